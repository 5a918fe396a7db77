"""The public API that plugins and domains program against.

Plugins receive these typed values and return typed results; they never touch storage,
the session or the engine. Everything here is plain data (attrs), a Protocol, or a pure
function over them.
"""

from evo_core.api.domain import (
    Completion,
    Domain,
    EpisodeAgent,
    EpisodeDomain,
    EpisodeOutcome,
    Task,
    TaskSource,
    Verdict,
    supports_episodes,
)
from evo_core.api.evidence import Diagnostic, Finding, Window, is_validation, strict_metric
from evo_core.api.harness import (
    INTERVENTION_KINDS,
    BacktestContext,
    Backtester,
    BacktestOutcome,
    Candidate,
    Gate,
    GateContext,
    GateDecision,
    Proposal,
    ProposalContext,
    ProposalRejection,
    Proposer,
    fingerprint,
)
from evo_core.api.interventions import EFFECTS, Intervention, RolloutView, apply_to_views, effects, replayable
from evo_core.api.trainer import RolloutBatch, RolloutItem, Sink

__all__ = [
    "Completion", "Domain", "EpisodeAgent", "EpisodeDomain", "EpisodeOutcome", "Task", "TaskSource", "Verdict",
    "supports_episodes",
    "Diagnostic", "Finding", "Window", "is_validation", "strict_metric",
    "INTERVENTION_KINDS", "BacktestContext", "Backtester", "BacktestOutcome", "Candidate", "Gate", "GateContext",
    "GateDecision", "Proposal", "ProposalContext", "ProposalRejection", "Proposer", "fingerprint",
    "EFFECTS", "Intervention", "RolloutView", "apply_to_views", "effects", "replayable",
    "RolloutBatch", "RolloutItem", "Sink",
]
