"""A few DeepSpeed training steps of a Qwen2-shaped model built from its config (no
downloads, random weights and tokens), printing tokens/s and step time as JSON.

    python -m benchmarks.gpu_check                 # ~0.5B params, bf16, ZeRO-2, on the GPU(s)
    python -m benchmarks.gpu_check --toy --cpu     # a toy size on the CPU accelerator (gloo)

Multi-GPU: run it under ``torchrun --nproc_per_node=N`` (benchmarks/gpu_check.sh does).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


# Qwen2-0.5B's shape (494M parameters with tied embeddings).
SIZES = {
    "0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2),
    "toy": dict(vocab_size=1024, hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--toy", action="store_true", help="toy model size (for a CPU smoke run)")
    ap.add_argument("--cpu", action="store_true", help="DeepSpeed's CPU accelerator (gloo) even if a GPU exists")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 10 GPU / 3 CPU)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 2 GPU / 1 CPU)")
    ap.add_argument("--batch", type=int, default=None, help="micro-batch per rank (default 8 GPU / 2 CPU)")
    ap.add_argument("--seq", type=int, default=None, help="sequence length (default 1024 GPU / 64 CPU)")
    ap.add_argument("--zero-stage", type=int, default=2, choices=(0, 1, 2, 3))
    ap.add_argument("--precision", choices=("bf16", "fp32", "fp16"), default=None,
                    help="default bf16 on GPU, fp32 on CPU")
    ap.add_argument("--grad-checkpointing", action="store_true")
    ap.add_argument("--model-dir", default="", help="a local HF model (>= 0.5B) to train instead of the config-built one")
    args = ap.parse_args()

    import torch

    cpu = args.cpu or not torch.cuda.is_available()
    steps = args.steps or (3 if cpu else 10)
    warmup = args.warmup if args.warmup is not None else (1 if cpu else 2)
    batch = args.batch or (2 if cpu else 8)
    seq = args.seq or (64 if cpu else 1024)
    precision = args.precision or ("fp32" if cpu else "bf16")
    if cpu:
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "2"))))

    from transformers import Qwen2Config, Qwen2ForCausalLM

    from evo_core.trainer.distributed import DeepSpeedSettings, select_accelerator, wrap_model

    select_accelerator("cpu" if cpu else "cuda")
    if not cpu:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
    size = "toy" if args.toy else "0.5b"
    torch.manual_seed(0)
    t0 = time.perf_counter()
    local = args.model_dir and os.path.exists(os.path.join(args.model_dir, "config.json"))
    if local:  # a real checkpoint when one is at hand, else a model of that size built from its config
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(args.model_dir, torch_dtype=torch.float32)
        cfg = model.config
        size = os.path.basename(os.path.normpath(args.model_dir))
    else:
        cfg = Qwen2Config(**SIZES[size], max_position_embeddings=max(seq, 2048), tie_word_embeddings=True)
        model = Qwen2ForCausalLM(cfg)
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    build_s = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    settings = DeepSpeedSettings(zero_stage=args.zero_stage, micro_batch_size=batch, precision=precision,
                                 lr=1e-5, grad_clip=1.0, accelerator="cpu" if cpu else "cuda",
                                 gradient_checkpointing=args.grad_checkpointing)
    engine = wrap_model(model, settings)
    device = engine.device
    g = torch.Generator().manual_seed(1234 + engine.rank)

    def one_step() -> float:
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g).to(device)
        out = engine.module(input_ids=ids, labels=ids, use_cache=False)
        engine.backward(out.loss)
        engine.step()
        return float(out.loss.detach())

    def sync() -> None:
        if not cpu:
            torch.cuda.synchronize()

    for _ in range(warmup):
        one_step()
    sync()
    times, losses = [], []
    for _ in range(steps):
        t = time.perf_counter()
        losses.append(one_step())
        sync()
        times.append(time.perf_counter() - t)
    tokens_per_step = batch * seq * engine.world_size
    result = {
        "device": torch.cuda.get_device_name() if not cpu else "cpu",
        "world_size": engine.world_size,
        "model": size if local else f"qwen2-{size}",
        "params": n_params,
        "precision": precision,
        "zero_stage": args.zero_stage,
        "micro_batch": batch,
        "seq_len": seq,
        "steps": steps,
        "build_s": round(build_s, 3),
        "step_time_s_median": round(statistics.median(times), 4),
        "step_time_s_mean": round(statistics.fmean(times), 4),
        "tokens_per_s": round(tokens_per_step / statistics.median(times), 1),
        "loss_first": round(losses[0], 4),
        "loss_last": round(losses[-1], 4),
    }
    if not cpu:
        result["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    if engine.rank == 0:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
