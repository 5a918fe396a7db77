"""The harness plugin contract: proposers, backtesters and gates, and the values they
exchange with the engine. Plugins receive these and return these; they never touch the
store, the session or the engine. The engine turns them into events."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Mapping, Optional, Protocol, Sequence, runtime_checkable

import attrs

from evo_core.api.evidence import Window
from evo_events import EvalCompleted, FailureDiagnosed, RolloutCompleted

if TYPE_CHECKING:  # annotations only: the engine's own modules import this one
    from evo_core.harness.audited_index import AuditedIndex
    from evo_core.harness.config import HarnessConfig
    from evo_core.harness.ports import TrainerPort
    from evo_core.state import DiagnosisRecord, HarnessState

INTERVENTION_KINDS = (
    "reward_shaping", "rollout_filter", "curriculum", "hyperparameter", "prompt_hint", "diagnostic", "verifier",
)


def fingerprint(kind: str, name: str, params: Mapping[str, Any], diagnostic: Optional[Mapping[str, Any]] = None) -> str:
    """Identity of a proposal for the do-not-repeat ledger: same change, same fingerprint."""
    body: list[Any] = [kind, name, params] + ([diagnostic.get("spec")] if diagnostic else [])
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@attrs.frozen(kw_only=True)
class Proposal:
    """A typed, single-factor, reversible change a proposer suggests. ``diagnostic``
    (``{"name", "version", "spec"}``) installs a data-only diagnostic together with the
    change: the predicate the repair acts on, so the harness can watch it fall."""

    kind: str  # one of INTERVENTION_KINDS
    name: str  # the intervention plugin's name ("diagnostic" kind: "diagnostic_revision")
    params: Mapping[str, Any] = attrs.Factory(dict)
    targets: tuple[str, ...] = attrs.field(default=(), converter=tuple)  # diagnosis kinds it claims to fix
    prediction: Mapping[str, Any] = attrs.Factory(dict)  # falsifiable: which rate falls, which metric holds
    rationale: str = ""
    proposer: str = ""
    skill_id: Optional[str] = None
    evidence: tuple[str, ...] = attrs.field(default=(), converter=tuple)  # ids it was derived from
    diagnostic: Optional[Mapping[str, Any]] = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in INTERVENTION_KINDS:
            raise ValueError(f"proposal kind {self.kind!r} is not one of {', '.join(INTERVENTION_KINDS)}")

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.kind, self.name, dict(self.params), self.diagnostic)


class ProposalRejection:
    """What a proposer returns instead of a proposal it could not form (e.g. an LLM's
    malformed answer). The engine records it as ``Rejected(subject="proposal")``."""

    def __init__(self, proposer: str, reason: str, raw: str = "") -> None:
        self.proposer, self.reason, self.raw = proposer, reason, raw[:2000]


@attrs.frozen(kw_only=True)
class ProposalContext:
    """What a proposer sees: this pass's diagnoses, the state and the evidence (the window,
    and ``history``: a longer stretch of logged rollouts, e.g. the audited ones to learn from)."""

    run_id: str
    step: int
    diagnoses: Sequence[FailureDiagnosed]
    state: "HarnessState"
    window: Window
    config: "HarnessConfig"
    interventions: Mapping[str, Any]  # name -> intervention object (the installed catalogue)
    diagnostics: Mapping[str, Any]  # name -> diagnostic object
    skills: Mapping[str, Any] = attrs.Factory(dict)  # skill_id -> Skill usable now (own + imported)
    history: Sequence[RolloutCompleted] = ()
    # the history's audited rollouts (``evo_core.api.stats.audited(history)``), as the engine
    # keeps them step by step; empty in a context built without them: filter ``history`` then
    audited: Sequence[RolloutCompleted] = ()
    seed: int = 0
    # ``audited`` indexed: each audited rollout's induction columns and hash order, computed
    # once when its step entered the history (``AuditedIndex``); None in a context built
    # without it (readers then compute them: ``AuditedIndex().columns(r)`` does)
    audited_index: Optional["AuditedIndex"] = None

    def audited_history(self) -> Sequence[RolloutCompleted]:
        """The audited training rollouts to learn from: ``audited`` when the engine filled it,
        else the audited ones of ``history`` (or of the window, when there is no history)."""
        if self.audited:
            return self.audited
        from evo_core.harness.validity import audited

        return audited(self.history or self.window.rollouts)


@runtime_checkable
class DiagnosticsReader(Protocol):
    """The run's active diagnostics (with a proposal's own diagnostic watched), over rollouts
    a backtester holds: a forked branch's, or a replayed history's."""

    def measure(self, kind: str, rollouts: Sequence[RolloutCompleted]) -> Optional[float]:
        """The statistic behind diagnosis ``kind`` on ``rollouts``, fired or not; None when no
        active diagnostic reports that kind."""
        ...

    def findings(self, rollouts: Sequence[RolloutCompleted]) -> list[tuple[str, str, Any, tuple[str, ...]]]:
        """``(kind, severity, value, evidence)`` of every active diagnostic that fires."""
        ...

    def resolve(self, name: str, version: str = "", params: Optional[Mapping[str, Any]] = None,
                spec: Optional[Mapping[str, Any]] = None) -> Optional[Any]:
        """A runnable diagnostic for a proposed setting (an installed plugin, or a data-only
        spec); None when neither exists. Raises on a malformed spec."""
        ...


@attrs.frozen(kw_only=True)
class Arms:
    """The two sides of an online A/B, built by the engine: harness states to train the
    control and treatment branches under (opaque to the backtester: pass them to
    ``Branch.train``), and where treatment starts (a rollback starts from the main line)."""

    control: Any
    treatment: Any
    treatment_start: Optional[Mapping[str, Any]] = None


@attrs.frozen(kw_only=True)
class BacktestContext:
    run_id: str
    step: int
    state: "HarnessState"  # read-only
    window: Window  # the evidence window (history to replay)
    config: "HarnessConfig"
    interventions: Mapping[str, Any]
    diagnostics: Mapping[str, Any]
    diagnoses: Sequence[FailureDiagnosed] = ()
    trainer: Optional["TrainerPort"] = None  # forks for online A/Bs (the engine's port supplies it)
    seed: int = 0
    history: Sequence[RolloutCompleted] = ()  # a longer stretch of logged rollouts to replay
    reader: Optional[DiagnosticsReader] = None  # the diagnostics, watching the proposal's own
    arms: Optional[Arms] = None  # the online A/B's control and treatment

    # -- the callables of earlier versions, kept for third-party backtesters ---------------
    def measure(self, kind: str, window: Window, state: Any = None) -> Optional[float]:
        """Deprecated: ``ctx.reader.measure(kind, rollouts)``."""
        return self.reader.measure(kind, window.rollouts) if self.reader is not None else None

    def diagnose(self, window: Window, state: Any = None) -> list[tuple[str, str, Any, tuple[str, ...]]]:
        """Deprecated: ``ctx.reader.findings(rollouts)``."""
        return self.reader.findings(window.rollouts) if self.reader is not None else []


@attrs.frozen(kw_only=True)
class BacktestOutcome:
    """One backtester's verdict. ``passed=None`` means "no decision possible" (too little data)."""

    backtester: str
    mode: str  # "offline" | "online"
    passed: Optional[bool]
    figures: Mapping[str, Any] = attrs.Factory(dict)
    ci: Optional[tuple[float, float]] = None
    n: int = 0
    reasons: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    evidence: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    version: str = "1"


