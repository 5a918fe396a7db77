"""Harness state as a pure fold over a run's events.

``fold(events)`` builds it from scratch; ``apply(state, event)`` advances it by one
event (the live loop uses the same function, so live state and replayed state
cannot drift apart). ``to_dict``/``from_dict`` serialise it for snapshots, which are
only a cache.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable, Optional

import attrs
import cattrs

from evo_events import (
    Event,
    FailureDiagnosed,
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
class HarnessState:
    run_id: str = ""
    mode: str = "evolving"
    harness_version: int = 0
    policy_version: int = 0
    main_policy_version: int = 0  # the last checkpoint a policy gate promoted
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

    def active_interventions(self, name: Optional[str] = None) -> list[ActiveIntervention]:
        return [i for i in self.interventions.values() if name is None or i.name == name]

    def rejected_fingerprints(self) -> set[str]:
        return {e.fingerprint for e in self.ledger if e.decision == "rejected" and e.fingerprint}

    def to_dict(self) -> dict[str, Any]:
        return _conv.unstructure(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HarnessState":
        return _conv.structure(data, cls)

    def copy(self) -> "HarnessState":
        return copy.deepcopy(self)


_conv = cattrs.Converter()


def _initial_from_config(state: HarnessState, ev: RunStarted) -> None:
    state.run_id = ev.run_id
    state.mode = ev.harness_mode
    state.config = ev.config
    state.status = "running"
    harness = ev.config.get("harness", {}) if isinstance(ev.config, dict) else {}
    for name, params in (harness.get("diagnostics") or {}).items():
        params = dict(params or {})
        version = str(params.pop("version", "1"))
        spec = params.pop("spec", None)
        state.diagnostics[name] = DiagnosticSetting(name, version, params, spec)
    state.gate_config = dict(harness.get("gates") or {})


def apply(state: HarnessState, ev: Event, position: Optional[int] = None) -> HarnessState:
    """Advance ``state`` by one event, in place; returns it for chaining."""
    if isinstance(ev, RunStarted):
        _initial_from_config(state, ev)
    elif isinstance(ev, StepCompleted):
        state.step = max(state.step, ev.step)
        state.policy_version = max(state.policy_version, ev.policy_version)
    elif isinstance(ev, PolicyUpdated):
        state.policy_version = max(state.policy_version, ev.policy_version)
    elif isinstance(ev, FailureDiagnosed):
        state.diagnosis_counts[ev.kind] = state.diagnosis_counts.get(ev.kind, 0) + 1
    elif isinstance(ev, InterventionProposed):
        state.proposals[ev.event_id] = {
            "kind": ev.kind, "name": ev.name, "params": dict(ev.params), "targets": list(ev.targets),
            "fingerprint": ev.fingerprint, "skill_id": ev.skill_id, "step": ev.step,
        }
    elif isinstance(ev, Promoted):
        _promote(state, ev)
    elif isinstance(ev, Rejected):
        state.ledger.append(LedgerEntry("rejected", ev.subject, ev.subject_id, ev.step, ev.harness_version,
                                        ev.gate, tuple(ev.reasons), ev.fingerprint, ev.event_id))
    elif isinstance(ev, InterventionReverted):
        state.interventions.pop(ev.proposal_id, None)
        state.harness_version = ev.harness_version_after
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


def _promote(state: HarnessState, ev: Promoted) -> None:
    proposal = state.proposals.get(ev.subject_id, {})
    state.ledger.append(LedgerEntry("promoted", ev.subject, ev.subject_id, ev.step, ev.harness_version_after,
                                    ev.gate, tuple(ev.reasons), proposal.get("fingerprint"), ev.event_id))
    state.harness_version = ev.harness_version_after
    if ev.subject == "policy":
        try:
            state.main_policy_version = int(ev.subject_id)
        except ValueError:
            pass
        return
    if not proposal:
        return
    skill_id = proposal.get("skill_id")
    if skill_id and skill_id in state.skills:
        state.skills[skill_id].uses += 1
    params = proposal["params"]
    if proposal["kind"] == "diagnostic":
        # params: {"diagnostic": name, "version": v, "params": {...}, "spec": {...} | None}
        name = params.get("diagnostic") or proposal["name"]
        state.diagnostics[name] = DiagnosticSetting(
            name, str(params.get("version", "1")), dict(params.get("params") or {}),
            params.get("spec"), ev.subject_id, ev.harness_version_after,
        )
    else:
        state.interventions[ev.subject_id] = ActiveIntervention(
            ev.subject_id, proposal["kind"], proposal["name"], dict(params), tuple(proposal["targets"]),
            ev.harness_version_after, skill_id,
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
