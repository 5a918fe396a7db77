"""The plugin contract, checked: what an object a plugin registers lacks or gets wrong.

``problems(kind, obj)`` returns one line per breach of the Protocol for ``kind``
("diagnostic", "intervention", "proposer", "gate", "backtester", "domain", "sink"): a missing
member, a member of the wrong type, or parameters that disagree with their defaults. The
contract test runs it over every installed plugin, and ``evo plugins`` reports it, so that
a third-party diagnostic without ``kinds`` is named instead of silently never retiring.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from evo_core.api.harness import INTERVENTION_KINDS
from evo_core.api.interventions import effects
from evo_core.api.params import Param

__all__ = ["KINDS", "check_diagnostic", "check_intervention", "problems"]


def _str(obj: Any, attr: str, out: list[str], *, empty: bool = False) -> None:
    if not hasattr(obj, attr):
        out.append(f"no {attr!r}")
    elif not isinstance(getattr(obj, attr), str) or (not empty and not getattr(obj, attr)):
        out.append(f"{attr!r} must be a{'' if empty else ' non-empty'} string, got {getattr(obj, attr)!r}")


def _bool(obj: Any, attr: str, out: list[str]) -> None:
    if not hasattr(obj, attr):
        out.append(f"no {attr!r}")
    elif not isinstance(getattr(obj, attr), bool):
        out.append(f"{attr!r} must be true or false, got {getattr(obj, attr)!r}")


def _names(obj: Any, attr: str, out: list[str], *, empty: bool) -> None:
    v = getattr(obj, attr, None)
    if not hasattr(obj, attr):
        out.append(f"no {attr!r}")
    elif isinstance(v, str) or not isinstance(v, (tuple, list)) or not all(isinstance(k, str) and k for k in v):
        out.append(f"{attr!r} must be a tuple of names, got {v!r}")
    elif not empty and not v:
        out.append(f"{attr!r} is empty")


def _methods(obj: Any, names: tuple[str, ...], out: list[str]) -> None:
    for m in names:
        if not callable(getattr(obj, m, None)):
            out.append(f"no method {m!r}")


def _params(obj: Any, out: list[str]) -> None:
    defaults = getattr(obj, "default_params", None)
    if not isinstance(defaults, Mapping):
        out.append(f"'default_params' must be a mapping, got {defaults!r}")
        return
    declared = getattr(obj, "parameters", None)
    if declared is None:
        out.append("no 'parameters'")
        return
    if not isinstance(declared, Mapping) or not all(isinstance(p, Param) for p in declared.values()):
        out.append("'parameters' must map names to evo_core.api.Param")
        return
    if declared and set(declared) != set(defaults):
        out.append(f"'parameters' ({', '.join(sorted(declared))}) and 'default_params' "
                   f"({', '.join(sorted(defaults))}) name different keys")
        return
    for k, p in declared.items():
        if p.default != defaults[k]:
            out.append(f"parameter {k!r}: declared default {p.default!r}, default_params says {defaults[k]!r}")


def check_diagnostic(obj: Any) -> list[str]:
    """Breaches of ``evo_core.api.Diagnostic``."""
    out: list[str] = []
    _str(obj, "name", out)
    _str(obj, "version", out)
    _names(obj, "kinds", out, empty=False)
    _params(obj, out)
    _bool(obj, "prior", out)
    _methods(obj, ("evaluate", "measure"), out)
    return out


def check_intervention(obj: Any) -> list[str]:
    """Breaches of ``evo_core.api.Intervention``."""
    out: list[str] = []
    _str(obj, "name", out)
    _str(obj, "version", out)
    _str(obj, "kind", out)
    if isinstance(getattr(obj, "kind", None), str) and obj.kind and obj.kind not in INTERVENTION_KINDS:
        out.append(f"'kind' must be one of {', '.join(INTERVENTION_KINDS)}, got {obj.kind!r}")
    _str(obj, "changes", out)
    _names(obj, "targets", out, empty=True)
    _params(obj, out)
    _bool(obj, "restore_main", out)
    _bool(obj, "prior", out)
    _methods(obj, ("params", "prediction"), out)
    if not effects(obj) and getattr(obj, "kind", None) != "diagnostic":
        out.append("no effect method (new_reward, mask, regrade, hyperparameters, prompt_hint, task_weights)")
    return out


def _simple(attrs_: tuple[str, ...], methods: tuple[str, ...], extra: Callable[[Any, list[str]], None] = lambda o, out: None
            ) -> Callable[[Any], list[str]]:
    def check(obj: Any) -> list[str]:
        out: list[str] = []
        for a in attrs_:
            _str(obj, a, out)
        _methods(obj, methods, out)
        extra(obj, out)
        return out

    return check


def _gate_subjects(obj: Any, out: list[str]) -> None:
    _names(obj, "subjects", out, empty=False)


def _backtest_mode(obj: Any, out: list[str]) -> None:
    if getattr(obj, "mode", None) not in ("offline", "online"):
        out.append(f"'mode' must be 'offline' or 'online', got {getattr(obj, 'mode', None)!r}")


def _trajectory_classifier(obj: Any, out: list[str]) -> None:
    """The optional ``trajectory_classifier``: when present, both methods."""
    c = getattr(obj, "trajectory_classifier", None)
    if c is not None and not (callable(getattr(c, "tool_class", None)) and callable(getattr(c, "classify_path", None))):
        out.append("'trajectory_classifier' must have tool_class(tool, args) and classify_path(path) "
                   "(evo_core.api.TrajectoryClassifier)")


KINDS: dict[str, Callable[[Any], list[str]]] = {
    "diagnostic": check_diagnostic,
    "intervention": check_intervention,
    "proposer": _simple(("name", "version"), ("propose",)),
    "gate": _simple(("name", "version"), ("decide",), _gate_subjects),
    "backtester": _simple(("name", "version"), ("backtest",), _backtest_mode),
    "domain": _simple(("name", "version"), ("load_tasks", "verify", "oracle"), _trajectory_classifier),
    "sink": _simple(("name",), ("handle", "close")),
}


def problems(kind: str, obj: Any) -> list[str]:
    """Breaches of the ``kind`` contract by ``obj`` (empty: it satisfies it)."""
    return KINDS[kind](obj)
