"""Resume checkpoints of a session: everything a ``--resume`` needs to recompute the next
step exactly (weights, optimizer, RNGs, data position, versions, the KL reference). Under
ZeRO the optimizer state stays sharded: each rank writes its own shard file."""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from evo_core.trainer.sampling import DataCursor
from evo_core.trainer.snapshots import zero_loaded


def resume_state(s: Any) -> dict[str, Any]:
    """Everything a resume needs. Under ZeRO each rank writes its shard to a file of this
    step under ``checkpoint_dir`` (a collective), and the state names the files and their
    sha256 (``zero_optimizer``); the weights are the full ones."""
    d = {"model": s.policy.state_dict(), "optimizer": s.optimizer.state_dict() if s.zero is None else None,
         "gen": s.gen.get_state(), "rng": s.rng.getstate(), "cursor": attrs.asdict(s.cursor),
         "step": s.step, "policy_version": s.policy_version, "max_version": s.max_version,
         "ref_state": s.ref_state}
    if s.zero is not None:
        d["zero_optimizer"] = save_shard(s)
    return d


def save_shard(s: Any) -> dict[str, Any]:
    from evo_core.checkpoints import save_shard as write_shard, shard_path

    if not s.checkpoint_dir:
        raise RuntimeError("a ZeRO session writes resume checkpoints only once checkpoint_dir is set")
    z = s.zero
    path = shard_path(s.checkpoint_dir, s.step, z.rank, z.world_size)
    digest = write_shard(path, z.shard_state())
    found = [(path, digest)] if s.dist is None else s.dist.all_gather((path, digest))
    return {**z.layout(), "files": [p for p, _ in found], "sha256": [h for _, h in found]}


def load_resume_state(s: Any, d: Mapping[str, Any]) -> None:
    s.policy.load_state_dict(d["model"])
    if s.zero is not None:
        zero_loaded(s, d, "resume checkpoint")
    else:
        s.optimizer.load_state_dict(d["optimizer"])
    s.gen.set_state(d["gen"])
    s.rng.setstate(d["rng"])
    s.cursor = DataCursor(**d["cursor"])
    s.step, s.policy_version, s.max_version = d["step"], d["policy_version"], d["max_version"]
    s.ref_state = d.get("ref_state")
    s._ref_policy = None
