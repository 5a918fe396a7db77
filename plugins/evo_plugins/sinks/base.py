"""What every sink mirrors, and the failure isolation around them.

A sink turns committed events into scalars (step metrics, evals, diagnosis counts,
harness version, decision counters) and text (each promotion/rejection with its
reasons). ``mirror`` calls every sink and turns an exception into a ``PluginFailed``
event for the loop to log; the sink is switched off after its first failure so a broken
backend cannot slow every later step, and training never stops because of a sink.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Optional, Sequence

from evo_events import (
    EvalCompleted,
    Event,
    FailureDiagnosed,
    PluginFailed,
    Promoted,
    Rejected,
    RunFinished,
    StepCompleted,
)


class SinkUnavailable(RuntimeError):
    """A configured sink's library is not installed (the message says what to install)."""


def sinks_table(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Accept either the run config or its ``[sinks]`` table."""
    config = dict(config or {})
    inner = config.get("sinks")
    return dict(inner) if isinstance(inner, Mapping) else config


class MetricsSink:
    """Base class: subclasses implement ``_scalars``, ``_text``, ``_flush`` and ``_close``."""

    name = "sink"
    version = "1"

    def __init__(self) -> None:
        self.promotions = 0
        self.rejections = 0
        self.failures = 0

    # -- to implement ----------------------------------------------------------------------
    def _scalars(self, step: int, values: Mapping[str, float]) -> None:
        raise NotImplementedError

    def _text(self, step: int, tag: str, text: str) -> None:
        raise NotImplementedError

    def _flush(self) -> None:
        pass

    def _close(self) -> None:
        pass

    # -- the Sink protocol -----------------------------------------------------------------
    def handle(self, events: Sequence[Event]) -> None:
        per_step: dict[int, dict[str, float]] = defaultdict(dict)
        for ev in events:
            if isinstance(ev, StepCompleted):
                vals = per_step[ev.step]
                for k, v in ev.metrics.items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        vals[f"train/{k}"] = float(v)
                vals["harness/version"] = float(ev.harness_version)
                vals["policy/version"] = float(ev.policy_version)
            elif isinstance(ev, EvalCompleted):
                prefix = "eval" if ev.branch == "main" else f"eval/{ev.branch}"
                for k, v in ev.metrics.items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        per_step[ev.step][f"{prefix}/{ev.split}/{k}"] = float(v)
            elif isinstance(ev, FailureDiagnosed):
                key = f"diagnoses/{ev.kind}"
                per_step[ev.step][key] = per_step[ev.step].get(key, 0.0) + 1.0
            elif isinstance(ev, Promoted):
                self.promotions += 1
                per_step[ev.step]["harness/promotions"] = float(self.promotions)
                per_step[ev.step]["harness/version"] = float(ev.harness_version_after)
                self._text(ev.step, "decisions", f"PROMOTED {ev.subject} {ev.subject_id} by {ev.gate}: harness "
                           f"v{ev.harness_version_before}→v{ev.harness_version_after}; " + "; ".join(ev.reasons))
            elif isinstance(ev, Rejected):
                self.rejections += 1
                per_step[ev.step]["harness/rejections"] = float(self.rejections)
                self._text(ev.step, "decisions", f"REJECTED {ev.subject} {ev.subject_id} by {ev.gate}: " + "; ".join(ev.reasons))
            elif isinstance(ev, PluginFailed):
                self.failures += 1
                per_step[ev.step or 0]["plugins/failures"] = float(self.failures)
            elif isinstance(ev, RunFinished):
                self._text(ev.step, "run", f"run {ev.run_id} {ev.status} at step {ev.step}")
        for step in sorted(per_step):
            self._scalars(step, per_step[step])
        self._flush()

    def close(self) -> None:
        self._close()


def mirror(sinks: list[Any], run_id: str, events: Sequence[Event], *, step: Optional[int] = None) -> list[PluginFailed]:
    """Hand ``events`` to every sink. A sink that raises is removed from ``sinks`` and
    reported as a ``PluginFailed`` (returned, for the caller to append to the run)."""
    failed: list[PluginFailed] = []
    for sink in list(sinks):
        try:
            sink.handle(events)
        except Exception as exc:  # a sink never stops training
            sinks.remove(sink)
            failed.append(PluginFailed(run_id=run_id, plugin=getattr(sink, "name", type(sink).__name__), hook="sink.handle",
                                       error_type=type(exc).__name__, message=str(exc)[:2000], required=False, step=step))
            try:
                sink.close()
            except Exception:
                pass
    return failed
