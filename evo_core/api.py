"""The public API that plugins and domains program against.

Plugins receive these typed values and return typed results; they never touch
storage. Everything here is plain data (attrs) or a Protocol.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Protocol, Sequence, runtime_checkable

import attrs

from evo_events import EvalCompleted, Event, FailureDiagnosed, RolloutCompleted, StepCompleted

# --- domains ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Task:
    """One problem. ``prompt`` is what the policy sees; ``gold`` whatever the verifier needs
    (an answer string, a test list, a SWE-bench row); ``meta`` free-form."""

    task_id: str
    prompt: str
    gold: Any = None
    split: str = "train"
    domain: str = ""
    meta: Mapping[str, Any] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class Completion:
    """What the policy produced for a task: final text, plus turns for multi-turn episodes."""

    text: str
    turns: tuple[Mapping[str, Any], ...] = ()
    truncated: bool = False
    n_tokens: int = 0
    workspace_diff: Optional[str] = None  # SWE: the episode's diff


@attrs.frozen(kw_only=True)
class Verdict:
    """A grader's answer. ``reward`` is None exactly when ``infra_error`` is set:
    an infrastructure failure is never scored 0 or 1; training masks it."""

    reward: Optional[float]
    correct: Optional[bool]
    signals: Mapping[str, Any] = attrs.Factory(dict)
    infra_error: Optional[str] = None
    details: Mapping[str, Any] = attrs.Factory(dict)

    @classmethod
    def infra(cls, message: str, **signals: Any) -> "Verdict":
        return cls(reward=None, correct=None, infra_error=message, signals=signals)


@attrs.frozen(kw_only=True)
class TaskSource:
    """Where a domain loads tasks from: a local file path, its format and the split."""

    path: str
    format: str = "auto"  # "jsonl" | "parquet" | "auto" | a domain-specific name
    split: str = "train"
    limit: Optional[int] = None
    options: Mapping[str, Any] = attrs.Factory(dict)


@runtime_checkable
class Domain(Protocol):
    """A task family: loading, the episode, a cheap training verifier and a strict oracle."""

    name: str
    version: str

    def load_tasks(self, source: TaskSource) -> list[Task]: ...

    def verify(self, task: Task, completion: Completion) -> Verdict:
        """The cheap training verifier (what the reward is computed from)."""
        ...

    def oracle(self, task: Task, completion: Completion) -> Verdict:
        """The strict oracle: held-out evaluation, evidence labels, gates. Never the reward."""
        ...


# --- diagnostics --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Window:
    """The evidence a diagnostic reads: recent rollouts (oldest first), step metrics and evals."""

    run_id: str
    step: int
    rollouts: Sequence[RolloutCompleted] = ()
    steps: Sequence[StepCompleted] = ()
    evals: Sequence[EvalCompleted] = ()
    diagnoses: Sequence[FailureDiagnosed] = ()


@attrs.frozen(kw_only=True)
class Finding:
    """What a diagnostic reports; the engine turns it into ``FailureDiagnosed``."""

    kind: str
    severity: str  # "info" | "warning" | "invalid"
    evidence: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    stats: Mapping[str, Any] = attrs.Factory(dict)
    message: str = ""


@runtime_checkable
class Diagnostic(Protocol):
    """Reads a window of evidence and reports findings. Pure: same window, same findings."""

    name: str
    version: str
    default_params: Mapping[str, Any]

    def evaluate(self, window: Window, params: Mapping[str, Any]) -> list[Finding]: ...


# --- everything else the harness plugs in -------------------------------------------------
# Interventions, proposers, backtesters, gates and sinks are objects with ``name`` and
# ``version``; their method signatures are documented with their hookspecs.


@runtime_checkable
class Named(Protocol):
    name: str
    version: str


@runtime_checkable
class Sink(Protocol):
    """Mirrors events somewhere (TensorBoard, W&B, MLflow). Failures never stop training."""

    name: str
    version: str

    def handle(self, events: Sequence[Event]) -> None: ...

    def close(self) -> None: ...


def plugin_versions(objs: Iterable[Named]) -> dict[str, str]:
    return {o.name: o.version for o in objs}


# --- the trainer's hook points ------------------------------------------------------------


@attrs.define(kw_only=True)
class RolloutItem:
    """One rollout inside a step's batch, as the trainer's hooks see it.

    ``reward`` starts as the training verifier's reward; reward hooks may change
    it; ``mask=False`` drops it from the loss (filters, infra errors)."""

    rollout_id: str
    group_id: str
    task: Task
    completion: Completion
    verdict: Verdict
    reward: Optional[float]
    mask: bool = True
    strict: Optional[Verdict] = None
    notes: dict[str, Any] = attrs.Factory(dict)


@attrs.define(kw_only=True)
class RolloutBatch:
    step: int
    items: list[RolloutItem]
    hyperparameters: dict[str, Any] = attrs.Factory(dict)
