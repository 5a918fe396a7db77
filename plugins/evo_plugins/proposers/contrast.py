"""The contrast proposer: evidence → a diagnostic spec and a generic repair.

When a diagnosis says the reward pays for something the oracle rejects, it takes the
audited rollouts the harness holds, induces the predicate that separates paid-but-rejected
from paid-and-accepted (``evo_core.harness.induction``), and proposes that predicate as a
data-only diagnostic together with one predicate-driven repair (``spec_penalty``,
``rollback``, ``spec_screen`` or ``oracle_regrade``), in order of preference. Its prediction
is falsifiable: the predicate's precision and recall on audited rollouts it was not fitted
on. It also revises induced diagnostics whose audited evidence turned out to be mostly
genuine work, by learning an added condition from their false positives.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from evo_core.api import Proposal, ProposalContext, ProposalRejection, strict_metric
from evo_plugins.proposers.induction import Induced, Settings, induce
from evo_core.api.specs import matches

PAY_FIELD = "reward"


def induced_spec(induced: Induced, pay_threshold: float, fire_rate: float) -> dict[str, Any]:
    conds = [c.to_dsl() for c in induced.conditions]
    return {
        "kind": f"induced_{induced.digest()}",
        "severity": "invalid",
        "description": f"paid responses the oracle rejects, learned from audited evidence: {induced.describe()}",
        "population": {"field": "split", "op": "==", "value": "train"},
        "where": {"all": conds + [{"field": PAY_FIELD, "op": ">", "value": pay_threshold}]},
        "statistic": {"type": "rate"},
        "threshold": {"op": ">", "value": fire_rate},
        "min_n": 32,
    }


def audited_rows(rows: Sequence[Any]) -> list[Any]:
    return [r for r in rows if r.split == "train" and r.infra_error is None and r.strict_correct is not None
            and r.reward is not None]


class ContrastProposer:
    name, version = "contrast", "1"
    default_params = {"pay_threshold": 0.0, "min_positive": 8, "min_negative": 8, "min_precision": 0.8,
                      "min_recall": 0.5, "fire_rate": 0.05, "repairs": ["spec_penalty", "rollback", "spec_screen",
                                                                         "oracle_regrade"],
                      "rollback_margin": 0.02, "revise_below_precision": 0.5, "revise_min_flagged": 8,
                      "max_evidence": 50, "response_first": True}

    def propose(self, ctx: ProposalContext, params: Mapping[str, Any]) -> list[Any]:
        p = {**self.default_params, **dict(params or {})}
        triggers = [d for d in ctx.diagnoses if d.severity == "invalid"]
        if not triggers:
            return []
        audited = audited_rows(ctx.history or ctx.window.rollouts)
        out: list[Any] = list(self._revisions(ctx, audited, p))
        settings = Settings(pay_threshold=float(p["pay_threshold"]), min_positive=int(p["min_positive"]),
                            min_negative=int(p["min_negative"]), response_first=bool(p["response_first"]))
        induced, report = induce(audited, settings, exclude=self._explained(ctx))
        if induced is None:
            return out  # too little evidence yet: the next pass looks again
        hold = induced.holdout
        if (hold.precision or 0.0) < p["min_precision"] or (hold.recall or 0.0) < p["min_recall"]:
            out.append(ProposalRejection(self.name, f"induced {induced.describe()!r} does not hold on audited rollouts "
                                                    f"it was not fitted on: precision {hold.precision}, recall {hold.recall} "
                                                    f"(need {p['min_precision']}, {p['min_recall']})", raw=str(report)))
            return out
        spec = induced_spec(induced, float(p["pay_threshold"]), float(p["fire_rate"]))
        diagnostic = {"name": spec["kind"], "version": "spec-1", "spec": spec}
        prediction = {"holdout_precision": hold.precision, "holdout_recall": hold.recall, "holdout": hold.to_dict(),
                      "fit": induced.fit.to_dict(), "fitted_on": list(induced.fitted_on),
                      "tested_on": len(induced.tested_on), "features_considered": list(induced.considered),
                      "falls": [spec["kind"]], "guard_metric": "strict_accuracy"}
        evidence = tuple(d.event_id for d in triggers) + tuple(induced.positives[: int(p["max_evidence"])])
        for name in self._repair_order(ctx, p):
            iv = ctx.interventions.get(name)
            if iv is None:
                continue
            out.append(Proposal(kind=iv.kind, name=name, params={"predicate": induced.predicate}, targets=(spec["kind"],),
                                diagnostic=diagnostic, prediction=prediction, proposer=self.name, evidence=evidence,
                                rationale=f"{len(induced.positives)} audited rollouts are paid but rejected by the oracle; "
                                          f"{induced.describe()} separates them (held-out precision {hold.precision:.2f}, "
                                          f"recall {hold.recall:.2f}); {iv.changes}"))
        return out

    def _explained(self, ctx: ProposalContext) -> Optional[dict[str, Any]]:
        """Rollouts an active predicate repair already covers are not evidence of a new loophole."""
        preds = [a.params["predicate"] for a in ctx.state.interventions.values()
                 if isinstance(a.params.get("predicate"), Mapping)]
        return {"any": preds} if preds else None

    def _repair_order(self, ctx: ProposalContext, p: Mapping[str, Any]) -> list[str]:
        repairs = [str(r) for r in p["repairs"]]
        if "rollback" in repairs and self._current_worse_than_main(ctx, float(p["rollback_margin"])):
            repairs.remove("rollback")
            repairs.insert(0, "rollback")  # the loophole already cost accuracy: start again from the main line
        return repairs

    @staticmethod
    def _current_worse_than_main(ctx: ProposalContext, margin: float) -> bool:
        main = next((e for e in ctx.window.evals if e.event_id == ctx.state.main.eval_id), None)
        latest = ctx.window.evals[-1] if ctx.window.evals else None
        if main is None or latest is None or latest.policy_version == ctx.state.main.policy_version:
            return False
        m, c = strict_metric(main), strict_metric(latest)
        return m is not None and c is not None and c < m - margin

    def _revisions(self, ctx: ProposalContext, audited: Sequence[Any], p: Mapping[str, Any]) -> list[Proposal]:
        """An induced diagnostic whose audited evidence is mostly genuine work gets a new version
        with an added condition learned from its false positives."""
        out = []
        fired = {d.kind: d for d in ctx.diagnoses}
        for name, setting in sorted(ctx.state.diagnostics.items()):
            spec = setting.spec
            if not spec or spec.get("kind") not in fired:
                continue
            flagged = [r for r in audited if matches(spec["where"], r)]
            bad = [r for r in flagged if not r.strict_correct]
            if len(flagged) < p["revise_min_flagged"] or len(bad) / len(flagged) >= p["revise_below_precision"]:
                continue
            settings = Settings(pay_threshold=float(p["pay_threshold"]), min_positive=2, min_negative=2, min_gain=1.0)
            induced, _ = induce(flagged, settings)
            if induced is None:
                continue
            cond = induced.conditions[0]
            new_spec = dict(spec)
            new_spec["where"] = {"all": list(spec["where"].get("all", [spec["where"]])) + [cond.to_dsl()]}
            version = f"{setting.version}.r{len(flagged)}"
            d = fired[spec["kind"]]
            out.append(Proposal(kind="diagnostic", name="diagnostic_revision", targets=(spec["kind"],), proposer=self.name,
                                params={"diagnostic": name, "version": version, "params": {}, "spec": new_spec},
                                evidence=(d.event_id,) + tuple(r.event_id for r in flagged[:50]),
                                prediction={"precision_rises_above": p["revise_below_precision"],
                                            "false_positives": len(flagged) - len(bad), "flagged": len(flagged),
                                            "added_condition": cond.describe()},
                                rationale=f"{name} v{setting.version}: only {len(bad)} of {len(flagged)} audited rollouts it "
                                          f"flags are rejected by the oracle; add {cond.describe()} (learned from its "
                                          f"false positives)"))
        return out
