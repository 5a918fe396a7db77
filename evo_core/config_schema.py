"""The one validation path of every config table: attrs classes structured by cattrs.

Each table is an attrs class whose fields carry their range as an attrs validator
(``count``, ``number``, ``one_of``, ...). ``structure(cls, data, where)`` builds it with a
cattrs converter that forbids unknown keys and converts nothing implicitly (``"5"`` is not an
integer, ``1.5`` is not an integer, ``"nan"`` is not a number), and turns the first error
into one ``ConfigError`` line that names the full key, e.g.
``config key 'rl.clip_low' must be a finite number >= 0, got nan``.

NaN never passes: every numeric validator asks for a finite value first, so a range check
written with ``<``/``>`` cannot be fooled by a value that compares false with everything.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping, Optional, TypeVar

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote, ForbiddenExtraKeysError, IterableValidationNote

from evo_core.config_base import ConfigError

T = TypeVar("T")
PluginTables = dict[str, dict[str, Any]]  # ``[harness.diagnostics.NAME]`` and friends: name -> parameters


class FieldError(ValueError):
    """A value is wrong; ``key`` is its path below the table being structured ("" = the table itself)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


# --- strict scalar hooks: TOML already typed the value; never coerce ------------------------


def _int(v: Any, _: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise FieldError("", f"must be an integer, got {v!r}")
    return v


def _float(v: Any, _: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FieldError("", f"must be a number, got {v!r}")
    return float(v)


def _bool(v: Any, _: Any) -> bool:
    if not isinstance(v, bool):
        raise FieldError("", f"must be true or false, got {v!r}")
    return v


def _str(v: Any, _: Any) -> str:
    if not isinstance(v, str):
        raise FieldError("", f"must be a string, got {v!r}")
    return v


def _str_tuple(v: Any, _: Any) -> tuple[str, ...]:
    if isinstance(v, str) or not isinstance(v, (list, tuple)):
        raise FieldError("", f"must be a list of strings, got {v!r}")
    for i, s in enumerate(v):
        if not isinstance(s, str):
            raise FieldError(f"[{i}]", f"must be a string, got {s!r}")
    return tuple(v)


def _table(v: Any, _: Any) -> dict[str, Any]:
    if not isinstance(v, Mapping):
        raise FieldError("", f"must be a table, got {v!r}")
    return dict(v)


def _plugin_tables(v: Any, _: Any) -> dict[str, dict[str, Any]]:
    """``NAME = true`` means the defaults; otherwise each entry is a table of parameters."""
    if not isinstance(v, Mapping):
        raise FieldError("", f"must be a table, got {v!r}")
    out: dict[str, dict[str, Any]] = {}
    for name, params in v.items():
        if params is True:
            out[name] = {}
        elif isinstance(params, Mapping):
            out[name] = dict(params)
        else:
            raise FieldError(str(name), f"must be a table of parameters, got {params!r}")
    return out


def _converter() -> cattrs.Converter:
    c = cattrs.Converter(forbid_extra_keys=True)
    c.register_structure_hook(int, _int)
    c.register_structure_hook(float, _float)
    c.register_structure_hook(bool, _bool)
    c.register_structure_hook(str, _str)
    # generic aliases are matched by equality (functools' single dispatch cannot take them)
    for tp, hook in ((tuple[str, ...], _str_tuple), (dict[str, Any], _table), (PluginTables, _plugin_tables)):
        c.register_structure_hook_func(lambda t, tp=tp: t == tp, hook)
    return c


CONVERTER = _converter()


# --- validators (attrs): each names its field; the walker adds the table path ---------------


def _fail(attribute: attrs.Attribute, message: str) -> None:
    raise FieldError(attribute.name, message)


@attrs.frozen
class Count:
    """An integer >= ``minimum`` (``None`` passes: an optional field left unset)."""

    minimum: int = 0

    def __call__(self, _inst: Any, attribute: attrs.Attribute, v: Any) -> None:
        if v is not None and v < self.minimum:
            _fail(attribute, f"must be an integer >= {self.minimum}, got {v!r}")


@attrs.frozen
class Number:
    """A finite number in the range (``None`` passes)."""

    lo: Optional[float] = None
    hi: Optional[float] = None
    lo_open: bool = False
    hi_open: bool = False

    @property
    def want(self) -> str:
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {self.lo:g}")
        if self.hi is not None:
            parts.append(f"{'<' if self.hi_open else '<='} {self.hi:g}")
        return "a finite number" + (" " + " and ".join(parts) if parts else "")

    def __call__(self, _inst: Any, attribute: attrs.Attribute, v: Any) -> None:
        if v is None:
            return
        ok = math.isfinite(v)
        if ok and self.lo is not None:
            ok = v > self.lo if self.lo_open else v >= self.lo
        if ok and self.hi is not None:
            ok = v < self.hi if self.hi_open else v <= self.hi
        if not ok:
            _fail(attribute, f"must be {self.want}, got {v!r}")


def count(minimum: int = 0) -> Count:
    return Count(minimum)


def number(lo: Optional[float] = None, hi: Optional[float] = None, *, lo_open: bool = False,
           hi_open: bool = False) -> Number:
    return Number(lo, hi, lo_open, hi_open)


def one_of(*choices: Any) -> Callable[[Any, attrs.Attribute, Any], None]:
    def check(_inst: Any, attribute: attrs.Attribute, v: Any) -> None:
        if v not in choices:
            _fail(attribute, f"must be one of {', '.join(map(repr, choices))}, got {v!r}")

    return check


def matches(pattern: str, what: str) -> Callable[[Any, attrs.Attribute, Any], None]:
    rx = re.compile(pattern)

    def check(_inst: Any, attribute: attrs.Attribute, v: Any) -> None:
        if not rx.fullmatch(v):
            _fail(attribute, f"must be {what}, got {v!r}")

    return check


def non_empty(_inst: Any, attribute: attrs.Attribute, v: Any) -> None:
    if not v:
        _fail(attribute, "must not be empty")


# --- structuring ----------------------------------------------------------------------------


def _join(where: str, key: str) -> str:
    if not key:
        return where
    if key.startswith("["):
        return where + key
    return f"{where}.{key}" if where else key


def _first_error(exc: BaseException, where: str) -> tuple[str, BaseException]:
    """Descend a cattrs error group to its first leaf; return (full key, leaf)."""
    for note in getattr(exc, "__notes__", ()) or ():
        if isinstance(note, AttributeValidationNote):
            where = _join(where, note.name)
        elif isinstance(note, IterableValidationNote):
            where = f"{where}[{note.index}]"
    subs = getattr(exc, "exceptions", None)
    if subs:
        return _first_error(subs[0], where)
    return where, exc


def message(exc: BaseException, where: str) -> str:
    """One line naming the key, for any error ``structure`` can meet."""
    key, leaf = _first_error(exc, where)
    if isinstance(leaf, ForbiddenExtraKeysError):
        cls = leaf.cl
        known = ", ".join(f.name for f in attrs.fields(cls)) if attrs.has(cls) else ""
        unknown = sorted(leaf.extra_fields)
        return (f"unknown config key {_join(key, unknown[0])!r} "
                f"(known keys in {key or 'the top level'}: {known})")
    if isinstance(leaf, FieldError):
        return f"config key {_join(key, leaf.key)!r} {leaf.message}"
    if isinstance(leaf, ConfigError):
        return str(leaf)
    return f"config key {key or 'the top level'!r} is invalid: {type(leaf).__name__}: {leaf}"


def structure(cls: type[T], data: Any, where: str = "") -> T:
    """``data`` (a TOML table) as ``cls``, or a one-line ``ConfigError`` naming the key."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"config key {where or 'the top level'!r} must be a table, got {data!r}")
    try:
        return CONVERTER.structure(dict(data), cls)
    except Exception as exc:  # noqa: BLE001  every structuring error becomes one named line
        raise ConfigError(message(exc, where)) from None


__all__ = ["CONVERTER", "Count", "FieldError", "Number", "PluginTables", "count", "matches", "message", "non_empty", "number",
           "one_of", "structure"]
