"""``RLSession``: the live GRPO-family trainer, orchestrating one RL step.

One RL step: task weights → hyperparameters → prompt hints → sampling (``sampling``) →
verification, generic response features and the strict-oracle audit (``grading``) → rewards
and masks (``rewards``) → advantages and the update (``update``) → the step's metrics
(``step_metrics``). At each stage the core applies the active interventions
(``evo_core.interventions``); nothing else changes a step. Every oracle label goes through
the session's ``OracleClient`` (``oracle``), which counts it. Forks for online backtests and
snapshots live in ``snapshots``, resume checkpoints in ``resume``. The session never writes
to the log: the run loop turns a ``StepResult`` into events (``step_events``).
"""

from __future__ import annotations

import math
import random
import time
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import RolloutItem, Task
from evo_core.interventions import InterventionApplier
from evo_core.trainer import grading, resume, sampling, snapshots, update
from evo_core.trainer.engine import InProcessEngine
from evo_core.trainer.evaluation import VerifierFailed, batch_method, evaluate_policy  # noqa: F401 (VerifierFailed: re-exported)
from evo_core.trainer.grpo import group_advantages, resolve
from evo_core.trainer.oracle import OracleClient
from evo_core.trainer.protocols import EvalResult, Sample
from evo_core.trainer.rewards import rewarded
from evo_core.trainer.sampling import HYPERPARAMETER_KEYS, DataCursor, informative_groups  # noqa: F401 (re-exported)
from evo_core.trainer.step_metrics import step_metrics


@attrs.define
class StepResult:
    step: int
    policy_version: int
    items: list[RolloutItem]
    samples: list[Sample]
    extra: list[dict[str, Any]]  # per item: entropy, advantage, final reward (for the rollout signals)
    metrics: dict[str, Optional[float]]
    hyperparameters: dict[str, Any]
    failures: list[Any]
    updated: bool
    synced: Optional[Mapping[str, Any]] = None  # what the rollout engine reported after a weight sync


