"""``evo run`` without a terminal: no progress bar, one structlog line every ``log_every``
steps (text or JSON), with the step's reward, the latest held-out figures, the harness
version and the window's decisions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from evo_core.testing import EVO_MAIN
from evo_core.trainer.step_log import StepLog

from .testlib import TINY_TOML

ROOT = Path(__file__).resolve().parents[2]
TOML = """
[run]
name = "quickstart"
steps = 4
eval_every = 2
log_every = 2
harnesses = ["evolving"]
checkpoint_dir = "{ck}"
threads = 1
""" + TINY_TOML + """[rl]
prompts_per_step = 2
group_size = 4
max_new_tokens = 4
[eval]
samples = 1
"""


def _evo_run(tmp_path, global_args=(), run_args=(), env=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / "q.toml"
    cfg.write_text(TOML.format(ck=tmp_path / "ck"))
    e = {**os.environ, "EVO_NO_PLUGIN_COMMANDS": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    e.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-c", EVO_MAIN, *global_args, "run", str(cfg), "--store",
                           f"sqlite:///{tmp_path}/evo.sqlite", *run_args],
                          capture_output=True, text=True, env=e, cwd=ROOT, timeout=600)


def test_piped_stderr_gets_step_lines_not_a_progress_bar(tmp_path):
    r = _evo_run(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "\x1b[" not in r.stderr and "\r" not in r.stderr and "━" not in r.stderr  # no bar, no colour
    steps = [line for line in r.stderr.splitlines() if " step " in line and "run_id=quickstart-evolving-" in line]
    assert len(steps) == 2, r.stderr  # steps 2 and 4 (log_every = 2)
    assert "step=2" in steps[0] and "step=4" in steps[1]
    for key in ("reward=", "validation=", "test=", "harness_v=", "promoted=", "rejected="):
        assert key in steps[1], steps[1]


def test_json_log_format_gives_parseable_lines(tmp_path):
    # the global option and the env var do the same; --log-every overrides run.log_every
    for how in ((["--log-format", "json"], {}), ([], {"EVO_LOG_FORMAT": "json"})):
        args, env = how
        r = _evo_run(tmp_path / str(len(args)), args, ["--log-every", "1"], env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        lines = [json.loads(x) for x in r.stderr.splitlines() if x.strip()]  # every line is JSON
        steps = [x for x in lines if x["event"] == "step"]
        assert [x["step"] for x in steps] == [1, 2, 3, 4]
        last = steps[-1]
        assert last["of"] == 4 and last["level"] == "info" and "timestamp" in last
        assert isinstance(last["reward"], float) and isinstance(last["validation"], float)
        assert isinstance(last["test"], float) and isinstance(last["harness_v"], int)
        assert isinstance(last["decisions"], list)
        assert any(x["event"] == "run sealed" for x in lines)


def test_a_bad_log_format_is_one_line(tmp_path):
    r = _evo_run(tmp_path, ["--log-format", "xml"])
    assert r.returncode == 2 and "log format must be one of console, json" in r.stderr


def _batches(events):
    """The loop commits one batch per step: group the log's events by step."""
    batch, step = [], None
    for ev in events:
        s = getattr(ev, "step", None)
        if batch and s != step:
            yield batch
            batch = []
        batch.append(ev)
        step = s
    if batch:
        yield batch


def test_step_log_names_the_windows_decisions(tmp_path):
    from evo_core.store import open_store, run_stream
    from evo_core.synthetic import generate_run

    st = open_store("memory://")
    run_id = generate_run(st, steps=20, rollouts_per_step=4)
    events = list(st.events(run_stream(run_id)))
    log = StepLog(log_every=5)
    log.start_run(run_id, "evolving", 20, 0)
    with structlog.testing.capture_logs() as logs:
        for batch in _batches(events):
            log.events(batch)
    lines = [x for x in logs if x["event"] == "step"]
    assert [x["step"] for x in lines] == [5, 10, 15, 20]
    assert sum(x["promoted"] for x in lines) == 2 and sum(x["rejected"] for x in lines) == 2
    decided = [d for x in lines for d in x["decisions"]]
    assert decided and all(d[0] in "+-" for d in decided)
    assert any("/" in d for d in decided)  # named by the proposal's kind/name
    assert lines[-1]["harness_v"] == 2


def test_log_every_is_validated(tmp_path):
    from evo_core.config import ConfigError, config_from_dict

    from .testlib import tiny_config_dict

    with pytest.raises(ConfigError, match="'run.log_every' must be an integer >= 1"):
        config_from_dict(tiny_config_dict(tmp_path, run={"log_every": 0}))


def test_terminal_progress_has_tasks_for_evals_and_backtests():
    import io

    from rich.console import Console

    from evo_core.trainer.progress import RunProgress

    p = RunProgress(Console(file=io.StringIO(), force_terminal=True, width=120))
    p.start_run("r1", "evolving", 10, 0)
    p.evaluating(0, "validation")
    assert [t.description.strip() for t in p.progress.tasks][-1] == "eval validation @ step 0"
    p.evaluated(0, "validation", {"strict_accuracy": 0.5})
    p.backtest("train", 1, 3)
    bt = p.progress.tasks[-1]
    assert bt.description.strip() == "backtest branch" and bt.completed == 1 and bt.total == 3
    p.step(1, {"reward_mean": 0.5}, None)  # the pass is over: its backtest task goes
    assert [t.description for t in p.progress.tasks] == ["evolving r1"]
    p.end_run()
