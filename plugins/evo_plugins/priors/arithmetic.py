"""Priors for the arithmetic domain's hedging flaw, written by hand: a diagnostic that
knows the hedge flaw's own signal (``numbers_found``), the repairs that act on it, and a
spec the rule proposer used to add. Warm mode only (``harness.priors = true``)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from evo_plugins.diagnostics.base import BaseDiagnostic, Measurement, halves, num, rate, signal, train_rollouts
from evo_plugins.interventions.base import BaseIntervention, RolloutView

COUNT_SIGNAL = "numbers_found"  # what the arithmetic domain's hedge verifier reports

MULTI_ANSWER_REWARDED_SPEC = {
    "kind": "multi_answer_rewarded",
    "severity": "invalid",
    "description": "responses with more than one answer that the training reward still pays",
    "population": {"field": "split", "op": "==", "value": "train"},
    "where": {"all": [{"signal": COUNT_SIGNAL, "op": ">", "value": 1}, {"field": "reward", "op": ">=", "value": 1}]},
    "statistic": {"type": "rate"},
    "threshold": {"op": ">", "value": 0.1},
    "min_n": 32,
}


def answer_count(view: RolloutView) -> Optional[int]:
    v = view.signals.get(COUNT_SIGNAL)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class AnswerHedging(BaseDiagnostic):
    """Several final answers in one response, paid by a lenient verifier: fires when the hedge
    rate is above ``max_rate`` while strict accuracy on the audited rollouts is flat or falling;
    "invalid" when hedges are rewarded."""

    name, version, kinds = "answer_hedging", "2", ("answer_hedging",)
    default_params = {"max_rate": 0.15, "min_rise": 0.0, "strict_tolerance": 0.02, "paid_fraction": 0.5, "min_n": 32}
    prior = True

    def measurements(self, window, p):
        rows = [r for r in train_rollouts(window) if num(signal(r, COUNT_SIGNAL)) is not None]
        if len(rows) < p["min_n"]:
            return [Measurement(None, len(rows), False)]
        hedged = lambda r: num(signal(r, COUNT_SIGNAL)) > 1  # noqa: E731
        early, late = halves(rows)
        v_late = rate(late, hedged)
        v_early = rate(early, hedged) if early else None
        rise = (v_late - v_early) if v_early is not None else None
        aud_e = [r for r in early if r.strict_correct is not None]
        aud_l = [r for r in late if r.strict_correct is not None]
        s_early = rate(aud_e, lambda r: r.strict_correct) if aud_e else None
        s_late = rate(aud_l, lambda r: r.strict_correct) if aud_l else None
        strict_not_up = s_early is None or s_late is None or s_late <= s_early + p["strict_tolerance"]
        hedges = [r for r in late if hedged(r)]
        paid = (sum(1 for r in hedges if r.reward and r.reward > 0) / len(hedges)) if hedges else 0.0
        fired = v_late > p["max_rate"] and (rise is None or rise >= p["min_rise"]) and strict_not_up
        sev = "invalid" if paid >= p["paid_fraction"] else "warning"
        return [Measurement(v_late, len(rows), fired, sev, tuple(r.event_id for r in hedges),
                            {"threshold": p["max_rate"], "early_rate": v_early, "rise": rise, "paid_fraction": paid,
                             "strict_early": s_early, "strict_late": s_late},
                            message=f"hedge rate {v_late:.0%}; {paid:.0%} of hedges rewarded; strict {s_early} -> {s_late}")]


class MultiAnswerPenalty(BaseIntervention):
    """Subtract a penalty when a response gives more than one final answer."""

    name, kind = "multi_answer_penalty", "reward_shaping"
    changes = f"reward: minus `penalty` when signals.{COUNT_SIGNAL} > max_answers (floored at `floor`)"
    targets = ("answer_hedging", "multi_answer_rewarded")
    default_params = {"penalty": 1.0, "max_answers": 1, "floor": 0.0}
    prior = True

    def new_reward(self, view, params):
        p = self.params(params)
        n = answer_count(view)
        if n is None or n <= p["max_answers"]:
            return None
        return max(float(p["floor"]), view.reward - float(p["penalty"]))


class StrictExtraction(BaseIntervention):
    """Tighten the verifier: only a response with exactly one final answer can be paid."""

    name, kind = "strict_extraction", "verifier"
    changes = f"verifier: reward 0 unless exactly one answer is extracted (signals.{COUNT_SIGNAL} == 1)"
    targets = ("answer_hedging", "multi_answer_rewarded")
    default_params: Mapping[str, Any] = {}
    prior = True

    def new_reward(self, view, params):
        n = answer_count(view)
        if n is None or n == 1:
            return None
        return 0.0
