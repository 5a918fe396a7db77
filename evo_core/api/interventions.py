"""Interventions: typed, single-factor, reversible changes to training, declared as data.

An intervention is one class. It says *what* it changes by defining any of the effect
methods below; the core decides when it is active (promotion adds it, a revert removes it),
in what order it acts (promotion order) and at which point of the step (``EFFECTS``).
This is the one way a plugin changes training: there are no trainer hooks (those of earlier
versions are removed, ``evo_core.hookspecs.REMOVED_HOOKS``). An intervention is active once
the harness promotes it, or from step 1 when the run config names it in
``[harness.interventions.NAME]``; offline replay runs exactly the same methods on logged
rollouts (``RolloutView`` has the same fields live and logged).

    class CapLength:
        name, version, kind = "cap_length", "1", "reward_shaping"
        changes = "reward: 0 for responses longer than `max_chars`"
        targets = ()
        default_params = {"max_chars": 40}

        def new_reward(self, view, params):
            return 0.0 if len(view.text) > params["max_chars"] else None
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Protocol, Sequence, runtime_checkable

import attrs

from evo_core.api.domain import Task
from evo_core.api.params import Param, declare_parameters
from evo_events import RolloutCompleted

# effect method -> the step stage where the core applies it
EFFECTS = {
    "task_weights": "sampling: which tasks are drawn",
    "prompt_hint": "prompts: a hint added to each prompt",
    "hyperparameters": "hyperparameters: overrides for this step",
    "regrade": "rewards: flagged rollouts re-graded by the strict oracle (within the audit budget)",
    "new_reward": "rewards: a new reward per rollout (None: unchanged)",
    "mask": "loss: rollouts dropped from the update",
}
REPLAYABLE = ("new_reward", "mask", "regrade")  # what offline replay can show on logged rollouts


@attrs.frozen
class RolloutView:
    """One rollout as an intervention sees it, live (from a ``RolloutItem``) or logged (from a
    ``RolloutCompleted``). Specs evaluate on it exactly as on the logged event."""

    rollout_id: str
    group_id: str
    task_id: str
    reward: Optional[float]
    correct: Optional[bool]
    truncated: bool
    length: int
    signals: Mapping[str, Any]
    text: str = ""
    features: Mapping[str, Any] = attrs.Factory(dict)
    step: int = 0
    split: str = "train"
    strict_correct: Optional[bool] = None
    infra_error: Optional[str] = None
    policy_version: int = 0

    @property
    def event_id(self) -> str:
        return self.rollout_id

    @classmethod
    def of_item(cls, item: Any, step: int = 0) -> "RolloutView":
        return cls(item.rollout_id, item.group_id, item.task.task_id, item.reward, item.verdict.correct,
                   bool(item.completion.truncated), int(item.completion.n_tokens or 0), dict(item.verdict.signals or {}),
                   item.completion.text or "", dict(item.features or {}), step,
                   strict_correct=item.strict.correct if item.strict is not None else None,
                   infra_error=item.verdict.infra_error)

    @classmethod
    def of_event(cls, ev: RolloutCompleted) -> "RolloutView":
        return cls(ev.event_id, ev.group_id, ev.task_id, ev.reward, ev.correct, ev.truncated, ev.length,
                   dict(ev.signals or {}), ev.response_preview or "", dict(ev.features or {}), ev.step, ev.split,
                   ev.strict_correct, ev.infra_error, ev.policy_version)


@runtime_checkable
class Intervention(Protocol):
    """A typed, single-factor change to training. Everything the engine and the standard
    proposers read from an intervention is here; ``BaseIntervention`` supplies every
    default (``evo_core.api.contract.check_intervention`` lists what a class lacks).

    Plus any of the effect methods of ``EFFECTS`` (what it changes; at least one):

    - ``new_reward(view, params) -> float | None``
    - ``mask(views, params) -> set of rollout ids``
    - ``regrade(view, params) -> bool`` (ask for the oracle's reward)
    - ``hyperparameters(current, params) -> mapping | None``
    - ``prompt_hint(task, params) -> str | None``
    - ``task_weights(tasks, params) -> {task_id: weight} | None``"""

    name: str
    """Unique name; what a ``Proposal`` names and the key of ``[harness.interventions.NAME]``."""
    version: str
    """Its code version."""
    kind: str
    """Its family (``INTERVENTION_KINDS``): the single-factor rule and the ledger group by it."""
    changes: str
    """One line: what it touches. Proposers quote it in their rationale."""
    targets: tuple[str, ...]
    """Diagnosis kinds it claims to fix; a proposal without its own targets takes these.
    Default: () (the proposer names them)."""
    parameters: Mapping[str, Param]
    """Its parameters with types and ranges. Default: inferred from ``default_params``."""
    default_params: Mapping[str, Any]
    """The parameters' defaults."""
    restore_main: bool
    """Its promotion continues training from the main line (a rollback). Default False."""
    prior: bool
    """Flaw- or domain-specific: offered only with ``harness.priors = true``. Default False."""

    def params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with a proposal's ``params``; raises ``ValueError`` on a bad set."""
        ...

    def prediction(self, params: Mapping[str, Any], targets: Sequence[str] = ()) -> dict[str, Any]:
        """The falsifiable claim a proposal of it makes: which statistics fall (``falls``) and
        which metric must not regress (``guard_metric``)."""
        ...


class BaseIntervention:
    """The defaults of the ``Intervention`` contract; a subclass sets ``name``, ``kind``,
    ``changes``, ``parameters`` (or ``default_params``) and defines its effect methods."""

    name: str = ""
    version: str = "1"
    kind: str = ""
    changes: str = ""
    targets: tuple[str, ...] = ()
    parameters: Mapping[str, Param] = {}
    default_params: Mapping[str, Any] = {}
    guard_metric: str = "strict_accuracy"
    restore_main: bool = False  # promotion sends training back to the main line
    prior: bool = False  # flaw- or domain-specific knowledge (joins only with harness.priors)

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        declare_parameters(cls)

    def params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.default_params, **dict(params or {})}

    def prediction(self, params: Mapping[str, Any], targets: Sequence[str] = ()) -> dict[str, Any]:
        return {"falls": list(targets or self.targets), "guard_metric": self.guard_metric, "guard": "does not regress"}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "kind": self.kind, "changes": self.changes,
                "targets": list(self.targets), "default_params": dict(self.default_params), "effects": list(effects(self))}


