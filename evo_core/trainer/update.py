"""The policy update of one step: GRPO-family loss over ``updates_per_step`` minibatches,
gradient accumulation over ``micro_batch_size``, the KL reference, grad clipping and the
optimizer step; in process, over ranks (each backpropagates its slice with the global
normalisers) or through DeepSpeed ZeRO.

Returns the update's statistics (loss, clip fraction, entropy, KL, grad norm, tokens, time)
and each trained item's mean entropy."""

from __future__ import annotations

import copy
import time
from typing import Any, Optional

from evo_core.trainer.episodes import generated_mask
from evo_core.trainer.grpo import LossSettings, pg_loss
from evo_core.trainer.protocols import Sample


def reference_policy(s: Any) -> Any:
    """The frozen KL reference (built once, from ``ref_state``)."""
    if s._ref_policy is None:
        if s.ref_state is None:  # KL switched on mid-run: anchor to the weights at that moment
            s.ref_state = s.policy.state_dict()
        s._ref_policy = copy.deepcopy(s.policy)
        s._ref_policy.load_state_dict(s.ref_state)
        for p in s._ref_policy.model.parameters():
            p.requires_grad_(False)
    return s._ref_policy


def update(s: Any, samples: list[Sample], adv: list[Optional[float]], settings: LossSettings,
           lr: float) -> dict[str, Any]:
    import torch

    idx = [i for i, a in enumerate(adv) if a is not None and len(samples[i].token_ids) > 0]
    out: dict[str, Any] = {"updated": False, "entropy_by_item": {}, "tokens": 0, "time": 0.0}
    if not idx:
        return out
    t0 = time.perf_counter()
    zero = s.zero
    model = s.policy.model if zero is None else zero.module
    model.train()
    scorer = s.policy if zero is None else zero.scorer  # ZeRO-3: the engine's partitioned module
    for g in s.optimizer.param_groups:  # under ZeRO, AdamW's groups over the flat partitions
        g["lr"] = lr
    n_up = max(1, min(s.rl.updates_per_step, len(idx)))
    perm = list(idx)
    if n_up > 1:
        s.rng.shuffle(perm)
    minibatches = [perm[j::n_up] for j in range(n_up)]
    if s.dist is not None:  # each rank backpropagates its slice; the loss keeps the global normalisers
        from evo_core.trainer.shard import my_slice

        mine = [my_slice(s.dist, mb) for mb in minibatches]
    else:
        mine = minibatches
    old: dict[int, Any] = {}
    ref: dict[int, Any] = {}
    need_ref = settings.kl_coef > 0
    # not under ZeRO-3, whose partitioned parameters this path has not been run with
    share = s.rl.shared_prompt_forward and zero is None
    if n_up > 1 or need_ref:
        with torch.no_grad():
            for mb in micro(s.rl, idx if s.dist is None else sorted(i for m in mine for i in m)):
                p_ids = [samples[i].prompt_ids for i in mb]
                c_ids = [samples[i].token_ids for i in mb]
                if n_up > 1:
                    lp, _, _ = s.policy.score(p_ids, c_ids, share_prompts=share)
                    for r, i in enumerate(mb):
                        old[i] = lp[r]
                if need_ref:
                    lp, _, _ = reference_policy(s).score(p_ids, c_ids, share_prompts=share)
                    for r, i in enumerate(mb):
                        ref[i] = lp[r]
    tot = {"loss": 0.0, "clipped": 0.0, "kl": 0.0, "tokens": 0.0, "ent": 0.0, "grad_norm": 0.0}
    for mb_all, mb_mine in zip(minibatches, mine):
        n_tokens = float(sum(samples[i].n_generated for i in mb_all))
        micros = micro(s.rl, mb_mine)
        if zero is None:
            s.optimizer.zero_grad(set_to_none=True)
        else:  # every rank runs as many backwards as the rank with the most micro-batches
            n_micro = most_micro_batches(s, mb_all)
        for j, mb in enumerate(micros):
            p_ids = [samples[i].prompt_ids for i in mb]
            c_ids = [samples[i].token_ids for i in mb]
            logp, mask, ent = scorer.score(p_ids, c_ids, with_entropy=True, share_prompts=share)
            T = logp.shape[1]
            gen = generated_mask([samples[i] for i in mb], T, mask)
            if gen is not None:  # an episode: the environment's tokens get no loss, KL or entropy
                mask, ent = mask * gen, ent * gen
            old_lp = torch.stack([pad(old[i], T) for i in mb]) if n_up > 1 else logp.detach()
            ref_lp = torch.stack([pad(ref[i], T) for i in mb]) if need_ref else None
            a = torch.tensor([float(adv[i]) for i in mb], dtype=logp.dtype, device=logp.device)  # type: ignore[arg-type]
            loss, st = pg_loss(logp, old_lp, a, mask, settings, ref_logp=ref_lp, n_seqs=len(mb_all), n_tokens=n_tokens)
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
        if s.dist is not None:
            s.dist.sum_grads(params)
        gn = torch.nn.utils.clip_grad_norm_(params, s.rl.grad_clip if s.rl.grad_clip > 0 else float("inf"))
        tot["grad_norm"] += float(gn)
        s.optimizer.step()
    model.eval()
    if s.dist is not None:
        from evo_core.trainer.shard import reduce_update_stats

        reduce_update_stats(s.dist, tot, out["entropy_by_item"])
    toks = tot["tokens"]
    out.update(updated=True, time=time.perf_counter() - t0, loss=tot["loss"] / n_up,
               clip_frac=tot["clipped"] / max(toks, 1), entropy=tot["ent"] / max(toks, 1),
               kl=(tot["kl"] / max(toks, 1)) if need_ref else None, grad_norm=tot["grad_norm"] / n_up,
               tokens=sum(len(samples[i].prompt_ids) + len(samples[i].token_ids) for i in idx) * n_up,
               n_seqs=len(idx))
    return out


def micro(rl: Any, idx: list[int]) -> list[list[int]]:
    if not idx:  # a rank's share of a small minibatch can be empty
        return []
    m = rl.micro_batch_size or len(idx)
    return [idx[j:j + m] for j in range(0, len(idx), m)]


def most_micro_batches(s: Any, minibatch: list[int]) -> int:
    """The micro-batches of the rank with the largest share of ``minibatch`` (every rank
    computes the same number: the shares are a function of the minibatch and the world)."""
    if s.dist is None:
        return len(micro(s.rl, minibatch))
    from evo_core.trainer.ranks import share_of

    return max(len(micro(s.rl, minibatch[lo:hi]))
               for lo, hi in (share_of(len(minibatch), r, s.dist.world_size) for r in range(s.dist.world_size)))


def pad(t: Any, T: int) -> Any:
    import torch

    if t.shape[0] >= T:
        return t[:T]
    return torch.cat([t, t.new_zeros(T - t.shape[0])])
