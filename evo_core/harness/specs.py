"""Data-only diagnostic specs and their safe evaluator.

A spec is plain JSON-able data, so proposers (rules or an LLM) can write and revise
diagnostics without the harness ever running generated code. No ``eval``: the
evaluator walks a tiny, validated grammar.

    {
      "kind": "paid_long_answers",                # the FailureDiagnosed kind
      "severity": "invalid",                        # info | warning | invalid
      "population": {"field": "split", "op": "==", "value": "train"},   # optional
      "where": {"all": [{"feature": "chars", "op": ">", "value": 4},
                        {"field": "reward", "op": ">=", "value": 1}]},
      "statistic": {"type": "rate"},                # rate | trend | mean | gap | diff
      "threshold": {"op": ">", "value": 0.1},
      "min_n": 20
    }

Predicates: ``{"all": [...]}``, ``{"any": [...]}``, ``{"not": p}`` or a leaf
``{"field"|"signal"|"feature": name, "op": op, "value": v}`` with op in ``== != < <= > >= in
exists``. ``signal`` reads the domain's signals, ``feature`` the generic response features
the core computes (``evo_core.harness.features``). Statistics (over the population, per window):
- ``rate``: fraction of rollouts matching ``where``;
- ``trend``: least-squares slope of the per-step rate (per step);
- ``mean``: mean of ``of`` (a value reference) over rollouts matching ``where`` (or all);
- ``gap``: mean of ``of`` over group ``a`` minus over group ``b`` (two predicates);
- ``diff``: mean of ``x - y`` over rollouts where both are present (e.g. reward vs strict label).
A value reference is ``{"field": name}``, ``{"signal": name}``, ``{"feature": name}`` or
``{"flag": true}`` (the ``where`` predicate as 0/1). Type mismatches evaluate to "no value", never to an error.
"""

from __future__ import annotations

import copy
import math
import operator
from typing import Any, Callable, Mapping, Optional, Sequence

import attrs

from evo_core.harness.stats import slope
from evo_events import SEVERITIES, RolloutCompleted

FIELDS = ("reward", "reward_final", "correct", "strict_correct", "truncated", "length", "split", "step",
          "policy_version", "task_id", "group_id", "infra_error")
OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "exists")
STATISTICS = ("rate", "trend", "mean", "gap", "diff")
MAX_DEPTH = 8
MAX_NODES = 64


class SpecError(ValueError):
    """A diagnostic spec is malformed (the message says where)."""


# --- validation ---------------------------------------------------------------------------


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def validate_predicate(p: Any, where: str = "where", _depth: int = 0, _count: Optional[list[int]] = None) -> None:
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > MAX_NODES:
        raise SpecError(f"{where}: predicate has more than {MAX_NODES} nodes")
    if _depth > MAX_DEPTH:
        raise SpecError(f"{where}: predicate nests deeper than {MAX_DEPTH}")
    if not isinstance(p, Mapping):
        raise SpecError(f"{where}: a predicate must be an object, got {type(p).__name__}")
    if "all" in p or "any" in p:
        key = "all" if "all" in p else "any"
        if set(p) != {key} or not isinstance(p[key], list) or not p[key]:
            raise SpecError(f"{where}.{key}: must be the only key and a non-empty list")
        for i, sub in enumerate(p[key]):
            validate_predicate(sub, f"{where}.{key}[{i}]", _depth + 1, count)
        return
    if "not" in p:
        if set(p) != {"not"}:
            raise SpecError(f"{where}.not: must be the only key")
        validate_predicate(p["not"], f"{where}.not", _depth + 1, count)
        return
    _validate_ref(p, where, allow_flag=False)
    extra = set(p) - {"field", "signal", "feature", "op", "value"}
    if extra:
        raise SpecError(f"{where}: unknown key(s) {sorted(extra)}")
    op = p.get("op")
    if op not in OPS:
        raise SpecError(f"{where}.op: {op!r} is not one of {' '.join(OPS)}")
    if op == "exists":
        return
    if "value" not in p:
        raise SpecError(f"{where}: op {op!r} needs a value")
    v = p["value"]
    if op == "in":
        if not isinstance(v, list) or not all(_is_scalar(x) for x in v):
            raise SpecError(f"{where}.value: 'in' needs a list of scalars")
    elif not _is_scalar(v):
        raise SpecError(f"{where}.value: must be a scalar, got {type(v).__name__}")