def effects(iv: Any) -> tuple[str, ...]:
    """The effect methods ``iv`` defines."""
    return tuple(e for e in EFFECTS if callable(getattr(iv, e, None)))


def replayable(iv: Any) -> bool:
    return any(e in REPLAYABLE for e in effects(iv))


def params_of(iv: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with the proposal's params (an intervention's ``params`` may validate)."""
    fn = getattr(iv, "params", None)
    if callable(fn):
        return dict(fn(params))
    return {**dict(getattr(iv, "default_params", {}) or {}), **dict(params or {})}


Active = Sequence[tuple[Any, Mapping[str, Any]]]


def apply_to_views(acts: Active, views: Sequence[RolloutView]) -> tuple[dict[str, Optional[float]], set[str], set[str]]:
    """Apply active interventions (in order) to views: (new reward per id, masked ids, ids a
    ``regrade`` effect asks the oracle about). A reward of None stays None: an
    infrastructure error is never turned into a score."""
    rewards = {v.rollout_id: v.reward for v in views}
    masked: set[str] = set()
    regrade: set[str] = set()
    for iv, params in acts:
        p = params_of(iv, params)
        if callable(getattr(iv, "regrade", None)):
            regrade |= {v.rollout_id for v in views if v.reward is not None and iv.regrade(v, p)}
        if callable(getattr(iv, "new_reward", None)):
            for v in views:
                cur = rewards[v.rollout_id]
                if cur is None:
                    continue
                # a view is rebuilt only when an earlier intervention changed its reward
                nr = iv.new_reward(v if cur == v.reward else attrs.evolve(v, reward=cur), p)
                if nr is not None:
                    rewards[v.rollout_id] = float(nr)
        if callable(getattr(iv, "mask", None)):
            masked |= set(iv.mask([v if rewards[v.rollout_id] == v.reward else attrs.evolve(v, reward=rewards[v.rollout_id])
                                   for v in views], p) or ())
    return rewards, masked, regrade


def merged_hyperparameters(acts: Active, current: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for iv, params in acts:
        if callable(getattr(iv, "hyperparameters", None)):
            out.update(iv.hyperparameters({**current, **out}, params_of(iv, params)) or {})
    return out


def prompt_hints(acts: Active, task: Task) -> list[str]:
    return [h for iv, params in acts if callable(getattr(iv, "prompt_hint", None))
            for h in [iv.prompt_hint(task, params_of(iv, params))] if h]


def task_weights(acts: Active, tasks: Sequence[Task]) -> Optional[dict[str, float]]:
    out: dict[str, float] = {}
    for iv, params in acts:
        if callable(getattr(iv, "task_weights", None)):
            for tid, w in (iv.task_weights(tasks, params_of(iv, params)) or {}).items():
                out[tid] = out.get(tid, 1.0) * float(w)
    return out or None


def in_order(active: Iterable[Any], catalogue: Mapping[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    """Active interventions (``HarnessState.interventions`` values) resolved to their
    installed objects, in promotion order. One that is not installed is skipped."""
    rows = sorted(active, key=lambda a: (a.since_harness_version, a.proposal_id))
    return [(catalogue[a.name], dict(a.params)) for a in rows if a.name in catalogue]
