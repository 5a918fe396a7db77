"""The co-evolving harness engine.

The run loop builds one harness per run and calls it once per step:

    from evo_core.harness import build_harness
    harness = build_harness(cfg["harness"], plugins, run_id=run_id, store=store)
    ...
    harness.on_step(StepContext(...))      # after the step's events are committed
    harness.on_run_end(StepContext(..., final=True))

What the engine reads from the evidence (the trainer/domains provide it):
- ``RolloutCompleted``: ``reward`` (training verifier, before interventions), ``correct``,
  ``strict_correct`` on audited rollouts (``[harness.audit].rate``), ``truncated``,
  ``length``, ``split``, ``group_id``, and ``signals`` — the standard diagnostics read
  ``answer_count`` (numbers/final answers extracted), ``entropy`` (mean token entropy),
  ``format_ok``, ``tool_calls``/``tool_errors``/``tool_call_names``, ``tests_modified``,
  ``runner_config_modified``, ``git_history_access``, ``special_cased_inputs``.
- ``EvalCompleted`` (branch "main", split "heldout") with ``metrics["strict_accuracy"]`` and
  ``item_scores``: the policy gate runs on every one of them.
- ``ctx.session`` (a ``TrainingSession``): forked for online backtests; ``checkpoint()`` /
  ``restore()`` keep the main line when a policy candidate is rejected.
"""

from __future__ import annotations

from typing import Any, Mapping, Union

from evo_core.harness.config import (
    Ablations,
    AuditConfig,
    BacktestConfig,
    HarnessConfig,
    HarnessConfigError,
)
from evo_core.harness.engine import ENGINE_VERSION, HarnessEngine, strict_metric
from evo_core.harness.types import (
    BacktestContext,
    BacktestOutcome,
    Candidate,
    GateContext,
    GateDecision,
    Proposal,
    ProposalContext,
    ProposalRejection,
)
from evo_core.harness_api import Harness

__all__ = [
    "build_harness", "HarnessConfig", "HarnessConfigError", "BacktestConfig", "Ablations", "AuditConfig",
    "HarnessEngine", "ENGINE_VERSION", "strict_metric", "Proposal", "ProposalContext", "ProposalRejection",
    "BacktestContext", "BacktestOutcome", "Candidate", "GateContext", "GateDecision",
]


def build_harness(config: Union[HarnessConfig, Mapping[str, Any], None], plugins: Any, *, run_id: str, store: Any = None) -> Harness:
    """Build the harness for one run. ``config`` is the ``[harness]`` table (or a parsed
    ``HarnessConfig``); ``plugins`` a ``PluginManager``; ``store`` the run's event store
    (read-only use: resume state, windows). Raises ``HarnessConfigError`` on bad config."""
    cfg = HarnessConfig.from_dict(config or {})
    return HarnessEngine(cfg, plugins, run_id=run_id, store=store)
