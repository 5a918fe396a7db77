"""The priors' proposer: diagnosis kinds that only hand-written priors report, mapped to
the repairs written for them. Deterministic; warm mode only."""

from __future__ import annotations

from typing import Any, Optional

from evo_core.api import Proposal, ProposalContext
from evo_plugins.priors.arithmetic import MULTI_ANSWER_REWARDED_SPEC
from evo_plugins.proposers.rules import RuleProposer

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


class PriorsProposer(RuleProposer):
    name, version = "priors", "1"
    templates = TEMPLATES
    prior = True

    def _from_template(self, name: str, params: dict[str, Any], d: Any, ctx: ProposalContext) -> Optional[Proposal]:
        if name != "@spec":
            return super()._from_template(name, params, d, ctx)
        if "multi_answer_rewarded" in ctx.state.diagnostics:
            return None
        return Proposal(kind="diagnostic", name="diagnostic_revision", targets=(d.kind,), proposer=self.name,
                        params={"diagnostic": "multi_answer_rewarded", "version": "spec-1", "params": {},
                                "spec": dict(MULTI_ANSWER_REWARDED_SPEC)},
                        evidence=(d.event_id,), prediction={"flags": "rewarded rollouts the strict oracle rejects"},
                        rationale=f"{d.kind}: add a diagnostic for multi-answer responses that are still paid")
