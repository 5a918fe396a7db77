"""Forks and snapshots of a session: an independent copy for an online backtest's branch,
the weights (and optimizer state) as bytes for a main-line snapshot, a detached copy to
evaluate a snapshot, and the restore of one under the policy version the log names."""

from __future__ import annotations

import copy
import io
import random
from typing import Any, Mapping, Optional

import attrs

from evo_core.trainer.engine import InProcessEngine


def fork(s: Any, seed: Optional[int] = None) -> Any:
    """An independent copy: weights, optimizer, data position and RNG (reseeded when
    ``seed`` is given: two forks with the same seed draw the same random numbers). A fork's
    oracle labels count under the ``branch`` scope of the same counts."""
    import torch

    new = copy.copy(s)
    new.policy = copy.deepcopy(s.policy)
    new.engine = InProcessEngine(new.policy)
    if s.zero is not None:  # a new engine (every rank forks), loaded with this rank's shard in memory
        new.zero = s.zero.fork(new.policy)
        new.optimizer = new.zero.optimizer
    else:
        new.optimizer = new._make_optimizer()
        new.optimizer.load_state_dict(copy.deepcopy(s.optimizer.state_dict()))
    new.gen = torch.Generator(device="cpu")
    new.rng = random.Random()
    if seed is None:
        new.gen.set_state(s.gen.get_state())
        new.rng.setstate(s.rng.getstate())
    else:
        new.gen.manual_seed(seed)
        new.rng.seed(f"fork:{seed}")
        new.id_salt = f"{s.id_salt}/fork-{seed}"
    new.cursor = attrs.evolve(s.cursor)
    new._ref_policy = None
    new.oracle = s.oracle.for_branch()
    return new


def weights_bytes(s: Any, *, with_optimizer: bool = True) -> bytes:
    """The weights (and optimizer state), serialised: what a main-line snapshot stores."""
    import torch

    snap: dict[str, Any] = {"model": s.policy.state_dict(), "policy_version": s.policy_version, "optimizer": None}
    if with_optimizer and s.zero is None:
        snap["optimizer"] = s.optimizer.state_dict()
    elif with_optimizer:  # every rank's shard, gathered here (a collective: rank 0 asks them all)
        snap["zero_optimizer"] = {**s.zero.layout(), "shards": optimizer_shards(s)}
    buf = io.BytesIO()
    torch.save(snap, buf)
    return buf.getvalue()


def optimizer_shards(s: Any) -> Optional[list[Any]]:
    """Under ZeRO, every rank's optimizer shard, in rank order, on rank 0 (None elsewhere)."""
    mine = s.zero.shard_state()
    return [mine] if s.dist is None else s.dist.gather(mine)


def load_weights_bytes(s: Any, data: bytes) -> None:
    import torch

    snap = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    s.policy.load_state_dict(snap["model"])
    if s.zero is not None:
        zero_loaded(s, snap, "snapshot")
    elif snap.get("optimizer") is not None:
        s.optimizer.load_state_dict(snap["optimizer"])


def zero_loaded(s: Any, d: Mapping[str, Any], what: str) -> None:
    """After the policy's weights were loaded from ``d``: this rank's optimizer shard from
    ``d`` (snapshots carry all of them; resume checkpoints name one file per rank), or, when
    ``d`` has no optimizer state, ZeRO's master weights from the loaded ones."""
    zo = d.get("zero_optimizer")
    if zo is None:
        if d.get("optimizer") is not None:
            raise RuntimeError(f"this {what} holds an unsharded optimizer state (a run without ZeRO); "
                               "a ZeRO session cannot load it")
        s.zero.weights_changed()
        return
    if int(zo["world_size"]) != s.zero.world_size or int(zo["stage"]) != s.zero.stage:
        raise RuntimeError(f"this {what}'s optimizer state is sharded for ZeRO-{zo['stage']} over {zo['world_size']} "
                           f"ranks, but this launch runs ZeRO-{s.zero.stage} over {s.zero.world_size}: "
                           "use the layout the run started with")
    if "shards" in zo:
        shards = list(zo["shards"])
    else:
        from evo_core.checkpoints import load_shard

        r = s.zero.rank
        shards = [None] * s.zero.world_size
        shards[r] = load_shard(zo["files"][r], zo["sha256"][r])
    s.zero.load_shards(shards)


def detached_policy(s: Any, data: bytes) -> Any:
    """A copy of the policy with a snapshot's weights (to evaluate it; training is untouched)."""
    import torch

    policy = copy.deepcopy(s.policy)
    policy.load_state_dict(torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)["model"])
    return policy


def restore(s: Any, data: bytes, policy_version: int) -> None:
    """Back to a snapshot's weights and optimizer. The step counter, RNG and data position
    keep moving forward, and the restored weights get the new policy version the log named
    (versions name distinct weight histories)."""
    if policy_version != s.max_version + 1:
        raise RuntimeError(f"restore names policy version {policy_version}, but the session's next is "
                           f"{s.max_version + 1}: the log and the session disagree")
    load_weights_bytes(s, data)
    s.max_version = s.policy_version = policy_version
