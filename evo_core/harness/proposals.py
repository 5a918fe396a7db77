"""Proposals: which proposers are asked, their answers sorted, the do-not-repeat ledger,
and a proposal as its ``InterventionProposed`` event.

A collaborator of the harness pass: it reads the values it is given and returns proposals
and events; it never calls a proposer (the pass does, under its guard) and never emits."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Optional, Sequence

import attrs
import structlog

from evo_core.api import Proposal, ProposalRejection, Window
from evo_core.harness.config import HarnessConfig
from evo_core.harness.diagnosis import Diagnoses, with_watched
from evo_core.harness.emit import ENGINE, jsonable
from evo_core.state import HarnessState, family
from evo_events import FailureDiagnosed, InterventionProposed, Rejected

log = structlog.get_logger("evo.harness")


def enabled(config: HarnessConfig, proposers: Mapping[str, Any]) -> list[tuple[str, Any, dict[str, Any]]]:
    """Every enabled, installed proposer with its params, in config order (one configured
    but not installed is reported once, on the run's first pass)."""
    out = []
    for name, params in config.proposers.items():
        params = dict(params)
        if params.pop("enabled", True) is False or (name == "skills" and config.ablations.no_skill_reuse):
            continue
        if name in proposers:
            out.append((name, proposers[name], params))
    return out


def answers(name: str, items: Optional[Iterable[Any]]) -> tuple[list[Proposal], list[tuple[str, ProposalRejection]]]:
    """A proposer's answer: its proposals, and the answers that could not be formed (with
    the proposer's name); anything else is ignored."""
    props: list[Proposal] = []
    rejections: list[tuple[str, ProposalRejection]] = []
    for item in items or ():
        if isinstance(item, ProposalRejection):
            rejections.append((name, item))
        elif isinstance(item, Proposal):
            props.append(item)
    return props, rejections


def rejection_event(run_id: str, step: int, state: HarnessState, proposer: str, item: ProposalRejection,
                    version: str) -> Rejected:
    return Rejected(run_id=run_id, subject="proposal", subject_id=f"{item.proposer}@{step}", step=step, gate="parse",
                    harness_version=state.harness_version, reasons=(item.reason,), figures={"raw": item.raw},
                    plugin_versions={proposer: version}, emitted_by=ENGINE)


def ledger_filter(state: HarnessState, config: HarnessConfig, step: int, proposals: Sequence[Proposal], *,
                  diagnoses: Diagnoses, window: Window, findings: Sequence[FailureDiagnosed]) -> list[Proposal]:
    """Proposals worth backtesting: not a duplicate, not already in force or promoted, not
    for diagnoses a change was just promoted for, and not rejected before unless the
    evidence against it has grown since (``ledger_new_evidence``)."""
    active_fps = {state.proposals.get(pid, {}).get("fingerprint") for pid in state.interventions}
    promoted_fps = {e.fingerprint for e in state.ledger if e.decision == "promoted" and e.fingerprint}
    recent_targets = {t for a in state.interventions.values() if step - a.step < config.window_steps for t in a.targets}
    out, seen = [], set()
    measured: dict[str, float] = {}  # one measurement per (targets, watched diagnostic): many proposals share them
    for prop in proposals:
        if config.ablations.no_revision and prop.diagnostic:
            prop = attrs.evolve(prop, diagnostic=None)  # the repair may act; the harness adds no diagnostic
        fp = prop.fingerprint
        if fp in seen or fp in active_fps or fp in promoted_fps:
            continue
        if prop.kind == "diagnostic" and config.ablations.no_revision:
            continue
        if prop.skill_id and config.ablations.no_skill_reuse:
            continue
        if prop.targets and set(prop.targets) <= recent_targets:
            continue  # a just-promoted change for these diagnoses needs time to act
        fam = family(prop.kind, prop.name, prop.targets)
        if fp in state.rejected or fam in state.rejected_families:
            before = state.rejected.get(fp, state.rejected_families.get(fam, 0.0))
            key = json.dumps([list(prop.targets), prop.diagnostic], sort_keys=True, default=str)
            if key not in measured:
                measured[key] = diagnoses.target_value(prop.targets, window, with_watched(state, prop.diagnostic), findings)
            now = measured[key]
            if now <= before * (1.0 + config.ledger_new_evidence) + 1e-9:
                log.info("ledger_blocked", name=prop.name, fingerprint=fp[:12], before=before, now=now)
                continue
        seen.add(fp)
        out.append(prop)
    return out


def proposal_event(run_id: str, step: int, prop: Proposal, targeted: Sequence[FailureDiagnosed]) -> InterventionProposed:
    return InterventionProposed(
        run_id=run_id, step=step, kind=prop.kind, name=prop.name, params=jsonable(dict(prop.params)),
        targets=prop.targets, prediction=jsonable(dict(prop.prediction)), rationale=prop.rationale, proposer=prop.proposer,
        fingerprint=prop.fingerprint, skill_id=prop.skill_id,
        diagnostic=jsonable(dict(prop.diagnostic)) if prop.diagnostic else None,
        caused_by=tuple(d.event_id for d in targeted) + tuple(e for e in prop.evidence if e), emitted_by=ENGINE)


__all__ = ["enabled", "answers", "rejection_event", "ledger_filter", "proposal_event"]
