"""The run loop: the log's shape, failure handling, and kill-and-resume."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from evo_core.config import config_from_dict
from evo_core.loop import NoopHarness, RunError, RunLoop, resume_run
from evo_core.plugins import PluginManager
from evo_core.state import fold
from evo_core.store import open_store, run_stream
from evo_core.store.blobs import get_json
from evo_events import (EvalCompleted, PluginFailed, PolicyUpdated, RolloutCompleted, RunFinished, RunResumed,
                        RunStarted, StepCompleted)
from .testlib import tiny_config_dict
import evo_plugins.arithmetic as arithmetic

QUIET_HARNESS = {"diagnostics": {}, "gates": {}, "proposers": {}, "audit": {"rate": 1.0}}


def _cfg(tmp_path, **over):
    d = tiny_config_dict(tmp_path, **over)
    d.setdefault("harness", {}).update(QUIET_HARNESS)
    return config_from_dict(d).for_harness("fixed")


def _pm():
    pm = PluginManager(load_entrypoints=False)
    pm.register(arithmetic, name="evo_arithmetic")
    return pm


def _steps(events):
    return [e.step for e in events if isinstance(e, StepCompleted)]


def test_run_log_shape(tmp_path):
    store = open_store("memory://")
    cfg = _cfg(tmp_path)
    loop = RunLoop(cfg, store, plugins=_pm(), harness=NoopHarness())
    loop.start()
    out = loop.run()
    events = list(store.events(run_stream(out.run_id)))
    started = events[0]
    assert isinstance(started, RunStarted) and started.harness_mode == "fixed"
    assert started.config_hash == cfg.config_hash() and started.config["rl"]["group_size"] == 4
    assert isinstance(events[-1], RunFinished) and events[-1].status == "completed"
    assert _steps(events) == [1, 2, 3, 4]
    # each step's events are one contiguous append: rollouts, then StepCompleted, PolicyUpdated, evals
    records = list(store.read_stream(run_stream(out.run_id)))
    for step in (1, 2, 3, 4):
        idx = [i for i, e in enumerate(events) if getattr(e, "step", None) == step
               and isinstance(e, (RolloutCompleted, StepCompleted, PolicyUpdated, EvalCompleted))]
        assert idx == list(range(idx[0], idx[0] + len(idx)))
        assert len({records[i].position for i in idx}) == len(idx)
    rollouts = [e for e in events if isinstance(e, RolloutCompleted)]
    assert Counter(e.step for e in rollouts) == {1: 16, 2: 16, 3: 16, 4: 16}
    assert all(e.strict_correct is not None for e in rollouts)  # audit rate 1.0
    assert len({e.event_id for e in rollouts}) == len(rollouts)
    traj = get_json(store.blobs, rollouts[0].trajectory)
    mine = traj["rollouts"][rollouts[0].signals["trajectory_index"]]
    assert mine["rollout_id"] == rollouts[0].event_id and traj["groups"][mine["group_id"]]["prompt"].endswith("=")
    assert len({e.trajectory.digest for e in rollouts}) == 4  # one blob per step
    assert rollouts[0].signals.keys() >= {"answer_count", "hedged", "entropy", "advantage", "reward_final"}
    evals = [e for e in events if isinstance(e, EvalCompleted)]
    assert [e.step for e in evals] == [0, 2, 4] and all(e.n == 20 and len(e.item_scores) == 20 for e in evals)
    metrics = [e for e in events if isinstance(e, StepCompleted)][0].metrics
    for key in ("reward_mean", "reward_std", "strict_correct_rate", "length_correct", "length_incorrect",
                "truncation_rate", "entropy", "clip_frac", "zero_var_frac", "rollout_tokens_per_s", "update_tokens_per_s"):
        assert key in metrics
    assert [e.policy_version for e in events if isinstance(e, PolicyUpdated)] == [0, 1, 2, 3, 4]
    assert fold(events).to_dict() == loop.state.to_dict()  # live state == replayed state
    from evo_core.config import config_hash

    assert config_hash(started.config) == started.config_hash
    assert store.verify().ok


class BrokenDomain(arithmetic.ArithmeticDomain):
    name = "broken"

    def configure(self, options):
        return self

    def verify(self, task, completion):
        raise KeyError("gold")


class BrokenPlugin:
    from evo_core.hookspecs import hookimpl

    @hookimpl
    def evo_register_domains(self):
        return [BrokenDomain()]


def test_raising_verifier_stops_the_run_with_a_consistent_log(tmp_path):
    store = open_store("memory://")
    pm = _pm()
    pm.register(BrokenPlugin(), name="broken_plugin")
    with pytest.raises(RunError, match="cannot start: domain 'broken' verify raised"):
        RunLoop(_cfg(tmp_path, task={"domain": "broken"}), store, plugins=pm, harness=NoopHarness()).start()
    assert store.runs() == []
    loop = RunLoop(_cfg(tmp_path, task={"domain": "broken"}, run={"eval_at_start": False}), store, plugins=pm,
                   harness=NoopHarness())
    loop.start()
    with pytest.raises(RunError, match="domain 'broken' verify raised.*KeyError"):
        loop.run()
    events = list(store.events(run_stream(loop.run_id)))
    assert isinstance(events[-2], PluginFailed) and events[-2].required and events[-2].plugin == "broken_plugin"
    assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"
    assert store.verify().ok


class ExplodingHarness:
    def on_step(self, ctx):
        raise ValueError("harness bug")

    def on_run_end(self, ctx):
        pass


def test_a_raising_harness_is_recorded_and_training_goes_on(tmp_path):
    store = open_store("memory://")
    loop = RunLoop(_cfg(tmp_path, run={"steps": 2}), store, plugins=_pm(), harness=ExplodingHarness())
    loop.start()
    assert loop.run().status == "completed"
    failed = [e for e in store.events(run_stream(loop.run_id)) if isinstance(e, PluginFailed)]
    assert [(e.hook, e.step) for e in failed] == [("Harness.on_step", 1), ("Harness.on_step", 2)]


def test_resume_refuses_a_changed_config_or_a_finished_run(tmp_path):
    store = open_store("memory://")
    loop = RunLoop(_cfg(tmp_path, run={"steps": 1}), store, plugins=_pm(), harness=NoopHarness())
    loop.start()
    loop.run()
    with pytest.raises(RunError, match="already completed"):
        RunLoop(_cfg(tmp_path, run={"steps": 1}), store, plugins=_pm()).resume(loop.run_id)
    with pytest.raises(RunError, match="config differs"):
        RunLoop(_cfg(tmp_path, run={"steps": 1}, rl={"lr": 0.5}), store, plugins=_pm()).resume(loop.run_id)
    with pytest.raises(RunError, match="not found"):
        RunLoop(_cfg(tmp_path), store, plugins=_pm()).resume("nope")


TOML = """
[run]
name = "kill"
steps = {steps}
eval_every = 3
harnesses = ["fixed"]
checkpoint_dir = "{ck}"
progress = false
threads = 1
[task]
train = "generate://addition?digits=2&heldout=20&seed=0"
[policy.tiny]
hidden_size = 32
num_layers = 1
num_heads = 2
num_kv_heads = 2
intermediate_size = 64
[rl]
prompts_per_step = 4
group_size = 4
max_new_tokens = 4
lr = 1e-3
warmup_steps = 0
[eval]
samples = 2
[harness]
diagnostics = {{}}
gates = {{}}
proposers = {{}}
[harness.audit]
rate = 1.0
"""


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path):
    steps = 30  # enough that the kill lands mid-run even on an idle machine
    cfg_path = tmp_path / "kill.toml"
    cfg_path.write_text(TOML.format(steps=steps, ck=tmp_path / "ck"))
    url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "EVO_NO_PLUGIN_COMMANDS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from evo_core.cli.app import main; main()", "run", str(cfg_path),
                             "--store", url, "--no-progress"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run_id, committed = None, 0
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
            st = open_store(url)
            try:
                runs = st.runs()
                if runs:
                    run_id = runs[0]
                    committed = len(_steps(st.events(run_stream(run_id))))
            finally:
                st.close()
            if committed >= 3:
                proc.send_signal(signal.SIGKILL)  # mid-run: no chance to clean up
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert run_id and committed >= 3, proc.stderr.read().decode()[-2000:]
    st = open_store(url)  # the process may have committed one more step before the kill landed
    committed = len(_steps(st.events(run_stream(run_id))))
    st.close()
    assert committed < steps, "the run finished before it could be killed"

    from evo_core.config import load_config

    cfg = load_config(str(cfg_path))
    store = open_store(url)
    out = resume_run(cfg, store, run_id, plugins=_pm())
    assert out.status == "completed"
    events = list(store.events(run_stream(run_id)))
    assert _steps(events) == list(range(1, steps + 1))  # every step exactly once
    rolled = Counter(e.step for e in events if isinstance(e, RolloutCompleted))
    assert rolled == {s: 16 for s in range(1, steps + 1)}
    assert [e.from_step for e in events if isinstance(e, RunResumed)] == [committed]
    assert store.verify().ok

    # an uninterrupted run with the same seed and config produces the same metrics
    from evo_core.loop import run_all

    ref = run_all(cfg, store, plugins=_pm())[0]
    ref_events = list(store.events(run_stream(ref.run_id)))
    a = [e.metrics for e in events if isinstance(e, StepCompleted)]
    b = [e.metrics for e in ref_events if isinstance(e, StepCompleted)]
    for ma, mb in zip(a, b):
        for k in ("reward_mean", "loss", "entropy", "length_mean", "strict_correct_rate"):
            assert ma[k] == pytest.approx(mb[k], abs=1e-4), k
    evals_a = [e.item_scores for e in events if isinstance(e, EvalCompleted)]
    evals_b = [e.item_scores for e in ref_events if isinstance(e, EvalCompleted)]
    assert evals_a == evals_b
    store.close()


class RecordingEngine:
    """Stands in for an HTTP engine: samples in process, records weight syncs."""

    def __init__(self, policy):
        from evo_core.trainer.engine import InProcessEngine

        self.inner = InProcessEngine(policy)
        self.synced = []

    def generate(self, prompts, params, *, generator=None):
        return self.inner.generate(prompts, params, generator=generator)

    def sync_weights(self, policy, version):
        self.synced.append(version)
        return {"kind": "checkpoint", "name": "fake-server", "digest": policy.digest()}


def test_rollout_engine_from_config_gets_every_weight_sync_logged(tmp_path, monkeypatch):
    import evo_core.trainer.engine_factory as factory

    engines = []

    def fake_build(table, policy):
        assert table["engine"] == "http"
        engines.append(RecordingEngine(policy))
        return engines[-1]

    monkeypatch.setattr(factory, "build_rollout_engine", fake_build)
    store = open_store("memory://")
    cfg = _cfg(tmp_path, run={"steps": 2}, rollout={"engine": "http", "base_url": "http://127.0.0.1:1"})
    loop = RunLoop(cfg, store, plugins=_pm(), harness=NoopHarness())
    loop.start()
    loop.run()
    assert engines[0].synced == [0, 1, 2]
    ups = [e for e in store.events(run_stream(loop.run_id)) if isinstance(e, PolicyUpdated) and e.target == "fake-server"]
    assert [(e.step, e.policy_version) for e in ups] == [(0, 0), (1, 1), (2, 2)]
