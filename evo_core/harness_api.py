"""The contract between the run loop (trainer side) and the harness engine.

After each step's events are committed, the loop calls ``harness.on_step(ctx)``.
The harness reads evidence, emits its decisions through ``ctx.emit`` (which
appends to the run's stream and folds them into ``ctx.state``), and may ask the
session to fork, evaluate or restore the main-line checkpoint.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, Sequence

import attrs

from evo_events import EvalCompleted, Event, RolloutCompleted, StepCompleted
from evo_core.state import HarnessState


@attrs.define(kw_only=True)
class StepContext:
    run_id: str
    step: int
    state: HarnessState  # live state; equals fold(log) after every emit
    rollouts: Sequence[RolloutCompleted]  # this step's rollouts, as logged
    step_event: StepCompleted
    evals: Sequence[EvalCompleted] = ()  # held-out evaluations logged this step
    session: Optional[Any] = None  # a TrainingSession, when the trainer offers one
    emit: Callable[[Sequence[Event]], None] = lambda events: None
    store: Optional[Any] = None  # read-only use: windows of past evidence
    final: bool = False  # the last step of the run
    extra: dict[str, Any] = attrs.Factory(dict)


class Harness(Protocol):
    def on_step(self, ctx: StepContext) -> None: ...

    def on_run_end(self, ctx: StepContext) -> None: ...
