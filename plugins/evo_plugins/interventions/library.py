"""The generic standard interventions, one class per single factor. None of them knows a
domain: they act on fields every rollout has, on the core's generic response features,
or on a predicate they are given."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping

from .base import BaseIntervention, RolloutView


class FlagPenalty(BaseIntervention):
    """Set the reward of rollouts whose named signal is true (the signal is a parameter)."""

    name, kind = "flag_penalty", "reward_shaping"
    changes = "reward: set to `value` when signals[`signal`] is true"
    default_params = {"signal": "", "value": 0.0}

    def new_reward(self, view, params):
        p = self.params(params)
        if not p["signal"] or not view.signals.get(p["signal"]):
            return None
        return float(p["value"])


class RepetitionPenalty(BaseIntervention):
    name, kind = "repetition_penalty", "reward_shaping"
    changes = "reward: minus `penalty` when a response repeats a word trigram `min_repeats` times"
    targets = ("repetition_loop",)
    default_params = {"penalty": 0.5, "min_repeats": 3}

    def new_reward(self, view, params):
        from evo_plugins.diagnostics.core import max_ngram_repeats

        p = self.params(params)
        reps = view.features.get("repeated_trigrams")
        if not isinstance(reps, (int, float)):
            reps = max_ngram_repeats(view.text, 3)
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

    def mask(self, views, params):
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

    def mask(self, views, params):
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
    """Add a system hint to every prompt."""

    name, kind = "prompt_hint", "prompt_hint"
    changes = "prompt: `hint` is added as a system hint"
    default_params = {"hint": ""}

    def prompt_hint(self, task, params):
        return str(self.params(params)["hint"]) or None


class DiagnosticRevision(BaseIntervention):
    """Add or revise a diagnostic (new params or a data spec). It acts on the harness, not on
    training: promotion installs the new version through the state fold."""

    name, kind = "diagnostic_revision", "diagnostic"
    changes = "harness: diagnostic `diagnostic` gets version `version` with `params`/`spec`"
    default_params = {"diagnostic": "", "version": "2", "params": {}, "spec": None}


ALL = (FlagPenalty, RepetitionPenalty, OverlongPenalty, DynamicSampling, OverlongMask, TaskReweight,
       HyperparameterChange, PromptHint, DiagnosticRevision)
