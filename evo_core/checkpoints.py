"""Resume checkpoints: ``<dir>/<run_id>/step-000042.pt``, one per committed step.

Each is written to a temp file and renamed, so a kill never leaves a half-written
checkpoint under its final name; its absolute path and sha256 go into that step's
``StepCompleted``, so ``--resume`` finds and checks it from any working directory. A
completed run's checkpoint folder is removed (its weights live in the blob store).

Under DeepSpeed ZeRO the optimizer state is sharded over the ranks and stays so on disk:
every rank writes its own shard, ``<dir>/<run_id>/step-000042.zero/rank-00001-of-00002.pt``,
and rank 0's ``step-000042.pt`` (the full weights, RNGs, data position) names every shard
file with its sha256, so the one digest in the log covers them all. A resume loads each
shard on its own rank. That needs ``run.checkpoint_dir`` on a filesystem every rank sees (the
same disk on one node; a shared one across nodes)."""

from __future__ import annotations

import glob
import hashlib
import io
import os
import shutil
from typing import Any, Optional


class CheckpointError(RuntimeError):
    """A resume checkpoint is missing or does not match what the log recorded."""


class _HashingWriter:
    """A write-only file object that feeds every byte to a hash as it passes (torch.save
    writes its zip stream sequentially: no seek, so the digest is the file's)."""

    def __init__(self, fh: Any, digest: Any) -> None:
        self.fh, self.digest = fh, digest

    def write(self, data: Any) -> int:
        self.digest.update(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def snapshot(state: Any) -> Any:
    """A copy of ``state`` that later training cannot change: every tensor copied to CPU memory,
    the containers rebuilt (dicts, lists, tuples), other values kept (they are immutable or
    fresh: RNG states, counters). One tensor under two names (tied weights) stays one tensor,
    so the file is the same size as the live state's.
    What it costs is one memory copy, on the critical path; what it buys is that serialising,
    hashing and writing the checkpoint can run while the next step updates the weights."""
    import torch

    copies: dict[tuple[Any, ...], Any] = {}

    def copy(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            key = (v.untyped_storage().data_ptr(), v.device, v.dtype, v.storage_offset(), tuple(v.shape), v.stride())
            if key not in copies:
                copies[key] = v.detach().to("cpu", copy=True)
            return copies[key]
        if isinstance(v, dict):
            out = type(v)((k, copy(x)) for k, x in v.items())
            if hasattr(v, "_metadata"):  # a module state_dict's versions, which load_state_dict reads
                out._metadata = v._metadata  # type: ignore[attr-defined]
            return out
        if isinstance(v, list):
            return [copy(x) for x in v]
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return tuple(copy(x) for x in v)
        return v

    return copy(state)


class Checkpoints:
    def __init__(self, root: str, run_id: str, keep: int = 2) -> None:
        self.dir = os.path.abspath(os.path.join(root, run_id))
        self.keep = keep
        os.makedirs(self.dir, exist_ok=True)

    @classmethod
    def continuing(cls, recorded: Optional[dict[str, str]], root: str, run_id: str) -> "Checkpoints":
        """Where a resumed run keeps writing: the folder its log recorded (wherever the resume
        runs from), or the configured one when the log recorded none."""
        path = (recorded or {}).get("path")
        if path and os.path.isabs(path):
            return cls(os.path.dirname(os.path.dirname(path)), os.path.basename(os.path.dirname(path)))
        return cls(root, run_id)

    def path(self, step: int) -> str:
        return os.path.join(self.dir, f"step-{step:06d}.pt")

    def save(self, step: int, state: dict[str, Any]) -> dict[str, str]:
        """Write the checkpoint; returns ``{"path", "sha256"}`` as the log records it."""
        import torch

        # streamed to the file and hashed on the way: no in-memory copy of the whole state
        # (weights + optimizer: gigabytes a step for a 0.5B model), the same bytes and digest
        tmp = self.path(step) + f".tmp-{os.getpid()}"
        digest = hashlib.sha256()
        with open(tmp, "wb") as fh:
            torch.save(state, _HashingWriter(fh, digest))
        os.replace(tmp, self.path(step))
        return {"path": self.path(step), "sha256": digest.hexdigest()}

    @staticmethod
    def load(step: int, recorded: Optional[dict[str, str]], fallback: str) -> dict[str, Any]:
        """The checkpoint the log recorded for ``step`` (or, for a step the log names none for,
        ``fallback``), its digest checked."""
        import torch

        path = (recorded or {}).get("path") or fallback
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            raise CheckpointError(f"no resume checkpoint for step {step} at {path}; the run cannot resume exactly") from None
        want = (recorded or {}).get("sha256")
        if want and hashlib.sha256(data).hexdigest() != want:
            raise CheckpointError(f"resume checkpoint {path} does not match the digest the log recorded for step {step}")
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)

    def gc(self, committed: int) -> None:
        """Keep the checkpoint of the last committed step and the newest ``keep`` ones."""
        steps = sorted(int(os.path.basename(p)[5:11]) for p in glob.glob(os.path.join(self.dir, "step-*.pt")))
        keep = set(steps[-self.keep:]) | {committed}
        for s in steps:
            if s not in keep and s < committed:
                try:
                    os.remove(self.path(s))
                except FileNotFoundError:
                    pass
                shutil.rmtree(shard_dir(self.dir, s), ignore_errors=True)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        parent = os.path.dirname(self.dir)
        try:
            os.rmdir(parent)  # only if no other run's checkpoints are there
        except OSError:
            pass


def shard_dir(ckpt_dir: str, step: int) -> str:
    return os.path.join(ckpt_dir, f"step-{step:06d}.zero")


def shard_path(ckpt_dir: str, step: int, rank: int, world_size: int) -> str:
    """Where rank ``rank`` writes its ZeRO optimizer shard of step ``step``'s resume checkpoint."""
    return os.path.join(shard_dir(ckpt_dir, step), f"rank-{rank:05d}-of-{world_size:05d}.pt")


def save_shard(path: str, state: Any) -> str:
    """One rank's optimizer shard, written atomically (temp file, rename); returns its sha256."""
    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    data = buf.getvalue()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + f".tmp-{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


def load_shard(path: str, sha256: str) -> Any:
    """A shard a resume checkpoint names, its digest checked."""
    import torch

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        raise CheckpointError(f"no optimizer shard at {path}: a ZeRO run resumes only where every rank can read "
                              "the shards its checkpoint names (run.checkpoint_dir on a shared filesystem)") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CheckpointError(f"optimizer shard {path} does not match the digest its resume checkpoint recorded")
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
