"""Distributed benchmark: ``evo run``'s machinery as 1 rank and as 2 ranks on this CPU (gloo).

Launches this file under torchrun once per entry of ``--ranks`` (default ``1,2,2:zero2``: one
rank, two ranks with the DDP-like engine, two ranks with DeepSpeed ZeRO-2), one torch thread per
rank, the quickstart configuration with the same global batch, the fixed harness. Rank 0 runs
the real run loop (``RunLoop`` with the leader's session factory, as ``evo run`` does) and
reports:

- rollout and update tokens/s (the steps' own metrics, first step left out), and their
  ratio 2 ranks / 1 rank;
- bytes exchanged per step by rank 0, counted at the collectives: the pickled command
  broadcasts (RL step commands carry the harness state), the pickled rollout all-gather, and
  the all-reduce payloads (gradients: one flat fp32 buffer per update, plus a few floats);
  with the ring all-reduce estimate 2*(n-1)/n * parameter bytes per update for what a rank
  actually sends (an estimate: gloo picks its algorithm by size);
- the harness overhead on rank 0 (the trainer benchmark's definition: bookkeeping time over
  step compute time);
- every torch.distributed collective rank 0 called, counted at the torch.distributed API (so
  DeepSpeed's own reductions and gathers are included): calls and payload bytes per step by op
  (the tensor this rank contributes: all_reduce/reduce/broadcast the whole tensor, the gathers
  and reduce-scatters their input), not bytes on the wire;
- the optimizer state rank 0 holds after the run (bytes of its tensors: AdamW's moments, and
  under ZeRO the fp32 master partition), which ZeRO shards.

    python -m benchmarks.distributed --json [--steps 10] [--ranks 1,2,2:zero2] [--config configs/quickstart.toml]
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
    ap.add_argument("--ranks", default="1,2,2:zero2",
                    help="launches: N ranks, or N:zeroK for DeepSpeed ZeRO stage K (comma-separated)")
    ap.add_argument("--engine", default="ddp", help=argparse.SUPPRESS)  # rank mode: ddp or zeroK
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
    torch_calls = _count_torch_collectives()  # before anything (DeepSpeed included) binds the functions
    work = args.work
    over = [f"run.steps={args.steps}", f"run.eval_every={args.steps + 1}", "run.eval_at_start=false",
            f"run.checkpoint_dir='{work}/ck-{args.engine}'", "run.progress=false", "run.threads=1",
            f"sft.steps={args.sft_steps}", f"sft.cache_dir='{work}/sft'"]
    if args.engine.startswith("zero"):
        over += ['distributed.engine="deepspeed"', f"distributed.zero_stage={int(args.engine[4:])}"]
    cfg = load_config(args.config, over).for_arm("fixed")
    info = detect()
    assert info is not None, "run under torchrun"
    comm = launch.join(cfg, info)
    if not comm.leader:
        return launch.run_follower(comm, cfg)
    metrics = []
    with launch.leading(comm) as leader:
        store = open_store(f"sqlite:///{work}/bench-{info.world_size}-{args.engine}.sqlite?synchronous=normal")
        loop = RunLoop(cfg, store, session_factory=leader.factory(build_session),
                       on_step=lambda step, m: metrics.append(dict(m)))
        loop.start()
        before = _traffic(comm)
        torch_before = {k: list(v) for k, v in torch_calls.items()}
        t0 = time.perf_counter()
        out = loop.run()
        wall = time.perf_counter() - t0
        after = _traffic(comm)
        torch_after = {k: list(v) for k, v in torch_calls.items()}
        opt_bytes = _tensor_bytes(loop.session.optimizer.state_dict())
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

    torch_per_step = {}
    for op, (calls, nbytes) in sorted(torch_after.items()):
        c0, b0 = torch_before.get(op, [0, 0])
        if calls - c0:
            torch_per_step[op] = {"calls": round((calls - c0) / n, 2), "bytes": round((nbytes - b0) / n)}
    report = {
        "ranks": world, "engine": args.engine, "steps": n, "wall_s": round(wall, 2), "step_compute_s": round(tm["compute"] / n, 4),
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
        "torch_collectives_per_step": torch_per_step,
        "torch_collective_bytes_per_step": sum(v["bytes"] for v in torch_per_step.values()),
        "optimizer_state_bytes_rank0": opt_bytes,
    }
    Path(args.worker).write_text(json.dumps(report))
    return 0


_PAYLOAD = {  # torch.distributed function -> the argument holding what this rank contributes
    "all_reduce": "tensor", "reduce": "tensor", "broadcast": "tensor", "all_gather": "tensor", "gather": "tensor",
    "all_gather_into_tensor": "input_tensor", "_all_gather_base": "input_tensor",
    "reduce_scatter_tensor": "input", "_reduce_scatter_base": "input", "reduce_scatter": "input_list",
    "all_reduce_coalesced": "tensors", "all_to_all_single": "input",
}


def _count_torch_collectives() -> dict:
    """Wrap torch.distributed's collectives to count calls and payload bytes by op."""
    import inspect

    import torch.distributed as dist

    counts: dict = {}

    def nbytes(x) -> int:
        if isinstance(x, (list, tuple)):
            return sum(nbytes(t) for t in x)
        return int(x.numel() * x.element_size()) if hasattr(x, "numel") else 0

    for name, arg in _PAYLOAD.items():
        fn = getattr(dist, name, None)
        if fn is None:
            continue
        sig = inspect.signature(fn)

        def wrapped(*a, __fn=fn, __sig=sig, __name=name, __arg=arg, **kw):
            try:
                size = nbytes(__sig.bind_partial(*a, **kw).arguments.get(__arg))
            except TypeError:
                size = 0
            c = counts.setdefault(__name, [0, 0])
            c[0] += 1
            c[1] += size
            return __fn(*a, **kw)

        setattr(dist, name, wrapped)
    return counts


def _tensor_bytes(obj) -> int:
    if hasattr(obj, "numel") and hasattr(obj, "element_size"):
        return int(obj.numel() * obj.element_size())
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
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

    env.setdefault("DS_ACCELERATOR", "cpu")  # ZeRO entries: DeepSpeed's CPU accelerator (gloo)
    reports = {}
    for entry in args.ranks.split(","):
        n, _, engine = entry.partition(":")
        engine = engine or "ddp"
        out = Path(work) / f"report-{n}-{engine}.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", n, "--master_port",
               str(free_port()), "-m", "benchmarks.distributed", "--worker", str(out), "--work", work, "--config", os.path.abspath(args.config),
               "--steps", str(args.steps), "--sft-steps", str(args.sft_steps), "--engine", engine]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-4000:])
            return 1
        reports[entry if engine != "ddp" else n] = json.loads(out.read_text())
    result = {"config": os.path.relpath(args.config, ROOT), "threads_per_rank": 1, "cpus": os.cpu_count(),
              "runs": list(reports.values())}
    a = reports.get("1")
    for key, b in reports.items():
        if a is None or key == "1":
            continue
        suffix = "" if key == "2" else "_" + key.replace(":", "_")  # "2": the names the docs have used
        result[f"rollout_tokens_per_s_ratio{suffix}"] = round(b["rollout_tokens_per_s"] / max(a["rollout_tokens_per_s"], 1e-9), 3)
        result[f"update_tokens_per_s_ratio{suffix}"] = round(b["update_tokens_per_s"] / max(a["update_tokens_per_s"], 1e-9), 3)
        result[f"step_compute_speedup{suffix}"] = round(a["step_compute_s"] / max(b["step_compute_s"], 1e-9), 3)
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
