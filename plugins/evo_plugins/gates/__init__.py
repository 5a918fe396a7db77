"""The standard gates (entry point ``evo_gates``).

- ``validity``: vetoes. An active "invalid" diagnosis that no active repair targets, or a
  strict-oracle failure rate on the candidate's audited rollouts, blocks promotion whatever
  the score. Vetoes outrank every other gate.
- ``statistical``: an intervention passes only on backtest evidence — no failed backtest,
  at least one decisive pass, and where an online A/B ran, its CI clears ``min_effect``
  and the regression cap holds.
- ``policy``: a checkpoint joins the main line only if validation strict accuracy does not
  fall. The fixed harness (a static human recipe) trusts the training reward instead;
  ``trust = "validation"`` with the fixed harness is early stopping (the competent baseline).
"""

from __future__ import annotations

from typing import Any, Mapping

from evo_core.api import Candidate, GateContext, GateDecision, strict_metric
from evo_core.api import hookimpl


class ValidityGate:
    name, version = "validity", "1"
    subjects = ("intervention", "policy")
    default_params = {"max_invalid_rewarded": 0.25, "min_audited": 16, "reward_threshold": 0.0}

    def decide(self, cand: Candidate, ctx: GateContext, params: Mapping[str, Any]) -> GateDecision:
        p = {**self.default_params, **dict(params or {})}
        if not ctx.config.evolving:
            return GateDecision(gate=self.name, passed=True, abstain=True, version=self.version,
                                reasons=("fixed harness: diagnoses are logged, not acted on",))
        reasons: list[str] = []
        figures: dict[str, Any] = {}
        if cand.subject == "policy":
            # an invalid diagnosis an active repair targets is being dealt with: the candidate's
            # validation accuracy judges what is left of it; an unaddressed one vetoes
            repaired = {t for a in ctx.state.interventions.values() for t in a.targets}
            invalid = [d for d in ctx.diagnoses if d.severity == "invalid" and d.kind not in repaired]
            if invalid:
                figures["invalid_diagnoses"] = [d.event_id for d in invalid]
                reasons.append("active invalid diagnoses: " + ", ".join(sorted({f"{d.kind}({d.diagnostic}@{d.diagnostic_version})"
                                                                                 for d in invalid})))
            aud = [r for r in cand.rollouts if r.strict_correct is not None and r.reward is not None
                   and _paid(r) > p["reward_threshold"]]
            if len(aud) >= p["min_audited"]:
                bad = sum(1 for r in aud if not r.strict_correct)
                figures["rewarded_strict_failures"] = bad / len(aud)
                if bad / len(aud) > p["max_invalid_rewarded"]:
                    reasons.append(f"strict oracle rejects {bad}/{len(aud)} rewarded audited rollouts "
                                   f"(> {p['max_invalid_rewarded']:.0%})")
        else:
            for o in cand.backtests:
                new_invalid = o.figures.get("treatment_new_invalid")
                if new_invalid:
                    reasons.append(f"treatment branch shows new invalid diagnoses: {', '.join(new_invalid)}")
        if reasons:
            return GateDecision(gate=self.name, passed=False, veto=True, reasons=tuple(reasons), figures=figures,
                                version=self.version)
        return GateDecision(gate=self.name, passed=True, reasons=("no validity veto",), figures=figures, version=self.version)


def _paid(r: Any) -> float:
    """What training paid a rollout: its reward after interventions (nothing when masked)."""
    if (r.train or {}).get("masked"):
        return 0.0
    return float(r.reward_final if r.reward_final is not None else r.reward)


class StatisticalGate:
    """An intervention passes only on backtest evidence: no failed backtest, at least one
    decisive pass, and no online A/B left without a decision (the backtesters own their
    statistics; this gate only reads their verdicts)."""

    name, version = "statistical", "2"
    subjects = ("intervention",)
    default_params: Mapping[str, Any] = {}

    def decide(self, cand: Candidate, ctx: GateContext, params: Mapping[str, Any]) -> GateDecision:
        bts = list(cand.backtests)
        if not bts:
            return GateDecision(gate=self.name, passed=False, reasons=("no backtest ran",), version=self.version)
        failed = [o for o in bts if o.passed is False]
        if failed:
            return GateDecision(gate=self.name, passed=False, version=self.version,
                                reasons=tuple(f"{o.backtester}: {r}" for o in failed for r in o.reasons))
        undecided_online = [o for o in bts if o.mode == "online" and o.passed is None]
        if undecided_online:
            return GateDecision(gate=self.name, passed=False, version=self.version,
                                reasons=tuple(f"online: {r}" for o in undecided_online for r in o.reasons))
        decisive = [o for o in bts if o.passed is True]
        if not decisive:
            return GateDecision(gate=self.name, passed=False, version=self.version,
                                reasons=tuple(f"{o.backtester}: {r}" for o in bts for r in o.reasons) or ("no decision possible",))
        return GateDecision(gate=self.name, passed=True, version=self.version,
                            reasons=tuple(f"{o.backtester}: {o.reasons[-1] if o.reasons else 'passed'}" for o in decisive),
                            figures={"ci": next((list(o.ci) for o in bts if o.mode == "online" and o.ci), None)})


class PolicyGate:
    name, version = "policy", "1"
    subjects = ("policy",)
    default_params = {"metric": None, "tolerance": 0.0, "trust": None, "reward_tolerance": 0.02, "restore_on": None}

    def decide(self, cand: Candidate, ctx: GateContext, params: Mapping[str, Any]) -> GateDecision:
        p = {**self.default_params, **dict(params or {})}
        trust = p["trust"] or ("validation" if ctx.config.evolving else "train_reward")
        trust = "validation" if trust == "strict" else trust
        if trust == "train_reward":
            c, m = cand.train_reward, cand.main_train_reward
            figs = {"trust": trust, "candidate_train_reward": c, "main_train_reward": m}
            if c is None:
                return GateDecision(gate=self.name, passed=False, figures=figs, version=self.version,
                                    reasons=("no training reward since the last gate",))
            if m is None or c >= m - p["reward_tolerance"]:
                return GateDecision(gate=self.name, passed=True, figures=figs, version=self.version,
                                    reasons=(f"training reward {c:.3f} >= main {m if m is not None else float('nan'):.3f} "
                                             f"- {p['reward_tolerance']}",))
            return GateDecision(gate=self.name, passed=False, figures=figs, version=self.version,
                                reasons=(f"training reward fell: {c:.3f} < main {m:.3f} - {p['reward_tolerance']}",))
        c, m = strict_metric(cand.eval, p["metric"]), strict_metric(cand.main_eval, p["metric"])
        figs = {"trust": trust, "candidate_strict": c, "main_strict": m}
        if c is None:
            return GateDecision(gate=self.name, passed=False, figures=figs, version=self.version,
                                reasons=("no validation strict score for the candidate",))
        if m is None or c >= m - p["tolerance"]:
            return GateDecision(gate=self.name, passed=True, figures=figs, version=self.version,
                                reasons=(f"validation strict {c:.3f} >= main {m if m is not None else float('nan'):.3f}",))
        return GateDecision(gate=self.name, passed=False, figures=figs, version=self.version,
                            reasons=(f"validation strict accuracy fell: {c:.3f} < main {m:.3f}",))


__all__ = ["ValidityGate", "StatisticalGate", "PolicyGate"]


@hookimpl
def evo_register_gates():
    return [ValidityGate(), StatisticalGate(), PolicyGate()]
