"""Sampling: which tasks a step draws, with which prompts and hyperparameters, and the
completions the engine (or the domain's episodes) samples for them.

The active interventions act here first (task weights, prompt hints, hyperparameter
overrides); grading and rewards follow in ``grading`` and ``rewards``.
"""

from __future__ import annotations

import random
import time
from typing import Any, Mapping, Optional, Sequence

import attrs
import structlog

from evo_core.api import Completion, RolloutItem, Task
from evo_core.trainer.protocols import Sample, SamplingParams

log = structlog.get_logger("evo.trainer")

HYPERPARAMETER_KEYS = ("temperature", "top_p", "max_new_tokens", "clip_low", "clip_high", "kl_coef", "lr",
                       "lr_scale", "overlong", "overlong_buffer", "overlong_penalty", "group_size",
                       "prompts_per_step", "dynamic_sampling", "stop")


@attrs.define
class DataCursor:
    """The data position: a seeded permutation per epoch and an index into it. Uniform
    sampling walks the permutation (no repeats within an epoch); when a curriculum
    intervention returns weights, tasks are drawn by weight from ``rng`` instead."""

    n: int
    seed: int
    epoch: int = 0
    index: int = 0

    def _perm(self) -> list[int]:
        order = list(range(self.n))
        random.Random(f"data:{self.seed}:{self.epoch}").shuffle(order)
        return order

    def take(self, k: int, weights: Optional[Sequence[float]] = None, rng: Optional[random.Random] = None) -> list[int]:
        if weights is not None and rng is not None:
            return rng.choices(range(self.n), weights=weights, k=k)
        out: list[int] = []
        perm = self._perm()
        while len(out) < k:
            if self.index >= self.n:
                self.epoch, self.index = self.epoch + 1, 0
                perm = self._perm()
            take = min(k - len(out), self.n - self.index)
            out.extend(perm[self.index:self.index + take])
            self.index += take
        return out


def task_weights(interventions: Any, tasks: Sequence[Task], state: Any) -> Optional[list[float]]:
    """Sampling weights per task (None: uniform), from the active curriculum interventions."""
    res = interventions.task_weights(tasks, state)
    if not res:
        return None
    return [float(res.get(t.task_id, 1.0)) for t in tasks]


def hyperparameters(rl: Any, loss_settings: Any, dynamic_sampling: bool, interventions: Any,
                    state: Any) -> dict[str, Any]:
    """This step's hyperparameters: the config's, overridden by the active interventions."""
    hp: dict[str, Any] = {
        "temperature": rl.temperature, "top_p": rl.top_p, "max_new_tokens": rl.max_new_tokens,
        "clip_low": loss_settings.clip_low, "clip_high": loss_settings.clip_high,
        "kl_coef": rl.kl_coef, "lr": rl.lr, "lr_scale": 1.0, "overlong": rl.overlong,
        "overlong_buffer": rl.overlong_buffer, "overlong_penalty": rl.overlong_penalty,
        "group_size": rl.group_size, "prompts_per_step": rl.prompts_per_step,
        "dynamic_sampling": dynamic_sampling, "stop": list(rl.stop),
    }
    for k, v in dict(interventions.hyperparameters(hp, state) or {}).items():
        if k in HYPERPARAMETER_KEYS:
            hp[k] = v
        else:
            log.warning("unknown hyperparameter override ignored", key=k)
    return hp


def prompt(interventions: Any, task: Task, state: Any) -> str:
    """The task's prompt with the active interventions' hints before it."""
    hints = interventions.prompt_hints(task, state)
    return ("\n".join(hints) + "\n" + task.prompt) if hints else task.prompt


def sampling_params(hp: Mapping[str, Any]) -> SamplingParams:
    return SamplingParams(n=int(hp["group_size"]), temperature=float(hp["temperature"]), top_p=float(hp["top_p"]),
                          max_new_tokens=int(hp["max_new_tokens"]), stop=tuple(hp["stop"]))


def run_episodes(s: Any, chosen: Sequence[Task], params: SamplingParams
                 ) -> tuple[list[list[Sample]], list[list[Completion]], list[list[dict[str, Any]]]]:
    """G episodes per task with the current policy as the agent: advancing together, one
    batched generate per turn, when the domain offers it, else one after another
    (``evo_core.trainer.episodes``): the conversation as one sample, the final completion
    and the episode's stats."""
    from evo_core.trainer.episodes import rollout_episodes

    return rollout_episodes(s.engine, s.domain, chosen, params, encode=s.policy.tokenizer.encode,
                            decode=s.policy.tokenizer.decode, generator=s.gen,
                            max_turns=int(getattr(s.rl, "episode_max_turns", 0) or 0))


def informative_groups(items: Sequence[RolloutItem]) -> list[str]:
    """Groups (in order) whose valid rewards are not all equal: they carry a learning signal."""
    rewards: dict[str, list[float]] = {}
    for it in items:
        rewards.setdefault(it.group_id, [])
        if it.mask and it.reward is not None:
            rewards[it.group_id].append(float(it.reward))
    return [g for g, rs in rewards.items() if len(rs) > 1 and any(r != rs[0] for r in rs)]


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t
