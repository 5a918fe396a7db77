"""The public API that plugins and domains program against.

Plugins receive these typed values and return typed results; they never touch storage,
the session or the engine. Everything here is plain data (attrs), a Protocol, or a pure
function over them. Plugins and domains import ``evo_core.api`` (and its submodules
``params``, ``contract``, ``specs``, ``stats``, ``features``, ``trajectory``, ``sandbox``, ``grading``) and ``evo_events``, nothing else of the core
(``tests/core/test_layers.py``).
"""

from evo_core.api.domain import (
    BatchedEpisodeDomain,
    Completion,
    Domain,
    EpisodeAgent,
    EpisodeDomain,
    EpisodeOutcome,
    Task,
    TaskSource,
    Verdict,
    generated_splits,
    supports_batched_episodes,
    supports_episodes,
)
from evo_core.api.evidence import BaseDiagnostic, Diagnostic, Finding, Window, is_validation, strict_metric
from evo_core.api.harness import (
    INTERVENTION_KINDS,
    Arms,
    BacktestContext,
    Backtester,
    BacktestOutcome,
    Candidate,
    DiagnosticsReader,
    Gate,
    GateContext,
    GateDecision,
    Proposal,
    ProposalContext,
    ProposalRejection,
    Proposer,
    fingerprint,
)
from evo_core.api.interventions import (
    EFFECTS,
    BaseIntervention,
    Intervention,
    RolloutView,
    apply_to_views,
    effects,
    replayable,
)
from evo_core.api.params import Param, ParamError
from evo_core.api.trajectory import TOOL_CLASSES, RuleClassifier, TrajectoryClassifier, Turn, trajectory_classifier_of
from evo_core.api.trainer import RolloutBatch, RolloutItem, Sink
from evo_core.hookspecs import hookimpl
from evo_core.trainer.protocols import SamplingParams
from evo_core.signal_names import MODES as SIGNAL_MODES
from evo_core.signal_names import rename as rename_signals

__all__ = [
    "Completion", "Domain", "EpisodeAgent", "EpisodeDomain", "EpisodeOutcome", "Task", "TaskSource", "Verdict",
    "supports_episodes", "BatchedEpisodeDomain", "supports_batched_episodes", "generated_splits",
    "BaseDiagnostic", "Diagnostic", "Finding", "Window", "is_validation", "strict_metric",
    "INTERVENTION_KINDS", "Arms", "AuditedIndex", "BacktestContext", "DiagnosticsReader", "Backtester", "BacktestOutcome", "Candidate", "Gate", "GateContext",
    "GateDecision", "Proposal", "ProposalContext", "ProposalRejection", "Proposer", "fingerprint",
    "EFFECTS", "BaseIntervention", "Intervention", "Param", "ParamError", "RolloutView", "apply_to_views", "effects", "replayable",
    "RolloutBatch", "RolloutItem", "Sink",
    "TOOL_CLASSES", "RuleClassifier", "TrajectoryClassifier", "Turn", "trajectory_classifier_of",
    "hookimpl", "SIGNAL_MODES", "rename_signals", "SamplingParams",
]


def __getattr__(name: str):
    """``AuditedIndex`` is the engine's (``evo_core.harness.audited_index``), loaded on first
    use: the engine's package imports this one, so this one cannot import it while loading."""
    if name == "AuditedIndex":
        from evo_core.harness.audited_index import AuditedIndex

        return AuditedIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