class RLSession:
    def __init__(self, *, policy: Any, domain: Any, train_tasks: Sequence[Task], validation_tasks: Sequence[Task],
                 test_tasks: Sequence[Task] = (), rl: Any, eval_cfg: Any, seed: int, total_steps: int,
                 plugins: Any = None, audit_rate: float = 0.05, audit_min: int = 0, regrade_rate: float = 0.05,
                 engine: Any = None, reward: str = "verifier") -> None:
        import torch

        if not train_tasks:
            raise ValueError("no training tasks: check [task] train")
        self.policy = policy
        self.engine = engine if engine is not None else InProcessEngine(policy)
        self.domain = domain
        self.oracle = OracleClient(domain)  # every strict-oracle label, counted by purpose and scope
        # the training reward: the domain's verifier, or its strict oracle (the no-flaw reference)
        self.reward = "oracle" if reward == "oracle" else "verifier"
        self.verifier_batch = batch_method(domain, "verify")  # optional
        # [rl] rollout = "episode": each rollout is one multi-turn episode the domain runs
        self.episodes = getattr(rl, "rollout", "single") == "episode"
        if self.episodes:
            from evo_core.api import supports_episodes

            if not supports_episodes(domain):
                raise ValueError(f"rl.rollout = 'episode', but domain {getattr(domain, 'name', domain)!r} has no "
                                 "run_episode")
        self.train_tasks = list(train_tasks)
        self.splits = {"validation": list(validation_tasks), "test": list(test_tasks)}
        self.rl, self.eval_cfg, self.seed, self.total_steps = rl, eval_cfg, seed, total_steps
        self.plugins = plugins
        self.interventions = InterventionApplier(plugins.interventions() if plugins is not None else {})
        self.audit_rate, self.audit_min, self.regrade_rate = audit_rate, audit_min, regrade_rate
        self.loss_settings, self.scale_rewards, self.dynamic_sampling = resolve(rl)
        self.step = self.policy_version = self.max_version = 0
        self.cursor = DataCursor(len(self.train_tasks), seed)
        self.gen = torch.Generator(device="cpu").manual_seed(seed)
        self.rng = random.Random(f"session:{seed}")
        self.optimizer = self._make_optimizer()
        self.ref_state = policy.state_dict() if rl.kl_coef > 0 else None
        self._ref_policy: Any = None
        self.id_salt = f"session:{seed}"  # rollout ids derive from it: a recomputed step gets the same ids
        self.features_s = 0.0  # time spent on the harness's generic features (its bookkeeping, not training)
        self.dist: Any = None  # a ranks.Comm when launched as several ranks (see evo_core.trainer.shard)
        self.zero: Any = None  # a zero.ZeroTrainer under [distributed] engine = "deepspeed" (see enable_zero)
        self.checkpoint_dir: Optional[str] = None  # where ZeRO writes this rank's optimizer shard of a resume checkpoint

    def _make_optimizer(self) -> Any:
        from evo_core.trainer.distributed import adamw

        params = [p for p in self.policy.model.parameters() if p.requires_grad]
        return adamw(params, lr=self.rl.lr, weight_decay=self.rl.weight_decay, fused=all(p.is_cuda for p in params))

    def enable_zero(self, settings: Any) -> None:
        """Train through DeepSpeed ZeRO from now on (``evo_core.trainer.zero``): the same AdamW,
        its state sharded over the ranks. A collective: every rank calls it, right after the
        session is built (the optimizer state so far, empty, is not carried over)."""
        from evo_core.trainer.zero import ZeroTrainer

        rank, world = (self.dist.rank, self.dist.world_size) if self.dist is not None else (0, 1)
        self.zero = ZeroTrainer(self.policy, settings, self.rl, rank=rank, world_size=world)
        self.optimizer = self.zero.optimizer

    def close(self) -> None:
        """Release what outlives garbage collection (a ZeRO engine): a dropped backtest branch."""
        if self.zero is not None:
            self.zero.close()

    def lr_at(self, step: int, base: float) -> float:
        """Linear warmup (a fresh AdamW state wrecks an SFT model without it), then constant
        or cosine to ``min_lr``. ``step`` counts from 1."""
        w = self.rl.warmup_steps
        if w and step <= w:
            return base * step / w
        if self.rl.lr_schedule == "cosine":
            span = max(self.total_steps - w, 1)
            prog = min(max(step - w, 0) / span, 1.0)
            return self.rl.min_lr + 0.5 * (base - self.rl.min_lr) * (1 + math.cos(math.pi * prog))
        return base

    # -- one RL step -----------------------------------------------------------------------
    def rl_step(self, state: Any = None) -> StepResult:
        import contextlib

        t0 = time.perf_counter()
        step = self.step + 1
        capture = self.plugins.capture_failures() if self.plugins is not None else contextlib.nullcontext([])
        with capture as failures:
            weights = sampling.task_weights(self.interventions, self.train_tasks, state)
            # before choosing tasks: prompts_per_step may change
            hp = sampling.hyperparameters(self.rl, self.loss_settings, self.dynamic_sampling, self.interventions, state)
            chosen = [self.train_tasks[i] for i in self.cursor.take(int(hp["prompts_per_step"]), weights, self.rng)]
            items, samples, rollout_time = self._collect(chosen, hp, state, step, 0)
            # DAPO dynamic sampling with refill: sample more groups until the batch holds
            # ``prompts_per_step`` groups with a learning signal (or the rounds run out)
            rounds = 0
            target = len(chosen)
            if hp["dynamic_sampling"] and self.rl.dynamic_sampling_rounds > 0:
                while rounds < self.rl.dynamic_sampling_rounds:
                    have = len(informative_groups(items))
                    if have >= target:
                        break
                    rounds += 1
                    extra = [self.train_tasks[i] for i in self.cursor.take(target - have, weights, self.rng)]
                    n_groups = len({it.group_id for it in items})
                    more_items, more_samples, t_more = self._collect(extra, hp, state, step, n_groups)
                    items += more_items
                    samples += more_samples
                    rollout_time += t_more
            valid = [it.mask and it.reward is not None for it in items]
            adv, zero_var = group_advantages([it.reward for it in items], [it.group_id for it in items], valid,
                                             scale=self.scale_rewards)
            if hp["dynamic_sampling"]:
                keep = informative_groups(items)[:target] if rounds else None  # a refilled batch is trimmed to size
                for i, it in enumerate(items):
                    if it.group_id in zero_var or (keep is not None and it.group_id not in keep):
                        adv[i] = None
            settings = attrs.evolve(self.loss_settings, clip_low=float(hp["clip_low"]), clip_high=float(hp["clip_high"]),
                                    kl_coef=float(hp["kl_coef"]), norm_len=int(hp["max_new_tokens"]))
            lr = self.lr_at(step, float(hp["lr"]) * float(hp["lr_scale"]))
            upd = self._update(samples, adv, settings, lr)
        self.step = step
        synced = None
        if upd["updated"]:
            self.max_version += 1
            self.policy_version = self.max_version
            synced = self.sync_engine()
        extra = [{"advantage": a, "reward_final": it.reward, "entropy": upd["entropy_by_item"].get(i)}
                 for i, (it, a) in enumerate(zip(items, adv))]
        metrics = step_metrics(items, samples, adv, zero_var, upd, rollout_time, lr)
        metrics["step_time_s"] = time.perf_counter() - t0
        metrics["dynamic_sampling_rounds"] = float(rounds)
        return StepResult(step=step, policy_version=self.policy_version, items=items, samples=samples, extra=extra,
                          metrics=metrics, hyperparameters=hp, failures=list(failures), updated=upd["updated"],
                          synced=synced)

    def sync_engine(self) -> Optional[Mapping[str, Any]]:
        """Push the current weights to the rollout engine (a no-op in process; a LoRA adapter
        or checkpoint reload for an HTTP/vLLM server). Returns what was synced, if anything."""
        res = self.engine.sync_weights(self.policy, self.policy_version)
        return dict(res) if res else None

    def _collect(self, chosen: list[Task], hp: dict[str, Any], state: Any, step: int,
                 group_offset: int) -> tuple[list[RolloutItem], list[Sample], float]:
        """Prompts, sampling, verification, features, the audit, then rewards and masks
        (once per call: a refill round is its own ``RolloutBatch``)."""
        prompts = [sampling.prompt(self.interventions, t, state) for t in chosen]
        params = sampling.sampling_params(hp)
        if self.episodes:
            if self.dist is not None:
                raise RuntimeError("episode rollouts ([rl] rollout = 'episode') run on one rank only so far")
            (groups, completions, stats), rollout_time = sampling.timed(sampling.run_episodes, self, chosen, params)
            items, samples = grading.graded(self, chosen, groups, step, group_offset, completions, stats)
        elif self.dist is None:
            groups, rollout_time = sampling.timed(self.engine.generate, prompts, params, generator=self.gen)
            items, samples = grading.graded(self, chosen, groups, step, group_offset)
        else:  # this rank samples and grades its slice; every rank gets the whole batch back
            from evo_core.trainer.shard import sharded_rollouts

            items, samples, rollout_time = sharded_rollouts(self, chosen, prompts, params, step, group_offset)
        return rewarded(self, items, samples, hp, state, step) + (rollout_time,)

    def _update(self, samples: list[Sample], adv: list[Optional[float]], settings: Any, lr: float) -> dict[str, Any]:
        return update.update(self, samples, adv, settings, lr)

    # -- evaluation, forks, snapshots, resume ----------------------------------------------
    def evaluate(self, split: str = "validation", *, strict: bool = True, limit: Optional[int] = None,
                 policy: Any = None, policy_version: Optional[int] = None) -> EvalResult:
        """The strict oracle on ``split`` ("validation" or "test"): seeded by the policy version,
        so the same weights always get the same score."""
        tasks = self.splits.get(split, [])
        if limit is not None:
            tasks = tasks[:limit]
        version = self.policy_version if policy_version is None else policy_version
        return evaluate_policy(policy or self.policy, self.domain, tasks, self.eval_cfg, self.rl,
                               seed=self.seed * 1_000_003 + version, oracle=self.oracle, strict=strict, split=split)

    def fork(self, seed: Optional[int] = None) -> "RLSession":
        return snapshots.fork(self, seed)

    def weights_bytes(self, *, with_optimizer: bool = True) -> bytes:
        return snapshots.weights_bytes(self, with_optimizer=with_optimizer)

    def load_weights_bytes(self, data: bytes) -> None:
        snapshots.load_weights_bytes(self, data)

    def detached_policy(self, data: bytes) -> Any:
        return snapshots.detached_policy(self, data)

    def restore(self, data: bytes, policy_version: int) -> None:
        snapshots.restore(self, data, policy_version)

    def resume_state(self) -> dict[str, Any]:
        return resume.resume_state(self)

    def load_resume_state(self, d: Mapping[str, Any]) -> None:
        resume.load_resume_state(self, d)
