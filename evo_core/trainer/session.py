"""``RLSession``: the live GRPO-family trainer (a ``TrainingSession``).

One RL step, in the hook order of ``evo_core.hookspecs``:
``evo_task_weights`` → ``evo_prompt_hint`` → ``evo_hyperparameters`` → sampling and
verification (+ strict-oracle audit) → ``evo_transform_rewards`` → ``evo_filter_rollouts``
→ advantages and the update. The session never writes to the log: the run loop turns a
``StepResult`` into events, and the harness forks sessions for online backtests.
"""

from __future__ import annotations

import copy
import math
import random
import time
import uuid
from typing import Any, Mapping, Optional, Sequence

import attrs
import structlog

from evo_core.api import Completion, RolloutBatch, RolloutItem, Task, Verdict
from evo_core.trainer.engine import InProcessEngine
from evo_core.trainer.grpo import LossSettings, group_advantages, overlong_penalty, pg_loss, resolve
from evo_core.trainer.protocols import EvalResult, Sample, SamplingParams

log = structlog.get_logger("evo.trainer")

HYPERPARAMETER_KEYS = ("temperature", "top_p", "max_new_tokens", "clip_low", "clip_high", "kl_coef", "lr",
                       "lr_scale", "overlong", "overlong_buffer", "overlong_penalty", "group_size",
                       "prompts_per_step", "dynamic_sampling", "stop")


