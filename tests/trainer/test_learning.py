"""GRPO really learns: trained on the strict oracle (the reference arm) from the planted SFT
start, test strict accuracy rises above the SFT starting point. Slow (SFT + 150 RL steps)."""

import pytest

from evo_core.config import load_config
from evo_core.loop import RunLoop
from evo_core.store import open_store, run_stream
from evo_events import EvalCompleted


@pytest.mark.slow
def test_grpo_with_strict_verifier_beats_the_sft_start(tmp_path):
    cfg = load_config("configs/quickstart.toml", [
        "run.steps=150", "run.eval_every=25", f"run.checkpoint_dir='{tmp_path}'", "run.progress=false",
    ]).for_arm("reference")
    store = open_store("memory://")
    loop = RunLoop(cfg, store)
    loop.start()
    loop.run()
    evals = [e for e in store.events(run_stream(loop.run_id)) if isinstance(e, EvalCompleted) and e.split == "test"
             and e.branch == "main"]
    start, end = evals[0].metrics, evals[-1].metrics
    assert evals[0].step == 0 and evals[-1].step == 150
    # sampled strict accuracy (4 samples x 400 test items) improves by a clear margin
    assert end["strict_accuracy"] >= start["strict_accuracy"] + 0.03, (start, end)
    assert end["hack_rate"] <= start["hack_rate"]  # the oracle reward does not pay for the planted loophole
