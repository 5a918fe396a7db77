"""The RL half of the GPU check (benchmarks/gpu_check.sh runs it after the DeepSpeed half).

1. Build a Qwen2-shaped model from its config (no download): 36 layers at Qwen2-0.5B's
   width, 537M parameters, with a character tokenizer; save it as a local HF directory.
2. Serve it for rollouts: ``evo serve`` (default) or ``vllm serve`` (``--vllm``), and time
   rollouts through the HTTP engine.
3. Run the math recipe (configs/recipes/math.toml, as shipped plus ``--set`` swaps: this
   model, synthetic BigMath/AIME-format files, GPU-sized batches) for a few RL steps against
   the ``evo serve`` server (checkpoint weight sync after every update), and report the
   per-step figures the run logged. ``--ranks N`` trains as N ranks under torchrun;
   ``--zero-stage K`` trains through DeepSpeed ZeRO stage K (``[distributed] engine =
   "deepspeed"``, bf16 with a bf16 policy), under torchrun even for one rank.

    python -m benchmarks.gpu_rl_check --work /tmp/w --device cuda:0 --server-device cuda:0
    python -m benchmarks.gpu_rl_check --work /tmp/w --toy --device cpu --server-device cpu

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import string
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_EVO = "import sys; from evo_core.cli.app import main; main(sys.argv[1:])"

SIZES = {  # Qwen2-0.5B's width, 36 layers instead of 24: >= 0.5B parameters with a small vocabulary
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=36, num_attention_heads=14,
                 num_key_value_heads=2),
    "toy": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1),
}
CHARS = "".join(c for c in string.printable if c not in "\x0b\x0c\r")


def build_model(path: Path, size: str, dtype: str) -> int:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from evo_core.trainer.tokenizer import CharTokenizer

    tok = CharTokenizer(CHARS)
    tok.save_hf(str(path))
    cfg = Qwen2Config(vocab_size=tok.vocab_size, max_position_embeddings=4096, tie_word_embeddings=True,
                      bos_token_id=tok.bos_id, eos_token_id=tok.eos_id, pad_token_id=tok.pad_id, **SIZES[size])
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(getattr(torch, dtype))
    model.save_pretrained(str(path))
    return sum(p.numel() for p in model.parameters())


def write_tasks(root: Path, n_train: int, n_heldout: int) -> tuple[Path, Path]:
    root.mkdir(parents=True, exist_ok=True)
    train = [{"problem": f"Compute {a} + {a * 7 % 50}.", "answer": str(a + a * 7 % 50), "source": "synthetic",
              "llama8b_solve_rate": 0.5} for a in range(n_train)]
    held = [{"ID": f"2024-I-{i + 1}", "Problem": f"Find {i} + {i + 2}.", "Solution": f"$\\boxed{{{2 * i + 2}}}$",
             "Answer": 2 * i + 2} for i in range(n_heldout)]
    paths = root / "bigmath_hard.jsonl", root / "aime.jsonl"
    for p, rows in zip(paths, (train, held)):
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, port: int, device: str, use_vllm: bool, log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    if use_vllm:
        if device.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
        args = ["vllm", "serve", str(model), "--port", str(port), "--served-model-name", "policy",
                "--gpu-memory-utilization", "0.3", "--max-model-len", "4096"]
    else:
        args = [sys.executable, "-c", _EVO, "serve", str(model), "--port", str(port), "--device", device,
                "--served-model-name", "policy"]
    return subprocess.Popen(args, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, cwd=ROOT)


def wait_healthy(proc: subprocess.Popen, url: str, timeout: float, log: Path) -> float:
    import httpx

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"rollout server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return time.monotonic() - t0
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"rollout server not healthy after {timeout:.0f} s: {log.read_text()[-2000:]}")


def rollout_throughput(url: str, prompts: int, n: int, max_new_tokens: int) -> dict:
    from evo_core.trainer.http_engine import HTTPEngine, HTTPEngineConfig
    from evo_core.trainer.protocols import SamplingParams

    texts = [f"Compute {a} + {a * 3}." for a in range(prompts)]
    params = SamplingParams(n=n, temperature=1.0, max_new_tokens=max_new_tokens, seed=0)
    with HTTPEngine(HTTPEngineConfig(base_url=url + "/v1", model="policy", prompts_per_request=8,
                                     max_concurrency=16, timeout_s=600)) as eng:
        eng.generate(texts[:2], SamplingParams(n=1, max_new_tokens=8))  # warm-up
        t = time.perf_counter()
        rows = eng.generate(texts, params)
        dt = time.perf_counter() - t
    tokens = sum(len(s.token_ids) for r in rows for s in r)
    return {"prompts": prompts, "n": n, "max_new_tokens": max_new_tokens, "tokens": tokens,
            "seconds": round(dt, 3), "tokens_per_s": round(tokens / dt, 1)}


def rl_run(work: Path, model: Path, train: Path, held: Path, url: str, args: argparse.Namespace) -> dict:
    q = json.dumps
    rollout = (f'{{engine = "http", base_url = {q(url + "/v1")}, model = "policy", sync_mode = "checkpoint", '
               f'sync_dir = {q(str(work / "sync"))}, timeout_s = 600.0}}')
    sets = {"policy.path": q(str(model)), "policy.dtype": q(args.dtype), "task.train": q(str(train)),
            "task.test": q(str(held)), "task.validation_fraction": "0.125",  # ~8 of the 64 train rows
            "run.device": q(args.device), "run.steps": str(args.steps),
            "run.eval_every": str(args.steps), "run.checkpoint_dir": q(str(work / "ckpt")),
            "rl.prompts_per_step": str(args.prompts), "rl.group_size": str(args.group),
            "rl.max_new_tokens": str(args.max_new_tokens), "rl.overlong_buffer": str(max(1, args.max_new_tokens // 8)),
            "rl.micro_batch_size": str(args.micro_batch), "eval.samples": "1",
            "harness.backtest.k_steps": "2",  # an online A/B trains control and treatment this many steps each
            "rollout": rollout}
    if args.zero_stage:  # DeepSpeed ZeRO over the ranks (the recipe's ZeRO keys, stage and device swapped)
        sets.update({"distributed.engine": q("deepspeed"), "distributed.zero_stage": str(args.zero_stage),
                     "distributed.accelerator": q("cuda" if args.device.startswith("cuda") else "cpu"),
                     "distributed.precision": q("bf16" if args.dtype == "bfloat16" else "fp32")})
    url_store = f"sqlite:///{work}/evo.sqlite"
    launch = [sys.executable, "-c", _EVO]
    if args.ranks > 1 or args.zero_stage:  # one process per GPU; rank 0 logs, the others follow (docs/scale.md)
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.ranks}",
                  "-m", "evo_core.cli.app"]
        sets["run.device"] = q("cuda" if args.device.startswith("cuda") else args.device)  # each rank: its LOCAL_RANK GPU
    cmd = [*launch, "run", str(ROOT / "configs/recipes/math.toml"), "--store", url_store,
           "--harness", "evolving", "--no-progress", "--json"]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=dict(os.environ, EVO_NO_PLUGIN_COMMANDS="1"))
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"evo run failed ({proc.returncode}): {proc.stderr[-3000:]}")
    from evo_core.store import open_store, run_stream
    from evo_events import PolicyUpdated, StepCompleted

    [row] = json.loads(proc.stdout.strip().splitlines()[-1])
    st = open_store(url_store)
    events = list(st.events(run_stream(row["run_id"]), types=[StepCompleted.TYPE, PolicyUpdated.TYPE]))
    ok = st.verify().ok
    st.close()
    keys = ("step_time_s", "rollout_time_s", "rollout_tokens_per_s", "update_time_s", "update_tokens_per_s", "reward_mean")
    steps = [{k: (round(e.metrics[k], 3) if e.metrics.get(k) is not None else None) for k in keys}
             for e in events if isinstance(e, StepCompleted)]
    syncs = sum(isinstance(e, PolicyUpdated) and e.target == "policy" for e in events)
    return {"status": row["status"], "steps": steps, "weight_syncs": syncs, "wall_s": round(wall, 1), "log_verifies": ok,
            "prompts_per_step": args.prompts, "group_size": args.group, "max_new_tokens": args.max_new_tokens,
            "algorithm": "dapo (math recipe)", "ranks": args.ranks,
            "engine": f"deepspeed zero-{args.zero_stage}" if args.zero_stage else "ddp"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="scratch directory (model, data, store, checkpoints)")
    ap.add_argument("--toy", action="store_true", help="toy model and sizes (a CPU smoke run of this script)")
    ap.add_argument("--device", default="cuda:0", help="trainer device")
    ap.add_argument("--server-device", default="cuda:0", help="rollout server device")
    ap.add_argument("--vllm", action="store_true", help="time rollouts on vllm serve too (the RL run uses evo serve)")
    ap.add_argument("--dtype", default=None, help="bfloat16 (GPU default) or float32 (CPU default)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--prompts", type=int, default=None)
    ap.add_argument("--group", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--micro-batch", type=int, default=None)
    ap.add_argument("--ranks", type=int, default=1,
                    help="train as this many ranks under torchrun (DDP over the GPUs; one evo serve for rollouts)")
    ap.add_argument("--zero-stage", type=int, default=0, choices=(0, 1, 2, 3),
                    help="train through DeepSpeed ZeRO at this stage (0: engine = ddp, gradients summed over ranks)")
    ap.add_argument("--model-dir", default="", help="a local HF model (>= 0.5B) to use instead of building one")
    args = ap.parse_args()
    toy = args.toy
    args.dtype = args.dtype or ("float32" if toy else "bfloat16")
    args.steps = args.steps or (2 if toy else 3)
    args.prompts = args.prompts or (2 if toy else 16)
    args.prompts = -(-args.prompts // args.ranks) * args.ranks  # the global batch splits evenly over the ranks
    args.group = args.group or (2 if toy else 8)
    args.max_new_tokens = args.max_new_tokens or (8 if toy else 256)
    args.micro_batch = args.micro_batch or (0 if toy else 16)

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {"size": "toy" if toy else "0.5b", "device": args.device, "server_device": args.server_device,
                 "dtype": args.dtype}
    t = time.perf_counter()
    model = work / "model"
    if args.model_dir and (Path(args.model_dir) / "config.json").exists():
        model = Path(args.model_dir)
        out["model"] = str(model)
    else:
        out["params"] = build_model(model, "toy" if toy else "0.5b", args.dtype)
    out["ranks"] = args.ranks
    out["build_s"] = round(time.perf_counter() - t, 1)
    train, held = write_tasks(work / "data", 64, 8 if toy else 16)
    servers = [("evo_serve", False)] + ([("vllm", True)] if args.vllm else [])
    out["rollouts"] = {}
    for name, use_vllm in servers:
        port = free_port()
        log = work / f"{name}.log"
        proc = start_server(model, port, args.server_device, use_vllm, log)
        url = f"http://127.0.0.1:{port}"
        try:
            ready_s = wait_healthy(proc, url, 300, log)
            fig = rollout_throughput(url, 8 if toy else 64, 2 if toy else 8, 8 if toy else 128)
            out["rollouts"][name] = {"ready_s": round(ready_s, 1), **fig}
            if not use_vllm:  # the RL run needs /update_weights_from_disk after each update
                out["rl"] = rl_run(work, model, train, held, url, args)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
