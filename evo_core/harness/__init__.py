"""The co-evolving harness engine.

The run loop builds one engine per run and runs one pass per step, before the step is
committed; the pass's events are appended in the same batch as the step's:

    from evo_core.harness import PassInput, build_harness
    engine = build_harness(cfg["harness"], plugins, run_id=run_id)
    events = engine.new_pass(PassInput(step=..., state=..., evidence=..., evals=..., port=LivePort(trainer))).run()

What the engine reads from the evidence (the trainer and the domains provide it):
- ``RolloutCompleted``: ``reward`` (training verifier, before interventions),
  ``reward_final``, ``strict_correct`` on audited rollouts (``[harness.audit].rate``),
  ``truncated``, ``length``, ``group_id``, the domain's ``signals`` (names it never assumes)
  and the core's generic response ``features``;
- ``EvalCompleted`` on the validation split (``metrics["strict_accuracy"]``, ``item_scores``):
  the policy gate decides on each; test-split evaluations never reach it;
- a ``HarnessPort`` (``evo_core.harness.ports``): online backtests (live, a ``LivePort`` over
  the trainer's forks; in replay, the recorded outcomes), and snapshots of the weights a
  policy promotion makes the main line.
"""

from __future__ import annotations

from typing import Any, Mapping, Union

from evo_core.api import (
    BacktestContext,
    BacktestOutcome,
    Candidate,
    GateContext,
    GateDecision,
    Proposal,
    ProposalContext,
    ProposalRejection,
    strict_metric,
)
from evo_core.harness.config import Ablations, AuditConfig, BacktestConfig, HarnessConfig, HarnessConfigError
from evo_core.harness.engine import ENGINE_VERSION, Catalog, HarnessEngine, PassInput
from evo_core.harness.ports import NO_TRAINER, HarnessPort, LivePort
from evo_core.harness.window import EvidenceWindow

__all__ = [
    "build_harness", "HarnessConfig", "HarnessConfigError", "BacktestConfig", "Ablations", "AuditConfig",
    "HarnessEngine", "Catalog", "PassInput", "HarnessPort", "LivePort", "NO_TRAINER", "EvidenceWindow", "ENGINE_VERSION", "strict_metric",
    "Proposal", "ProposalContext", "ProposalRejection", "BacktestContext", "BacktestOutcome", "Candidate",
    "GateContext", "GateDecision",
]


def build_harness(config: Union[HarnessConfig, Mapping[str, Any], None], plugins: Any, *, run_id: str) -> HarnessEngine:
    """The engine for one run. ``config`` is the ``[harness]`` table (or a parsed
    ``HarnessConfig``); ``plugins`` a ``PluginManager``. Raises ``HarnessConfigError`` on a
    bad config."""
    cfg = HarnessConfig.from_dict(config or {})
    return HarnessEngine(cfg, Catalog.from_plugins(plugins), run_id=run_id)
