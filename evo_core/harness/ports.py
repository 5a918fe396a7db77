"""What the harness may ask of the trainer, and nothing more.

The engine never holds the session: it gets a ``TrainerPort`` for the pass. Online
backtests fork branches from it (from the current weights or from the main line's
checkpoint), and a policy promotion asks it to persist the weights that become the main
line. The pass reaches both through a ``HarnessPort`` (below), never the session itself.
Restores are *decisions* (a ``PolicyUpdated(target="restore")`` event): the loop
carries them out after the pass is committed, so a crash cannot lose or double them.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol, Sequence, runtime_checkable

import attrs

from evo_events import BlobRef, RolloutCompleted


@attrs.frozen
class Snapshot:
    """Persisted weights (and optimizer state) of one policy version."""

    checkpoint: BlobRef
    digest: str
    policy_version: int


@attrs.frozen
class BranchEval:
    """A branch's validation evaluation: per-item strict scores and aggregates."""

    item_scores: Mapping[str, float]
    metrics: Mapping[str, Optional[float]]


@runtime_checkable
class Branch(Protocol):
    """A forked copy of training. Nothing it does reaches the run's log or weights."""

    def train(self, k: int, state: Any) -> Sequence[RolloutCompleted]:
        """``k`` RL steps with ``state``'s active interventions in force; their rollouts."""
        ...

    def evaluate(self) -> BranchEval:
        """The strict oracle on the validation split (never the test split)."""
        ...


@runtime_checkable
class TrainerPort(Protocol):
    def fork(self, *, seed: int, start: Optional[Mapping[str, Any]] = None) -> Branch:
        """A branch from the current weights, or from ``start`` (a checkpoint ``BlobRef`` as a
        dict, e.g. the main line's). ``seed`` reseeds its sampling: two forks with the same seed
        and the same weights draw the same random numbers (paired arms)."""
        ...

    def snapshot(self) -> Snapshot:
        """Persist the current weights (and optimizer state); durable before it returns."""
        ...


@runtime_checkable
class HarnessPort(Protocol):
    """Everything a harness pass asks of its surroundings: the online backtests that fork
    training, and the snapshot a policy promotion persists. The live loop gives a
    ``LivePort`` over the session; replay gives one that answers from the recorded run; a
    pass with neither gets ``NO_TRAINER``. The pass itself never asks which one it has."""

    def online_backtest(self, backtester: Any, proposal: Any, ctx: Any) -> Optional[Any]:
        """Run an online backtester (``ctx`` without a trainer; the port supplies one), or
        answer for it. None: no decision is possible here."""
        ...

    def snapshot(self, step: int, policy_version: int) -> Optional[Snapshot]:
        """The persisted weights of a policy version the gate promotes at ``step``, or None."""
        ...


@attrs.frozen
class LivePort:
    """The live run: online backtests fork the session through ``trainer``."""

    trainer: TrainerPort

    def online_backtest(self, backtester: Any, proposal: Any, ctx: Any) -> Optional[Any]:
        return backtester.backtest(proposal, attrs.evolve(ctx, trainer=self.trainer))

    def unpaid_backtest(self, k_steps: int, replicates: int) -> Optional[str]:
        """Why the run's oracle budget cannot pay an online A/B of this size (None: it can)."""
        unpaid = getattr(self.trainer, "unpaid_backtest", None)
        return unpaid(k_steps, replicates) if callable(unpaid) else None

    def snapshot(self, step: int, policy_version: int) -> Optional[Snapshot]:
        return self.trainer.snapshot()


class _NoTrainer:
    """A pass with no training session (tests, tools): online backtests cannot decide."""

    def online_backtest(self, backtester: Any, proposal: Any, ctx: Any) -> Optional[Any]:
        return None

    def snapshot(self, step: int, policy_version: int) -> Optional[Snapshot]:
        return None


NO_TRAINER: HarnessPort = _NoTrainer()
