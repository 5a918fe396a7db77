"""Skill retrieval: propose promoted bundles (this run's or imported ones) that apply now.

A skill applies when the diagnoses it was made for are in force, or, for a skill that
carries its own induced diagnostic, when that diagnostic's predicate fires on the current
evidence (a later run need not have re-learned it). A retrieved skill is backtested again
here like any proposal; one that stops working is retired."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from evo_core.api import INTERVENTION_KINDS, Proposal, ProposalContext
from evo_core.api.specs import SpecError, evaluate_spec

RANK = {"info": 0, "warning": 1, "invalid": 2}


class SkillProposer:
    name, version = "skills", "2"
    default_params: Mapping[str, Any] = {}

    def propose(self, ctx: ProposalContext, params: Mapping[str, Any]) -> list[Proposal]:
        fired: dict[str, int] = {}
        for d in ctx.diagnoses:
            fired[d.kind] = max(fired.get(d.kind, 0), RANK.get(d.severity, 0))
        out = []
        for sk in sorted(ctx.skills.values(), key=lambda s: (-s.uses, s.skill_id)):
            if sk.retired:
                continue
            prop = self._retrieve(sk, fired, ctx)
            if prop is not None:
                out.append(prop)
        return out

    def _retrieve(self, sk: Any, fired: Mapping[str, int], ctx: ProposalContext) -> Optional[Proposal]:
        b = sk.bundle or {}
        iv = b.get("intervention") or {}
        kind, name = iv.get("kind"), iv.get("name")
        if kind not in INTERVENTION_KINDS or not name or (kind != "diagnostic" and name not in ctx.interventions):
            return None  # not a bundle this installation can run
        pre = b.get("preconditions") or {}
        need = set(pre.get("diagnoses") or [])
        min_sev = RANK.get(pre.get("min_severity", "warning"), 1)
        why = sorted(k for k in need if fired.get(k, -1) >= min_sev)
        diagnostic = b.get("diagnostic")
        if not why and diagnostic and diagnostic.get("spec"):
            value = self._fires(diagnostic["spec"], ctx)
            if value is None:
                return None
            why = [f"its predicate fires on this run's evidence ({value:.3f})"]
        if not why:
            return None
        return Proposal(kind=kind, name=name, params=dict(iv.get("params") or {}),
                        targets=tuple(iv.get("targets") or sorted(need)), diagnostic=diagnostic or None,
                        prediction=dict(b.get("expected_effect") or {}), proposer=self.name, skill_id=sk.skill_id,
                        evidence=tuple(d.event_id for d in ctx.diagnoses if d.kind in need or d.severity == "invalid"),
                        rationale=f"skill {sk.skill_id} ({sk.name}, from run {sk.source_run}): {', '.join(why)}")

    @staticmethod
    def _fires(spec: Mapping[str, Any], ctx: ProposalContext) -> Optional[float]:
        try:
            res = evaluate_spec(spec, ctx.window.rollouts)
        except SpecError:
            return None
        return res.value if res.fired and res.value is not None else None
