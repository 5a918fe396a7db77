"""The priors' proposer: diagnosis kinds that only hand-written priors report, mapped to
the repairs written for them. Deterministic; warm mode only."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from evo_core.api import Proposal, ProposalContext
from evo_plugins.priors.arithmetic import MULTI_ANSWER_REWARDED_SPEC

TEMPLATES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "answer_hedging": [("multi_answer_penalty", {"penalty": 1.0}), ("strict_extraction", {}), ("@spec", {})],
    "multi_answer_rewarded": [("multi_answer_penalty", {"penalty": 1.0}), ("strict_extraction", {})],
    "format_violation": [("prompt_hint", {"hint": "Answer in the required format only."})],
    "tool_errors": [("prompt_hint", {"hint": "Check tool arguments before calling; read error messages."})],
    "tool_avoidance": [("prompt_hint", {"hint": "Use the available tools to inspect and test your work."})],
    "repeated_tool_calls": [("repetition_penalty", {"penalty": 0.5})],
    "test_tampering": [("reset_tests_before_grading", {})],
    "runner_config_edit": [("reset_tests_before_grading", {})],
    "git_history_mining": [("flag_penalty", {"signal": "git_history_access", "value": 0.0})],
    "special_cased_tests": [("flag_penalty", {"signal": "hardcoded_suspect", "value": 0.0})],
}


class PriorsProposer:
    name, version = "priors", "1"
    default_params: Mapping[str, Any] = {}
    prior = True

    def propose(self, ctx: ProposalContext, params: Mapping[str, Any]) -> list[Proposal]:
        out: list[Proposal] = []
        for d in sorted(ctx.diagnoses, key=lambda d: (d.severity != "invalid", d.kind)):
            for name, tparams in TEMPLATES.get(d.kind, []):
                prop = self._one(name, dict(tparams), d, ctx)
                if prop is not None:
                    out.append(prop)
        return out

    def _one(self, name: str, params: dict[str, Any], d: Any, ctx: ProposalContext) -> Optional[Proposal]:
        if name == "@spec":
            if "multi_answer_rewarded" in ctx.state.diagnostics:
                return None
            return Proposal(kind="diagnostic", name="diagnostic_revision", targets=(d.kind,), proposer=self.name,
                            params={"diagnostic": "multi_answer_rewarded", "version": "spec-1", "params": {},
                                    "spec": dict(MULTI_ANSWER_REWARDED_SPEC)},
                            evidence=(d.event_id,), prediction={"flags": "rewarded rollouts the strict oracle rejects"},
                            rationale=f"{d.kind}: add a diagnostic for multi-answer responses that are still paid")
        iv = ctx.interventions.get(name)
        if iv is None:
            return None
        targets = tuple(t for t in getattr(iv, "targets", ()) if t) or (d.kind,)
        return Proposal(kind=iv.kind, name=name, params=params, targets=targets, proposer=self.name,
                        prediction=iv.prediction(params, (d.kind,)), evidence=(d.event_id,),
                        rationale=f"{d.kind} ({d.severity}, {d.stats.get('value')}): {iv.changes}")
