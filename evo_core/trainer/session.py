"""``RLSession``: the live GRPO-family trainer.

One RL step: task weights → prompt hints → hyperparameters → sampling and verification →
generic response features → the strict-oracle audit → rewards and masks → advantages and
the update. At each stage the core applies the active interventions first
(``evo_core.interventions``), then the plugins' trainer hooks (``evo_core.hookspecs``). The
session never writes to the log: the run loop turns a ``StepResult`` into events
(``evo_core.trainer.step_events``), and the trainer port forks sessions for online backtests.
"""

from __future__ import annotations

import copy
import hashlib
import math
import random
import time
from typing import Any, Mapping, Optional, Sequence

import attrs
import structlog

from evo_core.api import Completion, RolloutBatch, RolloutItem, Task
from evo_core.harness.features import features_for_group
from evo_core.interventions import InterventionApplier
from evo_core.trainer.engine import InProcessEngine
from evo_core.trainer.episodes import generated_mask
from evo_core.trainer.evaluation import VerifierFailed, batch_method, evaluate_policy, grade, grade_many  # noqa: F401 (VerifierFailed: re-exported)
from evo_core.trainer.grpo import LossSettings, group_advantages, overlong_penalty, pg_loss, resolve
from evo_core.trainer.protocols import EvalResult, Sample, SamplingParams

log = structlog.get_logger("evo.trainer")

HYPERPARAMETER_KEYS = ("temperature", "top_p", "max_new_tokens", "clip_low", "clip_high", "kl_coef", "lr",
                       "lr_scale", "overlong", "overlong_buffer", "overlong_penalty", "group_size",
                       "prompts_per_step", "dynamic_sampling", "stop")


@attrs.define
class DataCursor:
    """The data position: a seeded permutation per epoch and an index into it. Uniform
    sampling walks the permutation (no repeats within an epoch); when a curriculum hook
    returns weights, tasks are drawn by weight from ``rng`` instead."""

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


