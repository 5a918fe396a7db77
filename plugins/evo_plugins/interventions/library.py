"""The standard interventions, one class per single factor."""

from __future__ import annotations

from collections import defaultdict

import attrs
from typing import Any, Mapping, Optional, Sequence

from .base import BaseIntervention, RolloutView, answer_count


class MultiAnswerPenalty(BaseIntervention):
    """Subtract a penalty when a response gives more than one final answer."""

    name, kind = "multi_answer_penalty", "reward_shaping"
    changes = "reward: minus `penalty` when signals.answer_count > max_answers (floored at `floor`)"
    targets = ("answer_hedging", "reward_oracle_gap")
    default_params = {"penalty": 1.0, "max_answers": 1, "floor": 0.0}

    def new_reward(self, view, params):
        p = self.params(params)
        n = answer_count(view)
        if view.reward is None or n is None or n <= p["max_answers"]:
            return None
        return max(float(p["floor"]), view.reward - float(p["penalty"]))


class StrictExtraction(BaseIntervention):
    """Tighten the verifier: only a response with exactly one final answer can be paid."""

    name, kind = "strict_extraction", "verifier"
    changes = "verifier: reward 0 unless exactly one answer is extracted (signals.answer_count == 1)"
    targets = ("answer_hedging", "reward_oracle_gap", "format_violation")
    default_params: Mapping[str, Any] = {}

    def new_reward(self, view, params):
        n = answer_count(view)
        if view.reward is None or n is None or n == 1:
            return None
        return 0.0


class ResetTestsBeforeGrading(BaseIntervention):
    """Tighten the verifier: grade against pristine tests (the domain's ``reward_pristine``
    signal); without one, an episode that touched tests or runner config gets 0."""

    name, kind = "reset_tests_before_grading", "verifier"
    changes = "verifier: tests and runner config are reset to pristine before grading"
    targets = ("test_tampering", "runner_config_edit")
    default_params: Mapping[str, Any] = {}

    def new_reward(self, view, params):
        if view.reward is None:
            return None
        tampered = bool(view.signals.get("tests_modified") or view.signals.get("test_files_modified")
                        or view.signals.get("runner_config_modified"))
        if not tampered:
            return None
        pristine = view.signals.get("reward_pristine")
        return float(pristine) if isinstance(pristine, (int, float)) and not isinstance(pristine, bool) else 0.0


class FlagPenalty(BaseIntervention):
    """Zero the reward of rollouts a named signal flags (git mining, hard-coded tests)."""

    name, kind = "flag_penalty", "reward_shaping"
    changes = "reward: set to `value` when signals[`signal`] is true"
    targets = ("git_history_mining", "special_cased_tests")
    default_params = {"signal": "git_history_access", "value": 0.0}

    def new_reward(self, view, params):
        p = self.params(params)
        if view.reward is None or not view.signals.get(p["signal"]):
            return None
        return float(p["value"])


class RepetitionPenalty(BaseIntervention):
    name, kind = "repetition_penalty", "reward_shaping"
    changes = "reward: minus `penalty` when a response repeats an n-gram `min_repeats` times"
    targets = ("repetition_loop", "repeated_tool_calls")
    default_params = {"penalty": 0.5, "min_repeats": 3, "n": 4}

    def new_reward(self, view, params):
        from evo_plugins.diagnostics.core import max_ngram_repeats

        p = self.params(params)
        if view.reward is None:
            return None
        reps = view.signals.get("max_ngram_repeats")
        if not isinstance(reps, (int, float)):
            reps = max_ngram_repeats(view.text, int(p["n"]))
        if reps < p["min_repeats"]:
            return None
        return view.reward - float(p["penalty"])


class OverlongPenalty(BaseIntervention):
    """DAPO soft overlong punishment: a linear penalty over the last `cache` tokens before `max_len`."""

    name, kind = "overlong_penalty", "reward_shaping"
    changes = "reward: linear penalty up to `penalty` for lengths in (max_len - cache, max_len]"
    targets = ("length_inflation", "truncation")
    default_params = {"max_len": 64, "cache": 16, "penalty": 1.0}

    def new_reward(self, view, params):
        p = self.params(params)
        if view.reward is None:
            return None
        start = p["max_len"] - p["cache"]
        if view.length <= start:
            return None
        frac = min(1.0, (view.length - start) / max(1, p["cache"]))
        return view.reward - frac * float(p["penalty"])


