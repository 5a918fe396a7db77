"""Progress as log lines: what ``evo run`` shows when stderr is not a terminal.

A rich progress display on a pipe or in a CI log is a mess of control characters, so
without a terminal the run writes one structlog line every ``log_every`` steps instead
(and at the last step). It reads only the committed events the loop hands to
``events``: the step's training reward and strict rate, the latest validation and test
evaluations of the main line, the harness version after the step's pass, and the
promotions and rejections decided since the previous line.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import structlog

from evo_events import EvalCompleted, HarnessPassCompleted, InterventionProposed, Promoted, Rejected, StepCompleted

log = structlog.get_logger("evo.run")


def _r(v: Any) -> Optional[float]:
    return None if v is None else round(float(v), 4)


class StepLog:
    """The ``progress`` object of ``RunLoop`` that logs instead of drawing."""

    def __init__(self, log_every: int = 10) -> None:
        if log_every < 1:
            raise ValueError(f"log_every must be >= 1, got {log_every!r}")
        self.log_every = log_every
        self._reset("", 0)

    def _reset(self, run_id: str, total: int) -> None:
        self.run_id, self.total = run_id, total
        self.validation: Optional[float] = None
        self.test: Optional[float] = None
        self.harness_version = 0
        self._names: dict[str, str] = {}  # proposal id -> kind/name, so a decision says what it decided
        self._promoted: list[str] = []
        self._rejected: list[str] = []
        self._step: Optional[StepCompleted] = None

    # -- the progress protocol of RunLoop ---------------------------------------------------------
    def sft(self, step: int, total: int, loss: float) -> None:
        if step == total or step % max(1, total // 10) == 0:
            log.info("sft", step=step, of=total, loss=_r(loss))

    def start_run(self, run_id: str, mode: str, total: int, done: int) -> None:
        validation, test = self.validation, self.test  # the step-0 evaluations come before start_run
        self._reset(run_id, total)
        self.validation, self.test = validation, test

    def step(self, step: int, m: Mapping[str, Any], evals: Optional[Mapping[str, Any]]) -> None:
        pass  # the line is written from the committed events (``events``)

    def end_run(self) -> None:
        self.validation = self.test = None

    def evaluated(self, step: int, split: str, metrics: Mapping[str, Any]) -> None:
        pass  # read from the committed EvalCompleted instead (only the main line's count)

    def events(self, events: Sequence[Any]) -> None:
        for ev in events:
            if isinstance(ev, StepCompleted):
                self._step = ev
                self.harness_version = max(self.harness_version, ev.harness_version)
            elif isinstance(ev, EvalCompleted) and ev.branch == "main":
                acc = _r(ev.metrics.get("strict_accuracy"))
                if ev.split == "validation":
                    self.validation = acc
                elif ev.split == "test":
                    self.test = acc
            elif isinstance(ev, InterventionProposed):
                self._names[ev.event_id] = f"{ev.kind}/{ev.name}"
            elif isinstance(ev, Promoted):
                self._promoted.append(self._name(ev))
                self.harness_version = max(self.harness_version, ev.harness_version_after)
            elif isinstance(ev, Rejected):
                self._rejected.append(self._name(ev))
            elif isinstance(ev, HarnessPassCompleted):
                self.harness_version = ev.harness_version
        st = self._step
        if st is not None and (st.step % self.log_every == 0 or st.step == self.total):
            self._line(st)
        self._step = None

    def _name(self, ev: Any) -> str:
        if ev.subject == "policy":
            return f"policy v{ev.subject_id}"  # a checkpoint joined (or was kept off) the main line
        return self._names.get(ev.subject_id, f"{ev.subject} {ev.subject_id[:12]}")

    def _line(self, st: StepCompleted) -> None:
        m = st.metrics
        log.info("step", run_id=self.run_id, step=st.step, of=self.total or None,
                 reward=_r(m.get("reward_mean")), train_strict=_r(m.get("strict_correct_rate")),
                 validation=self.validation, test=self.test, harness_v=self.harness_version,
                 promoted=len(self._promoted), rejected=len(self._rejected),
                 decisions=[f"+{n}" for n in self._promoted] + [f"-{n}" for n in self._rejected])
        self._promoted, self._rejected = [], []