@attrs.frozen(kw_only=True)
class Candidate:
    """What a gate decides on: an intervention proposal, or a policy checkpoint."""

    subject: str  # "intervention" | "policy"
    subject_id: str  # proposal id or str(policy_version)
    step: int
    proposal: Optional[Proposal] = None
    backtests: Sequence[BacktestOutcome] = ()
    eval: Optional[EvalCompleted] = None  # the candidate checkpoint's validation eval
    main_eval: Optional[EvalCompleted] = None  # the main line's validation eval
    train_reward: Optional[float] = None  # candidate's recent training reward
    main_train_reward: Optional[float] = None
    rollouts: Sequence[RolloutCompleted] = ()  # the candidate's recent evidence


@attrs.frozen(kw_only=True)
class GateContext:
    run_id: str
    step: int
    state: "HarnessState"
    config: "HarnessConfig"
    diagnoses: Sequence["DiagnosisRecord"]  # the diagnoses in force (latest diagnostic pass)


@attrs.frozen(kw_only=True)
class GateDecision:
    gate: str
    passed: bool
    veto: bool = False  # a validity veto: blocks regardless of every other gate
    reasons: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    figures: Mapping[str, Any] = attrs.Factory(dict)
    version: str = "1"
    abstain: bool = False  # this gate has nothing to say about the candidate


@runtime_checkable
class Proposer(Protocol):
    """Turns diagnoses (and evidence) into proposals. The ledger filters them afterwards."""

    name: str
    version: str

    def propose(self, ctx: ProposalContext, params: Mapping[str, Any]) -> Sequence[Any]:
        """``Proposal``s, or ``ProposalRejection``s for answers that could not be formed."""
        ...


@runtime_checkable
class Backtester(Protocol):
    """Tests a proposal before any gate sees it: offline on logged evidence, or online on a
    forked branch of training."""

    name: str
    version: str
    mode: str  # "offline" | "online"

    def backtest(self, proposal: Proposal, ctx: BacktestContext) -> BacktestOutcome: ...


@runtime_checkable
class Gate(Protocol):
    """Decides on a candidate. ``subjects`` says which it judges ("intervention", "policy").
    A veto (``GateDecision.veto``) outranks every score."""

    name: str
    version: str
    subjects: tuple[str, ...]

    def decide(self, cand: Candidate, ctx: GateContext, params: Mapping[str, Any]) -> GateDecision: ...
