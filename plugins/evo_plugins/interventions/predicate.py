"""Generic repairs driven by a predicate: each takes any data-only predicate (the DSL of
``evo_core.harness.specs``, e.g. one the harness induced from audited evidence) and acts on
the rollouts it matches. None of them knows what the predicate means. ``spec_penalty``,
``spec_screen`` and ``rollback`` repair overpayment; ``spec_restore`` repairs underpayment;
``oracle_regrade`` repairs either (the oracle's verdict replaces the verifier's)."""

from __future__ import annotations

from typing import Any, Mapping

from evo_core.api.specs import compile_predicate, validate_predicate

from .base import BaseIntervention

PREDICATE_PARAMS = {"predicate": {}}


class _PredicateRepair(BaseIntervention):
    default_params: Mapping[str, Any] = PREDICATE_PARAMS

    def params(self, params):
        p = super().params(params)
        validate_predicate(p["predicate"], f"{self.name}.predicate")
        return p

    def flags(self, view, params) -> bool:
        # compiled once per predicate object: replays call this for every rollout of a branch
        pred = params["predicate"]
        cached = self.__dict__.get("_compiled")
        if cached is None or cached[0] is not pred:
            cached = self.__dict__["_compiled"] = (pred, compile_predicate(pred))
        return cached[1](view)


class SpecPenalty(_PredicateRepair):
    """Subtract ``penalty`` from the reward where the predicate holds (``mode = "zero"``: pay nothing)."""

    name, kind = "spec_penalty", "reward_shaping"
    changes = "reward: where `predicate` holds, minus `penalty` (floored at `floor`), or 0 with mode = zero"
    default_params = {**PREDICATE_PARAMS, "mode": "zero", "penalty": 1.0, "floor": 0.0}

    def new_reward(self, view, params):
        if not self.flags(view, params):
            return None
        if params["mode"] == "zero":
            return 0.0
        return max(float(params["floor"]), float(view.reward) - float(params["penalty"]))


class SpecRestore(_PredicateRepair):
    """The repair for underpayment: where the predicate holds and the verifier paid nothing
    (reward at most ``pay_threshold``), pay ``value``, what the verifier pays an accepted
    answer (the proposer sets it from the audited paid-and-accepted rollouts). It restores
    withheld reward; it never lowers one."""

    name, kind = "spec_restore", "reward_shaping"
    changes = "reward: where `predicate` holds and the reward is at most `pay_threshold`, `value` (the paid reward)"
    default_params = {**PREDICATE_PARAMS, "value": 1.0, "pay_threshold": 0.0}

    def params(self, params):
        p = super().params(params)
        for k in ("value", "pay_threshold"):
            if isinstance(p[k], bool) or not isinstance(p[k], (int, float)):
                raise ValueError(f"{self.name}.{k}: a number is required, got {p[k]!r}")
        if p["value"] <= p["pay_threshold"]:
            raise ValueError(f"{self.name}.value must exceed pay_threshold ({p['value']!r} <= {p['pay_threshold']!r})")
        return p

    def new_reward(self, view, params):
        if view.reward is None or view.reward > params["pay_threshold"] or not self.flags(view, params):
            return None
        return float(params["value"])


class SpecScreen(_PredicateRepair):
    """Monitor-with-screening: rollouts the predicate flags do not enter the loss."""

    name, kind = "spec_screen", "rollout_filter"
    changes = "loss: masks rollouts where `predicate` holds"

    def mask(self, views, params):
        return {v.rollout_id for v in views if v.reward is not None and self.flags(v, params)}


class OracleRegrade(_PredicateRepair):
    """Flagged rollouts are re-graded by the strict oracle and get its reward, within the
    step's re-grade budget (``harness.audit.regrade_rate``); flagged rollouts the budget
    cannot cover are screened from the loss, never paid unchecked."""

    name, kind = "oracle_regrade", "verifier"
    changes = "verifier: rollouts where `predicate` holds get the strict oracle's reward (budget-limited)"

    def regrade(self, view, params):
        return self.flags(view, params)


class Rollback(SpecPenalty):
    """Continue the repaired run from the main line (the last checkpoint the policy gate
    admitted) rather than from the weights that learned the loophole, with the predicate's
    rollouts paid nothing from then on."""

    name = "rollback"
    changes = "training: back to the main-line checkpoint; reward: 0 where `predicate` holds"
    restore_main = True


ALL = (SpecPenalty, SpecRestore, SpecScreen, OracleRegrade, Rollback)
