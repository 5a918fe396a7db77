"""The RL phase of the GPU check: a few steps of the math recipe, in this process, with the
in-process rollout engine (batched sampling with a KV cache, ``HFPolicy.sample``) on one
device, timed piece by piece.

1. Build a Qwen2 model from its config (no download): Qwen2-0.5B's width, 36 layers (537M
   parameters) with a character tokenizer, saved as a local HF directory (``--cpu``: a toy).
2. Write synthetic BigMath/AIME-format task files.
3. Run ``configs/recipes/math.toml`` as shipped plus overrides (this model, these files,
   GPU-sized batches: 64 prompts x 8 samples x 256 new tokens by default, the evolving
   harness arm, in-process rollouts) through ``evo_core.loop.RunLoop``, printing a line per
   step and rewriting ``--out`` after each one with the step's figures:
   rollout and update tokens/s, and the seconds spent in rollout, grading (verifier and
   features), update, weight sync, weights digest, resume checkpoint, the harness pass,
   evaluation and the event log.

``rl.dynamic_sampling = false``: an untrained model's groups rarely differ in reward, and
DAPO would drop them all and skip the update; the update's cost is what is measured.

    python -m benchmarks.gpu_rl --work /tmp/w --out /tmp/rl.json            # one GPU
    python -m benchmarks.gpu_rl --work /tmp/w --out /tmp/rl.json --cpu      # toy sizes
"""

from __future__ import annotations

import argparse
import json
import string
import time
from pathlib import Path
from typing import Any, Callable, Optional

from benchmarks.gpu_phases import write_json

ROOT = Path(__file__).resolve().parents[1]
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
    with torch.device("cuda" if torch.cuda.is_available() and size != "toy" else "cpu"):  # a 537M init on the host is slow
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


