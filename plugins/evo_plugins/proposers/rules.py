"""The rule-based proposer: generic diagnosis kinds mapped to generic repairs. Deterministic.
It knows no flaw: flaw-specific templates live with the priors, and repairs for what the
reward pays but the oracle rejects are learned from evidence (``contrast``)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Optional

from evo_core.api import Proposal, ProposalContext
from evo_events import FailureDiagnosed

# kind -> [(intervention name, params)], most specific first.
TEMPLATES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "zero_variance_groups": [("dynamic_sampling", {}), ("@reweight", {})],
    "truncation": [("overlong_mask", {}), ("overlong_penalty", {})],
    "length_inflation": [("overlong_penalty", {}), ("overlong_mask", {})],
    "entropy_collapse": [("hyperparameter", {"set": {"clip_high": 0.28}}), ("hyperparameter", {"set": {"temperature": 1.2}})],
    "repetition_loop": [("repetition_penalty", {"penalty": 0.5})],
}


class RuleProposer:
    """Maps diagnosis kinds to intervention templates (``templates``; subclasses bring their own)."""

    name, version = "rules", "2"
    default_params: Mapping[str, Any] = {}
    templates: Mapping[str, list[tuple[str, dict[str, Any]]]] = TEMPLATES

    def propose(self, ctx: ProposalContext, params: Mapping[str, Any]) -> list[Proposal]:
        out: list[Proposal] = []
        for d in sorted(ctx.diagnoses, key=lambda d: (d.severity != "invalid", d.kind)):
            for name, tparams in self.templates.get(d.kind, []):
                prop = self._from_template(name, dict(tparams), d, ctx)
                if prop is not None:
                    out.append(prop)
        return out

    def _from_template(self, name: str, params: dict[str, Any], d: FailureDiagnosed, ctx: ProposalContext) -> Optional[Proposal]:
        if name == "@reweight":
            weights = _solved_task_weights(ctx)
            if not weights:
                return None
            name, params = "task_reweight", {"weights": weights}
        iv = ctx.interventions.get(name)
        if iv is None:
            return None
        return Proposal(kind=iv.kind, name=name, params=params, targets=tuple(t for t in iv.targets if t) or (d.kind,),
                        prediction=iv.prediction(params, (d.kind,)), proposer=self.name, evidence=(d.event_id,),
                        rationale=f"{d.kind} ({d.severity}, {d.stats.get('value')}): {iv.changes}")


def _solved_task_weights(ctx: ProposalContext, weight: float = 0.25, limit: int = 200) -> dict[str, float]:
    groups: dict[str, list] = defaultdict(list)
    for r in ctx.window.rollouts:
        if r.reward is not None and r.split == "train":
            groups[r.task_id].append(r.reward)
    solved = sorted(t for t, rs in groups.items() if len(rs) > 1 and len(set(rs)) == 1)
    return {t: weight for t in solved[:limit]}
