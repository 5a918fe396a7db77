"""Online backtest: fork training into control and treatment, train K steps each, and
compare them on the validation split with the strict oracle.

Each arm is a random training run, so one pair of branches measures item noise but not
training noise. The A/B therefore runs ``replicates`` pairs; the two branches of a pair
share their sampling seed (paired, common random numbers) and each pair has its own seed.
It decides on t-intervals over the pairs' differences:

- the fingerprint: the statistic the change targets (an induced predicate's rate, or the
  targeted diagnosis) must fall in treatment: the interval of its change lies below 0;
- accuracy: the interval of the validation strict-accuracy change must lie above
  ``min_effect`` (a small negative margin by default: do not make it worse). When the
  targeted statistic cannot be checked (absent in control), it must be an improvement;
- a regression cap on items that got worse, averaged over replicates.

With a no-op treatment the fingerprint never falls, and with a placebo it falls only by
chance: ``benchmarks/aa_check.py`` measures that pass rate against the nominal one. The
engine builds both arms (``ctx.arms``; a rollback's treatment starts from the main line) and
measures branches with the run's diagnostics (``ctx.reader``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from evo_core.api import BacktestContext, BacktestOutcome, Proposal
from evo_core.api.stats import PayCheck, paired_bootstrap, t_interval

from . import paid


def pair_seed(seed: int, fingerprint: str, replicate: int) -> int:
    return int(hashlib.sha256(f"{seed}:{fingerprint}:{replicate}".encode()).hexdigest()[:8], 16)


class OnlineAB:
    name, version, mode = "online_ab", "3", "online"

    def backtest(self, proposal: Proposal, ctx: BacktestContext) -> BacktestOutcome:
        cfg = ctx.config.backtest
        if ctx.trainer is None:
            return BacktestOutcome(backtester=self.name, mode="online", passed=None, version=self.version,
                                   reasons=("no decision: no training session to fork",))
        if ctx.arms is None:
            return BacktestOutcome(backtester=self.name, mode="online", passed=None, version=self.version,
                                   reasons=("no decision: the engine gave no A/B arms",))
        arms = ctx.arms
        pairs = []
        for r in range(cfg.replicates):
            seed = pair_seed(ctx.seed, proposal.fingerprint, r)
            control = ctx.trainer.fork(seed=seed)
            treatment = ctx.trainer.fork(seed=seed, start=arms.treatment_start)
            rc = control.train(cfg.k_steps, arms.control)
            rt = treatment.train(cfg.k_steps, arms.treatment)
            pairs.append((control.evaluate(), treatment.evaluate(), tuple(rc), tuple(rt)))
        return self._decide(proposal, ctx, pairs, arms.treatment_start is not None)

    def _decide(self, proposal: Proposal, ctx: BacktestContext, pairs: list, rollback: bool) -> BacktestOutcome:
        cfg = ctx.config.backtest
        limit = cfg.eval_limit
        figures: dict[str, Any] = {"k_steps": cfg.k_steps, "replicates": len(pairs), "rollback": rollback}
        # accuracy: per pair, the mean over shared items; items averaged over pairs for the regression cap
        diffs, c_items, t_items = [], {}, {}
        for ec, et, _, _ in pairs:
            shared = sorted(set(ec.item_scores) & set(et.item_scores))[:limit]
            if shared:
                diffs.append(sum(et.item_scores[i] - ec.item_scores[i] for i in shared) / len(shared))
            for i in shared:
                c_items.setdefault(i, []).append(ec.item_scores[i])
                t_items.setdefault(i, []).append(et.item_scores[i])
        c_mean = {i: sum(v) / len(v) for i, v in c_items.items()}
        t_mean = {i: sum(v) / len(v) for i, v in t_items.items()}
        boot = paired_bootstrap(c_mean, t_mean, n_boot=cfg.n_boot, confidence=cfg.confidence,
                                seed=ctx.seed, worse_margin=cfg.worse_margin)
        if boot is None or boot.n < cfg.min_n:
            n = 0 if boot is None else boot.n
            return BacktestOutcome(backtester=self.name, mode="online", passed=None, figures=figures, n=n,
                                   version=self.version,
                                   reasons=(f"no decision: {n} paired validation items (< min_n {cfg.min_n})",))
        acc = t_interval(diffs, cfg.confidence)
        acc_ci = (acc.lo, acc.hi) if acc is not None else boot.ci  # one pair: item noise only
        figures.update(control_strict=boot.control_mean, treatment_strict=boot.treatment_mean, mean_diff=boot.mean_diff,
                       pair_diffs=diffs, accuracy_ci=list(acc_ci), worse=boot.worse, better=boot.better,
                       worse_fraction=boot.worse_frac, regression_cap=cfg.regression_cap, min_effect=cfg.min_effect,
                       confidence=cfg.confidence, interval="t over pairs" if acc is not None else "item bootstrap")
        fp = self._fingerprint(proposal, ctx, pairs)
        figures["fingerprint"] = fp
        checkable = fp.get("checkable", False)
        figures["fingerprint_ok"] = fp.get("fell") if checkable else None
        self._validity(ctx, pairs, figures)
        pcs = self._pay_checks(proposal, ctx, pairs)
        if pcs:
            figures["pay_check"] = {"against_control_paid": pcs[0].to_dict(), "against_control_would": pcs[1].to_dict()}
        floor = cfg.min_effect if checkable else max(cfg.min_effect, 0.0)
        reasons = []
        if not acc_ci[0] > floor:
            reasons.append(f"accuracy CI [{acc_ci[0]:+.3f}, {acc_ci[1]:+.3f}] does not clear {floor:+.3f}"
                           + ("" if checkable else " (nothing to fingerprint: an improvement is required)"))
        if boot.worse_frac > cfg.regression_cap:
            reasons.append(f"{boot.worse_frac:.0%} of items got worse (cap {cfg.regression_cap:.0%})")
        if cfg.fingerprint_check and checkable and not fp["fell"]:
            reasons.append(f"fingerprint: {fp['kind']} {fp['control']:.3f} -> {fp['treatment']:.3f}, "
                           f"CI of the change [{fp['ci'][0]:+.3f}, {fp['ci'][1]:+.3f}] does not lie below 0")
        reasons += [paid.veto_reason(pc) for pc in pcs if pc.loophole]
        passed = not reasons
        if passed:
            reasons.append(f"strict {boot.control_mean:.3f} -> {boot.treatment_mean:.3f}, CI [{acc_ci[0]:+.3f}, "
                           f"{acc_ci[1]:+.3f}] over {len(pairs)} pair(s) x {boot.n} items"
                           + (f"; {fp['kind']} {fp['control']:.3f} -> {fp['treatment']:.3f}" if checkable else ""))
        return BacktestOutcome(backtester=self.name, mode="online", passed=passed, figures=figures, ci=tuple(acc_ci),
                               n=boot.n, reasons=tuple(reasons), version=self.version,
                               # fork rollouts are not in the log: cite the logged diagnoses it answers
                               evidence=tuple(d.event_id for d in ctx.diagnoses)[:50])

    def _fingerprint(self, proposal: Proposal, ctx: BacktestContext, pairs: list) -> dict[str, Any]:
        if ctx.reader is None or not proposal.targets:
            return {"checkable": False, "reason": "no targeted statistic"}
        kind = proposal.targets[0]
        changes, controls, treats = [], [], []
        for _, _, rc, rt in pairs:
            c, t = ctx.reader.measure(kind, rc), ctx.reader.measure(kind, rt)
            if c is None or t is None:
                return {"checkable": False, "kind": kind, "reason": f"{kind} cannot be measured on the branches"}
            controls.append(c)
            treats.append(t)
            changes.append(t - c)
        control, treatment = sum(controls) / len(controls), sum(treats) / len(treats)
        if control <= 0:
            return {"checkable": False, "kind": kind, "control": control, "treatment": treatment,
                    "reason": f"{kind} is absent in control"}
        ti = t_interval(changes, ctx.config.backtest.confidence)
        ci = (ti.lo, ti.hi) if ti is not None else (changes[0], changes[0])
        fell = ci[1] < 0 if ti is not None else changes[0] < 0
        return {"checkable": True, "kind": kind, "control": control, "treatment": treatment, "changes": changes,
                "ci": list(ci), "fell": bool(fell)}

    @staticmethod
    def _pay_checks(proposal: Proposal, ctx: BacktestContext, pairs: list) -> "tuple[PayCheck, ...]":
        """The rollouts the treatment paid because of the proposal, judged by the oracle
        (``paid.ab_checks``; none when the proposal raises no reward)."""
        iv = ctx.interventions.get(proposal.name)
        if iv is None or not callable(getattr(iv, "new_reward", None)):
            return ()
        rc = [r for _, _, c, _ in pairs for r in c]
        rt = [r for _, _, _, t in pairs for r in t]
        return paid.ab_checks(iv, proposal.params, rt, rc)

    @staticmethod
    def _validity(ctx: BacktestContext, pairs: list, figures: dict[str, Any]) -> None:
        """Invalid diagnoses the treatment branches show and the control branches do not."""
        if ctx.reader is None:
            return
        rc = tuple(r for _, _, c, _ in pairs for r in c)
        rt = tuple(r for _, _, _, t in pairs for r in t)
        inv_c = {k for k, sev, _, _ in ctx.reader.findings(rc) if sev == "invalid"}
        inv_t = {k for k, sev, _, _ in ctx.reader.findings(rt) if sev == "invalid"}
        figures.update(control_invalid=sorted(inv_c), treatment_invalid=sorted(inv_t),
                       treatment_new_invalid=sorted(inv_t - inv_c))