def _validate_ref(r: Any, where: str, allow_flag: bool = True) -> None:
    if not isinstance(r, Mapping):
        raise SpecError(f"{where}: a value reference must be an object")
    if "field" in r:
        if r["field"] not in FIELDS:
            raise SpecError(f"{where}.field: {r['field']!r} is not one of {', '.join(FIELDS)}")
    elif "signal" in r or "feature" in r:
        key = "signal" if "signal" in r else "feature"
        if not isinstance(r[key], str) or not r[key]:
            raise SpecError(f"{where}.{key}: must be a non-empty string")
    elif allow_flag and r.get("flag") is True:
        pass
    else:
        raise SpecError(f"{where}: needs 'field', 'signal' or 'feature'" + (" or 'flag'" if allow_flag else ""))


def validate_spec(spec: Any) -> None:
    """Raise ``SpecError`` naming the first problem; return None when the spec is valid."""
    if not isinstance(spec, Mapping):
        raise SpecError("spec: must be an object")
    known = {"kind", "severity", "population", "where", "statistic", "threshold", "min_n", "description"}
    extra = set(spec) - known
    if extra:
        raise SpecError(f"spec: unknown key(s) {sorted(extra)}")
    if not isinstance(spec.get("kind"), str) or not spec["kind"]:
        raise SpecError("spec.kind: a non-empty string is required")
    if spec.get("severity", "warning") not in SEVERITIES:
        raise SpecError(f"spec.severity: must be one of {', '.join(SEVERITIES)}")
    if "population" in spec:
        validate_predicate(spec["population"], "spec.population")
    if "where" in spec:
        validate_predicate(spec["where"], "spec.where")
    st = spec.get("statistic", {"type": "rate"})
    if not isinstance(st, Mapping) or st.get("type") not in STATISTICS:
        raise SpecError(f"spec.statistic.type: must be one of {', '.join(STATISTICS)}")
    t = st["type"]
    if t in ("rate", "trend") and "where" not in spec:
        raise SpecError(f"spec: statistic {t!r} needs a 'where' predicate")
    if t == "mean":
        _validate_ref(st.get("of"), "spec.statistic.of")
    if t == "gap":
        _validate_ref(st.get("of"), "spec.statistic.of")
        validate_predicate(st.get("a"), "spec.statistic.a")
        validate_predicate(st.get("b"), "spec.statistic.b")
    if t == "diff":
        _validate_ref(st.get("x"), "spec.statistic.x")
        _validate_ref(st.get("y"), "spec.statistic.y")
    th = spec.get("threshold")
    if not isinstance(th, Mapping) or th.get("op") not in ("<", "<=", ">", ">=") or not _is_number(th.get("value")):
        raise SpecError("spec.threshold: needs {'op': one of < <= > >=, 'value': number}")
    mn = spec.get("min_n", 1)
    if not isinstance(mn, int) or isinstance(mn, bool) or mn < 1:
        raise SpecError("spec.min_n: must be a positive integer")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# --- evaluation ---------------------------------------------------------------------------

_MISSING = object()


def _lookup(r: Any, ref: Mapping[str, Any]) -> Any:
    """``r`` is a ``RolloutCompleted`` or a ``RolloutView`` (same field names)."""
    if "field" in ref:
        return getattr(r, ref["field"], _MISSING)
    if "feature" in ref:
        return (getattr(r, "features", None) or {}).get(ref["feature"], _MISSING)
    return (r.signals or {}).get(ref["signal"], _MISSING)


def _compare(a: Any, op: str, b: Any) -> bool:
    if op == "exists":
        return a is not _MISSING and a is not None
    if a is _MISSING:
        return False
    if op == "in":
        return a in b
    if op in ("==", "!="):
        if _is_number(a) and _is_number(b) and not isinstance(a, bool):
            eq = float(a) == float(b)
        else:
            eq = a == b
        return eq if op == "==" else not eq
    # ordering: numbers only (bools count as 0/1)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return False
    a, b = float(a), float(b)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def matches(p: Mapping[str, Any], r: RolloutCompleted) -> bool:
    if "all" in p:
        return all(matches(s, r) for s in p["all"])
    if "any" in p:
        return any(matches(s, r) for s in p["any"])
    if "not" in p:
        return not matches(p["not"], r)
    return _compare(_lookup(r, p), p["op"], p.get("value"))