class VerifierFailed(RuntimeError):
    """The domain's training verifier or oracle raised: the run cannot continue."""


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
    def __init__(self, *, policy: Any, domain: Any, train_tasks: Sequence[Task], heldout_tasks: Sequence[Task],
                 rl: Any, eval_cfg: Any, seed: int, total_steps: int, plugins: Any = None,
                 audit_rate: float = 1.0, audit_min: int = 0, engine: Any = None) -> None:
        import torch

        if not train_tasks:
            raise ValueError("no training tasks: check [task] train")
        self.policy = policy
        self.engine = engine if engine is not None else InProcessEngine(policy)
        self.domain = domain
        self.train_tasks = list(train_tasks)
        self.heldout_tasks = list(heldout_tasks)
        self.rl = rl
        self.eval_cfg = eval_cfg
        self.seed = seed
        self.total_steps = total_steps
        self.plugins = plugins
        self.audit_rate = audit_rate
        self.audit_min = audit_min
        self.loss_settings, self.scale_rewards, self.dynamic_sampling = resolve(rl)
        self.step = 0
        self.policy_version = 0
        self.max_version = 0
        self.restored = False
        self.cursor = DataCursor(len(self.train_tasks), seed)
        self.gen = torch.Generator(device="cpu").manual_seed(seed)
        self.rng = random.Random(f"session:{seed}")
        self.optimizer = self._make_optimizer()
        self.ref_state = policy.state_dict() if rl.kl_coef > 0 else None
        self._ref_policy: Any = None

    def _make_optimizer(self) -> Any:
        import torch

        params = [p for p in self.policy.model.parameters() if p.requires_grad]
        return torch.optim.AdamW(params, lr=self.rl.lr, weight_decay=self.rl.weight_decay)

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

    # -- hooks -----------------------------------------------------------------------------
    def _call(self, hook: str, **kw: Any) -> list[Any]:
        return self.plugins.call(hook, **kw) if self.plugins is not None else []

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
        for res in self._call("evo_hyperparameters", params=dict(hp), state=state, step=step):
            for k, v in dict(res).items():
                if k in HYPERPARAMETER_KEYS:
                    hp[k] = v
                else:
                    log.warning("unknown hyperparameter override ignored", key=k)
        return hp

    # -- one RL step -----------------------------------------------------------------------
    def rl_step(self, state: Any = None) -> StepResult:
        import torch

        t0 = time.perf_counter()
        step = self.step + 1
        fail_start = len(self.plugins.failures) if self.plugins is not None else 0
        # 1. curriculum
        weights = None
        for res in self._call("evo_task_weights", tasks=self.train_tasks, state=state, step=step):
            weights = weights or [1.0] * len(self.train_tasks)
            for i, t in enumerate(self.train_tasks):
                weights[i] *= float(res.get(t.task_id, 1.0))
        # 3. hyperparameters (before choosing tasks: prompts_per_step may change)
        hp = self._hyperparameters(state, step)
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
        # 6. advantages
        valid = [it.mask and it.reward is not None for it in items]
        adv, zero_var = group_advantages([it.reward for it in items], [it.group_id for it in items], valid,
                                         scale=self.scale_rewards)
        if hp["dynamic_sampling"]:
            keep = _informative_groups(items)[:target] if rounds else None  # a refilled batch is trimmed to size
            for i, it in enumerate(items):
                if it.group_id in zero_var or (keep is not None and it.group_id not in keep):
                    adv[i] = None
        # 7. update
        settings = attrs.evolve(self.loss_settings, clip_low=float(hp["clip_low"]), clip_high=float(hp["clip_high"]),
                                kl_coef=float(hp["kl_coef"]), norm_len=int(hp["max_new_tokens"]))
        lr = float(hp["lr"]) * float(hp["lr_scale"])
        lr = self.lr_at(step, lr)
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
        failures = list(self.plugins.failures[fail_start:]) if self.plugins is not None else []
        return StepResult(step=step, policy_version=self.policy_version, items=items, samples=samples, extra=extra,
                          metrics=metrics, hyperparameters=hp, failures=failures, updated=upd["updated"], synced=synced)

    def sync_engine(self) -> Optional[Mapping[str, Any]]:
        """Push the current weights to the rollout engine (a no-op in process; a LoRA adapter
        or checkpoint reload for an HTTP/vLLM server). Returns what was synced, if anything."""
        res = self.engine.sync_weights(self.policy, self.policy_version)
        return dict(res) if res else None

    def _collect(self, chosen: list[Task], hp: dict[str, Any], state: Any, step: int,
                 group_offset: int) -> tuple[list[RolloutItem], list[Sample], float]:
        """Prompt hints, sampling, verification, the audit, then the reward and filter hooks
        (once per call: a refill round is its own ``RolloutBatch``)."""
        prompts = []
        for t in chosen:
            hints = [h for h in self._call("evo_prompt_hint", task=t, state=state) if h]
            prompts.append(("\n".join(hints) + "\n" + t.prompt) if hints else t.prompt)
        G = int(hp["group_size"])
        params = SamplingParams(n=G, temperature=float(hp["temperature"]), top_p=float(hp["top_p"]),
                                max_new_tokens=int(hp["max_new_tokens"]), stop=tuple(hp["stop"]))
        ts = time.perf_counter()
        groups = self.engine.generate(prompts, params, generator=self.gen)
        rollout_time = time.perf_counter() - ts
        items: list[RolloutItem] = []
        samples: list[Sample] = []
        for gi, (task, group) in enumerate(zip(chosen, groups)):
            gid = f"s{step}g{group_offset + gi}"
            for s in group:
                comp = Completion(text=s.text, truncated=s.truncated, n_tokens=len(s.token_ids))
                verdict = self._grade(self.domain.verify, task, comp)
                items.append(RolloutItem(rollout_id=uuid.uuid4().hex, group_id=gid, task=task, completion=comp,
                                         verdict=verdict, reward=verdict.reward, mask=verdict.reward is not None))
                samples.append(s)
        self._audit(items)
        # reward transforms and filters (interventions act here)
        batch = RolloutBatch(step=step, items=items, hyperparameters=hp)
        raw = [it.reward for it in items]
        self._call("evo_transform_rewards", batch=batch, state=state)
        for it, r in zip(items, raw):
            if r is None:  # an infrastructure error is never turned into a score
                it.reward, it.mask = None, False
        self._call("evo_filter_rollouts", batch=batch, state=state)
        if hp["overlong"] == "filter":
            for it in items:
                if it.completion.truncated:
                    it.mask = False
        elif hp["overlong"] == "soft":
            for it, s in zip(items, samples):
                if it.reward is not None:
                    it.reward += overlong_penalty(len(s.token_ids), int(hp["max_new_tokens"]),
                                                  int(hp["overlong_buffer"]), float(hp["overlong_penalty"]))
        return items, samples, rollout_time

    def _grade(self, fn: Any, task: Task, comp: Completion) -> Verdict:
        try:
            v = fn(task, comp)
        except Exception as exc:
            name = getattr(self.domain, "name", "?")
            raise VerifierFailed(f"domain {name!r} {getattr(fn, '__name__', 'verifier')} raised on task "
                                 f"{task.task_id!r}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(v, Verdict):
            raise VerifierFailed(f"domain {getattr(self.domain, 'name', '?')!r} returned {type(v).__name__}, not a Verdict")
        return v

    def _audit(self, items: list[RolloutItem]) -> None:
        """Label a sample of rollouts with the strict oracle (evidence for the harness)."""
        n = len(items)
        k = min(n, max(int(round(self.audit_rate * n)), self.audit_min if self.audit_rate > 0 else 0))
        chosen = range(n) if k >= n else sorted(self.rng.sample(range(n), k))
        for i in chosen:
            it = items[i]
            if it.verdict.reward is not None:
                it.strict = self._grade(self.domain.oracle, it.task, it.completion)

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
        model = self.policy.model
        model.train()
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        n_up = max(1, min(self.rl.updates_per_step, len(idx)))
        perm = list(idx)
        if n_up > 1:
            self.rng.shuffle(perm)
        minibatches = [perm[j::n_up] for j in range(n_up)]
        old: dict[int, Any] = {}
        ref: dict[int, Any] = {}
        need_ref = s.kl_coef > 0
        if n_up > 1 or need_ref:
            with torch.no_grad():
                for mb in self._micro(idx):
                    p_ids = [samples[i].prompt_ids for i in mb]
                    c_ids = [samples[i].token_ids for i in mb]
                    if n_up > 1:
                        lp, _, _ = self.policy.score(p_ids, c_ids)
                        for r, i in enumerate(mb):
                            old[i] = lp[r]
                    if need_ref:
                        lp, _, _ = self._ref().score(p_ids, c_ids)
                        for r, i in enumerate(mb):
                            ref[i] = lp[r]
        tot = {"loss": 0.0, "clipped": 0.0, "kl": 0.0, "tokens": 0.0, "ent": 0.0, "grad_norm": 0.0}
        for mb_all in minibatches:
            n_tokens = float(sum(len(samples[i].token_ids) for i in mb_all))
            self.optimizer.zero_grad(set_to_none=True)
            for mb in self._micro(mb_all):
                p_ids = [samples[i].prompt_ids for i in mb]
                c_ids = [samples[i].token_ids for i in mb]
                logp, mask, ent = self.policy.score(p_ids, c_ids, with_entropy=True)
                T = logp.shape[1]
                old_lp = torch.stack([_pad(old[i], T) for i in mb]) if n_up > 1 else logp.detach()
                ref_lp = torch.stack([_pad(ref[i], T) for i in mb]) if need_ref else None
                a = torch.tensor([float(adv[i]) for i in mb], dtype=logp.dtype, device=logp.device)  # type: ignore[arg-type]
                loss, st = pg_loss(logp, old_lp, a, mask, s, ref_logp=ref_lp, n_seqs=len(mb_all), n_tokens=n_tokens)
                loss.backward()
                tot["loss"] += float(loss.item())
                tot["clipped"] += st["clipped_tokens"]
                tot["kl"] += st["kl_sum"]
                tot["tokens"] += float(mask.sum().item())
                with torch.no_grad():
                    tot["ent"] += float(ent.sum().item())
                    per_seq = (ent.sum(-1) / mask.sum(-1).clamp(min=1)).tolist()
                for r, i in enumerate(mb):
                    out["entropy_by_item"][i] = round(per_seq[r], 5)
            params = [p for p in model.parameters() if p.requires_grad]
            gn = torch.nn.utils.clip_grad_norm_(params, self.rl.grad_clip if self.rl.grad_clip > 0 else float("inf"))
            tot["grad_norm"] += float(gn)
            self.optimizer.step()
        model.eval()
        toks = tot["tokens"]
        out.update(updated=True, time=time.perf_counter() - t0, loss=tot["loss"] / n_up,
                   clip_frac=tot["clipped"] / max(toks, 1), entropy=tot["ent"] / max(toks, 1),
                   kl=(tot["kl"] / max(toks, 1)) if need_ref else None, grad_norm=tot["grad_norm"] / n_up,
                   tokens=sum(len(samples[i].prompt_ids) + len(samples[i].token_ids) for i in idx) * n_up,
                   n_seqs=len(idx))
        return out

    def _micro(self, idx: list[int]) -> list[list[int]]:
        m = self.rl.micro_batch_size or len(idx)
        return [idx[j:j + m] for j in range(0, len(idx), m)]

    def _metrics(self, items: list[RolloutItem], samples: list[Sample], adv: list[Optional[float]],
                 zero_var: set[str], upd: dict[str, Any], rollout_time: float, lr: float) -> dict[str, Optional[float]]:
        graded = [it for it in items if it.reward is not None]
        rewards = [float(it.reward) for it in graded]  # type: ignore[arg-type]
        raw = [float(it.verdict.reward) for it in items if it.verdict.reward is not None]
        mean = _mean(rewards)
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards)) if rewards and mean is not None else None
        audited = [it for it in items if it.strict is not None and it.strict.correct is not None]
        lens = [len(s.token_ids) for s in samples]
        correct_len = [len(s.token_ids) for it, s in zip(items, samples) if it.verdict.correct]
        wrong_len = [len(s.token_ids) for it, s in zip(items, samples) if it.verdict.correct is False]
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

    # -- TrainingSession protocol ----------------------------------------------------------
    def train_steps(self, k: int, state: Any) -> list[Mapping[str, Any]]:
        out = []
        for _ in range(k):
            res = self.rl_step(state)
            d = dict(res.metrics)
            d["step"] = res.step
            d["rollouts"] = [rollout_summary(it, s, e) for it, s, e in zip(res.items, res.samples, res.extra)]
            out.append(d)
        return out

    def evaluate(self, split: str = "heldout", *, strict: bool = True, limit: Optional[int] = None) -> EvalResult:
        tasks = self.heldout_tasks if split == "heldout" else self.train_tasks
        if limit is not None:
            tasks = tasks[:limit]
        return evaluate_policy(self.policy, self.domain, tasks, self.eval_cfg, self.rl,
                               seed=self.seed * 1_000_003 + self.policy_version, strict=strict, split=split)

    def fork(self) -> "RLSession":
        import torch

        new = copy.copy(self)
        new.policy = copy.deepcopy(self.policy)
        new.engine = InProcessEngine(new.policy)
        new.optimizer = new._make_optimizer()
        new.optimizer.load_state_dict(copy.deepcopy(self.optimizer.state_dict()))
        new.gen = torch.Generator(device="cpu")
        new.gen.set_state(self.gen.get_state())
        new.rng = random.Random()
        new.rng.setstate(self.rng.getstate())
        new.cursor = attrs.evolve(self.cursor)
        new._ref_policy = None
        return new

    def checkpoint(self) -> dict[str, Any]:
        return {"model": self.policy.state_dict(), "optimizer": copy.deepcopy(self.optimizer.state_dict()),
                "policy_version": self.policy_version}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Back to a snapshot's weights and optimizer. The step counter, RNG and data
        position keep moving forward, and the restored weights get a fresh policy version
        (versions name distinct weight histories in the log)."""
        self.policy.load_state_dict(snapshot["model"])
        self.optimizer.load_state_dict(copy.deepcopy(snapshot["optimizer"]))
        self.max_version += 1
        self.policy_version = self.max_version
        self.restored = True

    # -- resume ----------------------------------------------------------------------------
    def resume_state(self) -> dict[str, Any]:
        return {"model": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "gen": self.gen.get_state(), "rng": self.rng.getstate(), "cursor": attrs.asdict(self.cursor),
                "step": self.step, "policy_version": self.policy_version, "max_version": self.max_version,
                "ref_state": self.ref_state}

    def load_resume_state(self, d: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(d["model"])
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


def rollout_summary(it: RolloutItem, s: Sample, extra: Mapping[str, Any]) -> dict[str, Any]:
    """What a fork reports per rollout (the same fields a logged ``RolloutCompleted`` has)."""
    return {"rollout_id": it.rollout_id, "task_id": it.task.task_id, "group_id": it.group_id,
            "reward": it.verdict.reward, "reward_final": it.reward, "mask": it.mask,
            "correct": it.verdict.correct, "strict_correct": it.strict.correct if it.strict else None,
            "truncated": s.truncated, "length": len(s.token_ids), "response_preview": s.text[:200],
            "signals": dict(it.verdict.signals), **{k: v for k, v in extra.items() if k != "reward_final"}}


def _graded(fn: Any, domain: Any, task: Task, comp: Completion) -> Verdict:
    try:
        return fn(task, comp)
    except Exception as exc:
        raise VerifierFailed(f"domain {getattr(domain, 'name', '?')!r} {getattr(fn, '__name__', 'verifier')} raised on "
                             f"task {task.task_id!r}: {type(exc).__name__}: {exc}") from exc


def evaluate_policy(policy: Any, domain: Any, tasks: Sequence[Task], eval_cfg: Any, rl: Any, *, seed: int,
                    strict: bool = True, split: str = "heldout") -> EvalResult:
    """Held-out evaluation: ``eval_cfg.samples`` sampled completions per item (item score =
    fraction correct under the strict oracle, or the training verifier when ``strict`` is
    False) and, optionally, the greedy completion. Seeded, so it never touches the
    session's RNG."""
    import torch

    max_new = eval_cfg.max_new_tokens or rl.max_new_tokens
    prompts = [t.prompt for t in tasks]
    metrics: dict[str, Optional[float]] = {}
    item_scores: dict[str, float] = {}
    if not tasks:
        return EvalResult(item_scores={}, metrics={}, split=split)
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def score(groups: list[list[Sample]], suffix: str) -> dict[str, float]:
        s_all, v_all, hedged, lens = [], [], [], []
        per_item: dict[str, float] = {}
        for t, group in zip(tasks, groups):
            s_item, v_item = [], []
            for smp in group:
                comp = Completion(text=smp.text, truncated=smp.truncated, n_tokens=len(smp.token_ids))
                sv, vv = _graded(domain.oracle, domain, t, comp), _graded(domain.verify, domain, t, comp)
                s_item.append(1.0 if sv.correct else 0.0)
                v_item.append(float(vv.reward) if vv.reward is not None else 0.0)
                hedged.append(1.0 if sv.signals.get("answer_count", 1) > 1 else 0.0)
                lens.append(float(len(smp.token_ids)))
            s_all += s_item
            v_all += v_item
            per_item[t.task_id] = sum(s_item if strict else v_item) / len(group)
        metrics[f"strict_accuracy{suffix}"] = _mean(s_all)
        metrics[f"train_reward{suffix}"] = _mean(v_all)
        metrics[f"hedge_rate{suffix}"] = _mean(hedged)
        metrics[f"length_mean{suffix}"] = _mean(lens)
        return per_item

    if eval_cfg.samples > 0:
        groups = policy.sample(prompts, SamplingParams(n=eval_cfg.samples, temperature=eval_cfg.temperature,
                                                       max_new_tokens=max_new), generator=gen)
        item_scores = score(groups, "")
    if eval_cfg.greedy:
        groups = policy.sample(prompts, SamplingParams(n=1, temperature=0.0, max_new_tokens=max_new))
        greedy_items = score(groups, "_greedy")
        if not item_scores:
            item_scores = greedy_items
            metrics["strict_accuracy"] = metrics["strict_accuracy_greedy"]
    metrics["samples_per_item"] = float(eval_cfg.samples)
    return EvalResult(item_scores=item_scores, metrics=metrics, split=split)
