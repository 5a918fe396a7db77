"""A path to a real model: a hub id instead of a local directory, a context window too small
for the recipe's replies, and a device too small for its batch are each one line that says
what to change (evo_core/trainer/fit.py, evo_core/trainer/policy.py, evo_core/harness/recipes.py).
The model is a local tiny Qwen2 directory (save_pretrained) with a 128-token window."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evo_core.config import load_config
from evo_core.trainer.fit import FitError, check_memory, check_run_fits, plan_memory

ROOT = Path(__file__).resolve().parents[2]
RECIPE_1X = ROOT / "configs" / "recipes" / "math-1xh200.toml"
RECIPE_8X = ROOT / "configs" / "recipes" / "math-8xh100.toml"
H200, H100 = int(139.8 * 2**30), int(79.1 * 2**30)  # torch's total_memory, as the devices report it


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from evo_core.trainer.tokenizer import CharTokenizer

    path = tmp_path_factory.mktemp("tiny-qwen2")
    tok = CharTokenizer("0123456789+-=. abcdefghijklmnopqrstuvwxyzCFP$\\{}")
    tok.save_hf(str(path))
    cfg = Qwen2Config(vocab_size=tok.vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                      bos_token_id=tok.bos_id, eos_token_id=tok.eos_id, pad_token_id=tok.pad_id)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("math-data")
    train = [{"problem": f"compute {a} + {a}.", "answer": str(2 * a), "source": "s"} for a in range(40)]
    train.append({"problem": "compute " + " + ".join(["1"] * 6) + ".", "answer": "6", "source": "s"})  # the longest
    test = [{"ID": f"2024-I-{i}", "Problem": f"find {i} + 1.", "Answer": i + 1} for i in range(4)]
    paths = root / "train.jsonl", root / "test.jsonl"
    for p, rows in zip(paths, (train, test)):
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def sets(model: Path, train: Path, test: Path, work: Path, **extra: str) -> list[str]:
    q = json.dumps
    kv = {"policy.path": q(str(model)), "policy.dtype": q("float32"), "task.train": q(str(train)),
          "task.test": q(str(test)), "run.device": q("cpu"), "run.checkpoint_dir": q(str(work / "ckpt")),
          "run.steps": "1", **extra}
    return [f"{k}={v}" for k, v in kv.items()]


def evo(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, EVO_NO_PLUGIN_COMMANDS="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "evo_core.cli.app", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def test_hub_id_is_one_line_naming_the_cause(tmp_path):
    proc = evo("run", str(RECIPE_1X), "--set", 'policy.path="Qwen/Qwen2.5-Math-1.5B"', "--store",
               f"sqlite:///{tmp_path}/s.sqlite", cwd=tmp_path)
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "hub id" in line and "local directory" in line and "never downloads" in line
    assert "huggingface-cli download Qwen/Qwen2.5-Math-1.5B" in line and "policy.path" in line
    assert not (tmp_path / "s.sqlite").exists()  # nothing was created


def test_hub_id_from_the_library():
    from evo_core.trainer.policy import HFPolicy, PolicyLoadError, hub_id_message

    with pytest.raises(PolicyLoadError, match="hub id"):
        HFPolicy.from_pretrained("Qwen/Qwen2.5-Math-1.5B")
    assert hub_id_message("/models/missing") is None and hub_id_message("./a/b") is None
    assert hub_id_message("missing-dir") is None


def test_context_window_is_checked_when_the_model_loads(tiny_model, tasks, tmp_path):
    train, test = tasks
    over = sets(tiny_model, train, test, tmp_path, **{"rl.max_new_tokens": "100"})
    proc = evo("run", str(RECIPE_1X), "--harness", "fixed", "--store", f"sqlite:///{tmp_path}/s.sqlite",
               *[a for s in over for a in ("--set", s)], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    [line] = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("error:")]
    m = re.search(r"rl.max_new_tokens = 100 plus the longest prompt \((\d+) tokens, task 'train:41'\) is (\d+) tokens, "
                  r"more than the context window of .*tiny-qwen2.* \(128, max_position_embeddings\): "
                  r"set rl.max_new_tokens <= (\d+)$", line)
    assert m, line
    prompt = int(m.group(1))  # the domain's prompt template around the longest problem, BOS included
    assert int(m.group(2)) == prompt + 100 and int(m.group(3)) == 128 - prompt


def test_context_window_that_fits_passes(tiny_model, tasks, tmp_path):
    from evo_core.plugins import PluginManager
    from evo_core.run_setup import build_domain, build_policy, load_splits
    from evo_core.trainer.fit import longest_prompt

    train, test = tasks
    cfg = load_config(str(RECIPE_1X), sets(tiny_model, train, test, tmp_path))
    domain, _ = build_domain(cfg, PluginManager())
    splits = load_splits(cfg, domain)
    policy = build_policy(cfg)
    everything = [*splits.train, *splits.validation, *splits.test]
    prompt, task_id = longest_prompt(policy, everything)
    assert task_id == "train:41"
    cfg = load_config(str(RECIPE_1X), sets(tiny_model, train, test, tmp_path, **{"rl.max_new_tokens": str(128 - prompt)}))
    assert check_run_fits(cfg, policy, everything) is None  # exactly the window; no device size: context only
    with pytest.raises(FitError) as e:  # and a device far too small for even this model: one line, a fix
        check_run_fits(cfg, policy, everything, eval_items=4, device_bytes=2**20, device="cuda:0")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("memory: this run needs about") and "cuda:0 has 0.0 GiB" in msg


def _qwen25_math_15b():
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                      num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=4096,
                      tie_word_embeddings=True)
    with torch.device("meta"):
        n = sum(p.numel() for p in Qwen2ForCausalLM(cfg).parameters())
    return cfg, n


@pytest.mark.parametrize("recipe, ranks, device_bytes", [(RECIPE_1X, 1, H200), (RECIPE_8X, 8, H100)],
                         ids=["1xh200", "8xh100"])
def test_sized_recipes_fit_their_machine(recipe, ranks, device_bytes):
    """Qwen2.5-Math-1.5B's shape (config only, no weights) with the recipe's own sizes, the
    longest prompt at 1,024 tokens (the window's remainder), 78 held-out items."""
    mc, n = _qwen25_math_15b()
    assert 1.5e9 < n < 1.6e9
    cfg = load_config(str(recipe))
    assert cfg.rl.max_new_tokens + 1024 <= mc.max_position_embeddings
    per_rank = cfg.rl.prompts_per_step // ranks * cfg.rl.group_size
    rows = min(max(per_rank, 78 * cfg.eval.samples), 1024)
    plan = plan_memory(mc, n, dtype_bytes=2, world_size=ranks, engine="deepspeed", zero_stage=2, precision="bf16",
                       rollout="inprocess", rows=rows, seq=4096, micro_batch=cfg.rl.micro_batch_size,
                       gradient_checkpointing=False)
    check_memory(plan, device_bytes, "gpu")
    # the same run with the original recipe's 16 eval samples (1,024 rows at once) does not fit an H100
    if ranks == 8:
        big = plan_memory(mc, n, dtype_bytes=2, world_size=8, engine="deepspeed", zero_stage=2, precision="bf16",
                          rollout="inprocess", rows=1024, seq=4096, micro_batch=2, gradient_checkpointing=False)
        with pytest.raises(FitError, match="sample fewer rows at once"):
            check_memory(big, device_bytes, "cuda:0")


def test_memory_fix_names_the_biggest_term():
    mc, n = _qwen25_math_15b()
    plan = plan_memory(mc, n, dtype_bytes=2, world_size=1, engine="ddp", zero_stage=1, precision="bf16",
                       rollout="http", rows=512, seq=4096, micro_batch=16, gradient_checkpointing=False)
    assert plan.kv_cache == 0  # sampled on a server
    with pytest.raises(FitError, match="lower rl.micro_batch_size .now 16 x 4096 tokens"):
        check_memory(plan, H100, "cuda:0")
