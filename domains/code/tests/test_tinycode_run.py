"""The code flaw's shipped config: it loads with the code alphabet, and a short run of it
completes through ``evo run`` (real sandbox, tiny model, 2 steps)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "suite" / "code-tinycode.toml"


def test_the_config_loads_and_its_alphabet_covers_the_programs():
    from evo_code.domain import CodeDomain
    from evo_core.api import TaskSource
    from evo_core.config import load_config
    from evo_core.trainer.tokenizer import DEFAULT_CHARS, CharTokenizer

    cfg = load_config(str(CONFIG), ['task.options.signal_names="hashed"'])
    assert cfg.task.domain == "code" and cfg.task.options == {"flaw": "visible_tests", "signal_names": "hashed"}
    assert cfg.sft.options["plant_rate"] > 0
    tok = CharTokenizer(cfg.policy.tiny.chars)
    tasks = CodeDomain().load_tasks(TaskSource(path=cfg.task.train, split="train"))[:50]
    for t in tasks:  # prompts and both reference programs round-trip, with no unknown character
        for text in (t.prompt, t.meta["solution"], t.meta["hack"]):
            assert tok.unk_id not in tok.encode(text) and tok.decode(tok.encode(text)) == text
    assert len(tok.encode(tasks[0].prompt + tasks[0].meta["solution"], add_bos=True)) + 1 <= cfg.policy.tiny.max_positions
    assert len(tasks[0].meta["solution"]) < cfg.rl.max_new_tokens
    # the arithmetic default is unchanged
    assert load_config(str(ROOT / "configs" / "quickstart.toml"), []).policy.tiny.chars == DEFAULT_CHARS


def test_a_two_step_run_of_the_config_completes(tmp_path):
    """A 1-layer model, 4 SFT steps, 2 RL steps and the evaluations, graded in the sandbox
    (about 12 s on the shared 2-core machine)."""
    sets = ["run.steps=2", "run.eval_every=2", "run.threads=1", "run.progress=false", 'run.harnesses=["fixed"]',
            "sft.steps=4", "sft.batch_size=8", f'sft.cache_dir="{tmp_path / "sft"}"', f'run.checkpoint_dir="{tmp_path / "ck"}"',
            "rl.prompts_per_step=4", "rl.group_size=4", "eval.samples=1",
            'task.train="generate://tinycode?ops=add,sub&validation=8&test=8&seed=0"',
            'task.options.signal_names="hashed"', "task.options.signal_seed=3",
            "policy.tiny.hidden_size=32", "policy.tiny.num_layers=1", "policy.tiny.num_heads=2",
            "policy.tiny.num_kv_heads=2", "policy.tiny.intermediate_size=64"]
    cmd = [sys.executable, "-m", "evo_core.cli.app", "run", str(CONFIG), "--store", f"sqlite:///{tmp_path / 'r.sqlite'}",
           "--json", "--no-progress"]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "EVO_NO_PLUGIN_COMMANDS": "1", "EVO_LOG_LEVEL": "WARNING"}
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["status"] == "completed" and row["steps"] == 2 and "strict_accuracy" in row["final_eval"]

    from evo_core.store import open_store, run_stream

    st = open_store(f"sqlite:///{tmp_path / 'r.sqlite'}")
    try:
        rollouts = list(st.events(run_stream(row["run_id"]), types=["evo.RolloutCompleted"]))
    finally:
        st.close()
    assert len(rollouts) == 2 * 4 * 4
    assert all(r.signals and all(k.startswith("s_") for k in r.signals) for r in rollouts)  # hashed names only
