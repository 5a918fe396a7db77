"""The standard event types. Names and schema versions are stable: never rename.

Every event carries ``run_id``, ``event_id``, ``caused_by`` (ids of its
evidence) and ``emitted_by`` (plugin name and version) from ``Event``.
Large payloads live in the blob store; events hold a ``BlobRef`` to them.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import attrs

from evo_events.base import Event, event_type
from evo_events.upcasters import register_upcaster

__all__ = [
    "BlobRef",
    "RunStarted",
    "RunResumed",
    "RunFinished",
    "RolloutCompleted",
    "StepCompleted",
    "PolicyUpdated",
    "PolicyExported",
    "EvalCompleted",
    "FailureDiagnosed",
    "InterventionProposed",
    "BacktestPassed",
    "BacktestFailed",
    "BacktestInconclusive",
    "backtest_decision",
    "backtest_decision_of",
    "BACKTEST_RESULTS",
    "BACKTEST_RESULT_TYPES",
    "Promoted",
    "Rejected",
    "InterventionReverted",
    "SkillRegistered",
    "SkillRetired",
    "PluginFailed",
    "HarnessPassCompleted",
    "TRAINER_KEYS",
    "SEVERITIES",
]

SEVERITIES = ("info", "warning", "invalid")


@attrs.frozen
class BlobRef:
    """A content address in the blob store."""

    digest: str  # sha256 hex of the stored bytes
    size: int
    media_type: str = "application/json"


# --- run lifecycle -------------------------------------------------------------------------


@event_type("evo.RunStarted", version=1)
@attrs.frozen(kw_only=True)
class RunStarted(Event):
    """A run began. ``config`` is the full resolved config; ``config_hash`` its sha256."""

    config: dict[str, Any]
    config_hash: str
    seed: int
    harness_mode: str  # "fixed" | "evolving"
    code_version: str
    started_at: str  # ISO-8601 UTC
    parent_run: Optional[str] = None


@event_type("evo.RunResumed", version=1)
@attrs.frozen(kw_only=True)
class RunResumed(Event):
    """A killed run continued from its last committed step."""

    from_step: int
    resumed_at: str


@event_type("evo.RunFinished", version=2)
@attrs.frozen(kw_only=True)
class RunFinished(Event):
    """The run ended (it may be resumed unless ``completed``).

    A sealed one carries its stream's head just before it: ``head_version`` and
    ``head_hash`` are the version and chain hash of the event it follows (built by
    ``evo_core.store.seal_run_finished``). Both are None in an unsealed one (every v1 event).
    """

    status: str  # "completed" | "failed" | "stopped"
    step: int
    summary: dict[str, Any] = attrs.Factory(dict)
    message: str = ""
    head_version: Optional[int] = None
    head_hash: Optional[str] = None


@register_upcaster("evo.RunFinished", 1)
def _run_finished_v1_to_v2(data: dict) -> dict:
    # v1 was never sealed.
    out = dict(data)
    out.setdefault("head_version", None)
    out.setdefault("head_hash", None)
    return out


# --- the policy side ----------------------------------------------------------------------


@event_type("evo.RolloutCompleted", version=3)
@attrs.frozen(kw_only=True)
class RolloutCompleted(Event):
    """One sampled completion and its verdicts. ``event_id`` is the rollout id.

    ``reward`` is the training verifier's reward *before* interventions and
    ``reward_final`` the reward training used (after interventions; None when masked
    out). ``reward`` is None and ``infra_error`` set when grading failed for
    infrastructure reasons. ``strict_correct`` is the strict oracle's label where
    the rollout was audited. ``signals`` are the domain's own (whatever their names);
    ``features`` are generic response features the core computes the same way for
    every domain; ``train`` holds the trainer's per-rollout values (entropy,
    advantage, whether the loss saw it, its index in the step's trajectory blob).
    """

    step: int
    task_id: str
    group_id: str
    policy_version: int
    reward: Optional[float]
    correct: Optional[bool] = None
    strict_correct: Optional[bool] = None
    split: str = "train"
    infra_error: Optional[str] = None
    truncated: bool = False
    length: int = 0
    response_preview: str = ""
    trajectory: Optional[BlobRef] = None
    signals: dict[str, Any] = attrs.Factory(dict)
    reward_final: Optional[float] = None
    features: dict[str, Any] = attrs.Factory(dict)
    train: dict[str, Any] = attrs.Factory(dict)


# Per-rollout values the trainer computed; v2 logs kept them among the domain's signals.
TRAINER_KEYS = ("entropy", "advantage", "masked", "trajectory_index")


@register_upcaster("evo.RolloutCompleted", 1)
def _rollout_v1_to_v2(data: dict) -> dict:
    # v1 had no split or infra_error and called the strict label "oracle".
    out = dict(data)
    out.setdefault("split", "train")
    out.setdefault("infra_error", None)
    out["strict_correct"] = out.pop("oracle", None)
    return out


@register_upcaster("evo.RolloutCompleted", 2)
def _rollout_v2_to_v3(data: dict) -> dict:
    # v2 mixed the trainer's values into the domain's signals and had no generic features.
    out = dict(data)
    signals = dict(out.get("signals") or {})
    out["train"] = {k: signals.pop(k) for k in TRAINER_KEYS if k in signals}
    out["reward_final"] = signals.pop("reward_final", out.get("reward"))
    out["signals"] = signals
    out["features"] = {}
    return out


@event_type("evo.StepCompleted", version=2)
@attrs.frozen(kw_only=True)
class StepCompleted(Event):
    """A step's update. ``resume_checkpoint`` is the absolute path and sha256 of the resume
    checkpoint written before this step's events were committed (``--resume`` reads it from
    here, so it works from any directory)."""

    step: int
    policy_version: int
    harness_version: int
    metrics: dict[str, Optional[float]]
    resume_checkpoint: Optional[dict[str, str]] = None


@register_upcaster("evo.StepCompleted", 1)
def _step_v1_to_v2(data: dict) -> dict:
    return {**data, "resume_checkpoint": None}


@event_type("evo.PolicyUpdated", version=1)
@attrs.frozen(kw_only=True)
class PolicyUpdated(Event):
    """New weights exist. ``checkpoint`` is the blob of the weights (or adapter)."""

    step: int
    policy_version: int
    digest: str
    checkpoint: Optional[BlobRef] = None
    adapter: bool = False
    target: str = "trainer"  # or the rollout server the weights were synced to


@event_type("evo.PolicyExported", version=1)
@attrs.frozen(kw_only=True)
class PolicyExported(Event):
    """``evo export`` wrote a policy out as a transformers directory.

    ``digest`` is the weights digest the log gave that version (``PolicyUpdated.digest``),
    checked against the exported weights; ``checkpoint`` the blob they were read from, or
    ``checkpoint_file`` the resume checkpoint (``{"path", "sha256"}``); ``source`` the
    event that named them. ``adapter``: the LoRA adapter alone was
    written; ``merged``: LoRA weights were merged into the base model."""

    policy_version: int
    digest: str
    output_dir: str
    checkpoint: Optional[BlobRef] = None
    checkpoint_file: Optional[dict[str, str]] = None
    source: str = ""
    main: bool = False  # the version was chosen as the run's main line (--main)
    adapter: bool = False
    merged: bool = False
    exported_at: str = ""  # ISO-8601 UTC


@event_type("evo.EvalCompleted", version=1)
@attrs.frozen(kw_only=True)
class EvalCompleted(Event):
    """Held-out evaluation. ``item_scores`` (task id -> score) feeds paired bootstraps."""

    step: int
    policy_version: int
    split: str
    n: int
    metrics: dict[str, Optional[float]]
    item_scores: dict[str, float] = attrs.Factory(dict)
    branch: str = "main"


# --- the harness side ---------------------------------------------------------------------


@event_type("evo.FailureDiagnosed", version=1)
@attrs.frozen(kw_only=True)
class FailureDiagnosed(Event):
    step: int
    kind: str
    severity: str  # one of SEVERITIES
    diagnostic: str
    diagnostic_version: str
    evidence: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    stats: dict[str, Any] = attrs.Factory(dict)
    message: str = ""


@event_type("evo.InterventionProposed", version=2)
@attrs.frozen(kw_only=True)
class InterventionProposed(Event):
    """A typed, single-factor, reversible change. ``event_id`` is the proposal id.

    ``kind`` is the family (reward_shaping, rollout_filter, curriculum,
    hyperparameter, prompt_hint, diagnostic, verifier); ``name`` the
    intervention plugin; ``targets`` the diagnosis kinds it claims to fix;
    ``prediction`` its falsifiable claim; ``fingerprint`` identifies the
    proposal for the do-not-repeat ledger. ``diagnostic`` (optional) is a data-only
    diagnostic ``{"name", "version", "spec"}`` that the proposal installs together with its
    repair: the evidence-induced spec that the repair acts on.
    """

    step: int
    kind: str
    name: str
    params: dict[str, Any]
    targets: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    prediction: dict[str, Any] = attrs.Factory(dict)
    rationale: str = ""
    proposer: str = ""
    fingerprint: str = ""
    skill_id: Optional[str] = None
    diagnostic: Optional[dict[str, Any]] = None


@register_upcaster("evo.InterventionProposed", 1)
def _proposed_v1_to_v2(data: dict) -> dict:
    return {**data, "diagnostic": None}


@attrs.frozen(kw_only=True)
class _BacktestResult(Event):
    proposal_id: str
    step: int
    mode: str  # "offline" | "online"
    figures: dict[str, Any] = attrs.Factory(dict)
    ci: Optional[tuple[float, float]] = None
    n: int = 0
    reasons: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    evidence: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@event_type("evo.BacktestPassed", version=1)
@attrs.frozen(kw_only=True)
class BacktestPassed(_BacktestResult):
    pass


@event_type("evo.BacktestFailed", version=1)
@attrs.frozen(kw_only=True)
class BacktestFailed(_BacktestResult):
    pass


@event_type("evo.BacktestInconclusive", version=1)
@attrs.frozen(kw_only=True)
class BacktestInconclusive(_BacktestResult):
    """A backtester that could not decide (too few audited rollouts, no session to fork): no
    verdict either way, so the gate turns to its next backtester. Logs written before this type
    existed record the same outcome as ``BacktestFailed`` with ``figures["decision"] == "none"``."""


# Every event type a backtester's verdict is logged as, and their type names.
BACKTEST_RESULTS = (BacktestPassed, BacktestFailed, BacktestInconclusive)
BACKTEST_RESULT_TYPES = tuple(c.TYPE for c in BACKTEST_RESULTS)


def backtest_decision(ev: Event) -> Optional[bool]:
    """What a logged backtest decided: True (passed), False (failed) or None (no decision),
    reading legacy ``BacktestFailed`` events whose figures say ``decision: none`` as None."""
    if not isinstance(ev, BACKTEST_RESULTS):
        raise TypeError(f"{type(ev).__name__} is not a backtest result")
    return backtest_decision_of(ev.TYPE, ev.figures)


def backtest_decision_of(event_type: str, figures: Optional[Mapping[str, Any]]) -> Optional[bool]:
    """``backtest_decision`` for readers of raw payloads: a result's type name and its figures."""
    if event_type == BacktestPassed.TYPE:
        return True
    if event_type == BacktestFailed.TYPE:
        return None if (figures or {}).get("decision") == "none" else False
    if event_type == BacktestInconclusive.TYPE:
        return None
    raise TypeError(f"{event_type} is not a backtest result")


