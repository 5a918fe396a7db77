"""A gate verdict as events: ``Promoted`` (with the skill it makes) or ``Rejected``."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from evo_core.api import Candidate, Proposal
from evo_core.harness.emit import jsonable
from evo_core.harness.gating import Verdict, gate_figures
from evo_events import BlobRef, Emitter, Event, FailureDiagnosed, InterventionProposed, Promoted, Rejected, SkillRegistered

ENGINE_VERSION = "2"
ENGINE = Emitter("evo_harness", ENGINE_VERSION)


def plugin_versions(catalog: Any) -> dict[str, str]:
    out = {"harness_engine": ENGINE_VERSION}
    for prefix, cat in (("diagnostic", catalog.diagnostics), ("intervention", catalog.interventions),
                        ("proposer", catalog.proposers), ("backtester", catalog.backtesters), ("gate", catalog.gates)):
        for n, obj in cat.items():
            out[f"{prefix}:{n}"] = str(getattr(obj, "version", "?"))
    return out


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


__all__ = ["ENGINE", "ENGINE_VERSION", "decision_events", "plugin_versions", "blob_ref"]
