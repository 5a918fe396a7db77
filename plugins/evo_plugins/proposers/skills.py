"""Skill retrieval: propose promoted bundles (this run's or imported) whose preconditions match."""

from __future__ import annotations

from typing import Any, Mapping

from evo_core.harness.types import INTERVENTION_KINDS, Proposal, ProposalContext

RANK = {"info": 0, "warning": 1, "invalid": 2}


class SkillProposer:
    name, version = "skills", "1"
    default_params: Mapping[str, Any] = {}

    def propose(self, ctx: ProposalContext, params: Mapping[str, Any]) -> list[Proposal]:
        fired = {}
        for d in ctx.diagnoses:
            fired[d.kind] = max(fired.get(d.kind, 0), RANK.get(d.severity, 0))
        out = []
        ranked = sorted(ctx.skills.values(), key=lambda s: (-s.uses, s.skill_id))
        for sk in ranked:
            if sk.retired:
                continue
            b = sk.bundle or {}
            pre = b.get("preconditions") or {}
            need = set(pre.get("diagnoses") or [])
            min_sev = RANK.get(pre.get("min_severity", "warning"), 1)
            if not need or not any(fired.get(k, -1) >= min_sev for k in need):
                continue
            iv = b.get("intervention") or {}
            kind, name = iv.get("kind"), iv.get("name")
            if kind not in INTERVENTION_KINDS or not name:
                continue
            if kind != "diagnostic" and name not in ctx.interventions:
                continue  # the intervention type is not installed here
            evidence = tuple(d.event_id for d in ctx.diagnoses if d.kind in need)
            out.append(Proposal(kind=kind, name=name, params=dict(iv.get("params") or {}),
                                targets=tuple(iv.get("targets") or sorted(need)),
                                prediction=dict(b.get("expected_effect") or {}), proposer=self.name, skill_id=sk.skill_id,
                                evidence=evidence,
                                rationale=f"skill {sk.skill_id} ({sk.name}, from run {sk.source_run}) matches "
                                          f"{', '.join(sorted(need & set(fired)))}"))
        return out