@event_type("evo.Promoted", version=2)
@attrs.frozen(kw_only=True)
class Promoted(Event):
    """A gate promoted a proposal (``subject="intervention"``) or a checkpoint (``"policy"``).

    A promoted checkpoint becomes the main line: ``checkpoint`` is its weights (and
    optimizer state) in the blob store and ``digest`` the weights' digest, so a rollback or a
    resume restores exactly that policy."""

    subject: str
    subject_id: str
    step: int
    gate: str
    harness_version_before: int
    harness_version_after: int
    reasons: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    plugin_versions: dict[str, str] = attrs.Factory(dict)
    skill_id: Optional[str] = None
    figures: dict[str, Any] = attrs.Factory(dict)
    checkpoint: Optional[BlobRef] = None
    digest: str = ""


@register_upcaster("evo.Promoted", 1)
def _promoted_v1_to_v2(data: dict) -> dict:
    return {**data, "checkpoint": None, "digest": ""}


@event_type("evo.Rejected", version=1)
@attrs.frozen(kw_only=True)
class Rejected(Event):
    subject: str
    subject_id: str
    step: int
    gate: str
    harness_version: int
    reasons: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    fingerprint: Optional[str] = None
    plugin_versions: dict[str, str] = attrs.Factory(dict)
    figures: dict[str, Any] = attrs.Factory(dict)


