"""One training measurement of the GPU check: a Qwen2-shaped model built from its config
(random weights and tokens, nothing downloaded), a few timed optimizer steps, three ways:

- ``bf16``: plain torch, bf16 weights, AdamW (fused on CUDA), grad clip: the fastest anchor;
- ``autocast``: plain torch, fp32 master weights under ``torch.autocast(bfloat16)``, AdamW
  (fused on CUDA), grad clip: the like-for-like anchor of a DeepSpeed bf16 configuration;
- ``engine``: the recipes' GPU training engine, DeepSpeed ZeRO-2 bf16 on this one device through
  ``evo_core.trainer.distributed.wrap_model``; the plain single-process update (bf16 AdamW)
  when deepspeed is not importable.

    python -m benchmarks.gpu_train --mode autocast --out /tmp/a.json            # GPU sizes
    python -m benchmarks.gpu_train --mode engine --cpu --out /tmp/e.json        # toy sizes, CPU

It prints a line per timed step and rewrites ``--out`` after each one.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.gpu_phases import write_json

# Qwen2-0.5B's shape (494M parameters with tied embeddings), and a toy for the CPU.
SIZES = {
    "0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2),
    "toy": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2),
}
MODES = ("bf16", "autocast", "engine")


def deepspeed_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("deepspeed") is not None


def build(size: str, seq: int, device: Any) -> Any:
    """The model in fp32, initialised on ``device`` (a 0.5B init on the host takes seconds)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(**SIZES[size], max_position_embeddings=max(seq, 2048), tie_word_embeddings=True)
    with torch.device(device):
        return Qwen2ForCausalLM(cfg)


def adamw(params: Any, cuda: bool) -> Any:
    import torch

    # fused: one kernel for the whole update on CUDA (foreach elsewhere); what a tuned loop uses
    return torch.optim.AdamW(params, lr=1e-5, fused=True) if cuda else torch.optim.AdamW(params, lr=1e-5)


def plain_step(model: Any, cuda: bool, autocast: bool) -> Callable[[Any], float]:
    import torch

    opt = adamw([p for p in model.parameters() if p.requires_grad], cuda)
    dev = "cuda" if cuda else "cpu"

    def step(ids: Any) -> float:
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())
    return step


def engine_step(model: Any, cuda: bool, batch: int) -> tuple[Callable[[Any], float], str]:
    """The recipes' engine: ZeRO-2 bf16 (fp32 on the CPU toy: DeepSpeed's CPU path is tested in fp32)."""
    import torch

    if not deepspeed_importable():
        return plain_step(model.to(torch.bfloat16) if cuda else model, cuda, autocast=False), "plain (deepspeed not importable)"
    from evo_core.trainer.distributed import DeepSpeedSettings, wrap_model

    precision = "bf16" if cuda else "fp32"
    if cuda:  # bf16 weights before the optimizer takes them (DeepSpeed keeps its fp32 master copy)
        model = model.to(torch.bfloat16)
    settings = DeepSpeedSettings(zero_stage=2, micro_batch_size=batch, precision=precision, lr=1e-5, grad_clip=1.0,
                                 accelerator="cuda" if cuda else "cpu")
    engine = wrap_model(model, settings)

    def step(ids: Any) -> float:
        loss = engine.module(input_ids=ids, labels=ids, use_cache=False).loss
        engine.backward(loss)
        engine.step()
        return float(loss.detach())
    return step, f"deepspeed zero-2 {precision}"


