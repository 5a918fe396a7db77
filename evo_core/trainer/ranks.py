"""Rank detection and the process group of a launched ``evo run``.

torchrun and the ``deepspeed`` launcher both start one process per rank with RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT in the environment; that is how a rank
knows it is one. :class:`Comm` is the little the trainer needs from torch.distributed:
an object broadcast from rank 0 (commands), an all-gather of Python objects (rollouts),
a sum all-reduce of gradients and of a few floats, each counted in bytes so the
benchmark can report what a step exchanges.
"""

from __future__ import annotations

import datetime as dt
import os
import pickle
import re
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.trainer.dist_settings import DistributedSettings

_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class RankLost(BaseException):
    """A collective failed because a peer rank is gone (killed, crashed, or silent past
    ``[distributed] timeout_s``). Rank 0 seals the run as stopped; ``--resume`` continues it.

    A ``BaseException``, like ``KeyboardInterrupt``: no plugin isolation, harness guard or sink
    wrapper (``except Exception``) may turn it into a ``PluginFailed`` and let the step commit,
    since a backtest branch or a snapshot that lost its collectives would then be logged as if
    it had decided something."""


# what gloo's errors say (its source path is in every message: ".../gloo/transport/tcp/pair.cc");
# nccl and the store raise torch's DistError family
_LOST_HINTS = ("gloo/", "connection reset by peer", "connection closed by peer", "nccl")