def _mean(xs: Sequence[float]) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


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
        # the training reward: the domain's verifier, or its strict oracle (the no-flaw reference)
        self.verifier = domain.oracle if reward == "oracle" else domain.verify
        self.verifier_batch = batch_method(domain, "oracle" if reward == "oracle" else "verify")  # optional
        # [rl] rollout = "episode": each rollout is one multi-turn episode the domain runs
        self.episodes = getattr(rl, "rollout", "single") == "episode"
        if self.episodes:
            from evo_core.api import supports_episodes

            if not supports_episodes(domain):
                raise ValueError(f"rl.rollout = 'episode', but domain {getattr(domain, 'name', domain)!r} has no "
                                 "run_episode")
        self.train_tasks = list(train_tasks)
        self.splits = {"validation": list(validation_tasks), "test": list(test_tasks)}
        self.rl = rl
        self.eval_cfg = eval_cfg
        self.seed = seed
        self.total_steps = total_steps
        self.plugins = plugins
        self.interventions = InterventionApplier(plugins.interventions() if plugins is not None else {})
        self.audit_rate = audit_rate
        self.audit_min = audit_min
        self.regrade_rate = regrade_rate
        self.loss_settings, self.scale_rewards, self.dynamic_sampling = resolve(rl)
        self.step = 0
        self.policy_version = 0
        self.max_version = 0
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

    # -- schedule --------------------------------------------------------------------------
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

    # -- the stages where interventions and hooks act ----------------------------------------
    def _task_weights(self, state: Any, step: int) -> Optional[list[float]]:
        found = [self.interventions.task_weights(self.train_tasks, state)]
        if self.plugins is not None:
            found += self.plugins.task_weights(self.train_tasks, state, step)
        weights = None
        for res in found:
            if not res:
                continue
            weights = weights or [1.0] * len(self.train_tasks)
            for i, t in enumerate(self.train_tasks):
                weights[i] *= float(res.get(t.task_id, 1.0))
        return weights

    def _hyperparameters(self, state: Any, step: int) -> dict[str, Any]:
        rl = self.rl
        hp: dict[str, Any] = {
            "temperature": rl.temperature, "top_p": rl.top_p, "max_new_tokens": rl.max_new_tokens,
            "clip_low": self.loss_settings.clip_low, "clip_high": self.loss_settings.clip_high,
            "kl_coef": rl.kl_coef, "lr": rl.lr, "lr_scale": 1.0, "overlong": rl.overlong,
            "overlong_buffer": rl.overlong_buffer, "overlong_penalty": rl.overlong_penalty,
            "group_size": rl.group_size, "prompts_per_step": rl.prompts_per_step,
            "dynamic_sampling": self.dynamic_sampling, "stop": list(rl.stop),
        }
        found = [self.interventions.hyperparameters(hp, state)]
        if self.plugins is not None:
            found += self.plugins.hyperparameters(dict(hp), state, step)
        for res in found:
            for k, v in dict(res or {}).items():
                if k in HYPERPARAMETER_KEYS:
                    hp[k] = v
                else:
                    log.warning("unknown hyperparameter override ignored", key=k)
        return hp

    def _prompt(self, task: Task, state: Any) -> str:
        hints = self.interventions.prompt_hints(task, state)
        if self.plugins is not None:
            hints += self.plugins.prompt_hints(task, state)
        return ("\n".join(hints) + "\n" + task.prompt) if hints else task.prompt

    # -- one RL step -----------------------------------------------------------------------
    def rl_step(self, state: Any = None) -> StepResult:
        import contextlib

        t0 = time.perf_counter()
        step = self.step + 1
        capture = self.plugins.capture_failures() if self.plugins is not None else contextlib.nullcontext([])
        with capture as failures:
            weights = self._task_weights(state, step)
            hp = self._hyperparameters(state, step)  # before choosing tasks: prompts_per_step may change
            chosen = [self.train_tasks[i] for i in self.cursor.take(int(hp["prompts_per_step"]), weights, self.rng)]
            items, samples, rollout_time = self._collect(chosen, hp, state, step, 0)
            # DAPO dynamic sampling with refill: sample more groups until the batch holds
            # ``prompts_per_step`` groups with a learning signal (or the rounds run out)
            rounds = 0
            target = len(chosen)
            if hp["dynamic_sampling"] and self.rl.dynamic_sampling_rounds > 0:
                while rounds < self.rl.dynamic_sampling_rounds:
                    have = len(_informative_groups(items))
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
                keep = _informative_groups(items)[:target] if rounds else None  # a refilled batch is trimmed to size
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
        metrics = self._metrics(items, samples, adv, zero_var, upd, rollout_time, lr)
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
        prompts = [self._prompt(t, state) for t in chosen]
        G = int(hp["group_size"])
        params = SamplingParams(n=G, temperature=float(hp["temperature"]), top_p=float(hp["top_p"]),
                                max_new_tokens=int(hp["max_new_tokens"]), stop=tuple(hp["stop"]))
        if self.episodes:
            if self.dist is not None:
                raise RuntimeError("episode rollouts ([rl] rollout = 'episode') run on one rank only so far")
            ts = time.perf_counter()
            groups, completions, stats = self._run_episodes(chosen, params)
            rollout_time = time.perf_counter() - ts
            items, samples = self._graded(chosen, groups, step, group_offset, completions, stats)
        elif self.dist is None:
            ts = time.perf_counter()
            groups = self.engine.generate(prompts, params, generator=self.gen)
            rollout_time = time.perf_counter() - ts
            items, samples = self._graded(chosen, groups, step, group_offset)
        else:  # this rank samples and grades its slice; every rank gets the whole batch back
            from evo_core.trainer.shard import sharded_rollouts

            items, samples, rollout_time = sharded_rollouts(self, chosen, prompts, params, step, group_offset)
        return self._rewarded(items, samples, hp, state, step) + (rollout_time,)

    def _run_episodes(self, chosen: Sequence[Task], params: SamplingParams
                      ) -> tuple[list[list[Sample]], list[list[Completion]], list[list[dict[str, Any]]]]:
        """G episodes per task, one after another, each with the current policy as the agent
        (``evo_core.trainer.episodes``): the conversation as one sample, the final completion
        and the episode's stats."""
        from evo_core.trainer.episodes import run_episode_groups

        return run_episode_groups(self.engine, self.domain, chosen, params, encode=self.policy.tokenizer.encode,
                                  generator=self.gen, max_turns=int(getattr(self.rl, "episode_max_turns", 0) or 0))

    def _graded(self, chosen: Sequence[Task], groups: Sequence[Sequence[Sample]], step: int,
                group_offset: int, completions: Optional[Sequence[Sequence[Completion]]] = None,
                episode_stats: Optional[Sequence[Sequence[Mapping[str, Any]]]] = None
                ) -> tuple[list[RolloutItem], list[Sample]]:
        """Features and the training verifier's verdicts for sampled groups (``chosen[i]``
        is group ``group_offset + i`` of the step). Episodes bring their final completions
        (with turns) and stats; the stats join the verdict's signals where it has none."""
        items: list[RolloutItem] = []
        samples: list[Sample] = []
        # every completion of the call is graded at once (a domain with a batch verifier uses it)
        comps = ([[Completion(text=s.text, truncated=s.truncated, n_tokens=len(s.token_ids)) for s in group]
                  for group in groups] if completions is None else [list(cs) for cs in completions])
        verdicts = iter(grade_many(self.verifier, self.verifier_batch, self.domain,
                                   [(task, c) for task, cs in zip(chosen, comps) for c in cs]))
        for gi, (task, group) in enumerate(zip(chosen, groups)):
            gid = f"s{step}g{group_offset + gi}"
            tf = time.perf_counter()
            feats = features_for_group([s.text for s in group], task.prompt, [s.n_generated for s in group],
                                       [s.truncated for s in group])
            self.features_s += time.perf_counter() - tf
            for j, (s, f) in enumerate(zip(group, feats)):
                comp = comps[gi][j]
                verdict = next(verdicts)
                if episode_stats is not None and episode_stats[gi][j]:
                    verdict = attrs.evolve(verdict, signals={**episode_stats[gi][j], **verdict.signals})
                rid = hashlib.sha256(f"{self.id_salt}:{step}:{gid}:{j}".encode()).hexdigest()[:32]
                items.append(RolloutItem(rollout_id=rid, group_id=gid, task=task, completion=comp,
                                         verdict=verdict, reward=verdict.reward, mask=verdict.reward is not None,
                                         features=f))
                samples.append(s)
        return items, samples

    def _rewarded(self, items: list[RolloutItem], samples: list[Sample], hp: dict[str, Any], state: Any,
                  step: int) -> tuple[list[RolloutItem], list[Sample]]:
        """The audit, the interventions' and plugins' rewards and masks, overlong shaping."""
        self._audit(items)
        batch = RolloutBatch(step=step, items=items, hyperparameters=hp, regrade=self._regrader(len(items)))
        raw = [it.reward for it in items]
        self.interventions.rewards_and_masks(batch, state)
        if self.plugins is not None:
            self.plugins.transform_rewards(batch, state)
        for it, r in zip(items, raw):
            if r is None:  # an infrastructure error is never turned into a score
                it.reward, it.mask = None, False
        if self.plugins is not None:
            self.plugins.filter_rollouts(batch, state)
        if hp["overlong"] == "filter":
            for it in items:
                if it.completion.truncated:
                    it.mask = False
        elif hp["overlong"] == "soft":
            for it, s in zip(items, samples):
                if it.reward is not None:
                    it.reward += overlong_penalty(s.n_generated, int(hp["max_new_tokens"]),
                                                  int(hp["overlong_buffer"]), float(hp["overlong_penalty"]))
        return items, samples

    def _audit(self, items: list[RolloutItem]) -> None:
        """Label a sample of rollouts with the strict oracle (evidence for the harness)."""
        n = len(items)
        k = min(n, max(int(round(self.audit_rate * n)), self.audit_min if self.audit_rate > 0 else 0))
        chosen = range(n) if k >= n else sorted(self.rng.sample(range(n), k))
        todo = [items[i] for i in chosen if items[i].verdict.reward is not None]
        strict = grade_many(self.domain.oracle, batch_method(self.domain, "oracle"), self.domain,
                            [(it.task, it.completion) for it in todo])
        for it, v in zip(todo, strict):
            it.strict = v

    def _regrader(self, n: int) -> Any:
        """The oracle for re-grades within this step's budget; None once it is spent."""
        budget = [int(math.ceil(self.regrade_rate * n))]

        def regrade(item: RolloutItem) -> Optional[float]:
            if item.strict is None:
                if budget[0] <= 0:
                    return None
                budget[0] -= 1
                item.strict = grade(self.domain.oracle, self.domain, item.task, item.completion)
            return item.strict.reward

        return regrade

    def _ref(self) -> Any:
        if self._ref_policy is None:
            if self.ref_state is None:  # KL switched on mid-run: anchor to the weights at that moment
                self.ref_state = self.policy.state_dict()
            self._ref_policy = copy.deepcopy(self.policy)
            self._ref_policy.load_state_dict(self.ref_state)
            for p in self._ref_policy.model.parameters():
                p.requires_grad_(False)
        return self._ref_policy

    def _update(self, samples: list[Sample], adv: list[Optional[float]], s: LossSettings, lr: float) -> dict[str, Any]:
        import torch

        idx = [i for i, a in enumerate(adv) if a is not None and len(samples[i].token_ids) > 0]
        out: dict[str, Any] = {"updated": False, "entropy_by_item": {}, "tokens": 0, "time": 0.0}
        if not idx:
            return out
        t0 = time.perf_counter()
        zero = self.zero
        model = self.policy.model if zero is None else zero.module
        model.train()
        scorer = self.policy if zero is None else zero.scorer  # ZeRO-3: the engine's partitioned module
        for g in self.optimizer.param_groups:  # under ZeRO, AdamW's groups over the flat partitions
            g["lr"] = lr
        n_up = max(1, min(self.rl.updates_per_step, len(idx)))
        perm = list(idx)
        if n_up > 1:
            self.rng.shuffle(perm)
        minibatches = [perm[j::n_up] for j in range(n_up)]
        if self.dist is not None:  # each rank backpropagates its slice; the loss keeps the global normalisers
            from evo_core.trainer.shard import my_slice

            mine = [my_slice(self.dist, mb) for mb in minibatches]
        else:
            mine = minibatches
        old: dict[int, Any] = {}
        ref: dict[int, Any] = {}
        need_ref = s.kl_coef > 0
        # not under ZeRO-3, whose partitioned parameters this path has not been run with
        share = self.rl.shared_prompt_forward and zero is None
        if n_up > 1 or need_ref:
            with torch.no_grad():
                for mb in self._micro(idx if self.dist is None else sorted(i for m in mine for i in m)):
                    p_ids = [samples[i].prompt_ids for i in mb]
                    c_ids = [samples[i].token_ids for i in mb]
                    if n_up > 1:
                        lp, _, _ = self.policy.score(p_ids, c_ids, share_prompts=share)
                        for r, i in enumerate(mb):
                            old[i] = lp[r]
                    if need_ref:
                        lp, _, _ = self._ref().score(p_ids, c_ids, share_prompts=share)
                        for r, i in enumerate(mb):
                            ref[i] = lp[r]
        tot = {"loss": 0.0, "clipped": 0.0, "kl": 0.0, "tokens": 0.0, "ent": 0.0, "grad_norm": 0.0}
        for mb_all, mb_mine in zip(minibatches, mine):
            n_tokens = float(sum(samples[i].n_generated for i in mb_all))
            micros = self._micro(mb_mine)
            if zero is None:
                self.optimizer.zero_grad(set_to_none=True)
            else:  # every rank runs as many backwards as the rank with the most micro-batches
                n_micro = self._most_micro_batches(mb_all)
            for j, mb in enumerate(micros):
                p_ids = [samples[i].prompt_ids for i in mb]
                c_ids = [samples[i].token_ids for i in mb]
                logp, mask, ent = scorer.score(p_ids, c_ids, with_entropy=True, share_prompts=share)
                T = logp.shape[1]
                gen = generated_mask([samples[i] for i in mb], T, mask)
                if gen is not None:  # an episode: the environment's tokens get no loss, KL or entropy
                    mask, ent = mask * gen, ent * gen
                old_lp = torch.stack([_pad(old[i], T) for i in mb]) if n_up > 1 else logp.detach()
                ref_lp = torch.stack([_pad(ref[i], T) for i in mb]) if need_ref else None
                a = torch.tensor([float(adv[i]) for i in mb], dtype=logp.dtype, device=logp.device)  # type: ignore[arg-type]
                loss, st = pg_loss(logp, old_lp, a, mask, s, ref_logp=ref_lp, n_seqs=len(mb_all), n_tokens=n_tokens)
                if zero is None:
                    loss.backward()
                else:
                    zero.backward(loss, boundary=j == n_micro - 1)
                tot["loss"] += float(loss.item())
                tot["clipped"] += st["clipped_tokens"]
                tot["kl"] += st["kl_sum"]
                tot["tokens"] += float(mask.sum().item())
                with torch.no_grad():
                    tot["ent"] += float(ent.sum().item())
                    per_seq = (ent.sum(-1) / mask.sum(-1).clamp(min=1)).tolist()
                for r, i in enumerate(mb):
                    out["entropy_by_item"][i] = round(per_seq[r], 5)
            if zero is not None:  # DeepSpeed reduces, clips (rl.grad_clip) and steps
                for j in range(len(micros), n_micro):
                    zero.pad_backward(samples[mb_all[0]], boundary=j == n_micro - 1)
                tot["grad_norm"] += zero.step()
                continue
            params = [p for p in model.parameters() if p.requires_grad]
            if self.dist is not None:
                self.dist.sum_grads(params)
            gn = torch.nn.utils.clip_grad_norm_(params, self.rl.grad_clip if self.rl.grad_clip > 0 else float("inf"))
            tot["grad_norm"] += float(gn)
            self.optimizer.step()
        model.eval()
        if self.dist is not None:
            from evo_core.trainer.shard import reduce_update_stats

            reduce_update_stats(self.dist, tot, out["entropy_by_item"])
        toks = tot["tokens"]
        out.update(updated=True, time=time.perf_counter() - t0, loss=tot["loss"] / n_up,
                   clip_frac=tot["clipped"] / max(toks, 1), entropy=tot["ent"] / max(toks, 1),
                   kl=(tot["kl"] / max(toks, 1)) if need_ref else None, grad_norm=tot["grad_norm"] / n_up,
                   tokens=sum(len(samples[i].prompt_ids) + len(samples[i].token_ids) for i in idx) * n_up,
                   n_seqs=len(idx))
        return out

    def _micro(self, idx: list[int]) -> list[list[int]]:
        if not idx:  # a rank's share of a small minibatch can be empty
            return []
        m = self.rl.micro_batch_size or len(idx)
        return [idx[j:j + m] for j in range(0, len(idx), m)]

    def _most_micro_batches(self, minibatch: list[int]) -> int:
        """The micro-batches of the rank with the largest share of ``minibatch`` (every rank
        computes the same number: the shares are a function of the minibatch and the world)."""
        if self.dist is None:
            return len(self._micro(minibatch))
        from evo_core.trainer.ranks import share_of

        return max(len(self._micro(minibatch[lo:hi]))
                   for lo, hi in (share_of(len(minibatch), r, self.dist.world_size) for r in range(self.dist.world_size)))

    def _metrics(self, items: list[RolloutItem], samples: list[Sample], adv: list[Optional[float]],
                 zero_var: set[str], upd: dict[str, Any], rollout_time: float, lr: float) -> dict[str, Optional[float]]:
        graded = [it for it in items if it.reward is not None]
        rewards = [float(it.reward) for it in graded]  # type: ignore[arg-type]
        raw = [float(it.verdict.reward) for it in items if it.verdict.reward is not None]
        mean = _mean(rewards)
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards)) if rewards and mean is not None else None
        audited = [it for it in items if it.strict is not None and it.strict.correct is not None]
        lens = [s.n_generated for s in samples]
        correct_len = [s.n_generated for it, s in zip(items, samples) if it.verdict.correct]
        wrong_len = [s.n_generated for it, s in zip(items, samples) if it.verdict.correct is False]
        groups = {it.group_id for it in items}
        gen_tokens = sum(lens)
        m: dict[str, Optional[float]] = {
            "reward_mean": mean, "reward_std": std, "reward_raw_mean": _mean(raw),
            "strict_correct_rate": _mean([1.0 if it.strict.correct else 0.0 for it in audited]),  # type: ignore[union-attr]
            "audited": float(len(audited)),
            "length_mean": _mean([float(x) for x in lens]),
            "length_correct": _mean([float(x) for x in correct_len]),
            "length_incorrect": _mean([float(x) for x in wrong_len]),
            "truncation_rate": _mean([1.0 if s.truncated else 0.0 for s in samples]),
            "infra_error_rate": _mean([1.0 if it.verdict.reward is None else 0.0 for it in items]),
            "masked_frac": _mean([0.0 if (a is not None) else 1.0 for a in adv]),
            "zero_var_frac": len(zero_var) / len(groups) if groups else None,
            "entropy": upd.get("entropy"), "clip_frac": upd.get("clip_frac"), "kl": upd.get("kl"),
            "loss": upd.get("loss"), "grad_norm": upd.get("grad_norm"), "lr": lr,
            "rollout_time_s": rollout_time, "update_time_s": upd.get("time"),
            "rollout_tokens_per_s": gen_tokens / rollout_time if rollout_time > 0 else None,
            "update_tokens_per_s": (upd["tokens"] / upd["time"]) if upd.get("time") else None,
            "n_rollouts": float(len(items)),
        }
        sig: dict[str, list[float]] = {}
        for it in items:
            for k, v in it.verdict.signals.items():
                if isinstance(v, (bool, int, float)):
                    sig.setdefault(k, []).append(float(v))
        for k, vs in sig.items():
            m[f"signal_{k}"] = _mean(vs)
        return m

    # -- evaluation, forks, snapshots ------------------------------------------------------
    def evaluate(self, split: str = "validation", *, strict: bool = True, limit: Optional[int] = None,
                 policy: Any = None, policy_version: Optional[int] = None) -> EvalResult:
        """The strict oracle on ``split`` ("validation" or "test"): seeded by the policy version,
        so the same weights always get the same score."""
        tasks = self.splits.get(split, [])
        if limit is not None:
            tasks = tasks[:limit]
        version = self.policy_version if policy_version is None else policy_version
        return evaluate_policy(policy or self.policy, self.domain, tasks, self.eval_cfg, self.rl,
                               seed=self.seed * 1_000_003 + version, strict=strict, split=split)

    def fork(self, seed: Optional[int] = None) -> "RLSession":
        """An independent copy: weights, optimizer, data position and RNG (reseeded when
        ``seed`` is given: two forks with the same seed draw the same random numbers)."""
        import torch

        new = copy.copy(self)
        new.policy = copy.deepcopy(self.policy)
        new.engine = InProcessEngine(new.policy)
        if self.zero is not None:  # a new engine (every rank forks), loaded with this rank's shard in memory
            new.zero = self.zero.fork(new.policy)
            new.optimizer = new.zero.optimizer
        else:
            new.optimizer = new._make_optimizer()
            new.optimizer.load_state_dict(copy.deepcopy(self.optimizer.state_dict()))
        new.gen = torch.Generator(device="cpu")
        new.rng = random.Random()
        if seed is None:
            new.gen.set_state(self.gen.get_state())
            new.rng.setstate(self.rng.getstate())
        else:
            new.gen.manual_seed(seed)
            new.rng.seed(f"fork:{seed}")
            new.id_salt = f"{self.id_salt}/fork-{seed}"
        new.cursor = attrs.evolve(self.cursor)
        new._ref_policy = None
        return new

    def weights_bytes(self, *, with_optimizer: bool = True) -> bytes:
        """The weights (and optimizer state), serialised: what a main-line snapshot stores."""
        import io

        import torch

        snap: dict[str, Any] = {"model": self.policy.state_dict(), "policy_version": self.policy_version,
                                "optimizer": None}
        if with_optimizer and self.zero is None:
            snap["optimizer"] = self.optimizer.state_dict()
        elif with_optimizer:  # every rank's shard, gathered here (a collective: rank 0 asks them all)
            snap["zero_optimizer"] = {**self.zero.layout(), "shards": self.optimizer_shards()}
        buf = io.BytesIO()
        torch.save(snap, buf)
        return buf.getvalue()

    def optimizer_shards(self) -> Optional[list[Any]]:
        """Under ZeRO, every rank's optimizer shard, in rank order, on rank 0 (None elsewhere)."""
        mine = self.zero.shard_state()
        return [mine] if self.dist is None else self.dist.gather(mine)

    def load_weights_bytes(self, data: bytes) -> None:
        import io

        import torch

        snap = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
        self.policy.load_state_dict(snap["model"])
        if self.zero is not None:
            self._zero_loaded(snap, "snapshot")
        elif snap.get("optimizer") is not None:
            self.optimizer.load_state_dict(snap["optimizer"])

    def _zero_loaded(self, d: Mapping[str, Any], what: str) -> None:
        """After the policy's weights were loaded from ``d``: this rank's optimizer shard from
        ``d`` (snapshots carry all of them; resume checkpoints name one file per rank), or, when
        ``d`` has no optimizer state, ZeRO's master weights from the loaded ones."""
        zo = d.get("zero_optimizer")
        if zo is None:
            if d.get("optimizer") is not None:
                raise RuntimeError(f"this {what} holds an unsharded optimizer state (a run without ZeRO); "
                                   "a ZeRO session cannot load it")
            self.zero.weights_changed()
            return
        if int(zo["world_size"]) != self.zero.world_size or int(zo["stage"]) != self.zero.stage:
            raise RuntimeError(f"this {what}'s optimizer state is sharded for ZeRO-{zo['stage']} over {zo['world_size']} "
                               f"ranks, but this launch runs ZeRO-{self.zero.stage} over {self.zero.world_size}: "
                               "use the layout the run started with")
        if "shards" in zo:
            shards = list(zo["shards"])
        else:
            from evo_core.checkpoints import load_shard

            r = self.zero.rank
            shards = [None] * self.zero.world_size
            shards[r] = load_shard(zo["files"][r], zo["sha256"][r])
        self.zero.load_shards(shards)

    def detached_policy(self, data: bytes) -> Any:
        """A copy of the policy with a snapshot's weights (to evaluate it; training is untouched)."""
        import io

        import torch

        policy = copy.deepcopy(self.policy)
        policy.load_state_dict(torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)["model"])
        return policy

    def restore(self, data: bytes, policy_version: int) -> None:
        """Back to a snapshot's weights and optimizer. The step counter, RNG and data position
        keep moving forward, and the restored weights get the new policy version the log named
        (versions name distinct weight histories)."""
        if policy_version != self.max_version + 1:
            raise RuntimeError(f"restore names policy version {policy_version}, but the session's next is "
                               f"{self.max_version + 1}: the log and the session disagree")
        self.load_weights_bytes(data)
        self.max_version = self.policy_version = policy_version

    # -- resume ----------------------------------------------------------------------------
    def resume_state(self) -> dict[str, Any]:
        """Everything a resume needs. Under ZeRO the optimizer state stays sharded: each rank writes
        its shard to a file of this step under ``checkpoint_dir`` (a collective), and the state
        names the files and their sha256 (``zero_optimizer``); the weights are the full ones."""
        d = {"model": self.policy.state_dict(), "optimizer": self.optimizer.state_dict() if self.zero is None else None,
             "gen": self.gen.get_state(), "rng": self.rng.getstate(), "cursor": attrs.asdict(self.cursor),
             "step": self.step, "policy_version": self.policy_version, "max_version": self.max_version,
             "ref_state": self.ref_state}
        if self.zero is not None:
            d["zero_optimizer"] = self._save_shard()
        return d

    def _save_shard(self) -> dict[str, Any]:
        from evo_core.checkpoints import save_shard, shard_path

        if not self.checkpoint_dir:
            raise RuntimeError("a ZeRO session writes resume checkpoints only once checkpoint_dir is set")
        z = self.zero
        path = shard_path(self.checkpoint_dir, self.step, z.rank, z.world_size)
        digest = save_shard(path, z.shard_state())
        found = [(path, digest)] if self.dist is None else self.dist.all_gather((path, digest))
        return {**z.layout(), "files": [p for p, _ in found], "sha256": [h for _, h in found]}

    def load_resume_state(self, d: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(d["model"])
        if self.zero is not None:
            self._zero_loaded(d, "resume checkpoint")
        else:
            self.optimizer.load_state_dict(d["optimizer"])
        self.gen.set_state(d["gen"])
        self.rng.setstate(d["rng"])
        self.cursor = DataCursor(**d["cursor"])
        self.step, self.policy_version, self.max_version = d["step"], d["policy_version"], d["max_version"]
        self.ref_state = d.get("ref_state")
        self._ref_policy = None


def _informative_groups(items: Sequence[RolloutItem]) -> list[str]:
    """Groups (in order) whose valid rewards are not all equal: they carry a learning signal."""
    rewards: dict[str, list[float]] = {}
    for it in items:
        rewards.setdefault(it.group_id, [])
        if it.mask and it.reward is not None:
            rewards[it.group_id].append(float(it.reward))
    return [g for g, rs in rewards.items() if len(rs) > 1 and any(r != rs[0] for r in rs)]


def _pad(t: Any, T: int) -> Any:
    import torch

    if t.shape[0] >= T:
        return t[:T]
    return torch.cat([t, t.new_zeros(T - t.shape[0])])
