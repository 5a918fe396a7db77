"""The data-parallel pieces of an RL step when ``evo run`` runs as several ranks.

Sampling and grading are split by prompt group: the step's prompt draw is the same on every
rank (the data cursor and RNGs are replicated), each rank samples and grades a disjoint
contiguous slice of it, and an all-gather hands the whole batch to every rank. Everything
after that (the audit, reward transforms, advantages, metrics) is computed identically on
every rank, so the ranks never disagree about the batch. The update backpropagates each
rank's slice of every minibatch with the global normalisers, then sums gradients over ranks:
the same gradient a single process computes on the whole batch.

Each group is sampled from a generator seeded by (one draw from the session generator, the
group's index), not from one generator shared by the batch: a group's completions do not
depend on which rank samples it, so a 2-rank run and a 1-rank run sample the same tokens.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Sequence

from evo_core.trainer.grading import graded


def group_seed(base: int, index: int) -> int:
    return int(hashlib.sha256(f"group:{base}:{index}".encode()).hexdigest()[:15], 16)


def my_slice(comm: Any, xs: Sequence[Any]) -> list[Any]:
    lo, hi = comm.share(len(xs))
    return list(xs[lo:hi])


def sharded_rollouts(session: Any, chosen: Sequence[Any], prompts: Sequence[str], params: Any, step: int,
                     group_offset: int) -> tuple[list[Any], list[Any], float]:
    """This rank's groups sampled and graded, then everyone's: (items, samples, rollout time),
    the time being the slowest rank's sampling (what the step waited for)."""
    import torch

    comm = session.dist
    base = int(torch.randint(0, 2**62, (1,), generator=session.gen).item())  # one draw on every rank
    lo, hi = comm.share(len(chosen))
    groups = []
    ts = time.perf_counter()
    for i in range(lo, hi):
        gen = torch.Generator(device="cpu").manual_seed(group_seed(base, group_offset + i))
        groups += session.engine.generate([prompts[i]], params, generator=gen)
    took = time.perf_counter() - ts
    items, samples = graded(session, list(chosen[lo:hi]), groups, step, group_offset + lo)
    parts = comm.all_gather((items, samples, took))
    all_items = [it for p in parts for it in p[0]]
    all_samples = [s for p in parts for s in p[1]]
    return all_items, all_samples, max(p[2] for p in parts)


def reduce_update_stats(comm: Any, tot: dict[str, float], entropy_by_item: dict[int, float]) -> None:
    """Sum the per-rank update statistics (the grad norm is already global: every rank
    clipped the same summed gradient) and merge the per-item entropies."""
    keys = [k for k in ("loss", "clipped", "kl", "tokens", "ent") if k in tot]
    for k, v in zip(keys, comm.sum_floats([tot[k] for k in keys])):
        tot[k] = v
    merged: dict[int, float] = {}
    for part in comm.all_gather(dict(entropy_by_item)):
        merged.update(part)
    entropy_by_item.clear()
    entropy_by_item.update(merged)