def overrides(a: argparse.Namespace, model: Path, train: Path, held: Path, work: Path) -> list[str]:
    q = json.dumps
    sets = {"policy.path": q(str(model)), "policy.dtype": q(a.dtype), "task.train": q(str(train)),
            "task.test": q(str(held)), "task.validation_fraction": "0.05",
            "run.device": q(a.device), "run.steps": str(a.steps), "run.eval_every": str(a.steps),
            "run.eval_at_start": "false", "run.checkpoint_dir": q(str(work / "ckpt")), "run.progress": "false",
            "rl.prompts_per_step": str(a.prompts), "rl.group_size": str(a.group),
            "rl.max_new_tokens": str(a.max_new_tokens), "rl.overlong_buffer": str(max(1, a.max_new_tokens // 8)),
            "rl.micro_batch_size": str(a.micro_batch), "rl.dynamic_sampling": "false",
            "eval.samples": "1", "task.test_limit": str(a.eval_items), "task.validation_limit": str(a.eval_items),
            "harness.backtest.k_steps": "1", "harness.backtest.eval_limit": str(a.eval_items),
            "harness.max_proposals_per_round": "1",  # the final pass backtests one proposal (2 branch steps)
            "rollout": '{engine = "inprocess"}'}
    return [f"{k}={v}" for k, v in sets.items()]


class Printer:
    """RunLoop's progress object: a line for each thing the loop does (SFT, evaluation, a step)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def _say(self, msg: str) -> None:
        print(f"rl +{time.perf_counter() - self.t0:6.1f}s {msg}", flush=True)

    def sft(self, step: int, total: int, loss: float) -> None:
        if step == total or step % max(1, total // 5) == 0:
            self._say(f"SFT step {step}/{total} loss {loss:.4f}")

    def start_run(self, run_id: str, mode: str, total: int, done: int) -> None:
        self._say(f"run {run_id} ({mode}): {total} RL steps")

    def evaluating(self, step: int, split: str) -> None:
        self._say(f"evaluation of {split} at step {step} ...")

    def evaluated(self, step: int, split: str, metrics: dict) -> None:
        self._say(f"evaluation of {split} at step {step}: strict accuracy {metrics.get('strict_accuracy')}")

    def backtest(self, *args: Any, **kw: Any) -> None:
        self._say(f"harness backtest branch {args or ''}{kw or ''}")

    def step(self, step: int, m: dict, evals: Optional[dict]) -> None:
        pass  # the step line comes from on_step, with the timings

    def end_run(self) -> None:
        self._say("run finished")


def timed(fn: Callable[..., Any], acc: dict[str, float], key: str) -> Callable[..., Any]:
    """``fn`` with its wall time added to ``acc[key]`` on every call."""
    def wrapper(*args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            acc[key] = acc.get(key, 0.0) + time.perf_counter() - t
    return wrapper


def _r(x: Any, nd: int = 3) -> Optional[float]:
    return None if x is None else round(float(x), nd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="scratch directory (model, data, store, checkpoints)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cpu", action="store_true", help="toy model and sizes on the CPU")
    ap.add_argument("--model-dir", default="", help="a local HF model directory to use instead of building one")
    ap.add_argument("--steps", type=int, default=None, help="RL steps (default 3)")
    ap.add_argument("--prompts", type=int, default=None, help="prompts per step (default 64 GPU / 4 CPU)")
    ap.add_argument("--group", type=int, default=None, help="samples per prompt (default 8 GPU / 2 CPU)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default 256 GPU / 8 CPU")
    ap.add_argument("--micro-batch", type=int, default=None, help="sequences per forward in the update (default 64 GPU / 0 CPU = all)")
    ap.add_argument("--eval-items", type=int, default=None, help="validation/test items evaluated (default 16 GPU / 4 CPU)")
    a = ap.parse_args(argv)
    cpu = a.cpu
    a.device = "cpu" if cpu else "cuda"
    a.dtype = "float32" if cpu else "bfloat16"
    a.steps = a.steps or 3
    a.prompts = a.prompts or (4 if cpu else 64)
    a.group = a.group or (2 if cpu else 8)
    a.max_new_tokens = a.max_new_tokens or (8 if cpu else 256)
    a.micro_batch = a.micro_batch if a.micro_batch is not None else (0 if cpu else 64)
    a.eval_items = a.eval_items or (4 if cpu else 16)
    out_path, work = Path(a.out), Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"device": a.device, "dtype": a.dtype, "prompts_per_step": a.prompts, "group_size": a.group,
                           "max_new_tokens": a.max_new_tokens, "micro_batch": a.micro_batch, "rollout_engine": "inprocess",
                           "harness": "evolving", "algorithm": "dapo (math recipe), dynamic sampling off", "steps": []}
    t0 = time.perf_counter()
    if a.model_dir:
        model = Path(a.model_dir)
        out["model"] = str(model)
    else:
        model = work / "model"
        out["params"] = build_model(model, "toy" if cpu else "0.5b", a.dtype)
        out["model"] = f"qwen2 {'toy' if cpu else '0.5b-width x 36 layers'}, char tokenizer"
    out["build_s"] = round(time.perf_counter() - t0, 2)
    print(f"rl: model ready in {out['build_s']} s ({out.get('params', '?')} parameters)", flush=True)
    train, held = write_tasks(work / "data", max(64, a.prompts * 2), a.eval_items)

    from evo_core.config import load_config
    from evo_core.loop import RunLoop
    from evo_core.store import open_store, run_stream

    cfg = load_config(str(ROOT / "configs/recipes/math.toml"), overrides(a, model, train, held, work)).for_arm("evolving")
    store = open_store(f"sqlite:///{work}/evo.sqlite")
    acc: dict[str, float] = {}
    loop = RunLoop(cfg, store, progress=Printer())
    t = time.perf_counter()
    loop.start()
    out["start_s"] = round(time.perf_counter() - t, 2)  # session, policy load, grading workers, step-0 snapshot
    out["run_id"] = loop.run_id
    print(f"rl: run started in {out['start_s']} s", flush=True)
    write_json(out_path, out)
    sess = loop.session
    sess.sync_engine = timed(sess.sync_engine, acc, "sync")
    from evo_core.trainer import grading  # the session grades through this module's function
    grading.graded = timed(grading.graded, acc, "grading")
    before = {**loop.timings, **acc}
    last = time.perf_counter()

    def figures(step: int, m: dict) -> dict[str, Any]:
        now = {**loop.timings, **acc}
        d = {k: now.get(k, 0.0) - before.get(k, 0.0) for k in set(now) | set(before)}
        wall = time.perf_counter() - last
        return {"step": step, "step_wall_s": _r(wall), "compute_s": _r(d.get("compute")),
               "rollout_s": _r(m.get("rollout_time_s")), "rollout_tokens_per_s": _r(m.get("rollout_tokens_per_s"), 1),
               "grading_s": _r(d.get("grading", 0.0)),
               "update_s": _r(m.get("update_time_s")), "update_tokens_per_s": _r(m.get("update_tokens_per_s"), 1),
               "sync_s": _r(d.get("sync", 0.0)), "digest_s": _r(d.get("digest")),
               "checkpoint_s": _r(d.get("checkpoint")), "harness_s": _r(d.get("harness")),
               "eval_s": _r(d.get("eval")),
               "log_s": _r(sum(d.get(k, 0.0) for k in ("events", "append", "observe", "blobs"))),
               "reward_mean": _r(m.get("reward_mean")), "length_mean": _r(m.get("length_mean"), 1)}

    harness_pass = loop._harness_pass

    def timed_harness(step: int, batch: Any, rollouts: Any, step_ev: Any, evals: Any) -> Any:
        """The step's figures before its harness pass (a pass that runs past the budget, e.g. the
        final pass's backtests, still leaves the step's compute figures in the JSON)."""
        fig = figures(step, step_ev.metrics)
        fig.update(harness_s=None, step_wall_s=None, pending="harness pass")
        out["steps"].append(fig)
        write_json(out_path, out)
        print(f"rl: RL step {step}/{a.steps} computed: rollout {fig['rollout_s']} s at {fig['rollout_tokens_per_s']} tok/s, "
              f"grading {fig['grading_s']} s, update {fig['update_s']} s at {fig['update_tokens_per_s']} tok/s, "
              f"sync {fig['sync_s']} s, digest {fig['digest_s']} s, checkpoint {fig['checkpoint_s']} s, "
              f"eval {fig['eval_s']} s; harness pass ...", flush=True)
        return harness_pass(step, batch, rollouts, step_ev, evals)

    loop._harness_pass = timed_harness

    def on_step(step: int, m: dict) -> None:
        nonlocal before, last
        fig = figures(step, m)
        if out["steps"] and out["steps"][-1]["step"] == step:
            out["steps"][-1] = fig
        else:
            out["steps"].append(fig)
        write_json(out_path, out)
        print(f"rl: RL step {step}/{a.steps}: {fig['step_wall_s']} s (rollout {fig['rollout_s']} s at "
              f"{fig['rollout_tokens_per_s']} tok/s, grading {fig['grading_s']} s, update {fig['update_s']} s at "
              f"{fig['update_tokens_per_s']} tok/s, sync {fig['sync_s']} s, digest {fig['digest_s']} s, "
              f"checkpoint {fig['checkpoint_s']} s, harness {fig['harness_s']} s, eval {fig['eval_s']} s)", flush=True)
        before, last = {**loop.timings, **acc}, time.perf_counter()

    loop.on_step = on_step
    outcome = loop.run()
    from evo_events import PolicyUpdated

    events = list(store.events(run_stream(loop.run_id), types=[PolicyUpdated.TYPE]))
    out.update(status=outcome.status, policy_updates=sum(e.policy_version > 0 for e in events),
               log_verifies=store.verify().ok, timings_total_s={k: round(v, 3) for k, v in outcome.timings.items()})
    store.close()
    write_json(out_path, out)
    print(f"rl: {outcome.status}, {len(out['steps'])} steps, log verifies: {out['log_verifies']}", flush=True)
    return 0 if outcome.status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
