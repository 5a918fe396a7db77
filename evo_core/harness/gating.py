"""A candidate's decision, live and in replay: which gates decide, their verdict, and the
verdict as events (``Promoted``, with the skill it makes, or ``Rejected``).

Every configured gate that judges the candidate's subject decides (the pass calls each under
its guard: a gate that raises, or is configured but not installed, counts as a veto).
Abstentions do not count. The candidate passes when at least one gate decided, none vetoed
and none failed. A collaborator of the pass: it never calls a gate and never emits."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import Candidate, GateDecision, Proposal
from evo_core.harness.emit import ENGINE, jsonable
from evo_events import BlobRef, Event, FailureDiagnosed, InterventionProposed, Promoted, Rejected, SkillRegistered


@attrs.frozen
class Verdict:
    accepted: bool
    vetoed: bool
    gate_names: str
    reasons: tuple[str, ...]
    decisions: tuple[GateDecision, ...]


def configured(gates: Mapping[str, Any], settings: Mapping[str, Mapping[str, Any]],
               subject: str) -> list[tuple[str, Optional[Any], dict[str, Any]]]:
    """The enabled gates that judge ``subject``, in config order, each with its params; a
    configured gate that is not installed comes with None (it counts as a veto)."""
    out = []
    for name, params in settings.items():
        params = dict(params)
        if params.pop("enabled", True) is False:
            continue
        gate = gates.get(name)
        if gate is not None and subject not in tuple(getattr(gate, "subjects", ("intervention", "policy"))):
            continue
        out.append((name, gate, params))
    return out


def not_installed(name: str) -> GateDecision:
    return GateDecision(gate=name, passed=False, veto=True, reasons=(f"gate {name!r} is configured but not installed",))


def raised(name: str) -> GateDecision:
    """A gate that raised (or answered nothing) vetoes."""
    return GateDecision(gate=name, passed=False, veto=True, reasons=(f"gate {name} raised",))


def verdict(decisions: Sequence[GateDecision]) -> Verdict:
    real = [d for d in decisions if not d.abstain]
    vetoes = [d for d in real if d.veto]
    failed = [d for d in real if not d.passed]
    accepted = bool(real) and not vetoes and not failed
    if accepted:
        reasons = tuple(r for d in real for r in d.reasons)
    elif not real:
        reasons = ("no gate decided on this candidate",)
    else:
        reasons = tuple(f"{d.gate}: {r}" for d in vetoes + [d for d in failed if d not in vetoes]
                        for r in (d.reasons or ("failed",)))
    return Verdict(accepted, bool(vetoes), "+".join(d.gate for d in real) or "none", reasons, tuple(decisions))


def gate_figures(decisions: Sequence[GateDecision]) -> dict[str, Any]:
    return {d.gate: {"passed": d.passed, "veto": d.veto, "reasons": list(d.reasons),
                     "figures": jsonable(dict(d.figures)), "version": d.version} for d in decisions}


def decision_events(run_id: str, step: int, harness_version: int, cand: Candidate, v: Verdict, versions: dict[str, str], *,
                    caused_by: tuple[str, ...], figures: dict[str, Any], proposal_event: Optional[InterventionProposed] = None,
                    diagnoses: Sequence[FailureDiagnosed] = (), backtest_events: Sequence[Event] = (),
                    target_value: float = 0.0, checkpoint: Optional[BlobRef] = None, digest: str = "") -> list[Event]:
    figs = dict(figures)
    figs["gates"] = gate_figures(v.decisions)
    if cand.subject == "intervention":
        figs["target_value" if v.accepted else "evidence_value"] = target_value
    if not v.accepted:
        fp = cand.proposal.fingerprint if cand.proposal is not None else None
        return [Rejected(run_id=run_id, subject=cand.subject, subject_id=cand.subject_id, step=step, gate=v.gate_names,
                         harness_version=harness_version, reasons=v.reasons, fingerprint=fp, plugin_versions=versions,
                         figures=jsonable(figs), caused_by=caused_by, emitted_by=ENGINE)]
    if cand.subject == "policy":
        return [Promoted(run_id=run_id, subject="policy", subject_id=cand.subject_id, step=step, gate=v.gate_names,
                         harness_version_before=harness_version, harness_version_after=harness_version,
                         reasons=v.reasons, plugin_versions=versions, figures=jsonable(figs), caused_by=caused_by,
                         checkpoint=checkpoint, digest=digest, emitted_by=ENGINE)]
    p = cand.proposal
    assert p is not None and proposal_event is not None
    skill_id = p.skill_id or f"skill-{proposal_event.event_id[:12]}"
    prom = Promoted(run_id=run_id, subject="intervention", subject_id=cand.subject_id, step=step, gate=v.gate_names,
                    harness_version_before=harness_version, harness_version_after=harness_version + 1, reasons=v.reasons,
                    plugin_versions=versions, skill_id=skill_id, figures=jsonable(figs), caused_by=caused_by,
                    emitted_by=ENGINE)
    out: list[Event] = [prom]
    if not p.skill_id:
        out.append(skill_event(run_id, step, p, proposal_event, prom, diagnoses, backtest_events, v, skill_id, versions))
    return out


def skill_event(run_id: str, step: int, p: Proposal, prop: InterventionProposed, prom: Promoted,
                diagnoses: Sequence[FailureDiagnosed], backtests: Sequence[Event], v: Verdict, skill_id: str,
                versions: dict[str, str]) -> SkillRegistered:
    """A promoted change as a reusable bundle: what it changes, the diagnostic it watches (an
    induced spec travels with it), when it applies, what it predicted, and the evidence."""
    bundle = {
        "intervention": {"kind": p.kind, "name": p.name, "params": dict(p.params), "targets": list(p.targets)},
        "diagnostic": dict(p.diagnostic) if p.diagnostic else None,
        "preconditions": {"diagnoses": sorted(set(p.targets)), "min_severity": "warning",
                          "predicate": (p.diagnostic or {}).get("spec", {}).get("where") if p.diagnostic else None},
        "expected_effect": dict(p.prediction),
    }
    provenance = {
        "run_id": run_id, "step": step, "harness_version": prom.harness_version_after,
        "evidence": list(dict.fromkeys([e for d in diagnoses for e in d.evidence] + list(p.evidence)))[:200],
        "diagnoses": [d.event_id for d in diagnoses], "proposal": prop.event_id, "proposer": p.proposer,
        "backtests": [b.event_id for b in backtests], "promotion": prom.event_id,
        "gates": {d.gate: {"passed": d.passed, "version": d.version} for d in v.decisions},
        "plugin_versions": versions,
    }
    return SkillRegistered(run_id=run_id, skill_id=skill_id, name=p.name, bundle=jsonable(bundle),
                           provenance=jsonable(provenance), source_run=run_id, caused_by=(prom.event_id,),
                           emitted_by=ENGINE)


def blob_ref(d: Optional[dict]) -> Optional[BlobRef]:
    return BlobRef(**d) if d else None


__all__ = ["Verdict", "configured", "not_installed", "raised", "verdict", "gate_figures", "decision_events", "skill_event", "blob_ref"]