def lost_peer(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective that failed for want of a peer: torch's DistError family
    (nccl, the store), or gloo's RuntimeError ("Read error ... Connection reset by peer",
    "Timed out waiting ... for recv")."""
    if isinstance(exc, RankLost):
        return True
    try:
        import torch.distributed as dist

        if isinstance(exc, getattr(dist, "DistError", ())):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(exc, RuntimeError) and any(h in str(exc).lower() for h in _LOST_HINTS)


def as_rank_lost(exc: BaseException) -> "RankLost":
    if isinstance(exc, RankLost):
        return exc
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    first = re.sub(r"^\[[^\]]*\]\s*", "", first)  # gloo's "[.../pair.cc:537] " source location
    first = first.split(". This is typically")[0]  # and its advice
    return RankLost(f"a rank of this launch is gone: a collective failed ({first[:200]})")


@attrs.frozen
class RankInfo:
    rank: int
    world_size: int
    local_rank: int


def detect(env: Optional[Mapping[str, str]] = None) -> Optional[RankInfo]:
    """The rank this process is, when a launcher started it (all of RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT set); None for a plain ``evo run``."""
    env = os.environ if env is None else env
    if not all(env.get(k) for k in _ENV):
        return None
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    return RankInfo(rank, world, int(env.get("LOCAL_RANK", rank)))


@attrs.define
class Traffic:
    """Bytes this rank sent or received through each kind of collective (payload sizes:
    pickled objects, gradient buffers), and how many collectives of each kind."""

    broadcast_bytes: int = 0
    gather_bytes: int = 0
    allreduce_bytes: int = 0
    calls: dict[str, int] = attrs.Factory(dict)

    def count(self, kind: str, n: int) -> None:
        setattr(self, f"{kind}_bytes", getattr(self, f"{kind}_bytes") + n)
        self.calls[kind] = self.calls.get(kind, 0) + 1


class Comm:
    """The process group, as the trainer uses it. ``device``: where collective buffers live
    (nccl needs CUDA tensors; gloo takes CPU ones). ``commands``: the group the command channel
    (:meth:`broadcast`) runs on, a gloo group with its own, longer timeout: a follower waits
    there while rank 0 evaluates and runs the harness alone, which can outlast any sensible
    collective timeout; a rank 0 that dies is still noticed at once (its connections drop)."""

    def __init__(self, info: RankInfo, device: str = "cpu", commands: Any = None) -> None:
        self.rank, self.world_size, self.local_rank = info.rank, info.world_size, info.local_rank
        self.device = device
        self.commands = commands  # None: the default group, on ``device``
        self.traffic = Traffic()

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def share(self, n: int) -> tuple[int, int]:
        """This rank's contiguous slice [lo, hi) of ``n`` items (sizes differ by at most one)."""
        return share_of(n, self.rank, self.world_size)

    # -- objects -----------------------------------------------------------------------------
    def broadcast(self, obj: Any = None) -> Any:
        """``obj`` from rank 0 to every rank (pickled; what broadcast_object_list does, with
        the payload size counted)."""
        import torch
        import torch.distributed as dist

        if self.world_size == 1:
            self.traffic.count("broadcast", 0)
            return obj
        device = "cpu" if self.commands is not None else self.device
        size = torch.zeros(1, dtype=torch.long, device=device)
        data = b""
        if self.leader:
            data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
            size[0] = len(data)
        dist.broadcast(size, 0, group=self.commands)
        n = int(size.item())
        buf = (torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device) if self.leader
               else torch.empty(n, dtype=torch.uint8, device=device))
        dist.broadcast(buf, 0, group=self.commands)
        self.traffic.count("broadcast", n)
        return obj if self.leader else pickle.loads(buf.cpu().numpy().tobytes())

    def _padded(self, obj: Any) -> tuple[bytes, list[int], Any]:
        """``obj`` pickled, every rank's pickle length, and this rank's bytes padded to the
        longest: gathers of unequal payloads need equal-sized tensors."""
        import torch
        import torch.distributed as dist

        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        sizes = [torch.zeros(1, dtype=torch.long, device=self.device) for _ in range(self.world_size)]
        dist.all_gather(sizes, torch.tensor([len(data)], dtype=torch.long, device=self.device))
        lens = [int(s.item()) for s in sizes]
        mine = torch.zeros(max(lens), dtype=torch.uint8, device=self.device)
        if data:
            mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device)
        return data, lens, mine

    def all_gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""
        import torch
        import torch.distributed as dist

        if self.world_size == 1:
            self.traffic.count("gather", 0)
            return [obj]
        _, lens, mine = self._padded(obj)
        bufs = [torch.empty(max(lens), dtype=torch.uint8, device=self.device) for _ in range(self.world_size)]
        dist.all_gather(bufs, mine)
        self.traffic.count("gather", sum(lens))
        return [pickle.loads(b[:n].cpu().numpy().tobytes()) for b, n in zip(bufs, lens)]

    def gather(self, obj: Any) -> Optional[list[Any]]:
        """Every rank's ``obj``, in rank order, on rank 0 only (None elsewhere): what a rank-0
        snapshot of sharded state needs, without every rank receiving every shard."""
        import torch
        import torch.distributed as dist

        if self.world_size == 1:
            self.traffic.count("gather", 0)
            return [obj]
        data, lens, mine = self._padded(obj)
        bufs = [torch.empty(max(lens), dtype=torch.uint8, device=self.device) for _ in range(self.world_size)] \
            if self.leader else None
        dist.gather(mine, bufs, dst=0)
        self.traffic.count("gather", sum(lens) if self.leader else len(data))
        if not self.leader:
            return None
        return [pickle.loads(b[:n].cpu().numpy().tobytes()) for b, n in zip(bufs, lens)]  # type: ignore[arg-type]

    # -- tensors -----------------------------------------------------------------------------
    def sum_floats(self, values: Sequence[float]) -> list[float]:
        import torch
        import torch.distributed as dist

        if self.world_size == 1:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        self.traffic.count("allreduce", t.numel() * 8)
        return t.cpu().tolist()

    def sum_grads(self, params: Sequence[Any]) -> None:
        """Sum the gradients of ``params`` over ranks, in one flat buffer (a rank whose share
        of the minibatch was empty contributes zeros). Every rank then holds the gradient of
        the global loss and takes the same optimizer step."""
        import torch
        import torch.distributed as dist

        if self.world_size == 1 or not params:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads]).to(self.device)
        dist.all_reduce(flat)
        self.traffic.count("allreduce", flat.numel() * flat.element_size())
        off = 0
        for p in params:
            n = p.numel()
            p.grad = flat[off:off + n].view_as(p).to(p.device, p.dtype)
            off += n

    def barrier(self) -> None:
        import torch.distributed as dist

        if self.world_size > 1:
            dist.barrier()

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def share_of(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """Rank ``rank``'s contiguous slice [lo, hi) of ``n`` items over ``world_size`` ranks."""
    base, extra = divmod(n, world_size)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


def init_group(info: RankInfo, settings: DistributedSettings, device: str) -> Comm:
    """Join the launcher's process group (gloo on CPU, nccl on CUDA unless configured). On
    CUDA each rank takes the GPU of its LOCAL_RANK before any model is built."""
    import torch
    import torch.distributed as dist

    backend = settings.resolved_backend(device)
    coll_device = "cpu"
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.set_device(info.local_rank)
        if backend == "nccl":
            coll_device = f"cuda:{info.local_rank}"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size,
                                timeout=dt.timedelta(seconds=settings.timeout_s))
    commands = None
    if info.world_size > 1:  # every rank creates it, in the same order: right after the default group
        commands = dist.new_group(backend="gloo", timeout=dt.timedelta(seconds=settings.command_timeout_s))
    return Comm(info, coll_device, commands)
