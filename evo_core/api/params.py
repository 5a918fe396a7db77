"""Plugin parameters, declared with their types and ranges.

A diagnostic, gate, proposer or intervention declares what its config table may hold:

    parameters = {
        "max_rate": Param(0.2, min=0.0, max=1.0, doc="fire above this share"),
        "min_n": Param(16, min=1, doc="rollouts needed before it can fire"),
    }

The config check (``evo_core.config_checks``) reads these declarations, so that
``--set harness.diagnostics.truncation_rate.max_rte=0.1`` (a typo), a wrong type or a value
out of range fails when the config is loaded, with one line naming the key. A plugin that
declares only ``default_params`` gets a declaration inferred from its defaults: the same
keys, each typed by its default value.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import attrs

__all__ = ["Param", "ParamError", "check_params", "declared_parameters", "defaults_of"]

_TYPES: tuple[type, ...] = (bool, int, float, str, list, dict)


class ParamError(ValueError):
    """A parameter value is wrong; ``key`` names the parameter."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


def _kind(value: Any) -> Optional[type]:
    if value is None:
        return None
    if isinstance(value, bool):
        return bool
    if isinstance(value, int):
        return int
    if isinstance(value, float):
        return float
    if isinstance(value, str):
        return str
    if isinstance(value, (list, tuple)):
        return list
    if isinstance(value, Mapping):
        return dict
    return None


@attrs.frozen(kw_only=True)
class Param:
    """One parameter: its default, its type (inferred from the default when not given:
    bool, int, float, str, list or dict; a ``None`` default takes any value), an inclusive
    range for numbers, the allowed values, and one line of documentation."""

    default: Any = attrs.field(kw_only=False)
    type: Optional[type] = None
    min: Optional[float] = None
    max: Optional[float] = None
    choices: tuple[Any, ...] = attrs.field(default=(), converter=tuple)
    doc: str = ""

    def __attrs_post_init__(self) -> None:
        if self.type is not None and self.type not in _TYPES:
            raise TypeError(f"Param type must be one of {', '.join(t.__name__ for t in _TYPES)}, got {self.type!r}")
        if self.default is not None:
            self.check("default", self.default)

    @property
    def kind(self) -> Optional[type]:
        return self.type if self.type is not None else _kind(self.default)

    def check(self, key: str, value: Any) -> Any:
        """``value`` if it fits this declaration, else ``ParamError`` naming ``key``. NaN and
        infinities never fit a number."""
        kind = self.kind
        if value is None:
            if self.default is None:
                return value
            raise ParamError(key, f"must be {self._want(kind)}, got None")
        if kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ParamError(key, f"must be a finite number, got {value!r}")
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ParamError(key, f"must be an integer, got {value!r}")
        elif kind is bool and not isinstance(value, bool):
            raise ParamError(key, f"must be true or false, got {value!r}")
        elif kind is str and not isinstance(value, str):
            raise ParamError(key, f"must be a string, got {value!r}")
        elif kind is list and (isinstance(value, str) or not isinstance(value, (list, tuple))):
            raise ParamError(key, f"must be a list, got {value!r}")
        elif kind is dict and not isinstance(value, Mapping):
            raise ParamError(key, f"must be a table, got {value!r}")
        if kind in (int, float):
            if self.min is not None and value < self.min:
                raise ParamError(key, f"must be >= {self.min:g}, got {value!r}")
            if self.max is not None and value > self.max:
                raise ParamError(key, f"must be <= {self.max:g}, got {value!r}")
        if self.choices and value not in self.choices:
            raise ParamError(key, f"must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
        return value

    @staticmethod
    def _want(kind: Optional[type]) -> str:
        return {float: "a finite number", int: "an integer", bool: "true or false", str: "a string",
                list: "a list", dict: "a table"}.get(kind, "a value")  # type: ignore[arg-type]


def defaults_of(parameters: Mapping[str, Param]) -> dict[str, Any]:
    """The ``default_params`` a declaration implies."""
    return {k: p.default for k, p in parameters.items()}


def declared_parameters(plugin: Any) -> dict[str, Param]:
    """What ``plugin`` declares (``parameters``), else a declaration inferred from its
    ``default_params``: each key typed by its default."""
    params = getattr(plugin, "parameters", None)
    if isinstance(params, Mapping) and params:
        return dict(params)
    return {k: Param(v) for k, v in dict(getattr(plugin, "default_params", None) or {}).items()}


def check_params(parameters: Mapping[str, Param], given: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults overlaid with ``given``, each value checked against its declaration;
    ``ParamError`` names the first unknown or wrong key."""
    out = defaults_of(parameters)
    for key, value in given.items():
        if key not in parameters:
            raise ParamError(key, f"is not a parameter (its parameters: {', '.join(sorted(parameters)) or 'none'})")
        out[key] = parameters[key].check(key, value)
    return out


def declare_parameters(cls: Any) -> None:
    """Keep a plugin class's ``parameters`` and ``default_params`` in step: declared Params give
    the defaults; defaults alone give a declaration inferred from them."""
    if cls.__dict__.get("parameters"):
        cls.default_params = defaults_of(cls.parameters)
    elif "default_params" in cls.__dict__:
        cls.parameters = {k: Param(v) for k, v in dict(cls.default_params).items()}
