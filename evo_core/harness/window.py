"""The evidence the harness reads: the last ``window_steps`` steps of rollouts (and a longer
history of them for offline replay and induction), step metrics and validation evals.

It is a fold of the log like the state: filled live step by step, and on resume (or in
replay) from the logged events, with the same result. Test-split evaluations never enter:
nothing in the harness may select on them."""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from itertools import chain
from typing import Iterable, Mapping, Optional, Sequence

from evo_core.api import Window, is_validation
from evo_core.harness.audited_index import AuditedIndex
from evo_core.harness.validity import audited
from evo_events import EvalCompleted, Event, FailureDiagnosed, RolloutCompleted, StepCompleted


class EvidenceWindow:
    def __init__(self, run_id: str, window_steps: int, history_steps: Optional[int] = None) -> None:
        self.run_id = run_id
        self.window_steps = window_steps
        self.history_steps = history_steps or window_steps * 10
        self._history: deque[tuple[int, list[RolloutCompleted]]] = deque()
        # each history step's audited rollouts, filtered once when the step arrives
        self._audited: deque[tuple[int, list[RolloutCompleted]]] = deque()
        self._audited_flat: Optional[tuple[RolloutCompleted, ...]] = None
        # the same audited rollouts with what induction reads of each, computed once (``audited_index``)
        self._audited_index = AuditedIndex()
        self._rollouts: deque[tuple[int, list[RolloutCompleted]]] = deque()
        self._steps: deque[StepCompleted] = deque(maxlen=max(window_steps * 4, 50))
        self.evals: list[EvalCompleted] = []  # all validation evals: trends over evals need history
        self._diagnoses: deque[FailureDiagnosed] = deque(maxlen=500)
        self._history_flat: Optional[tuple[RolloutCompleted, ...]] = None  # history(), until the next add_step
        self._window_rows: Optional[tuple[RolloutCompleted, ...]] = None  # window()'s rollouts, until the next add_step
        # history's train rollouts with a reward, kept in step with it: their steps and rewards
        self._reward_steps: list[int] = []
        self._rewards: list[float] = []
        self._ascending = True
        self._last_step = -(2 ** 62)

    def add_step(self, step: int, rollouts: Sequence[RolloutCompleted], step_event: Optional[StepCompleted],
                 evals: Sequence[EvalCompleted] = ()) -> None:
        self._history_flat = self._audited_flat = self._window_rows = None
        new_audited = audited(rollouts)
        for buf, keep, rows in ((self._rollouts, self.window_steps, rollouts), (self._history, self.history_steps, rollouts),
                                (self._audited, self.history_steps, new_audited)):
            if buf and buf[-1][0] == step:
                buf[-1][1].extend(rows)
            else:
                buf.append((step, list(rows)))
            while buf and buf[0][0] <= step - keep:
                buf.popleft()
        self._audited_index.add(step, new_audited)
        self._audited_index.drop_through(step - self.history_steps)
        steps, rewards = self._reward_steps, self._rewards
        if self._ascending and step < self._last_step:
            self._ascending = False  # from now on mean_reward scans the history
            steps.clear(), rewards.clear()
        self._last_step = max(self._last_step, step)
        for r in rollouts:
            if self._ascending and r.reward is not None and r.split == "train":
                if steps and r.step < steps[-1]:
                    self._ascending = False  # from now on mean_reward scans the history
                    steps.clear(), rewards.clear()
                    break
                steps.append(r.step)
                rewards.append(r.reward)
        if self._ascending:  # the history's oldest step is now above step - history_steps
            cut = bisect_right(steps, step - self.history_steps)
            del steps[:cut], rewards[:cut]
        if step_event is not None:
            self._steps.append(step_event)
        self.evals.extend(e for e in evals if is_validation(e))

    def add_diagnoses(self, diags: Iterable[FailureDiagnosed]) -> None:
        self._diagnoses.extend(diags)

    def prefill(self, events: Iterable[Event]) -> None:
        """Rebuild from a run's logged events (resume, replay)."""
        by_step: dict[int, list[RolloutCompleted]] = {}
        steps: dict[int, StepCompleted] = {}
        evals: dict[int, list[EvalCompleted]] = {}
        for ev in events:
            if isinstance(ev, RolloutCompleted):
                by_step.setdefault(ev.step, []).append(ev)
            elif isinstance(ev, StepCompleted):
                steps[ev.step] = ev
            elif isinstance(ev, EvalCompleted):
                evals.setdefault(ev.step, []).append(ev)
            elif isinstance(ev, FailureDiagnosed):
                self._diagnoses.append(ev)
        for s in sorted(set(by_step) | set(steps) | set(evals)):
            self.add_step(s, by_step.get(s, []), steps.get(s), evals.get(s, ()))

    def rollouts(self, last_steps: Optional[int] = None) -> list[RolloutCompleted]:
        rows = list(self._rollouts)
        if last_steps is not None and rows:
            cutoff = rows[-1][0] - last_steps
            rows = [r for r in rows if r[0] > cutoff]
        return list(chain.from_iterable(batch for _, batch in rows))

    def history(self) -> tuple[RolloutCompleted, ...]:
        """Up to ``history_steps`` of logged rollouts (what offline replay and induction read);
        flattened once per step, however many readers a pass has."""
        if self._history_flat is None:
            self._history_flat = tuple(chain.from_iterable(batch for _, batch in self._history))
        return self._history_flat

    def audited(self) -> tuple[RolloutCompleted, ...]:
        """The history's audited training rollouts (``evo_core.api.stats.audited``), in history
        order: what induction learns from, kept step by step instead of rescanning the history."""
        if self._audited_flat is None:
            self._audited_flat = tuple(chain.from_iterable(batch for _, batch in self._audited))
        return self._audited_flat

    def audited_index(self) -> AuditedIndex:
        """The audited rollouts of ``audited()`` with their induction columns and hash order,
        kept step by step (``evo_core.harness.audited_index``)."""
        return self._audited_index

    def eval_by_id(self, event_id: Optional[str]) -> Optional[EvalCompleted]:
        return next((e for e in reversed(self.evals) if e.event_id == event_id), None) if event_id else None

    def mean_reward(self, after_step: int) -> Optional[float]:
        """Mean training reward of the history's rollouts after ``after_step``."""
        if self._ascending:  # the rows after a step are a suffix (same order, same sum)
            tail = self._rewards[bisect_right(self._reward_steps, after_step):]
        else:
            tail = [r.reward for r in self.history() if r.reward is not None and r.split == "train" and r.step > after_step]
        return sum(tail) / len(tail) if tail else None

    def window(self, step: int) -> Window:
        if self._window_rows is None:  # the window's rollouts, one tuple per step for all its readers
            self._window_rows = tuple(chain.from_iterable(batch for _, batch in self._rollouts))
        return Window(run_id=self.run_id, step=step, rollouts=self._window_rows, steps=tuple(self._steps),
                      evals=tuple(self.evals), diagnoses=tuple(self._diagnoses))


def rollouts_from_summaries(run_id: str, rows: Iterable[Mapping]) -> list[RolloutCompleted]:
    """Rollout summaries (dicts with ``RolloutCompleted`` field names) as events, so that
    diagnostics run on a forked branch exactly as on the main line."""
    import attrs

    names = {f.name for f in attrs.fields(RolloutCompleted)}
    out = []
    for i, row in enumerate(rows):
        kw = {k: v for k, v in row.items() if k in names and k not in ("run_id", "trajectory", "caused_by", "emitted_by")}
        kw.setdefault("event_id", str(row.get("rollout_id", f"r{i}")))
        kw.setdefault("step", 0)
        kw.setdefault("task_id", f"t{i}")
        kw.setdefault("group_id", "g")
        kw.setdefault("policy_version", 0)
        kw.setdefault("reward", None)
        try:
            out.append(RolloutCompleted(run_id=run_id, **kw))
        except (TypeError, ValueError):
            continue
    return out