_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def compile_predicate(p: Mapping[str, Any]) -> Callable[[Any], bool]:
    """``matches(p, ·)`` as one closure: the tree is walked once, not once per rollout
    (backtests evaluate a predicate over tens of thousands of branch rollouts). Leaves read
    their field, feature or signal inline, and two-way conjunctions skip the generator."""
    if "all" in p:
        subs = tuple(compile_predicate(s) for s in p["all"])
        if len(subs) == 1:
            return subs[0]
        if len(subs) == 2:
            f0, f1 = subs
            return lambda r: bool(f0(r)) and bool(f1(r))
        return lambda r: all(f(r) for f in subs)
    if "any" in p:
        subs = tuple(compile_predicate(s) for s in p["any"])
        if len(subs) == 1:
            return subs[0]
        if len(subs) == 2:
            f0, f1 = subs
            return lambda r: bool(f0(r)) or bool(f1(r))
        return lambda r: any(f(r) for f in subs)
    if "not" in p:
        sub = compile_predicate(p["not"])
        return lambda r: not sub(r)
    op, b = p["op"], p.get("value")
    cmp = _ORDER.get(op)
    if cmp is not None:
        if not isinstance(b, (int, float)):
            return lambda r: False
        bf = float(b)
        # _MISSING and non-numbers never order; bools count as 0/1 (as in _compare)
        if "feature" in p:
            name = p["feature"]

            def ordered_feature(r: Any) -> bool:
                a = (getattr(r, "features", None) or _EMPTY).get(name, _MISSING)
                return isinstance(a, (int, float)) and cmp(float(a), bf)
            return ordered_feature
        get = _getter(p)
        return lambda r: isinstance(a := get(r), (int, float)) and cmp(float(a), bf)
    get = _getter(p)
    return lambda r: _compare(get(r), op, b)


_EMPTY: Mapping[str, Any] = {}


def _getter(ref: Mapping[str, Any]) -> Callable[[Any], Any]:
    if "field" in ref:
        name = ref["field"]
        return lambda r: getattr(r, name, _MISSING)
    if "feature" in ref:
        name = ref["feature"]
        return lambda r: (getattr(r, "features", None) or _EMPTY).get(name, _MISSING)
    name = ref["signal"]
    return lambda r: (r.signals or _EMPTY).get(name, _MISSING)


def _value(ref: Mapping[str, Any], r: RolloutCompleted, flag: Optional[bool]) -> Optional[float]:
    if ref.get("flag") is True:
        return None if flag is None else float(flag)
    v = _lookup(r, ref)
    if isinstance(v, bool):
        return float(v)
    if _is_number(v):
        return float(v)
    return None


@attrs.frozen
class SpecResult:
    value: Optional[float]
    n: int
    fired: bool
    evidence: tuple[str, ...]
    stats: dict[str, Any]


