"""``[distributed]``: validated when the config loads, one line naming the key, exit 2 before
any rank builds anything; rank detection and the per-rank slices (fast, no process group)."""

from __future__ import annotations

import pytest

from evo_core.config import ConfigError, config_from_dict
from evo_core.trainer.dist_settings import DistributedConfigError, DistributedSettings
from evo_core.trainer.ranks import Comm, RankInfo, detect
from evo_core.trainer.shard import group_seed

from .export_testlib import ROOT, evo


def test_settings_defaults_and_deepspeed_keys():
    s = DistributedSettings.from_mapping({"zero_stage": 2, "precision": "bf16"})
    assert (s.engine, s.backend) == ("ddp", "auto")
    assert s.deepspeed_settings().zero_stage == 2
    assert s.resolved_backend("cpu") == "gloo" and s.resolved_backend("cuda") == "nccl"


@pytest.mark.parametrize("table, message", [
    ({"zero_stagee": 2}, "distributed.zero_stagee: unknown key (known: accelerator, backend, command_timeout_s, engine"),
    ({"engine": "fsdp"}, "distributed.engine: must be one of ddp, deepspeed, got 'fsdp'"),
    ({"backend": "mpi"}, "distributed.backend: must be one of auto, gloo, nccl"),
    ({"timeout_s": 0}, "distributed.timeout_s: must be a positive number"),
    ({"command_timeout_s": "1h"}, "distributed.command_timeout_s: must be a positive number, got '1h'"),
    ({"zero_stage": 4}, "distributed.zero_stage must be in 0..3, got 4"),
    ({"engine": "deepspeed", "zero_stage": 0}, 'distributed.zero_stage: engine = "deepspeed" runs ZeRO stage 1, 2 or 3, got 0'),
    ({"micro_batch_size": 4}, "distributed.micro_batch_size: evo run defines the batch and the optimizer once, in [rl] "
                              "(here: rl.micro_batch_size)"),
    ({"lr": 1e-5}, "distributed.lr: evo run defines the batch and the optimizer once, in [rl] (here: rl.lr)"),
    ({"persistence_threshold": -1}, "distributed.persistence_threshold must be in >= 0, got -1"),
])
def test_bad_table_is_one_line(table, message):
    with pytest.raises(DistributedConfigError) as exc:
        DistributedSettings.from_mapping(table)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match="^distributed\\."):
        config_from_dict({"distributed": table})


def test_bad_key_stops_evo_run_before_anything(tmp_path):
    store = tmp_path / "evo.sqlite"
    proc = evo("run", str(ROOT / "configs" / "quickstart.toml"), "--store", f"sqlite:///{store}",
               "--set", "distributed.zero_stagee=2", cwd=tmp_path)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: distributed.zero_stagee: unknown key (known: accelerator, backend, ")
    assert len(lines) == 1 and not store.exists()


def test_indivisible_global_batch_stops_every_rank(tmp_path):
    """A launched rank checks the split before joining the process group (no peer is needed)."""
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    proc = evo("run", str(ROOT / "configs" / "quickstart.toml"), "--store", f"sqlite:///{tmp_path}/evo.sqlite",
               "--set", "rl.prompts_per_step=7", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert "rl.prompts_per_step = 7 (the global batch) is not divisible by the 2 ranks" in proc.stderr


def test_bad_zero_stage_stops_evo_run_before_anything(tmp_path):
    store = tmp_path / "evo.sqlite"
    proc = evo("run", str(ROOT / "configs" / "quickstart.toml"), "--store", f"sqlite:///{store}",
               "--set", 'distributed.engine="deepspeed"', "--set", "distributed.zero_stage=0", cwd=tmp_path)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == ['error: distributed.zero_stage: engine = "deepspeed" runs ZeRO stage 1, 2 or 3, got 0 '
                     '(stage 0 shards nothing: use engine = "ddp")']
    assert not store.exists()


def test_missing_deepspeed_extra_is_one_line(monkeypatch):
    """engine = "deepspeed" without the extra: one line naming the install, checked by every
    launched rank before it joins the process group (``launch.check``)."""
    import importlib.util

    from evo_core.trainer import launch

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "deepspeed" else real(name, *a))
    cfg = config_from_dict({"distributed": {"engine": "deepspeed", "zero_stage": 2}})
    with pytest.raises(DistributedConfigError) as exc:
        launch.check(cfg, RankInfo(0, 2, 0))
    assert str(exc.value) == ('distributed.engine: "deepspeed" needs the deepspeed extra, which is not installed: '
                              "pip install 'evotrainer[deepspeed]'")


def test_detect():
    assert detect({}) is None
    assert detect({"RANK": "1", "WORLD_SIZE": "2"}) is None  # no rendezvous: not a launch
    full = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "2"}
    assert detect(full) == RankInfo(1, 4, 1)


def test_shares_are_disjoint_and_cover():
    for world in (1, 2, 3):
        for n in (0, 1, 7, 8):
            got = [Comm(RankInfo(r, world, r)).share(n) for r in range(world)]
            assert [x for lo, hi in got for x in range(lo, hi)] == list(range(n))


def test_group_seed_is_stable():
    assert group_seed(5, 0) == group_seed(5, 0) != group_seed(5, 1)


def test_a_lost_peer_is_told_apart_from_other_errors():
    import torch.distributed as dist

    from evo_core.trainer.ranks import RankLost, as_rank_lost, lost_peer

    gloo = RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
                        "[127.0.0.1]:50357: Connection reset by peer. This is typically caused by a remote worker "
                        "hanging or bugs in the application.")
    assert lost_peer(gloo) and lost_peer(dist.DistBackendError("NCCL watchdog timed out"))
    assert not lost_peer(RuntimeError("rollout server timed out after 3 retries"))
    assert not lost_peer(ValueError("gloo/"))
    lost = as_rank_lost(gloo)
    assert isinstance(lost, RankLost) and str(lost) == (
        "a rank of this launch is gone: a collective failed (Read error [127.0.0.1]:50357: Connection reset by peer)")


def test_a_lost_rank_is_never_isolated_as_a_plugin_failure():
    """A backtest branch or a snapshot whose collectives failed must stop the step, not become
    a PluginFailed the step commits with (RankLost is a BaseException)."""
    from evo_core.harness.engine import ENGINE
    from evo_core.harness.isolation import Isolation
    from evo_core.trainer.ranks import RankLost

    emitted: list = []
    iso = Isolation("run", 3, emitted.append, ENGINE)

    with pytest.raises(RankLost):
        with iso.guard("trainer", "snapshot"):
            raise RankLost("a rank of this launch is gone")
    assert emitted == []
    with iso.guard("trainer", "snapshot") as g:
        1 / 0
    assert g.failed and len(emitted) == 1  # others are isolated
