"""Optional SFT warm start on the task's reference answers, cached by config hash.

A policy built from scratch cannot do RL on a sparse reward; a few hundred supervised
steps make it competent but imperfect. The checkpoint is cached under
``cache_dir/<key>`` where the key hashes everything that determines the weights (model
config and seed, SFT settings, domain and task source, and a digest of the targets the
domain returns), so the fixed and evolving runs of the quickstart, and any rerun, reuse it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import tempfile
import time
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import structlog

from evo_core.api import Task

log = structlog.get_logger("evo.sft")
SFT_CODE_VERSION = "1"
TARGET_DIGEST_STEPS = 64


def sft_key(parts: Mapping[str, Any]) -> str:
    blob = json.dumps({"v": SFT_CODE_VERSION, **parts}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def reference_target(domain: Any, task: Task, rng: random.Random, options: Mapping[str, Any]) -> Any:
    if hasattr(domain, "sft_target"):  # a string, or an episode transcript as (text, trained) segments
        return domain.sft_target(task, rng, **dict(options))
    if task.gold is None:
        raise ValueError(f"task {task.task_id!r} has no reference answer (gold) for the SFT warm start")
    return str(task.gold)


def target_ids(tok: Any, target: Any) -> tuple[list[int], list[int]]:
    """(token ids + EOS, loss mask) of an SFT target: a string (every token trained), or an
    episode's transcript as ``(text, trained)`` segments, the environment's text untrained."""
    if isinstance(target, str):
        ids = tok.encode(target) + [tok.eos_id]
        return ids, [1] * len(ids)
    ids, mask = [], []
    for text, trained in target:
        piece = tok.encode(str(text))
        ids += piece
        mask += [int(bool(trained))] * len(piece)
    return ids + [tok.eos_id], mask + [1]


def lr_at(step: int, cfg: Any) -> float:
    """Linear warmup, then cosine decay to ``min_lr``; ``step`` counts from 1."""
    if cfg.warmup_steps and step <= cfg.warmup_steps:
        return cfg.lr * step / cfg.warmup_steps
    span = max(cfg.steps - cfg.warmup_steps, 1)
    prog = min((step - cfg.warmup_steps) / span, 1.0)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * prog))


def sft_batches(domain: Any, tasks: Sequence[Task], cfg: Any, *, seed: int) -> Iterator[tuple[list[Task], list[Any]]]:
    """The SFT's (tasks, targets) per step: one seeded stream, shared by training and the cache key."""
    rng = random.Random(f"sft:{seed}")
    for _ in range(cfg.steps):
        batch = [tasks[rng.randrange(len(tasks))] for _ in range(cfg.batch_size)]
        yield batch, [reference_target(domain, t, rng, cfg.options) for t in batch]


def targets_digest(domain: Any, tasks: Sequence[Task], cfg: Any, *, seed: int, steps: int = TARGET_DIGEST_STEPS) -> str:
    """A hash of the first ``steps`` batches of SFT targets. It joins the cache key because the
    config does not pin what a domain's ``sft_target`` returns: a changed plant or reference
    answer must train a new warm start, not load the old one."""
    h = hashlib.sha256()
    for n, (batch, targets) in enumerate(sft_batches(domain, tasks, cfg, seed=seed)):
        if n >= steps:
            break
        for t, target in zip(batch, targets):
            h.update(f"{t.task_id}\x1f{target}\x1e".encode())
    return h.hexdigest()[:16]


def train_sft(policy: Any, domain: Any, tasks: Sequence[Task], cfg: Any, *, seed: int,
              on_step: Optional[Callable[[int, float], None]] = None) -> dict[str, float]:
    """Supervised steps on prompt → reference answer (+EOS). Returns summary metrics."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        params = [p for p in policy.model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        tok = policy.tokenizer
        model = policy.model
        model.train()
        loss_val = float("nan")
        t0 = time.perf_counter()
        for step, (batch, targets) in enumerate(sft_batches(domain, tasks, cfg, seed=seed), 1):
            p_ids = [policy.encode_prompt(t.prompt) for t in batch]
            laid = [target_ids(tok, target) for target in targets]
            c_ids = [ids for ids, _ in laid]
            for g in opt.param_groups:
                g["lr"] = lr_at(step, cfg)
            logp, mask, _ = policy.score(p_ids, c_ids)
            if any(0 in m for _, m in laid):  # an episode's transcript: loss on the policy's turns only
                seg = torch.zeros_like(mask)
                for r, (_, m) in enumerate(laid):
                    seg[r, :len(m)] = torch.tensor(m, dtype=mask.dtype)
                mask = mask * seg
            loss = -(logp * mask).sum() / mask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            loss_val = float(loss.item())
            if on_step is not None:
                on_step(step, loss_val)
        model.eval()
    return {"sft_loss": loss_val, "sft_time_s": time.perf_counter() - t0, "sft_steps": float(cfg.steps)}


def warm_start(policy: Any, domain: Any, tasks: Sequence[Task], cfg: Any, *, seed: int, key_parts: Mapping[str, Any],
               on_step: Optional[Callable[[int, float], None]] = None) -> dict[str, Any]:
    """Load the cached SFT weights for this key, or train and cache them. Returns
    ``{"key", "cached", **metrics}``."""
    import torch

    key = sft_key({**key_parts, "sft": {k: v for k, v in _asdict(cfg).items() if k not in ("cache_dir", "seed")}, "seed": seed,
                   "targets": targets_digest(domain, tasks, cfg, seed=seed)})
    path = os.path.join(cfg.cache_dir, key) if cfg.cache_dir else ""
    weights = os.path.join(path, "weights.pt")
    if path and os.path.exists(weights):
        policy.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        with open(os.path.join(path, "metrics.json")) as fh:
            metrics = json.load(fh)
        log.info("sft warm start loaded from cache", key=key, path=path)
        return {"key": key, "cached": True, **metrics}
    metrics = train_sft(policy, domain, tasks, cfg, seed=seed, on_step=on_step)
    if path:
        # write into a temp dir and rename: a killed run never leaves a half-written cache entry
        os.makedirs(cfg.cache_dir, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=cfg.cache_dir, prefix=".tmp-")
        torch.save(policy.state_dict(), os.path.join(tmp, "weights.pt"))
        with open(os.path.join(tmp, "metrics.json"), "w") as fh:
            json.dump(metrics, fh)
        try:
            os.rename(tmp, path)
        except OSError:  # another process cached the same key first
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("sft warm start trained", key=key, **metrics)
    return {"key": key, "cached": False, **metrics}


def _asdict(cfg: Any) -> dict[str, Any]:
    import attrs

    return attrs.asdict(cfg) if attrs.has(type(cfg)) else dict(cfg)
