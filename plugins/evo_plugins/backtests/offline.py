"""Offline backtest: replay logged evidence with the proposal in force.

- Changes with a reward, mask or re-grade effect: what they would have changed or removed,
  and, on the audited rollouts, whether they hit the invalid high-scoring ones (paid,
  strictly wrong: recall, precision) without touching genuine ones (strictly right). A
  change that *restores* reward (the underpaid side: ``prediction["side"] == "unpaid"``, or
  one that only raises rewards) is judged the mirror way: whether it raises the underpaid
  ones (unpaid, strictly right: recall, precision) without raising strictly wrong ones.
  Any change that lifts rollouts from unpaid to paid is also refused when the oracle rejects
  the audited ones it would pay significantly more often than those the run paid
  (``paid.check``, a one-sided Fisher test; figures under ``pay_check``). A
  proposal learned from evidence is judged only on audited rollouts it was not fitted on
  (its ``prediction["fitted_on"]``).
- New or revised diagnostics: precision and recall of the rollouts they flag against the
  strict-oracle labels, and the steps at which they would have fired over the history.
- Other kinds (hyperparameters, curriculum, hints) cannot be replayed: "no decision".
"""

from __future__ import annotations

from typing import Any, Optional

import attrs
from evo_core.api import BacktestContext, BacktestOutcome, Proposal, RolloutView, Window, apply_to_views, replayable
from evo_core.api.specs import evaluate_spec, flagged_ids
from evo_events import RolloutCompleted

from . import paid

VALIDITY_SEVERITY = "invalid"


def labels(rows: list[RolloutCompleted], pay_threshold: float = 0.0) -> tuple[set[str], set[str]]:
    """(invalid, genuine) audited rollout ids: paid-but-strictly-wrong, and strictly right."""
    invalid, genuine = set(), set()
    for r in rows:
        if r.strict_correct is None or r.reward is None:
            continue
        if r.strict_correct:
            genuine.add(r.event_id)
        elif r.reward > pay_threshold:
            invalid.add(r.event_id)
    return invalid, genuine


def underpaid_labels(rows: list[RolloutCompleted], pay_threshold: float = 0.0) -> tuple[set[str], set[str]]:
    """(underpaid, wrong) audited rollout ids: unpaid-but-strictly-right, and strictly wrong."""
    underpaid, wrong = set(), set()
    for r in rows:
        if r.strict_correct is None or r.reward is None:
            continue
        if not r.strict_correct:
            wrong.add(r.event_id)
        elif r.reward <= pay_threshold:
            underpaid.add(r.event_id)
    return underpaid, wrong


def _ratio(a: int, b: int) -> Optional[float]:
    return a / b if b else None