class CompiledSpec:
    """A validated spec with its predicates compiled once (``compile_predicate``): evaluating
    it over many windows walks the spec's tree once, not once per window. ``evaluate`` and
    ``flagged_ids`` answer as ``evaluate_spec`` and ``flagged_ids`` do."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        validate_spec(spec)
        self.spec = spec
        self._in_pop = compile_predicate(spec["population"]) if "population" in spec else None
        where = spec.get("where")
        self._where = compile_predicate(where) if where is not None else None
        st = spec.get("statistic", {"type": "rate"})
        self._st = st
        self._ab = (compile_predicate(st["a"]), compile_predicate(st["b"])) if st["type"] == "gap" else None
        # the last result, by the rollouts' identity: a pass evaluates a spec on its window
        # to diagnose, then measures the same window for the ledger (held, so the id stays its own)
        self._last: Optional[tuple[tuple[RolloutCompleted, ...], int, SpecResult]] = None

    def evaluate(self, rollouts: Sequence[RolloutCompleted], *, max_evidence: int = 50) -> SpecResult:
        last = self._last
        if last is not None and last[0] is rollouts and last[1] == max_evidence:
            res = last[2]
            return SpecResult(res.value, res.n, res.fired, res.evidence, dict(res.stats))
        res = self._evaluate(rollouts, max_evidence)
        if isinstance(rollouts, tuple):  # immutable: its identity stands for its content
            self._last = (rollouts, max_evidence, SpecResult(res.value, res.n, res.fired, res.evidence, dict(res.stats)))
        return res

    def _evaluate(self, rollouts: Sequence[RolloutCompleted], max_evidence: int) -> SpecResult:
        spec, in_pop = self.spec, self._in_pop
        pop = [r for r in rollouts if in_pop is None or in_pop(r)]
        flags = list(map(self._where, pop)) if self._where is not None else [None] * len(pop)
        flagged = [r.event_id for r, f in zip(pop, flags) if f]
        st = self._st
        t = st["type"]
        value: Optional[float] = None
        n = len(pop)
        extra: dict[str, Any] = {}
        if t == "rate":
            value = (len(flagged) / n) if n else None
        elif t == "trend":
            per_step: dict[int, list[bool]] = {}
            for r, f in zip(pop, flags):
                per_step.setdefault(r.step, []).append(bool(f))
            xs = sorted(per_step)
            ys = [sum(per_step[x]) / len(per_step[x]) for x in xs]
            value = slope([float(x) for x in xs], ys)
            extra["steps"] = len(xs)
        elif t == "mean":
            vals = [v for r, f in zip(pop, flags) if (f is None or f) for v in [_value(st["of"], r, f)] if v is not None]
            n = len(vals)
            value = sum(vals) / n if n else None
        elif t == "gap":
            assert self._ab is not None
            in_a, in_b = self._ab
            a = [v for r, f in zip(pop, flags) if in_a(r) for v in [_value(st["of"], r, f)] if v is not None]
            b = [v for r, f in zip(pop, flags) if in_b(r) for v in [_value(st["of"], r, f)] if v is not None]
            n = min(len(a), len(b))
            value = (sum(a) / len(a) - sum(b) / len(b)) if a and b else None
            extra.update(n_a=len(a), n_b=len(b))
        elif t == "diff":
            d = []
            for r, f in zip(pop, flags):
                x, y = _value(st["x"], r, f), _value(st["y"], r, f)
                if x is not None and y is not None:
                    d.append(x - y)
            n = len(d)
            value = sum(d) / n if n else None
        th = spec["threshold"]
        fired = value is not None and n >= spec.get("min_n", 1) and _compare(value, th["op"], th["value"])
        stats = {"value": value, "n": n, "statistic": t, "threshold": th["value"], "op": th["op"], **extra}
        return SpecResult(value, n, fired, tuple(flagged[:max_evidence]), stats)

    def flagged_ids(self, rollouts: Sequence[RolloutCompleted]) -> set[str]:
        if self._where is None:
            return set()
        in_pop, flag = self._in_pop, self._where
        return {r.event_id for r in rollouts if (in_pop is None or in_pop(r)) and flag(r)}


_COMPILED: dict[str, CompiledSpec] = {}


def compiled_spec(spec: Mapping[str, Any]) -> CompiledSpec:
    """``CompiledSpec(spec)``, kept by the spec's ``repr`` (specs are plain data, whose repr
    tells apart everything a predicate does: 1, 1.0 and True, a list and a tuple; a run
    evaluates the same few over and over). A spec that does not validate raises each time."""
    key = repr(spec)
    hit = _COMPILED.get(key)
    if hit is None:
        if len(_COMPILED) > 512:
            _COMPILED.clear()
        hit = _COMPILED[key] = CompiledSpec(copy.deepcopy(spec))  # the caller's dict may change later
    return hit


def evaluate_spec(spec: Mapping[str, Any], rollouts: Sequence[RolloutCompleted], *, max_evidence: int = 50) -> SpecResult:
    """Evaluate a (validated) spec over a window of rollouts."""
    return compiled_spec(spec).evaluate(rollouts, max_evidence=max_evidence)


def flagged_ids(spec: Mapping[str, Any], rollouts: Sequence[RolloutCompleted]) -> set[str]:
    """Every rollout the spec's ``where`` predicate flags (within its population)."""
    where = spec.get("where")
    if where is None:
        return set()
    try:
        return compiled_spec(spec).flagged_ids(rollouts)
    except SpecError:  # only its predicates are needed here: the rest need not validate
        in_pop = compile_predicate(spec["population"]) if "population" in spec else None
        flag = compile_predicate(where)
        return {r.event_id for r in rollouts if (in_pop is None or in_pop(r)) and flag(r)}