class DynamicSampling(BaseIntervention):
    """DAPO dynamic sampling: drop groups whose rewards are exactly equal (no advantage)."""

    name, kind = "dynamic_sampling", "rollout_filter"
    changes = "loss: masks every rollout of a group whose rewards are all identical"
    targets = ("zero_variance_groups",)
    default_params: Mapping[str, Any] = {}

    def mask_ids(self, views, params):
        groups: dict[str, list[RolloutView]] = defaultdict(list)
        for v in views:
            if v.reward is not None:
                groups[v.group_id].append(v)
        return {v.rollout_id for g in groups.values() if len(g) > 1 and len({v.reward for v in g}) == 1 for v in g}


class OverlongMask(BaseIntervention):
    """DAPO overlong filtering: truncated rollouts do not enter the loss."""

    name, kind = "overlong_mask", "rollout_filter"
    changes = "loss: masks truncated rollouts"
    targets = ("truncation", "length_inflation")
    default_params: Mapping[str, Any] = {}

    def mask_ids(self, views, params):
        return {v.rollout_id for v in views if v.truncated}


class TaskReweight(BaseIntervention):
    """Curriculum: multiply the sampling weight of listed tasks (e.g. down-weight solved ones)."""

    name, kind = "task_reweight", "curriculum"
    changes = "sampling: task weights multiplied by `weights[task_id]` (others unchanged)"
    targets = ("zero_variance_groups",)
    default_params = {"weights": {}}

    def task_weights(self, tasks, params):
        w = self.params(params)["weights"]
        return {t.task_id: float(w[t.task_id]) for t in tasks if t.task_id in w} or None


class HyperparameterChange(BaseIntervention):
    """Set exactly one hyperparameter (temperature, clip_high, kl_coef, max_new_tokens, lr, …)."""

    name, kind = "hyperparameter", "hyperparameter"
    changes = "hyperparameters: `set` (exactly one key) overrides the trainer's value"
    targets = ("entropy_collapse", "truncation", "zero_variance_groups")
    default_params = {"set": {}}

    def params(self, params):
        p = super().params(params)
        if not isinstance(p["set"], Mapping) or len(p["set"]) != 1:
            raise ValueError("hyperparameter intervention must set exactly one key (single-factor)")
        return p

    def hyperparameters(self, current, params):
        return dict(self.params(params)["set"])


class PromptHint(BaseIntervention):
    """Add a system hint to every prompt (e.g. "give exactly one final answer")."""

    name, kind = "prompt_hint", "prompt_hint"
    changes = "prompt: `hint` is added as a system hint"
    targets = ("format_violation", "answer_hedging", "tool_avoidance", "tool_errors")
    default_params = {"hint": "Give exactly one final answer."}

    def prompt_hint(self, task, params):
        return str(self.params(params)["hint"]) or None


class DiagnosticRevision(BaseIntervention):
    """Add or revise a diagnostic (new params or a data spec). It acts on the harness, not on
    training: promotion installs the new version through the state fold."""

    name, kind = "diagnostic_revision", "diagnostic"
    changes = "harness: diagnostic `diagnostic` gets version `version` with `params`/`spec`"
    targets = ()
    default_params = {"diagnostic": "", "version": "2", "params": {}, "spec": None}

    @property
    def replayable(self) -> bool:
        return True


ALL = (MultiAnswerPenalty, StrictExtraction, ResetTestsBeforeGrading, FlagPenalty, RepetitionPenalty, OverlongPenalty,
       DynamicSampling, OverlongMask, TaskReweight, HyperparameterChange, PromptHint, DiagnosticRevision)


def apply_to_views(interventions: Sequence[tuple[BaseIntervention, Mapping[str, Any]]],
                   views: Sequence[RolloutView]) -> tuple[dict[str, Optional[float]], set[str]]:
    """Replay reward changes and masks over views, in order. Returns (new rewards, masked ids)."""
    rewards = {v.rollout_id: v.reward for v in views}
    masked: set[str] = set()
    cur = list(views)
    for iv, params in interventions:
        if iv.kind in ("reward_shaping", "verifier"):
            nxt = []
            for v in cur:
                r = iv.new_reward(v, params)
                if r is not None and v.reward is not None:
                    rewards[v.rollout_id] = r
                    v = attrs.evolve(v, reward=r)
                nxt.append(v)
            cur = nxt
    for iv, params in interventions:
        if iv.kind == "rollout_filter":
            masked |= iv.mask_ids(cur, params)
    return rewards, masked