class OfflineReplay:
    name, version, mode = "offline_replay", "3", "offline"
    min_invalid = 5  # audited invalid rollouts below which precision/recall mean nothing

    def backtest(self, proposal: Proposal, ctx: BacktestContext) -> BacktestOutcome:
        unseen = set(proposal.prediction.get("fitted_on") or ())
        rows = [r for r in (ctx.history or ctx.window.rollouts) if r.split == "train" and r.infra_error is None
                and r.event_id not in unseen]
        recent = [r for r in ctx.window.rollouts if r.split == "train" and r.infra_error is None]
        if proposal.kind == "diagnostic":
            return self._diagnostic(proposal, ctx, rows, recent)
        iv = ctx.interventions.get(proposal.name)
        if iv is None:
            return BacktestOutcome(backtester=self.name, mode="offline", passed=False, version=self.version,
                                   reasons=(f"intervention {proposal.name!r} is not installed",))
        if not replayable(iv):
            return BacktestOutcome(backtester=self.name, mode="offline", passed=None, version=self.version,
                                   reasons=(f"offline replay cannot show the effect of a {proposal.kind} change",))
        # a change learned from evidence is judged on all the held-out audited history
        return self._reward_rule(proposal, iv, ctx, rows if unseen else recent)

    def _reward_rule(self, proposal: Proposal, iv: Any, ctx: BacktestContext, rows: list[RolloutCompleted]) -> BacktestOutcome:
        views = [RolloutView.of_event(r) for r in rows]
        new, masked, regrade = apply_to_views([(iv, dict(proposal.params))], views)
        for r in rows:  # a re-grade gives the oracle's verdict, known exactly on audited rollouts
            if r.event_id in regrade:
                if r.strict_correct is None:
                    masked.add(r.event_id)
                else:
                    new[r.event_id] = 1.0 if r.strict_correct else 0.0
        changed = {r.event_id for r in rows if r.event_id in masked
                   or (r.reward is not None and new[r.event_id] is not None and new[r.event_id] < r.reward)}
        raised = {r.event_id for r in rows if r.reward is not None and new[r.event_id] is not None and new[r.event_id] > r.reward}
        side = proposal.prediction.get("side") or ("unpaid" if raised and not changed else "paid")
        if side == "unpaid":
            # a restored reward: its hits are the underpaid, its false positives the strictly wrong
            invalid, genuine = underpaid_labels(rows)
            changed = raised
        else:
            invalid, genuine = labels(rows)
        audited_changed = changed & (invalid | genuine)
        kept = [r for r in rows if r.event_id not in masked and r.reward is not None]
        figures: dict[str, Any] = {
            "replayed": len(rows), "changed": len(changed), "masked": len(masked), "raised": len(raised),
            "mean_reward_before": _mean([r.reward for r in rows if r.reward is not None]),
            "mean_reward_after": _mean([new[r.event_id] for r in kept]),
            "side": side, "audited_invalid": len(invalid), "audited_genuine": len(genuine),
            "recall": _ratio(len(changed & invalid), len(invalid)),
            "false_positive_rate": _ratio(len(changed & genuine), len(genuine)),
            "precision": _ratio(len(changed & invalid), len(audited_changed)),
        }
        labelled = invalid | genuine
        aud = [r for r in rows if r.event_id in labelled]
        figures["gap_before"] = _mean([float(r.reward > 0) - float(bool(r.strict_correct)) for r in aud])
        figures["gap_after"] = _mean([float((new[r.event_id] or 0) > 0) - float(bool(r.strict_correct))
                                      for r in aud if r.event_id not in masked])
        figures["judged_on_unseen"] = bool(proposal.prediction.get("fitted_on"))
        # what it would pay (on the verifier's reward) against what the logged run paid
        pc = paid.check(iv, proposal.params, rows, rows, logged=False)
        figures["pay_check"] = pc.to_dict()
        return self._pay_veto(self._decide(proposal, ctx, figures, changed, invalid, genuine, masked, aud), pc)

    @staticmethod
    def _pay_veto(out: BacktestOutcome, pc: Any) -> BacktestOutcome:
        """A change that would pay oracle-rejected rollouts more often than the run paid them
        is refused, whatever else the replay shows (the repair would be the loophole)."""
        if not pc.loophole:
            return out
        kept = () if out.passed else tuple(out.reasons)
        return attrs.evolve(out, passed=False, reasons=(paid.veto_reason(pc),) + kept,
                            evidence=tuple(pc.evidence)[:50] or out.evidence)

    def _decide(self, proposal: Proposal, ctx: BacktestContext, figures: dict[str, Any], changed: set[str],
                invalid: set[str], genuine: set[str], masked: set[str], aud: list[RolloutCompleted]) -> BacktestOutcome:
        cfg = ctx.config.backtest
        side = figures["side"]
        validity = proposal.diagnostic is not None or any(
            d.severity == VALIDITY_SEVERITY and d.kind in set(proposal.targets) for d in ctx.diagnoses)
        evidence = tuple(sorted(changed & invalid))[:50]
        if not validity:
            # a health fix (dead groups, truncation…): report what it would change; the A/B decides
            return BacktestOutcome(backtester=self.name, mode="offline", passed=None if changed else False, figures=figures,
                                   n=figures["replayed"], version=self.version, evidence=tuple(sorted(changed))[:50],
                                   reasons=("replayed: see figures; an online A/B decides" if changed else
                                            "replay: the change would not have touched any logged rollout",))
        if len(invalid) < self.min_invalid:
            return BacktestOutcome(backtester=self.name, mode="offline", passed=None, figures=figures, n=len(aud),
                                   version=self.version,
                                   reasons=(f"no decision: {len(invalid)} audited {'underpaid' if side == 'unpaid' else 'invalid'} "
                                            f"rollouts (< {self.min_invalid})",))
        reasons = []
        if figures["recall"] < cfg.min_recall:
            reasons.append(f"recall {figures['recall']:.2f} < {cfg.min_recall}")
        fpr = figures["false_positive_rate"]
        if fpr is not None and fpr > cfg.max_false_positive:
            reasons.append(f"raises {fpr:.0%} of strictly wrong rollouts (> {cfg.max_false_positive:.0%})" if side == "unpaid"
                           else f"changes {fpr:.0%} of genuinely correct rollouts (> {cfg.max_false_positive:.0%})")
        prec = figures["precision"]
        if prec is not None and prec < cfg.min_precision:
            reasons.append(f"precision {prec:.2f} < {cfg.min_precision}")
        passed = not reasons
        if passed:
            reasons.append(f"recall {figures['recall']:.2f}, precision {prec if prec is not None else float('nan'):.2f}, "
                           f"false positives {fpr if fpr is not None else 0:.0%} on {len(aud)} audited rollouts")
        return BacktestOutcome(backtester=self.name, mode="offline", passed=passed, figures=figures, n=len(aud),
                               reasons=tuple(reasons), evidence=evidence, version=self.version)

    def _diagnostic(self, proposal: Proposal, ctx: BacktestContext, rows: list[RolloutCompleted],
                    recent: list[RolloutCompleted]) -> BacktestOutcome:
        cfg = ctx.config.backtest
        p = dict(proposal.params)
        name, spec, own = str(p.get("diagnostic") or ""), p.get("spec"), dict(p.get("params") or {})
        try:
            diag = ctx.reader.resolve(name, str(p.get("version") or "2"), own, spec) if ctx.reader else None
        except Exception as exc:
            return BacktestOutcome(backtester=self.name, mode="offline", passed=False, version=self.version,
                                   reasons=(f"the proposed diagnostic does not load: {exc}",))
        if diag is None:
            return BacktestOutcome(backtester=self.name, mode="offline", passed=False, version=self.version,
                                   reasons=(f"diagnostic {name!r} is not installed and no spec was given",))
        params = {**dict(getattr(diag, "default_params", {}) or {}), **own}
        if spec is not None:
            flagged = flagged_ids(spec, rows)
        else:
            flagged = {e for f in diag.evaluate(Window(run_id=ctx.run_id, step=ctx.step, rollouts=tuple(rows)), params)
                       for e in f.evidence}
        invalid, genuine = labels(rows)
        tp, fp = len(flagged & invalid), len(flagged & genuine)
        figures: dict[str, Any] = {"replayed": len(rows), "flagged": len(flagged), "audited_invalid": len(invalid),
                                   "audited_genuine": len(genuine), "precision": _ratio(tp, tp + fp),
                                   "recall": _ratio(tp, len(invalid)), "false_positive_rate": _ratio(fp, len(genuine))}
        # replay over history: at which steps would the new version have fired?
        fires = []
        steps = sorted({r.step for r in rows})
        w = ctx.config.window_steps
        for s in steps[w - 1::max(1, ctx.config.diagnose_every)]:
            win = [r for r in rows if s - w < r.step <= s]
            if spec is not None:
                fired = evaluate_spec(spec, win).fired
            else:
                fired = bool(diag.evaluate(Window(run_id=ctx.run_id, step=s, rollouts=tuple(win)), params))
            if fired:
                fires.append(s)
        figures["would_fire_at_steps"] = fires
        if len(invalid) < self.min_invalid:
            return BacktestOutcome(backtester=self.name, mode="offline", passed=None, figures=figures, n=len(invalid) + len(genuine),
                                   version=self.version,
                                   reasons=(f"no decision: {len(invalid)} audited invalid rollouts (< {self.min_invalid})",))
        reasons = []
        if figures["precision"] is None or figures["precision"] < cfg.min_precision:
            reasons.append(f"precision {figures['precision']} < {cfg.min_precision}")
        if figures["recall"] < cfg.min_recall:
            reasons.append(f"recall {figures['recall']:.2f} < {cfg.min_recall}")
        fpr = figures["false_positive_rate"]
        if fpr is not None and fpr > cfg.max_false_positive:
            reasons.append(f"flags {fpr:.0%} of genuinely correct rollouts (> {cfg.max_false_positive:.0%})")
        passed = not reasons
        if passed:
            reasons.append(f"precision {figures['precision']:.2f}, recall {figures['recall']:.2f} against strict labels")
        return BacktestOutcome(backtester=self.name, mode="offline", passed=passed, figures=figures,
                               n=len(invalid) + len(genuine), reasons=tuple(reasons),
                               evidence=tuple(sorted(flagged & invalid))[:50], version=self.version)


def _mean(xs: list) -> Optional[float]:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None
