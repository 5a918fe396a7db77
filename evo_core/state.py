"""Harness state as a pure fold over a run's events.

``fold(events)`` builds it from scratch; ``apply(state, event)`` advances it by one
event. The live loop uses the same function, so live state and replayed state cannot
drift apart. ``to_dict``/``from_dict`` serialise it for snapshots, which are only a
cache.

This is *all* the memory the harness engine has: the main line (which checkpoint the
policy gate admitted, and where its weights are), the do-not-repeat ledger with the
evidence each rejection saw, when the last gate and promotion happened, which evaluations
were gated, and which diagnoses are in force. A resumed harness is exactly this fold.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

import attrs
import cattrs

from evo_events import (
    EvalCompleted,
    Event,
    FailureDiagnosed,
    HarnessPassCompleted,
    InterventionProposed,
    InterventionReverted,
    PolicyUpdated,
    Promoted,
    Rejected,
    RunFinished,
    RunStarted,
    SkillRegistered,
    SkillRetired,
    StepCompleted,
)


@attrs.define
class DiagnosticSetting:
    name: str
    version: str
    params: dict[str, Any] = attrs.Factory(dict)
    spec: Optional[dict[str, Any]] = None  # a data-only diagnostic spec, when not code
    source: str = "config"  # "config" or the proposal id that introduced this version
    since_harness_version: int = 0


@attrs.define
class ActiveIntervention:
    proposal_id: str
    kind: str
    name: str
    params: dict[str, Any] = attrs.Factory(dict)
    targets: tuple[str, ...] = ()
    since_harness_version: int = 0
    skill_id: Optional[str] = None
    step: int = 0  # when it was promoted
    value: Optional[float] = None  # the targeted diagnosis' statistic when it was promoted


@attrs.define
class LedgerEntry:
    decision: str  # "promoted" | "rejected"
    subject: str  # "intervention" | "policy"
    subject_id: str
    step: int
    harness_version: int
    gate: str
    reasons: tuple[str, ...] = ()
    fingerprint: Optional[str] = None
    event_id: str = ""


@attrs.define
class Skill:
    skill_id: str
    name: str
    bundle: dict[str, Any] = attrs.Factory(dict)
    uses: int = 0
    retired: bool = False
    source_run: Optional[str] = None


@attrs.define
class DiagnosisRecord:
    """What the gates need of a ``FailureDiagnosed`` while it is in force."""

    event_id: str
    step: int
    kind: str
    severity: str
    diagnostic: str
    diagnostic_version: str
    value: Optional[float] = None


@attrs.define
class MainLine:
    """The checkpoint training keeps as its main line (what a rollback returns to)."""

    policy_version: int = 0
    step: int = 0
    eval_id: Optional[str] = None  # the validation evaluation that admitted it
    train_reward: Optional[float] = None  # its training reward when admitted
    checkpoint: Optional[dict[str, Any]] = None  # BlobRef fields of its weights
    digest: str = ""


@attrs.define
class HarnessState:
    run_id: str = ""
    mode: str = "evolving"
    harness_version: int = 0
    policy_version: int = 0  # the version of the weights training is on now
    max_policy_version: int = 0  # the highest version ever named (a restore names a new one)
    main_policy_version: int = 0  # the last checkpoint a policy gate promoted
    main: MainLine = attrs.Factory(MainLine)
    step: int = 0  # last completed step
    position: int = 0  # stream version of the last event folded in
    status: str = "new"  # new | running | completed | failed | stopped
    config: dict[str, Any] = attrs.Factory(dict)
    diagnostics: dict[str, DiagnosticSetting] = attrs.Factory(dict)
    interventions: dict[str, ActiveIntervention] = attrs.Factory(dict)
    gate_config: dict[str, Any] = attrs.Factory(dict)
    skills: dict[str, Skill] = attrs.Factory(dict)
    ledger: list[LedgerEntry] = attrs.Factory(list)
    proposals: dict[str, dict[str, Any]] = attrs.Factory(dict)
    diagnosis_counts: dict[str, int] = attrs.Factory(dict)
    rejected: dict[str, float] = attrs.Factory(dict)  # fingerprint -> evidence value when rejected
    rejected_families: dict[str, float] = attrs.Factory(dict)  # same change, other params (see ``family``)
    active_diagnoses: list[DiagnosisRecord] = attrs.Factory(list)
    gated_evals: list[str] = attrs.Factory(list)  # validation evals a policy gate decided on
    last_gate_step: int = 0
    last_promotion_step: Optional[int] = None
    passes: int = 0  # harness passes completed
    pending_diagnoses: dict[str, DiagnosisRecord] = attrs.Factory(dict)  # this pass's, until it completes
    blocked_repairs: list[str] = attrs.Factory(list)  # (intervention, predicate) keys a pay watch retired

    def active_interventions(self, name: Optional[str] = None) -> list[ActiveIntervention]:
        return [i for i in self.interventions.values() if name is None or i.name == name]

    def rejected_fingerprints(self) -> set[str]:
        return set(self.rejected)

    def to_dict(self) -> dict[str, Any]:
        return _conv.unstructure(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HarnessState":
        return _conv.structure(data, cls)

    def copy(self) -> "HarnessState":
        """A copy that ``apply`` (and a pass's working state) can change without touching this
        one. It copies the containers and the records ``apply`` changes in place (the main
        line, skills), and shares the rest, which is only ever replaced: a ``deepcopy`` costs
        the whole ledger on every pass, so a long run (or its replay) would slow step by step."""
        return attrs.evolve(
            self, main=attrs.evolve(self.main), diagnostics=dict(self.diagnostics), interventions=dict(self.interventions),
            gate_config=dict(self.gate_config), skills={k: attrs.evolve(v) for k, v in self.skills.items()},
            ledger=list(self.ledger), proposals=dict(self.proposals), diagnosis_counts=dict(self.diagnosis_counts),
            rejected=dict(self.rejected), rejected_families=dict(self.rejected_families),
            active_diagnoses=list(self.active_diagnoses), gated_evals=list(self.gated_evals),
            pending_diagnoses=dict(self.pending_diagnoses), blocked_repairs=list(self.blocked_repairs))


_conv = cattrs.Converter()


def _initial_from_config(state: HarnessState, ev: RunStarted) -> None:
    state.run_id = ev.run_id
    state.mode = ev.harness_mode
    state.config = ev.config
    state.status = "running"
    harness = ev.config.get("harness", {}) if isinstance(ev.config, dict) else {}
    for name, params in (harness.get("diagnostics") or {}).items():
        params = dict(params or {})
        if params.pop("enabled", True) is False:
            continue
        version = str(params.pop("version", "1"))
        spec = params.pop("spec", None)
        state.diagnostics[name] = DiagnosticSetting(name, version, params, spec)
    state.gate_config = dict(harness.get("gates") or {})
    for name, params in sorted((harness.get("interventions") or {}).items()):
        params = dict(params or {})
        if params.pop("enabled", True) is False:
            continue
        # active from step 1, like a promotion at step 0: the core applies it, offline replay and
        # backtests see it in the state, and a retirement or a revert can switch it off
        pid = config_intervention_id(name)
        state.interventions[pid] = ActiveIntervention(pid, "config", name, params)


def config_intervention_id(name: str) -> str:
    """The id under which ``[harness.interventions.NAME]`` is active (no proposal has it)."""
    return f"config:{name}"


def family(kind: str, name: str, targets: Iterable[str]) -> str:
    """A change's family: the same intervention for the same diagnoses, whatever its params
    (a curriculum proposal names different tasks each time; the ledger must still see a repeat)."""
    return f"{kind}:{name}:{','.join(sorted(targets))}"


def _see_version(state: HarnessState, version: int) -> None:
    state.max_policy_version = max(state.max_policy_version, version)


def apply(state: HarnessState, ev: Event, position: Optional[int] = None) -> HarnessState:
    """Advance ``state`` by one event, in place; returns it for chaining."""
    if isinstance(ev, RunStarted):
        _initial_from_config(state, ev)
    elif isinstance(ev, StepCompleted):
        state.step = max(state.step, ev.step)
        state.policy_version = ev.policy_version
        _see_version(state, ev.policy_version)
    elif isinstance(ev, PolicyUpdated):
        _policy_updated(state, ev)
    elif isinstance(ev, EvalCompleted):
        if ev.policy_version == 0 and ev.split in ("validation", "heldout") and ev.branch == "main" \
                and state.main.eval_id is None and state.main.policy_version == 0:
            state.main.eval_id = ev.event_id  # the starting checkpoint is the main line by definition
    elif isinstance(ev, FailureDiagnosed):
        state.diagnosis_counts[ev.kind] = state.diagnosis_counts.get(ev.kind, 0) + 1
        value = ev.stats.get("value") if isinstance(ev.stats, dict) else None
        state.pending_diagnoses[ev.event_id] = DiagnosisRecord(
            ev.event_id, ev.step, ev.kind, ev.severity, ev.diagnostic, ev.diagnostic_version,
            float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None)
    elif isinstance(ev, HarnessPassCompleted):
        state.passes += 1
        if ev.diagnosed:
            state.active_diagnoses = [state.pending_diagnoses[i] for i in ev.active if i in state.pending_diagnoses]
        state.pending_diagnoses = {}
    elif isinstance(ev, InterventionProposed):
        state.proposals[ev.event_id] = {
            "kind": ev.kind, "name": ev.name, "params": dict(ev.params), "targets": list(ev.targets),
            "fingerprint": ev.fingerprint, "skill_id": ev.skill_id, "step": ev.step,
            "diagnostic": dict(ev.diagnostic) if ev.diagnostic else None,
        }
    elif isinstance(ev, Promoted):
        _promote(state, ev)
    elif isinstance(ev, Rejected):
        state.ledger.append(LedgerEntry("rejected", ev.subject, ev.subject_id, ev.step, ev.harness_version,
                                        ev.gate, tuple(ev.reasons), ev.fingerprint, ev.event_id))
        if ev.subject == "policy":
            state.last_gate_step = ev.step
            if ev.caused_by:
                state.gated_evals.append(ev.caused_by[0])
            _remember_start_reward(state, ev.figures)
        elif ev.fingerprint:
            value = ev.figures.get("evidence_value") if isinstance(ev.figures, dict) else None
            value = float(value) if isinstance(value, (int, float)) else 0.0
            state.rejected[ev.fingerprint] = value
            proposal = state.proposals.get(ev.subject_id)
            if proposal:
                state.rejected_families[family(proposal["kind"], proposal["name"], proposal["targets"])] = value
    elif isinstance(ev, InterventionReverted):
        state.interventions.pop(ev.proposal_id, None)
        state.harness_version = ev.harness_version_after
        blocks = ev.figures.get("blocks") if isinstance(ev.figures, dict) else None
        if isinstance(blocks, str) and blocks not in state.blocked_repairs:
            state.blocked_repairs.append(blocks)
    elif isinstance(ev, SkillRegistered):
        state.skills[ev.skill_id] = Skill(ev.skill_id, ev.name, dict(ev.bundle), source_run=ev.source_run)
    elif isinstance(ev, SkillRetired):
        if ev.skill_id in state.skills:
            state.skills[ev.skill_id].retired = True
    elif isinstance(ev, RunFinished):
        state.status = ev.status
    if position is not None:
        state.position = position
    return state


def _policy_updated(state: HarnessState, ev: PolicyUpdated) -> None:
    if ev.target not in ("trainer", "restore"):
        return  # a weight sync to a rollout server names no new weights
    _see_version(state, ev.policy_version)
    state.policy_version = ev.policy_version
    if ev.step == 0 and ev.target == "trainer" and state.main.checkpoint is None and state.main.policy_version == 0:
        # the starting checkpoint's weights: where a rollback to the start goes
        state.main.checkpoint = attrs.asdict(ev.checkpoint) if ev.checkpoint is not None else None
        state.main.digest = ev.digest


def _remember_start_reward(state: HarnessState, figures: Any) -> None:
    """The starting checkpoint's training reward, as the first policy gate measured it."""
    reward = figures.get("main_train_reward") if isinstance(figures, dict) else None
    if state.main.train_reward is None and state.main.policy_version == 0 and isinstance(reward, (int, float)):
        state.main.train_reward = float(reward)


def _promote(state: HarnessState, ev: Promoted) -> None:
    proposal = state.proposals.get(ev.subject_id, {})
    state.ledger.append(LedgerEntry("promoted", ev.subject, ev.subject_id, ev.step, ev.harness_version_after,
                                    ev.gate, tuple(ev.reasons), proposal.get("fingerprint"), ev.event_id))
    state.harness_version = ev.harness_version_after
    if ev.subject == "policy":
        try:
            version = int(ev.subject_id)
        except ValueError:
            return
        _remember_start_reward(state, ev.figures)
        state.main_policy_version = version
        state.last_gate_step = ev.step
        eval_id = ev.caused_by[0] if ev.caused_by else None
        if eval_id:
            state.gated_evals.append(eval_id)
        reward = ev.figures.get("train_reward") if isinstance(ev.figures, dict) else None
        state.main = MainLine(version, ev.step, eval_id, float(reward) if isinstance(reward, (int, float)) else None,
                              attrs.asdict(ev.checkpoint) if ev.checkpoint is not None else None, ev.digest)
        return
    state.last_promotion_step = ev.step
    if not proposal:
        return
    skill_id = proposal.get("skill_id")
    if skill_id and skill_id in state.skills:
        state.skills[skill_id].uses += 1
    params = proposal["params"]
    if proposal.get("diagnostic"):
        d = proposal["diagnostic"]
        state.diagnostics[d["name"]] = DiagnosticSetting(d["name"], str(d.get("version", "spec-1")), {},
                                                         d.get("spec"), ev.subject_id, ev.harness_version_after)
    if proposal["kind"] == "diagnostic":
        # params: {"diagnostic": name, "version": v, "params": {...}, "spec": {...} | None}
        name = params.get("diagnostic") or proposal["name"]
        state.diagnostics[name] = DiagnosticSetting(
            name, str(params.get("version", "1")), dict(params.get("params") or {}),
            params.get("spec"), ev.subject_id, ev.harness_version_after,
        )
    else:
        value = ev.figures.get("target_value") if isinstance(ev.figures, dict) else None
        state.interventions[ev.subject_id] = ActiveIntervention(
            ev.subject_id, proposal["kind"], proposal["name"], dict(params), tuple(proposal["targets"]),
            ev.harness_version_after, skill_id, ev.step, float(value) if isinstance(value, (int, float)) else None,
        )


def fold(events: Iterable[Event], state: Optional[HarnessState] = None, *, start_position: int = 0) -> HarnessState:
    """Fold events (in stream order) into a state. ``start_position`` is the stream
    version just before the first event (non-zero when starting from a snapshot)."""
    state = HarnessState() if state is None else state
    pos = start_position
    for ev in events:
        pos += 1
        apply(state, ev, pos)
    return state
