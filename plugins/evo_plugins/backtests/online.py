"""Online backtest: fork the live session into control and treatment, train K steps each
(same seeds, same data), evaluate both on the same held-out items with the strict oracle.

Decides on a paired item-level bootstrap CI of (treatment − control), a minimum sample
size (below it: no decision), a regression cap on items that got worse, and a
fingerprint check: the diagnosis the change targets must fall in treatment.
"""

from __future__ import annotations

from typing import Any, Optional

from evo_core.api import Window
from evo_core.harness.stats import paired_bootstrap
from evo_core.harness.types import BacktestContext, BacktestOutcome, Proposal
from evo_core.harness.window import steps_rollouts
from evo_core.state import ActiveIntervention

CANDIDATE_ID = "backtest-candidate"


class OnlineAB:
    name, version = "online_ab", "1"

    def backtest(self, proposal: Proposal, ctx: BacktestContext) -> BacktestOutcome:
        cfg = ctx.config.backtest
        if ctx.session is None:
            return BacktestOutcome(backtester=self.name, mode="online", passed=None, version=self.version,
                                   reasons=("no decision: no training session to fork",))
        control, treatment = ctx.session.fork(), ctx.session.fork()
        s_control = ctx.state.copy()
        s_treat = ctx.state.copy()
        s_treat.interventions[CANDIDATE_ID] = ActiveIntervention(
            CANDIDATE_ID, proposal.kind, proposal.name, dict(proposal.params), tuple(proposal.targets),
            s_treat.harness_version + 1, proposal.skill_id)
        m_control = control.train_steps(cfg.k_steps, s_control)
        m_treat = treatment.train_steps(cfg.k_steps, s_treat)
        e_control = control.evaluate("heldout", strict=True, limit=cfg.eval_limit)
        e_treat = treatment.evaluate("heldout", strict=True, limit=cfg.eval_limit)
        boot = paired_bootstrap(e_control.item_scores, e_treat.item_scores, n_boot=cfg.n_boot,
                                confidence=cfg.confidence, seed=ctx.seed, worse_margin=cfg.worse_margin)
        r_control = steps_rollouts(ctx.run_id, m_control)
        r_treat = steps_rollouts(ctx.run_id, m_treat)
        w_control = Window(run_id=ctx.run_id, step=ctx.step, rollouts=tuple(r_control))
        w_treat = Window(run_id=ctx.run_id, step=ctx.step, rollouts=tuple(r_treat))
        figures: dict[str, Any] = {"k_steps": cfg.k_steps, "control_rollouts": len(r_control), "treatment_rollouts": len(r_treat),
                                   "control_train_reward": _mean_metric(m_control), "treatment_train_reward": _mean_metric(m_treat)}
        # fingerprint: the targeted diagnosis must fall in treatment
        fp: dict[str, Any] = {}
        for kind in proposal.targets:
            c = ctx.measure(kind, w_control, s_control) if ctx.measure else None
            t = ctx.measure(kind, w_treat, s_treat) if ctx.measure else None
            if c is not None and t is not None:
                fp[kind] = {"control": c, "treatment": t, "fell": t < c}
        checkable = {k: v for k, v in fp.items() if v["control"] > 0}
        fingerprint_ok: Optional[bool] = all(v["fell"] for v in checkable.values()) if checkable else None
        figures["fingerprint"] = fp
        figures["fingerprint_ok"] = fingerprint_ok
        # validity on the candidate branch: invalid diagnoses the treatment has and control does not
        if ctx.diagnose is not None:
            inv_c = {k for k, sev, _, _ in ctx.diagnose(w_control, s_control) if sev == "invalid"}
            inv_t = {k for k, sev, _, _ in ctx.diagnose(w_treat, s_treat) if sev == "invalid"}
            figures["control_invalid"] = sorted(inv_c)
            figures["treatment_invalid"] = sorted(inv_t)
            figures["treatment_new_invalid"] = sorted(inv_t - inv_c)
        if boot is None or boot.n < cfg.min_n:
            n = 0 if boot is None else boot.n
            return BacktestOutcome(backtester=self.name, mode="online", passed=None, figures=figures, n=n,
                                   version=self.version,
                                   reasons=(f"no decision: {n} paired held-out items (< min_n {cfg.min_n})",))
        figures.update(control_strict=boot.control_mean, treatment_strict=boot.treatment_mean, mean_diff=boot.mean_diff,
                       worse=boot.worse, better=boot.better, worse_fraction=boot.worse_frac,
                       regression_cap=cfg.regression_cap, min_effect=cfg.min_effect, confidence=cfg.confidence)
        reasons = []
        if not boot.ci[0] > cfg.min_effect:
            reasons.append(f"CI [{boot.ci[0]:+.3f}, {boot.ci[1]:+.3f}] does not exclude {cfg.min_effect:+.3f}")
        if boot.worse_frac > cfg.regression_cap:
            reasons.append(f"{boot.worse_frac:.0%} of items got worse (cap {cfg.regression_cap:.0%})")
        if cfg.fingerprint_check and fingerprint_ok is False:
            reasons.append("fingerprint: " + ", ".join(f"{k} {v['control']:.3f} -> {v['treatment']:.3f}"
                                                       for k, v in checkable.items() if not v["fell"]) + " did not fall")
        passed = not reasons
        if passed:
            reasons.append(f"strict {boot.control_mean:.3f} -> {boot.treatment_mean:.3f}, CI [{boot.ci[0]:+.3f}, "
                           f"{boot.ci[1]:+.3f}] on {boot.n} paired items; {boot.worse} worse")
        return BacktestOutcome(backtester=self.name, mode="online", passed=passed, figures=figures, ci=boot.ci, n=boot.n,
                               reasons=tuple(reasons), version=self.version,
                               # fork rollouts are not in the log: cite the logged diagnoses it answers
                               evidence=tuple(d.event_id for d in ctx.diagnoses if d.kind in set(proposal.targets))[:50])


def _mean_metric(metrics: list, key: str = "reward_mean") -> Optional[float]:
    vals = [m.get(key) for m in metrics if isinstance(m.get(key), (int, float))]
    return sum(vals) / len(vals) if vals else None
