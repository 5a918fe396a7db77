"""A third-party diagnostic in one module: response-length spikes.

A policy that starts padding its answers (or looping until truncation) shows up as a
sudden jump in mean response length. ``ResponseLengthSpike`` compares the latest step's
mean length with the mean of the earlier steps in the window and reports a finding when
the ratio exceeds ``ratio``. The evidence is the ids of the longest rollouts of that step.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any, Mapping, Optional

from evo_core.api import BaseDiagnostic, Finding, Param, Window, hookimpl

__version__ = "0.1.0"


class ResponseLengthSpike(BaseDiagnostic):
    name = "response_length_spike"
    version = __version__
    kinds = ("response_length_spike",)
    parameters = {
        "ratio": Param(2.0, min=1.0, doc="fire when the latest step's mean length is this many times the earlier"),
        "min_rollouts": Param(8, min=1, doc="graded rollouts needed on each side"),
        "max_evidence": Param(8, min=1, doc="longest rollouts quoted as evidence"),
        "invalid_ratio": Param(4.0, min=1.0, doc="from this ratio on the finding is 'invalid'"),
    }

    def _spike(self, window: Window, p: Mapping[str, Any]) -> Optional[tuple[int, list, float, float]]:
        if not window.rollouts:
            return None
        last = max(r.step for r in window.rollouts)
        now = [r for r in window.rollouts if r.step == last and r.reward is not None]
        before = [r for r in window.rollouts if r.step < last and r.reward is not None]
        if len(now) < p["min_rollouts"] or len(before) < p["min_rollouts"]:
            return None  # not enough evidence either side
        base = fmean(r.length for r in before)
        return (last, now, base, fmean(r.length for r in now)) if base > 0 else None

    def measure(self, window: Window, params: Mapping[str, Any], kind: Optional[str] = None) -> Optional[float]:
        """The length ratio, whether or not it crosses ``ratio`` (what a backtest watches fall)."""
        spike = self._spike(window, self.params(params))
        return spike[3] / spike[2] if spike else None

    def evaluate(self, window: Window, params: Mapping[str, Any]) -> list[Finding]:
        p = self.params(params)
        spike = self._spike(window, p)
        if spike is None or spike[3] / spike[2] < p["ratio"]:
            return []
        last, now, base, cur = spike
        ratio = cur / base
        longest = sorted(now, key=lambda r: (-r.length, r.event_id))[: p["max_evidence"]]
        return [Finding(
            kind="response_length_spike",
            severity="invalid" if ratio >= p["invalid_ratio"] else "warning",
            evidence=tuple(r.event_id for r in longest),
            stats={"value": ratio, "step": last, "mean_length": cur, "baseline_mean_length": base, "ratio": ratio,
                   "threshold": p["ratio"], "n": len(now)},
            message=f"mean response length jumped {ratio:.1f}x at step {last} ({base:.0f} -> {cur:.0f} tokens)",
        )]


@hookimpl
def evo_register_diagnostics():
    return [ResponseLengthSpike()]