@event_type("evo.InterventionReverted", version=1)
@attrs.frozen(kw_only=True)
class InterventionReverted(Event):
    """An active intervention was switched off; the harness version moves on. ``figures``
    are the decision's numbers (a pay-watch retirement's test, and under ``"blocks"`` the
    (intervention, predicate) pair the ledger no longer proposes)."""

    proposal_id: str
    step: int
    harness_version_before: int
    harness_version_after: int
    reason: str = ""
    figures: dict[str, Any] = attrs.Factory(dict)


@event_type("evo.SkillRegistered", version=1)
@attrs.frozen(kw_only=True)
class SkillRegistered(Event):
    """A reusable bundle: diagnostic, intervention, preconditions, expected effect, provenance."""

    skill_id: str
    name: str
    bundle: dict[str, Any]
    provenance: dict[str, Any] = attrs.Factory(dict)
    source_run: Optional[str] = None


@event_type("evo.SkillRetired", version=1)
@attrs.frozen(kw_only=True)
class SkillRetired(Event):
    skill_id: str
    reason: str
    step: int = 0
    evidence: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@event_type("evo.PluginFailed", version=1)
@attrs.frozen(kw_only=True)
class PluginFailed(Event):
    plugin: str
    hook: str
    error_type: str
    message: str
    required: bool = False
    step: Optional[int] = None


@event_type("evo.HarnessPassCompleted", version=1)
@attrs.frozen(kw_only=True)
class HarnessPassCompleted(Event):
    """The harness finished its work for a step. It is committed in the same batch as the
    step's events, so a step and its harness pass are durable together or not at all.
    ``diagnosed`` says a diagnostic pass ran; ``active`` lists the diagnoses it left in force
    (what the validity gate reads until the next diagnostic pass)."""

    step: int
    harness_version: int
    diagnosed: bool = False
    active: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    proposals: int = 0
    decisions: int = 0
