"""Distributed benchmark: ``evo run``'s machinery as 1 rank and as 2 ranks on this CPU (gloo).

Launches this file under torchrun twice (``--nproc_per_node 1``, then ``2``), one torch thread
per rank, the quickstart configuration with the same global batch, the fixed harness. Rank 0
runs the real run loop (``RunLoop`` with the leader's session factory, as ``evo run`` does)
and reports:

- rollout and update tokens/s (the steps' own metrics, first step left out), and their
  ratio 2 ranks / 1 rank;
- bytes exchanged per step by rank 0, counted at the collectives: the pickled command
  broadcasts (RL step commands carry the harness state), the pickled rollout all-gather, and
  the all-reduce payloads (gradients: one flat fp32 buffer per update, plus a few floats);
  with the ring all-reduce estimate 2*(n-1)/n * parameter bytes per update for what a rank
  actually sends (an estimate: gloo picks its algorithm by size);
- the harness overhead on rank 0 (the trainer benchmark's definition: bookkeeping time over
  step compute time).

    python benchmarks/distributed.py --json [--steps 10] [--config configs/quickstart.toml]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "quickstart.toml"))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--sft-steps", type=int, default=100, help="a short warm start, so rewards vary and updates happen")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # rank mode: where rank 0 writes its report
    ap.add_argument("--work", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def worker(args) -> int:
    from evo_core.config import load_config
    from evo_core.loop import RunLoop
    from evo_core.run_setup import build_session
    from evo_core.store import open_store
    from evo_core.trainer import launch
    from evo_core.trainer.logs import configure_logging
    from evo_core.trainer.ranks import detect

    configure_logging("WARNING")
    work = args.work
    over = [f"run.steps={args.steps}", f"run.eval_every={args.steps + 1}", "run.eval_at_start=false",
            f"run.checkpoint_dir='{work}/ck'", "run.progress=false", "run.threads=1",
            f"sft.steps={args.sft_steps}", f"sft.cache_dir='{work}/sft'"]
    cfg = load_config(args.config, over).for_arm("fixed")
    info = detect()
    assert info is not None, "run under torchrun"
    comm = launch.join(cfg, info)
    if not comm.leader:
        return launch.run_follower(comm, cfg)
    metrics = []
    with launch.leading(comm) as leader:
        store = open_store(f"sqlite:///{work}/bench-{info.world_size}.sqlite?synchronous=normal")
        loop = RunLoop(cfg, store, session_factory=leader.factory(build_session),
                       on_step=lambda step, m: metrics.append(dict(m)))
        loop.start()
        before = _traffic(comm)
        t0 = time.perf_counter()
        out = loop.run()
        wall = time.perf_counter() - t0
        after = _traffic(comm)
        store.close()
        params = [p for p in loop.session.policy.model.parameters() if p.requires_grad]
        param_bytes = sum(p.numel() * p.element_size() for p in params)
    n, world = args.steps, info.world_size
    tm = dict(out.timings)
    tm["harness"] -= tm.get("backtest_branches", 0.0)
    tm["compute"] -= tm.get("features", 0.0)
    parts = ("features", "events", "blobs", "digest", "append", "observe", "harness")
    book = sum(tm[k] for k in parts)
    updates = sum(1 for m in metrics if m.get("update_time_s"))

    def mean(key):
        vals = [m[key] for m in metrics[1:] if m.get(key) is not None]  # step 1 warms caches up
        return sum(vals) / len(vals) if vals else None

    report = {
        "ranks": world, "steps": n, "wall_s": round(wall, 2), "step_compute_s": round(tm["compute"] / n, 4),
        "rollout_tokens_per_s": round(mean("rollout_tokens_per_s") or 0, 1),
        "update_tokens_per_s": round(mean("update_tokens_per_s") or 0, 1),
        "bytes_per_step": {k: round((after[k] - before[k]) / n) for k in ("broadcast", "gather", "allreduce")},
        "collectives_per_step": {k: round((after["calls"].get(k, 0) - before["calls"].get(k, 0)) / n, 2)
                                 for k in ("broadcast", "gather", "allreduce")},
        "param_bytes": param_bytes, "updates": updates,
        "ring_allreduce_send_bytes_per_step_estimate": round(2 * (world - 1) / world * param_bytes * updates / n),
        "harness_overhead": round(book / max(tm["compute"], 1e-9), 4),
        "harness_per_step_ms": round(1000 * book / n, 2),
        "eval_s": round(tm["eval"], 2),
    }
    Path(args.worker).write_text(json.dumps(report))
    return 0


def _traffic(comm) -> dict:
    t = comm.traffic
    return {"broadcast": t.broadcast_bytes, "gather": t.gather_bytes, "allreduce": t.allreduce_bytes,
            "calls": dict(t.calls)}


def parent(args) -> int:
    work = tempfile.mkdtemp(prefix="evo-dist-bench-")
    env = dict(os.environ, OMP_NUM_THREADS="1", EVO_NO_PLUGIN_COMMANDS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    from evo_core.trainer.distributed import free_port

    reports = {}
    for n in [int(x) for x in args.ranks.split(",")]:
        out = Path(work) / f"report-{n}.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(n), "--master_port",
               str(free_port()), __file__, "--worker", str(out), "--work", work, "--config", args.config,
               "--steps", str(args.steps), "--sft-steps", str(args.sft_steps)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-4000:])
            return 1
        reports[n] = json.loads(out.read_text())
    result = {"config": os.path.relpath(args.config, ROOT), "threads_per_rank": 1, "cpus": os.cpu_count(),
              "runs": list(reports.values())}
    if 1 in reports and 2 in reports:
        a, b = reports[1], reports[2]
        result["rollout_tokens_per_s_ratio"] = round(b["rollout_tokens_per_s"] / max(a["rollout_tokens_per_s"], 1e-9), 3)
        result["update_tokens_per_s_ratio"] = round(b["update_tokens_per_s"] / max(a["update_tokens_per_s"], 1e-9), 3)
        result["step_compute_speedup"] = round(a["step_compute_s"] / max(b["step_compute_s"], 1e-9), 3)
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


def main(argv=None) -> int:
    args = _args(argv)
    return worker(args) if args.worker else parent(args)


if __name__ == "__main__":
    sys.exit(main())
