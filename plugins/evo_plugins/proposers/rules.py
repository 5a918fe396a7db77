"""The rule-based proposer: diagnosis kinds mapped to intervention templates. Deterministic."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Optional

from evo_core.harness.types import Proposal, ProposalContext
from evo_events import FailureDiagnosed

SEVERITY_RANK = {"info": 0, "warning": 1, "invalid": 2}

# A new diagnostic the harness can add about itself: "several answers, and paid for it".
MULTI_ANSWER_REWARDED_SPEC = {
    "kind": "multi_answer_rewarded",
    "severity": "invalid",
    "description": "responses with more than one answer that the training reward still pays",
    "population": {"field": "split", "op": "==", "value": "train"},
    "where": {"all": [{"signal": "answer_count", "op": ">", "value": 1}, {"field": "reward", "op": ">=", "value": 1}]},
    "statistic": {"type": "rate"},
    "threshold": {"op": ">", "value": 0.1},
    "min_n": 32,
}

# kind -> [(intervention name, params)], most specific first.
TEMPLATES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "answer_hedging": [("multi_answer_penalty", {"penalty": 1.0}), ("strict_extraction", {}),
                       ("prompt_hint", {"hint": "Give exactly one final answer."})],
    "reward_oracle_gap": [("@spec", {}), ("strict_extraction", {}), ("multi_answer_penalty", {"penalty": 1.0})],
    "multi_answer_rewarded": [("multi_answer_penalty", {"penalty": 1.0}), ("strict_extraction", {})],
    "format_violation": [("strict_extraction", {}), ("prompt_hint", {"hint": "Answer in the required format only."})],
    "zero_variance_groups": [("dynamic_sampling", {}), ("@reweight", {})],
    "truncation": [("overlong_mask", {}), ("overlong_penalty", {})],
    "length_inflation": [("overlong_penalty", {}), ("overlong_mask", {})],
    "entropy_collapse": [("hyperparameter", {"set": {"clip_high": 0.28}}), ("hyperparameter", {"set": {"temperature": 1.2}})],
    "repetition_loop": [("repetition_penalty", {"penalty": 0.5})],
    "repeated_tool_calls": [("repetition_penalty", {"penalty": 0.5})],
    "tool_errors": [("prompt_hint", {"hint": "Check tool arguments before calling; read error messages."})],
    "tool_avoidance": [("prompt_hint", {"hint": "Use the available tools to inspect and test your work."})],
    "test_tampering": [("reset_tests_before_grading", {})],
    "runner_config_edit": [("reset_tests_before_grading", {})],
    "git_history_mining": [("flag_penalty", {"signal": "git_history_access", "value": 0.0})],
    "special_cased_tests": [("flag_penalty", {"signal": "special_cased_inputs", "value": 0.0})],
}


def _audited_precision(d: FailureDiagnosed, ctx: ProposalContext) -> Optional[tuple[float, int]]:
    """Of the diagnosis' audited evidence, the share that the strict oracle calls invalid
    (rewarded but strictly wrong). Low precision → the diagnostic flags genuine work."""
    ids = set(d.evidence)
    aud = [r for r in ctx.window.rollouts if r.event_id in ids and r.strict_correct is not None and r.reward is not None]
    if not aud:
        return None
    bad = sum(1 for r in aud if r.reward > 0 and not r.strict_correct)
    return bad / len(aud), len(aud)


class RuleProposer:
    name, version = "rules", "1"
    default_params = {"revise_below_precision": 0.3, "revise_min_audited": 10, "threshold_factor": 1.5}

    def propose(self, ctx: ProposalContext, params: Mapping[str, Any]) -> list[Proposal]:
        p = {**self.default_params, **dict(params or {})}
        out: list[Proposal] = []
        diags = sorted(ctx.diagnoses, key=lambda d: (-SEVERITY_RANK.get(d.severity, 0), d.kind))
        for d in diags:
            revision = self._revision(d, ctx, p)
            if revision is not None:
                out.append(revision)
            for name, tparams in TEMPLATES.get(d.kind, []):
                prop = self._from_template(name, dict(tparams), d, ctx)
                if prop is not None:
                    out.append(prop)
        return out

    def _from_template(self, name: str, params: dict[str, Any], d: FailureDiagnosed, ctx: ProposalContext) -> Optional[Proposal]:
        evidence = (d.event_id,)
        if name == "@spec":
            if "multi_answer_rewarded" in {s.name for s in ctx.state.diagnostics.values()}:
                return None
            spec = dict(MULTI_ANSWER_REWARDED_SPEC)
            return Proposal(kind="diagnostic", name="diagnostic_revision",
                            params={"diagnostic": "multi_answer_rewarded", "version": "spec-1", "params": {}, "spec": spec},
                            targets=(d.kind,), proposer=self.name, evidence=evidence,
                            prediction={"flags": "rewarded rollouts the strict oracle rejects",
                                        "min_precision": ctx.config.backtest.min_precision,
                                        "min_recall": ctx.config.backtest.min_recall},
                            rationale=f"{d.kind}: the reward pays rollouts the oracle rejects; add a diagnostic that "
                                      "flags multi-answer responses that are still rewarded")
        if name == "@reweight":
            weights = _solved_task_weights(ctx)
            if not weights:
                return None
            name, params = "task_reweight", {"weights": weights}
        iv = ctx.interventions.get(name)
        if iv is None:
            return None
        return Proposal(kind=iv.kind, name=name, params=params, targets=tuple(t for t in iv.targets if t) or (d.kind,),
                        prediction=iv.prediction(params, (d.kind,)), proposer=self.name, evidence=evidence,
                        rationale=f"{d.kind} ({d.severity}, {d.stats.get('value')}): {iv.changes}")

    def _revision(self, d: FailureDiagnosed, ctx: ProposalContext, p: Mapping[str, Any]) -> Optional[Proposal]:
        """A diagnostic whose audited evidence is mostly genuine work is too loose: propose a
        new version with a stricter threshold (new params, new version, same name)."""
        prec = _audited_precision(d, ctx)
        if prec is None or d.severity != "invalid":
            return None
        precision, n = prec
        if n < p["revise_min_audited"] or precision >= p["revise_below_precision"]:
            return None
        th = d.stats.get("threshold")
        if not isinstance(th, (int, float)) or isinstance(th, bool):
            return None
        setting = ctx.state.diagnostics.get(d.diagnostic)
        key = _threshold_key(ctx.diagnostics.get(d.diagnostic))
        if key is None:
            return None
        cur = dict(setting.params) if setting else {}
        new_th = round(float(th) * p["threshold_factor"] if th else 0.05, 4)
        version = f"{d.diagnostic_version}.r{int(new_th * 10000)}"
        return Proposal(kind="diagnostic", name="diagnostic_revision",
                        params={"diagnostic": d.diagnostic, "version": version, "params": {**cur, key: new_th}, "spec": None},
                        targets=(d.kind,), proposer=self.name, evidence=(d.event_id,),
                        prediction={"precision_rises_above": p["revise_below_precision"]},
                        rationale=f"{d.diagnostic} v{d.diagnostic_version}: only {precision:.0%} of {n} audited evidence "
                                  f"rollouts are invalid; raise {key} {th} -> {new_th}")


def _threshold_key(diag: Any) -> Optional[str]:
    params = getattr(diag, "default_params", {}) or {}
    for key in ("max_rate", "max_gap", "max_fraction", "max_ratio", "max_error_rate"):
        if key in params:
            return key
    return None


def _solved_task_weights(ctx: ProposalContext, weight: float = 0.25, limit: int = 200) -> dict[str, float]:
    groups: dict[str, list] = defaultdict(list)
    for r in ctx.window.rollouts:
        if r.reward is not None and r.split == "train":
            groups[r.task_id].append(r.reward)
    solved = sorted(t for t, rs in groups.items() if len(rs) > 1 and len(set(rs)) == 1)
    return {t: weight for t in solved[:limit]}
