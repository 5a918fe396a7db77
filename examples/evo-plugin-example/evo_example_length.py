"""A third-party diagnostic in one module: response-length spikes.

A policy that starts padding its answers (or looping until truncation) shows up as a
sudden jump in mean response length. ``ResponseLengthSpike`` compares the latest step's
mean length with the mean of the earlier steps in the window and reports a finding when
the ratio exceeds ``ratio``. The evidence is the ids of the longest rollouts of that step.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any, Mapping

from evo_core.api import Finding, Window
from evo_core.api import hookimpl

__version__ = "0.1.0"


class ResponseLengthSpike:
    name = "response_length_spike"
    version = __version__
    default_params: Mapping[str, Any] = {"ratio": 2.0, "min_rollouts": 8, "max_evidence": 8, "invalid_ratio": 4.0}

    def evaluate(self, window: Window, params: Mapping[str, Any]) -> list[Finding]:
        p = {**self.default_params, **params}
        if not window.rollouts:
            return []
        last = max(r.step for r in window.rollouts)
        now = [r for r in window.rollouts if r.step == last and r.reward is not None]
        before = [r for r in window.rollouts if r.step < last and r.reward is not None]
        if len(now) < p["min_rollouts"] or len(before) < p["min_rollouts"]:
            return []  # not enough evidence either side
        base = fmean(r.length for r in before)
        cur = fmean(r.length for r in now)
        if base <= 0 or cur / base < p["ratio"]:
            return []
        ratio = cur / base
        longest = sorted(now, key=lambda r: (-r.length, r.event_id))[: p["max_evidence"]]
        return [Finding(
            kind="response_length_spike",
            severity="invalid" if ratio >= p["invalid_ratio"] else "warning",
            evidence=tuple(r.event_id for r in longest),
            stats={"step": last, "mean_length": cur, "baseline_mean_length": base, "ratio": ratio,
                   "threshold": p["ratio"], "n": len(now)},
            message=f"mean response length jumped {ratio:.1f}x at step {last} ({base:.0f} -> {cur:.0f} tokens)",
        )]


@hookimpl
def evo_register_diagnostics():
    return [ResponseLengthSpike()]
