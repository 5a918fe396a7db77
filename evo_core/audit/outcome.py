"""Did a decision's prediction hold afterwards? Computed from the events logged after it.

Three measures, each over ``window`` steps before versus after the decision step:
- the rate of the target diagnoses (diagnoses per step, and the mean of their ``rate``/
  ``value`` statistic where the diagnostic logged one);
- the guarded metric (held-out evals, e.g. ``heldout_strict_accuracy``), which must not
  fall by more than the prediction's ``tolerance`` (default 0.02);
- the strict oracle's labels on the rollouts: strict accuracy and the *exploit rate*
  (rewarded by the training verifier, failed by the strict oracle).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Sequence

import attrs

from evo_core.audit.index import RunIndex

DEFAULT_GUARD = "heldout_strict_accuracy"
DEFAULT_TOLERANCE = 0.02
_STEPPED = ("evo.RolloutCompleted", "evo.StepCompleted", "evo.FailureDiagnosed", "evo.EvalCompleted")


@attrs.frozen
class WindowStats:
    steps: int = 0  # steps observed in the window
    diagnoses: int = 0
    diag_stat: Optional[float] = None  # mean rate/value statistic of the target diagnoses
    guard: Optional[float] = None
    strict_n: int = 0
    strict_accuracy: Optional[float] = None
    exploit_rate: Optional[float] = None

    @property
    def diag_rate(self) -> Optional[float]:
        return self.diagnoses / self.steps if self.steps else None


def _mean(xs: Sequence[float]) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


def guard_value(metrics: Mapping[str, Any], split: str, name: str) -> Optional[float]:
    """Find metric ``name`` in an eval's metrics: exact key, or ``<split>_<key>``."""
    v = metrics.get(name)
    if v is None and name.startswith(split + "_"):
        v = metrics.get(name[len(split) + 1:])
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _walk(index: RunIndex, start: int, step_lo: int, step_hi: int) -> Iterator[dict[str, Any]]:
    """Raw payloads (with ``_type``) of the stepped events whose step lies in [lo, hi],
    walking out from record ``start`` in both directions until the steps leave the range."""
    recs = index.records
    for rng, outside in ((range(start, -1, -1), lambda s: s < step_lo), (range(start + 1, len(recs)), lambda s: s > step_hi)):
        misses = 0
        for i in rng:
            rec = recs[i]
            if rec.type not in _STEPPED:
                continue
            data = rec.data()
            s = data.get("step")
            if not isinstance(s, int):
                continue
            if outside(s):
                # Events of a step can interleave slightly (a late eval); stop after a run of misses.
                misses += 1
                if misses > 64:
                    break
                continue
            misses = 0
            if step_lo <= s <= step_hi:
                data["_type"] = rec.type
                yield data


def window_stats(rows: Sequence[dict[str, Any]], targets: Sequence[str], guard: str) -> WindowStats:
    steps = {r["step"] for r in rows if r["_type"] in ("evo.StepCompleted", "evo.RolloutCompleted")}
    diags = [r for r in rows if r["_type"] == "evo.FailureDiagnosed" and (not targets or r.get("kind") in targets)]
    dstat = []
    for d in diags:
        st = d.get("stats") or {}
        for key in ("rate", "value"):
            if isinstance(st.get(key), (int, float)):
                dstat.append(float(st[key]))
                break
    guards = []
    for r in rows:
        if r["_type"] == "evo.EvalCompleted":
            v = guard_value(r.get("metrics") or {}, r.get("split", ""), guard)
            if v is not None:
                guards.append(v)
    labelled = [r for r in rows if r["_type"] == "evo.RolloutCompleted" and r.get("strict_correct") is not None
                and r.get("reward") is not None]
    strict = [1.0 if r["strict_correct"] else 0.0 for r in labelled]
    exploit = [1.0 if (r["reward"] > 0 and not r["strict_correct"]) else 0.0 for r in labelled]
    return WindowStats(len(steps), len(diags), _mean(dstat), _mean(guards), len(labelled), _mean(strict), _mean(exploit))


@attrs.frozen
class Outcome:
    window: int
    before: WindowStats
    after: WindowStats
    guard_metric: str
    tolerance: float
    diagnosis_rate_fell: Optional[bool]
    guard_held: Optional[bool]
    strict_held: Optional[bool]  # strict accuracy did not fall and the exploit rate did not rise

    @property
    def held(self) -> Optional[bool]:
        """True when every measure with data held; False when any failed; None with no data."""
        known = [v for v in (self.diagnosis_rate_fell, self.guard_held, self.strict_held) if v is not None]
        if not known:
            return None
        return all(known)

    def to_dict(self) -> dict[str, Any]:
        d = attrs.asdict(self)
        d["before"]["diag_rate"] = self.before.diag_rate
        d["after"]["diag_rate"] = self.after.diag_rate
        d["held"] = self.held
        return d


def assess(index: RunIndex, at: int, step: int, targets: Sequence[str], prediction: Mapping[str, Any],
           window: int = 10) -> Outcome:
    """Compare the ``window`` steps up to ``step`` with the ``window`` steps after it."""
    window = int(prediction.get("window_steps", window) or window)
    guard = str(prediction.get("guard_metric") or DEFAULT_GUARD)
    tol = float(prediction.get("tolerance", DEFAULT_TOLERANCE))
    rows = list(_walk(index, at, step - window + 1, step + window))
    before = window_stats([r for r in rows if r["step"] <= step], targets, guard)
    after = window_stats([r for r in rows if r["step"] > step], targets, guard)
    fell: Optional[bool] = None
    if after.steps and before.steps and targets:
        if before.diag_stat is not None and after.diag_stat is not None:
            fell = after.diag_stat < before.diag_stat
        elif before.diag_rate:
            fell = (after.diag_rate or 0.0) < before.diag_rate
    guard_held = None
    if before.guard is not None and after.guard is not None:
        guard_held = after.guard >= before.guard - tol
    strict_held = None
    if before.strict_n and after.strict_n:
        strict_held = (after.strict_accuracy >= before.strict_accuracy - tol  # type: ignore[operator]
                       and after.exploit_rate <= before.exploit_rate + tol)  # type: ignore[operator]
    return Outcome(window, before, after, guard, tol, fell, guard_held, strict_held)
