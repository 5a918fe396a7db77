"""The contrast proposer: evidence → a diagnostic spec and a generic repair, on either side.

When an invalid diagnosis says the reward is wrong, it takes the audited rollouts the
harness holds and induces (``evo_plugins.proposers.induction``) on the side the diagnosis
is about (``stats["side"]``, or the side most of its audited evidence lies on):

- paid (overpayment): the predicate that separates paid-but-rejected from paid-and-accepted,
  proposed with one predicate-driven repair (``spec_penalty``, ``rollback``, ``spec_screen``
  or ``oracle_regrade``), in order of preference;
- unpaid (underpayment): the predicate that separates unpaid-but-accepted from
  unpaid-and-rejected, proposed with ``spec_restore`` (pay what the verifier withheld, at
  the reward audited accepted answers are paid) or ``oracle_regrade``.

Its prediction is falsifiable: the predicate's precision and recall on audited rollouts of
that side it was not fitted on. It also revises induced diagnostics whose audited evidence turned out to be mostly
genuine work, by learning an added condition from their false positives.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from evo_core.api import Proposal, ProposalContext, ProposalRejection, strict_metric
from evo_core.api.specs import matches
from evo_core.api.stats import audited as audited_sample
from evo_core.api.stats import side_of
from evo_plugins.proposers.induction import SIDES, Induced, Settings, induce

PAY_FIELD = "reward"
FINAL_FIELD = "reward_final"


def induced_spec(induced: Induced, pay_threshold: float, fire_rate: float) -> dict[str, Any]:
    conds = [c.to_dsl() for c in induced.conditions]
    paid = induced.side == "paid"
    what = "paid responses the oracle rejects" if paid else "unpaid responses the oracle accepts"
    return {
        "kind": f"induced_{induced.digest()}" if paid else f"induced_unpaid_{induced.digest()}",
        "severity": "invalid",
        "description": f"{what}, learned from audited evidence: {induced.describe()}",
        "population": {"field": "split", "op": "==", "value": "train"},
        # the unpaid side reads what training paid after repairs: once a restore pays what the
        # verifier withheld, the spec's rate falls (the verifier's own reward never would)
        "where": {"all": conds + [{"field": PAY_FIELD, "op": ">", "value": pay_threshold} if paid
                                  else {"field": FINAL_FIELD, "op": "<=", "value": pay_threshold}]},
        "statistic": {"type": "rate"},
        "threshold": {"op": ">", "value": fire_rate},
        "min_n": 32,
    }


def _paid_value(audited: Sequence[Any], pay_threshold: float) -> float:
    """What the verifier pays an answer the oracle accepts: the median reward of the audited
    paid-and-accepted rollouts (1.0 when there are none)."""
    paid = sorted(float(r.reward) for r in audited if r.strict_correct and r.reward is not None and r.reward > pay_threshold)
    return paid[len(paid) // 2] if paid else 1.0


class ContrastProposer:
    name, version = "contrast", "1"
    default_params = {"pay_threshold": 0.0, "min_positive": 8, "min_negative": 8, "min_precision": 0.8,
                      "min_recall": 0.5, "fire_rate": 0.05, "repairs": ["spec_penalty", "rollback", "spec_screen",
                                                                         "oracle_regrade"],
                      "rollback_margin": 0.02, "revise_below_precision": 0.5, "revise_min_flagged": 8,
                      "max_evidence": 50, "response_first": True,
                      "underpay_repairs": ["spec_restore", "oracle_regrade"]}

    def propose(self, ctx: ProposalContext, params: Mapping[str, Any]) -> list[Any]:
        p = {**self.default_params, **dict(params or {})}
        triggers = [d for d in ctx.diagnoses if d.severity == "invalid"]
        if not triggers:
            return []
        audited = list(ctx.audited_history())
        out: list[Any] = list(self._revisions(ctx, audited, p))
        by_side = self._sides(triggers, ctx, float(p["pay_threshold"]))
        for side in SIDES:
            if by_side.get(side):
                out += self._propose_side(ctx, audited, p, side, by_side[side])
        return out

    @staticmethod
    def _sides(triggers: Sequence[Any], ctx: ProposalContext, pay_threshold: float) -> dict[str, list[Any]]:
        """Each trigger's side: the one it declares, else the one most of its audited evidence is on
        (a diagnosis with no audited evidence, such as a held-out trend, is about the paid side)."""
        wanted = {i for d in triggers for i in d.evidence}
        rows = {r.event_id: r for r in (ctx.history or ctx.window.rollouts) if r.event_id in wanted}
        out: dict[str, list[Any]] = {}
        for d in triggers:
            side = (d.stats or {}).get("side")
            if side not in SIDES:
                ev = audited_sample(rows[i] for i in d.evidence if i in rows)
                unpaid = sum(side_of(r, pay_threshold) == "unpaid" for r in ev)
                side = "unpaid" if ev and unpaid * 2 > len(ev) else "paid"
            out.setdefault(side, []).append(d)
        return out

    def _propose_side(self, ctx: ProposalContext, audited: Sequence[Any], p: Mapping[str, Any], side: str,
                      triggers: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        settings = Settings(pay_threshold=float(p["pay_threshold"]), min_positive=int(p["min_positive"]),
                            min_negative=int(p["min_negative"]), response_first=bool(p["response_first"]), side=side)
        repairs = self._repair_order(ctx, p) if side == "paid" else [str(r) for r in p["underpay_repairs"]]
        induced, report = induce(audited, settings, exclude=self._explained(ctx, side, p),
                                  index=getattr(ctx, "audited_index", None))
        if induced is None:
            return out  # too little evidence yet: the next pass looks again
        hold = induced.holdout
        if (hold.precision or 0.0) < p["min_precision"] or (hold.recall or 0.0) < p["min_recall"]:
            out.append(ProposalRejection(self.name, f"induced {induced.describe()!r} ({side} side) does not hold on "
                                                    f"audited rollouts it was not fitted on: precision {hold.precision}, "
                                                    f"recall {hold.recall} (need {p['min_precision']}, {p['min_recall']})",
                                         raw=str(report)))
            return out
        spec = induced_spec(induced, float(p["pay_threshold"]), float(p["fire_rate"]))
        diagnostic = {"name": spec["kind"], "version": "spec-1", "spec": spec}
        prediction = {"holdout_precision": hold.precision, "holdout_recall": hold.recall, "holdout": hold.to_dict(),
                      "fit": induced.fit.to_dict(), "fitted_on": list(induced.fitted_on),
                      "tested_on": len(induced.tested_on), "features_considered": list(induced.considered),
                      "falls": [spec["kind"]], "guard_metric": "strict_accuracy", "side": side}
        evidence = tuple(d.event_id for d in triggers) + tuple(induced.positives[: int(p["max_evidence"])])
        what = "paid but rejected" if side == "paid" else "unpaid but accepted"
        for name in repairs:
            iv = ctx.interventions.get(name)
            if iv is None:
                continue
            params: dict[str, Any] = {"predicate": induced.predicate}
            if name == "spec_restore":
                params.update(value=_paid_value(audited, float(p["pay_threshold"])), pay_threshold=float(p["pay_threshold"]))
            out.append(Proposal(kind=iv.kind, name=name, params=params, targets=(spec["kind"],),
                                diagnostic=diagnostic, prediction=prediction, proposer=self.name, evidence=evidence,
                                rationale=f"{len(induced.positives)} audited rollouts are {what} by the oracle; "
                                          f"{induced.describe()} separates them (held-out precision {hold.precision:.2f}, "
                                          f"recall {hold.recall:.2f}); {iv.changes}"))
        return out

    @staticmethod
    def _explained(ctx: ProposalContext, side: str, p: Mapping[str, Any]) -> Optional[dict[str, Any]]:
        """Rollouts an active predicate repair of this side already covers are not evidence of a
        new flaw (a repair only for underpayment explains nothing on the paid side, and only
        underpayment repairs explain anything on the unpaid side)."""
        under = {str(r) for r in p["underpay_repairs"]}
        under_only = under - {str(r) for r in p["repairs"]}
        preds = [a.params["predicate"] for a in ctx.state.interventions.values()
                 if isinstance(a.params.get("predicate"), Mapping)
                 and ((a.name not in under_only) if side == "paid" else (a.name in under))]
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
            # the side the spec flags (most of its flagged rollouts): wrong there is rejected if
            # paid, accepted if unpaid
            unpaid = sum(side_of(r, float(p["pay_threshold"])) == "unpaid" for r in flagged)
            side = "unpaid" if unpaid * 2 > len(flagged) else "paid"
            bad = [r for r in flagged if (bool(r.strict_correct) if side == "unpaid" else not r.strict_correct)]
            if len(flagged) < p["revise_min_flagged"] or len(bad) / len(flagged) >= p["revise_below_precision"]:
                continue
            settings = Settings(pay_threshold=float(p["pay_threshold"]), min_positive=2, min_negative=2, min_gain=1.0,
                                side=side)
            induced, _ = induce(flagged, settings, index=getattr(ctx, "audited_index", None))
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
                                          f"flags are wrongly rewarded by the oracle's verdict; add {cond.describe()} (learned from its "
                                          f"false positives)"))
        return out
