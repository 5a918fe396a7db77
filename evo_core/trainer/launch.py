"""``evo run`` under a launcher: join the process group, then lead (rank 0) or follow.

Checked before any rank builds a model: the ``[distributed]`` engine is one this process can
run (``engine = "deepspeed"`` needs the deepspeed extra), and the global batch
(``rl.prompts_per_step``) divides evenly over the ranks. A bad setting is the same one-line
error on every rank (exit 2), and no rank has trained.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import structlog

from evo_core.trainer.dist_settings import DistributedSettings, check_global_batch
from evo_core.trainer.ranks import Comm, RankInfo, as_rank_lost, init_group, lost_peer
from evo_core.trainer.spmd import Leader, follow

log = structlog.get_logger("evo.ranks")


def check(cfg: Any, info: RankInfo) -> DistributedSettings:
    """The settings of this launch, or a ``DistributedConfigError``."""
    settings = DistributedSettings.from_mapping(cfg.distributed)
    settings.check_installed()
    check_global_batch(cfg.rl.prompts_per_step, info.world_size)
    return settings


def join(cfg: Any, info: RankInfo) -> Comm:
    settings = check(cfg, info)
    if settings.engine == "deepspeed":  # DeepSpeed picks its accelerator once, at import: before anything imports it
        from evo_core.trainer.distributed import prepare_deepspeed

        prepare_deepspeed(settings.deepspeed_settings().accelerator)
    comm = init_group(info, settings, cfg.run.device)
    if settings.deepspeed and settings.engine == "ddp" and info.rank == 0:  # a ZeRO-3 table does not shard a ddp run
        log.warning("distributed: the DeepSpeed keys are not used by engine = ddp (every rank holds the full model "
                    "and optimizer state)", keys=sorted(settings.deepspeed))
    log.info("rank joined", rank=info.rank, world_size=info.world_size, engine=settings.engine,
             backend=settings.resolved_backend(cfg.run.device))
    return comm


def run_follower(comm: Comm, cfg: Any) -> int:
    """A follower's whole life: replicate the leader's sessions until it says exit."""
    from evo_core.plugins import PluginManager
    from evo_core.run_setup import build_session

    try:
        return follow(comm, build_session, PluginManager())
    except Exception as exc:
        if not lost_peer(exc):
            raise
        # rank 0 (or another rank) is gone: one line, and a non-zero exit the launcher reports
        log.error("rank stopped: a peer is gone", rank=comm.rank, error=str(as_rank_lost(exc)))
        return 1
    finally:
        with contextlib.suppress(Exception):
            comm.close()


@contextlib.contextmanager
def leading(comm: Comm) -> Iterator[Leader]:
    """Rank 0's side: yields the leader (its ``factory`` wraps the session factory); on the
    way out tells the followers to exit, with 0 when the body succeeded. When the leader
    failed in the middle of a step the followers wait in a collective the leader will never
    join: no exit is sent, and the launcher stops them when rank 0 exits non-zero."""
    leader = Leader(comm)
    rc: Optional[int] = 1
    try:
        yield leader
        rc = 0
    except BaseException:
        rc = None if leader.busy else 1
        raise
    finally:
        if rc is not None:
            with contextlib.suppress(Exception):
                leader.send("exit", rc)
        with contextlib.suppress(Exception):
            comm.close()