def peak_mem_gib(cuda: bool) -> tuple[float, str]:
    import torch

    if cuda:
        return round(torch.cuda.max_memory_allocated() / 2**30, 2), "torch.cuda.max_memory_allocated"
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3), "process max RSS (CPU)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--cpu", action="store_true", help="toy sizes on the CPU")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 8 GPU / 3 CPU)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 2 GPU / 1 CPU)")
    ap.add_argument("--batch", type=int, default=None, help="micro-batch (default 8 GPU / 2 CPU)")
    ap.add_argument("--seq", type=int, default=None, help="tokens per sequence (default 1024 GPU / 32 CPU)")
    ap.add_argument("--profile", action="store_true", help="profile one more step: the top ops by self time")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import torch

    cuda = not a.cpu
    if cuda and not torch.cuda.is_available():
        print("error: torch sees no CUDA device (use --cpu for the toy sizes)", file=sys.stderr)
        return 2
    steps, warmup = a.steps or (8 if cuda else 3), a.warmup if a.warmup is not None else (2 if cuda else 1)
    batch, seq = a.batch or (8 if cuda else 2), a.seq or (1024 if cuda else 32)
    size = "0.5b" if cuda else "toy"
    out = Path(a.out)
    if not cuda:
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    t0 = time.perf_counter()
    if cuda:
        torch.cuda.set_device(0)
    device = torch.device("cuda:0" if cuda else "cpu")
    model = build(size, seq, device)
    if a.mode == "engine":
        step, engine = engine_step(model, cuda, batch)
    else:
        model = model.to(device, dtype=torch.bfloat16 if a.mode == "bf16" else torch.float32)
        step, engine = plain_step(model, cuda, autocast=a.mode == "autocast"), f"torch {a.mode}"
    n_params = sum(p.numel() for p in model.parameters())
    res: dict[str, Any] = {"mode": a.mode, "engine": engine, "model": f"qwen2-{size}", "params": n_params,
                           "micro_batch": batch, "seq_len": seq, "steps": steps, "warmup": warmup,
                           "device": torch.cuda.get_device_name() if cuda else "cpu",
                           "build_s": round(time.perf_counter() - t0, 2), "step_times_s": []}
    print(f"{a.mode}: {engine}, {n_params:,} parameters, ready in {res['build_s']} s", flush=True)
    g = torch.Generator().manual_seed(1234)
    vocab = SIZES[size]["vocab_size"]

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    for k in range(warmup + steps):
        ids = torch.randint(0, vocab, (batch, seq), generator=g).to(device)
        t = time.perf_counter()
        loss = step(ids)
        sync()
        dt = time.perf_counter() - t
        timed = k >= warmup
        if timed:
            res["step_times_s"].append(round(dt, 4))
            med = statistics.median(res["step_times_s"])
            res.update(step_time_s_median=round(med, 4), tokens_per_s=round(batch * seq / med, 1),
                       loss_last=round(loss, 4))
            res["peak_mem_gib"], res["peak_mem_source"] = peak_mem_gib(cuda)
            write_json(out, res)
        print(f"{a.mode}: {'step' if timed else 'warm-up step'} {k + 1 - warmup if timed else k + 1}"
              f"/{steps if timed else warmup}: {dt:.3f} s, loss {loss:.3f}", flush=True)
    if a.profile:  # one more step under the profiler: where a step's time goes, op by op
        ids = torch.randint(0, vocab, (batch, seq), generator=g).to(device)
        res["profile_top_ops"] = profile_step(lambda: step(ids), cuda)
        write_json(out, res)
        top = res["profile_top_ops"][:5]
        print(f"{a.mode}: profiled step, top ops: " + "; ".join(f"{o['op']} {o['self_ms']} ms x{o['calls']}" for o in top),
              flush=True)
    return 0


def profile_step(run: Callable[[], Any], cuda: bool, top: int = 15) -> list[dict[str, Any]]:
    """The ``top`` ops of one step by self time on the device (CUDA) or the host (CPU)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        run()
        if cuda:
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        dev = getattr(e, "self_device_time_total", None)
        if dev is None:
            dev = getattr(e, "self_cuda_time_total", 0)
        self_us = dev if cuda else e.self_cpu_time_total
        rows.append({"op": e.key[:80], "self_ms": round(self_us / 1000, 3), "calls": e.count,
                     "cpu_ms": round(e.self_cpu_time_total / 1000, 3)})
    rows.sort(key=lambda r: -r["self_ms"])
    return rows[:top]


if __name__ == "__main__":
    raise SystemExit(main())
