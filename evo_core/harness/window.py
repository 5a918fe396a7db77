"""The rolling evidence window: the last ``window_steps`` steps of rollouts, plus step
metrics and held-out evals. Filled live from ``StepContext`` and, on resume, from the log."""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Mapping, Optional, Sequence

from evo_core.api import Window
from evo_events import EvalCompleted, Event, FailureDiagnosed, RolloutCompleted, StepCompleted


class EvidenceWindow:
    def __init__(self, run_id: str, window_steps: int, history_steps: Optional[int] = None) -> None:
        self.run_id = run_id
        self.window_steps = window_steps
        self.history_steps = history_steps or window_steps * 10
        self._history: deque[tuple[int, list[RolloutCompleted]]] = deque()
        self._rollouts: deque[tuple[int, list[RolloutCompleted]]] = deque()
        self._steps: deque[StepCompleted] = deque(maxlen=max(window_steps * 4, 50))
        self.evals: list[EvalCompleted] = []  # all of them: trends over evals need history
        self._diagnoses: deque[FailureDiagnosed] = deque(maxlen=500)

    def add_step(self, step: int, rollouts: Sequence[RolloutCompleted], step_event: Optional[StepCompleted],
                 evals: Sequence[EvalCompleted] = ()) -> None:
        for buf, keep in ((self._rollouts, self.window_steps), (self._history, self.history_steps)):
            if buf and buf[-1][0] == step:
                buf[-1][1].extend(rollouts)
            else:
                buf.append((step, list(rollouts)))
            while buf and buf[0][0] <= step - keep:
                buf.popleft()
        if step_event is not None:
            self._steps.append(step_event)
        self.evals.extend(evals)

    def add_diagnoses(self, diags: Iterable[FailureDiagnosed]) -> None:
        self._diagnoses.extend(diags)

    def prefill(self, events: Iterable[Event]) -> None:
        """Rebuild from a run's logged events (resume)."""
        by_step: dict[int, list[RolloutCompleted]] = {}
        steps: dict[int, StepCompleted] = {}
        for ev in events:
            if isinstance(ev, RolloutCompleted):
                by_step.setdefault(ev.step, []).append(ev)
            elif isinstance(ev, StepCompleted):
                steps[ev.step] = ev
            elif isinstance(ev, EvalCompleted):
                self.evals.append(ev)
            elif isinstance(ev, FailureDiagnosed):
                self._diagnoses.append(ev)
        for s in sorted(set(by_step) | set(steps)):
            self.add_step(s, by_step.get(s, []), steps.get(s))

    def rollouts(self, last_steps: Optional[int] = None) -> list[RolloutCompleted]:
        rows = list(self._rollouts)
        if last_steps is not None and rows:
            cutoff = rows[-1][0] - last_steps
            rows = [r for r in rows if r[0] > cutoff]
        return [r for _, batch in rows for r in batch]

    def history(self) -> list[RolloutCompleted]:
        """Up to ``history_steps`` of logged rollouts (what offline replay walks over)."""
        return [r for _, batch in self._history for r in batch]

    def window(self, step: int) -> Window:
        return Window(run_id=self.run_id, step=step, rollouts=tuple(self.rollouts()), steps=tuple(self._steps),
                      evals=tuple(self.evals), diagnoses=tuple(self._diagnoses))


def rollouts_from_summaries(run_id: str, rows: Iterable[Any]) -> list[RolloutCompleted]:
    """Turn ``TrainingSession.train_steps`` rollout summaries (events or dicts) into events,
    so diagnostics can run on a forked branch exactly as on the main line."""
    import attrs

    names = {f.name for f in attrs.fields(RolloutCompleted)}
    out = []
    for i, row in enumerate(rows):
        if isinstance(row, RolloutCompleted):
            out.append(row)
            continue
        if not isinstance(row, Mapping):
            continue
        kw = {k: v for k, v in row.items() if k in names and k not in ("run_id", "trajectory", "caused_by", "emitted_by")}
        if "rollout_id" in row and "event_id" not in kw:
            kw["event_id"] = str(row["rollout_id"])
        kw.setdefault("step", 0)
        kw.setdefault("task_id", str(row.get("task_id", f"t{i}")))
        kw.setdefault("group_id", str(row.get("group_id", "g")))
        kw.setdefault("policy_version", 0)
        kw.setdefault("reward", None)
        kw["signals"] = dict(row.get("signals") or {})
        try:
            out.append(RolloutCompleted(run_id=run_id, **kw))
        except (TypeError, ValueError):
            continue
    return out


def steps_rollouts(run_id: str, step_metrics: Sequence[Mapping[str, Any]]) -> list[RolloutCompleted]:
    rows: list[Any] = []
    for i, m in enumerate(step_metrics):
        for r in m.get("rollouts") or ():
            if isinstance(r, Mapping) and "step" not in r:
                r = {**r, "step": i + 1}
            rows.append(r)
    return rollouts_from_summaries(run_id, rows)
