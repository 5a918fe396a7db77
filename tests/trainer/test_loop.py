"""The run loop: the log's shape, failure handling, and kill-and-resume."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from evo_core.config import config_from_dict
from evo_core.loop import RunError, RunLoop, resume_run
from evo_core.state import fold
from evo_core.store import open_store, run_stream
from evo_core.store.blobs import get_json
from evo_core.testing import isolated_plugins
from evo_events import (EvalCompleted, HarnessPassCompleted, PluginFailed, PolicyUpdated, RolloutCompleted,
                        RunFinished, RunResumed, RunStarted, StepCompleted)

from .testlib import TINY_TOML, tiny_config_dict

ROOT = Path(__file__).resolve().parents[2]


def _cfg(tmp_path, arm="fixed", **over):
    d = tiny_config_dict(tmp_path, **over)
    d.setdefault("harness", {}).setdefault("audit", {"rate": 1.0})
    return config_from_dict(d).for_arm(arm)


def _pm():
    return isolated_plugins("evo_arithmetic.plugin", "+standard")


def _steps(events):
    return [e.step for e in events if isinstance(e, StepCompleted)]


def test_run_log_shape(tmp_path):
    store = open_store("memory://")
    cfg = _cfg(tmp_path)
    loop = RunLoop(cfg, store, plugins=_pm())
    loop.start()
    out = loop.run()
    events = list(store.events(run_stream(out.run_id)))
    started = events[0]
    assert isinstance(started, RunStarted) and started.harness_mode == "fixed" and started.config["run"]["arm"] == "fixed"
    assert started.config_hash == cfg.config_hash() and started.config["rl"]["group_size"] == 4
    assert isinstance(events[-1], RunFinished) and events[-1].status == "completed"
    assert _steps(events) == [1, 2, 3, 4]
    # each step's events, and its harness pass, are one contiguous append
    records = list(store.read_stream(run_stream(out.run_id)))
    for step in (1, 2, 3, 4):
        first = next(i for i, e in enumerate(events) if isinstance(e, RolloutCompleted) and e.step == step)
        last = next(i for i, e in enumerate(events) if isinstance(e, HarnessPassCompleted) and e.step == step)
        assert all(getattr(e, "step", step) in (step, None) for e in events[first:last + 1])
        assert isinstance(events[last - 1 if isinstance(events[last - 1], HarnessPassCompleted) else first], RolloutCompleted)
        assert len({records[i].position for i in range(first, last + 1)}) == last + 1 - first
    rollouts = [e for e in events if isinstance(e, RolloutCompleted)]
    assert Counter(e.step for e in rollouts) == {1: 16, 2: 16, 3: 16, 4: 16}
    assert all(e.strict_correct is not None for e in rollouts)  # audit rate 1.0
    assert len({e.event_id for e in rollouts}) == len(rollouts)
    traj = get_json(store.blobs, rollouts[0].trajectory)
    mine = traj["rollouts"][rollouts[0].train["trajectory_index"]]
    assert mine["rollout_id"] == rollouts[0].event_id and traj["groups"][mine["group_id"]]["prompt"].endswith("=")
    assert len({e.trajectory.digest for e in rollouts}) == 4  # one blob per step
    assert rollouts[0].train.keys() == {"entropy", "advantage", "masked", "trajectory_index"}
    assert {"chars", "numbers", "digits", "group_distance", "prompt_overlap"} <= rollouts[0].features.keys()
    assert rollouts[0].signals.keys() >= {"numbers_found", "length"}  # the domain's own, under its own names
    evals = [e for e in events if isinstance(e, EvalCompleted)]
    assert [(e.step, e.split) for e in evals] == [(s, sp) for s in (0, 2, 4) for sp in ("validation", "test")]
    assert all(e.n == 20 and len(e.item_scores) == 20 for e in evals)
    assert {"strict_accuracy", "hack_rate", "paid_rate", "train_reward"} <= evals[0].metrics.keys()
    steps = [e for e in events if isinstance(e, StepCompleted)]
    for key in ("reward_mean", "reward_std", "strict_correct_rate", "length_correct", "length_incorrect",
                "truncation_rate", "entropy", "clip_frac", "zero_var_frac", "rollout_tokens_per_s", "update_tokens_per_s"):
        assert key in steps[0].metrics
    assert all(os.path.isabs(s.resume_checkpoint["path"]) and len(s.resume_checkpoint["sha256"]) == 64 for s in steps)
    assert [e.policy_version for e in events if isinstance(e, PolicyUpdated)] == [0, 1, 2, 3, 4]
    assert fold(events).to_dict() == loop.state.to_dict()  # live state == replayed state
    assert not Path(loop.ckpt.dir).exists()  # a completed run leaves no resume checkpoints behind
    assert store.verify().ok


def test_the_harness_never_sees_the_test_split(tmp_path):
    """Every input a diagnostic, proposer, backtester or gate receives is checked for test items."""
    from evo_core.hookspecs import hookimpl

    test_ids = set()
    seen = []

    class Spy:
        name, version, kinds, default_params, mode, subjects = "spy", "1", ("spy",), {}, "offline", ("intervention", "policy")

        def evaluate(self, window, params):
            seen.append({e.split for e in window.evals} | {r.task_id for r in window.rollouts}
                        | {i for e in window.evals for i in e.item_scores})
            return []

        def propose(self, ctx, params):
            seen.append({i for e in ctx.window.evals for i in e.item_scores} | {r.task_id for r in ctx.history})
            return []

        def decide(self, cand, ctx, params):
            from evo_core.api import GateDecision

            for ev in (cand.eval, cand.main_eval):
                if ev is not None:
                    seen.append(set(ev.item_scores) | {ev.split})
            return GateDecision(gate="spy", passed=True, abstain=True)

    class Plugin:
        @hookimpl
        def evo_register_diagnostics(self):
            return [Spy()]

        @hookimpl
        def evo_register_proposers(self):
            return [Spy()]

        @hookimpl
        def evo_register_gates(self):
            return [Spy()]

    pm = _pm()
    pm.register(Plugin(), name="spy")
    store = open_store("memory://")
    cfg = _cfg(tmp_path, arm="evolving", run={"steps": 6}, harness={
        "audit": {"rate": 1.0}, "diagnose_every": 1, "diagnostics": {"spy": {}}, "proposers": {"spy": {}},
        "gates": {"spy": {}}})
    loop = RunLoop(cfg, store, plugins=pm)
    loop.start()
    test_ids = {t.task_id for t in loop.session.splits["test"]}
    loop.run()
    assert seen and test_ids
    for inputs in seen:
        assert "test" not in inputs and not inputs & test_ids
    logged_test = [e for e in store.events(run_stream(loop.run_id)) if isinstance(e, EvalCompleted) and e.split == "test"]
    assert logged_test and set(logged_test[0].item_scores) == test_ids  # the report still has them


class BrokenDomain:
    name, version = "broken", "1"

    def configure(self, options):
        return self

    def load_tasks(self, source):
        from evo_arithmetic.domain import ArithmeticDomain

        return ArithmeticDomain().load_tasks(source)

    def verify(self, task, completion):
        raise KeyError("gold")

    oracle = verify


class BrokenPlugin:
    from evo_core.hookspecs import hookimpl

    @hookimpl
    def evo_register_domains(self):
        return [BrokenDomain()]


def test_raising_verifier_stops_the_run_with_a_consistent_log(tmp_path):
    store = open_store("memory://")
    pm = _pm()
    pm.register(BrokenPlugin(), name="broken_plugin")
    with pytest.raises(RunError, match="cannot start: domain 'broken' .* raised"):
        RunLoop(_cfg(tmp_path, task={"domain": "broken"}), store, plugins=pm).start()
    assert store.runs() == []
    loop = RunLoop(_cfg(tmp_path, task={"domain": "broken"}, run={"eval_at_start": False}), store, plugins=pm)
    loop.start()
    with pytest.raises(RunError, match="domain 'broken' verify raised.*KeyError"):
        loop.run()
    events = list(store.events(run_stream(loop.run_id)))
    assert isinstance(events[-2], PluginFailed) and events[-2].required and events[-2].plugin == "broken_plugin"
    assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"
    assert store.verify().ok


def test_a_raising_harness_is_recorded_and_training_goes_on(tmp_path, monkeypatch):
    from evo_core.harness.harness_pass import HarnessPass

    def explode(self):
        raise ValueError("harness bug")

    monkeypatch.setattr(HarnessPass, "run", explode)
    store = open_store("memory://")
    loop = RunLoop(_cfg(tmp_path, run={"steps": 2}), store, plugins=_pm())
    loop.start()
    assert loop.run().status == "completed"
    failed = [e for e in store.events(run_stream(loop.run_id)) if isinstance(e, PluginFailed)]
    assert [(e.hook, e.step) for e in failed] == [("run_pass", 1), ("run_pass", 2)]


def test_a_plugin_that_fails_to_load_is_logged_and_a_config_naming_it_does_not_start(tmp_path):
    from evo_core.plugins import PluginFailure

    pm = _pm()
    pm.load_failures.append(PluginFailure("evo_broken", "load evo_broken.plugin", "ImportError", "no module named x"))
    store = open_store("memory://")
    loop = RunLoop(_cfg(tmp_path, run={"steps": 1}), store, plugins=pm)
    loop.start()
    loop.run()
    failed = [e for e in store.events(run_stream(loop.run_id)) if isinstance(e, PluginFailed)]
    assert failed and failed[0].plugin == "evo_broken" and failed[0].step == 0
    with pytest.raises(RunError, match="diagnostic 'ghost_diag'.*evo_broken"):
        RunLoop(_cfg(tmp_path, harness={"diagnostics": {"ghost_diag": {}}}), store, plugins=pm).start()


def test_resume_refuses_a_changed_config_a_finished_run_or_another_arm(tmp_path):
    store = open_store("memory://")
    loop = RunLoop(_cfg(tmp_path, run={"steps": 1}), store, plugins=_pm())
    loop.start()
    loop.run()
    with pytest.raises(RunError, match="already completed"):
        RunLoop(_cfg(tmp_path, run={"steps": 1}), store, plugins=_pm()).resume(loop.run_id)
    with pytest.raises(RunError, match="config differs"):
        RunLoop(_cfg(tmp_path, run={"steps": 1}, rl={"lr": 0.5}), store, plugins=_pm()).resume(loop.run_id)
    with pytest.raises(RunError, match="not found"):
        RunLoop(_cfg(tmp_path), store, plugins=_pm()).resume("nope")
    with pytest.raises(RunError, match="--harness evolving does not match"):
        resume_run(config_from_dict(tiny_config_dict(tmp_path)), store, loop.run_id, plugins=_pm(), harness="evolving")


TOML = """
[run]
name = "kill"
steps = {steps}
eval_every = 3
harnesses = ["fixed"]
checkpoint_dir = "{ck}"
progress = false
threads = 1
""" + TINY_TOML + """[rl]
prompts_per_step = 4
group_size = 4
max_new_tokens = 4
lr = 1e-3
warmup_steps = 0
[eval]
samples = 2
[harness.audit]
rate = 1.0
"""


def test_sigkill_mid_run_then_resume_from_another_directory_loses_and_duplicates_nothing(tmp_path, monkeypatch):
    steps = 30  # enough that the kill lands mid-run even on an idle machine
    cfg_path = tmp_path / "kill.toml"
    cfg_path.write_text(TOML.format(steps=steps, ck="ck"))  # relative: resolved in the run's working directory
    work = tmp_path / "work"
    work.mkdir()
    url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "EVO_NO_PLUGIN_COMMANDS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from evo_core.cli.app import main; main()", "run", str(cfg_path),
                             "--store", url, "--no-progress"], env=env, cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
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
    monkeypatch.chdir(tmp_path)  # another working directory: the log says where the checkpoint is
    out = resume_run(cfg, store, run_id, plugins=_pm())
    assert out.status == "completed"
    events = list(store.events(run_stream(run_id)))
    assert _steps(events) == list(range(1, steps + 1))  # every step exactly once
    rolled = Counter(e.step for e in events if isinstance(e, RolloutCompleted))
    assert rolled == {s: 16 for s in range(1, steps + 1)}
    assert [e.from_step for e in events if isinstance(e, RunResumed)] == [committed]
    assert [e.step for e in events if isinstance(e, HarnessPassCompleted)] == list(range(1, steps + 1))
    assert store.verify().ok
    assert not (work / "ck" / run_id).exists() and not (tmp_path / "ck").exists()  # nothing stray left behind

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


def test_sigterm_stops_the_run_and_says_how_to_resume(tmp_path):
    cfg_path = tmp_path / "term.toml"
    cfg_path.write_text(TOML.format(steps=200, ck=tmp_path / "ck"))
    url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "EVO_NO_PLUGIN_COMMANDS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from evo_core.cli.app import main; main()", "run", str(cfg_path),
                             "--store", url, "--no-progress"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while time.time() < deadline:
        time.sleep(0.1)
        st = open_store(url)
        try:
            runs = st.runs()
            if runs and _steps(st.events(run_stream(runs[0]))):
                break
        finally:
            st.close()
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=120)[1].decode()
    st = open_store(url)
    events = list(st.events(run_stream(st.runs()[0])))
    st.close()
    assert isinstance(events[-1], RunFinished) and events[-1].status == "stopped" and "SIGTERM" in events[-1].message
    assert "--resume" in err
    assert proc.returncode == 143, err[-2000:]  # 128 + SIGTERM, as a shell reports a terminated process


# --- every event boundary of an evolving step: kill, resume, same decisions -------------------

KILL_POINTS = ["after_compute", "after_evals", "harness.diagnosed", "harness.proposed", "backtest.arm:1",
               "backtest.arm:4", "harness.backtested:2", "harness.decided", "harness.policy_gated", "before_commit",
               "after_commit", "after_restore"]


def _drive(url, run_id, ck, steps, *extra, fault=None):
    env = {k: v for k, v in os.environ.items() if k != "EVO_FAULT"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if fault:
        env["EVO_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "tests.trainer.sim_driver", url, run_id, str(ck), str(steps), *extra],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _decisions(store, run_id):
    """The harness's events, with their own ids replaced by their place among them (event ids are
    random; what they point at is not) and without times."""
    import attrs

    from evo_events import RunResumed

    events = list(store.events(run_stream(run_id)))
    picked = [e for e in events if not (e.emitted_by.name == "evo_trainer" or isinstance(e, RunResumed))
              or (isinstance(e, PolicyUpdated) and e.target == "restore")]
    ids = {e.event_id: f"#{i}" for i, e in enumerate(picked)}
    for e in events:  # the trainer's events a decision cites, by what they are
        if isinstance(e, (EvalCompleted, StepCompleted, PolicyUpdated)) and e.event_id not in ids:
            ids[e.event_id] = f"{type(e).__name__}@{e.step}/{getattr(e, 'split', getattr(e, 'target', ''))}"

    def norm(v):
        if isinstance(v, str):
            return ids.get(v, v)
        if isinstance(v, dict):
            return {norm(k): norm(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        return v

    out = []
    for e in picked:
        d = norm(attrs.asdict(e))
        d.pop("run_id"), d.pop("event_id")
        if isinstance(d.get("skill_id"), str) and d["skill_id"].startswith("skill-"):
            d["skill_id"] = "skill-of-its-proposal"
        if "provenance" in d:
            d["provenance"].pop("imported_from", None)
        out.append((type(e).__name__, d))
    return out


KILL_STEPS = 12


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    url = f"sqlite:///{tmp / 'ref.sqlite'}"
    r = _drive(url, "sim-run", tmp / "ck", KILL_STEPS)
    assert r.returncode == 0, r.stderr[-2000:]
    store = open_store(url)
    yield _decisions(store, "sim-run")
    store.close()


@pytest.mark.parametrize("fault", KILL_POINTS)
def test_a_kill_at_any_boundary_of_an_evolving_step_then_resume_gives_the_same_decisions(tmp_path, fault, uninterrupted):
    steps = KILL_STEPS
    url = f"sqlite:///{tmp_path / 'killed.sqlite'}"
    k = _drive(url, "sim-run", tmp_path / "ck", steps, fault=fault)
    assert k.returncode == 137, (fault, k.returncode, k.stderr[-2000:])
    r2 = _drive(url, "sim-run", tmp_path / "ck", steps, "--resume")
    assert r2.returncode == 0, r2.stderr[-2000:]
    got = open_store(url)
    try:
        decisions = _decisions(got, "sim-run")
        assert any(name == "Promoted" for name, _ in decisions) and decisions == uninterrupted
        assert _steps(got.events(run_stream("sim-run"))) == list(range(1, steps + 1))
        assert got.verify().ok
    finally:
        got.close()


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
    loop = RunLoop(cfg, store, plugins=_pm())
    loop.start()
    loop.run()
    assert engines[0].synced == [0, 1, 2]
    ups = [e for e in store.events(run_stream(loop.run_id)) if isinstance(e, PolicyUpdated) and e.target == "fake-server"]
    assert [(e.step, e.policy_version) for e in ups] == [(0, 0), (1, 1), (2, 2)]


def test_sigterm_during_a_commit_waits_for_the_fold():
    """A SIGTERM that lands while a batch is appended is raised once the loop's version matches
    the store's, so the stop can be sealed (it once left the run without its RunFinished)."""
    from evo_core import loop as loop_mod

    previous = loop_mod._install_sigterm()
    try:
        folded = []
        with pytest.raises(loop_mod.Terminated):
            with loop_mod._uninterrupted():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler runs here and must not raise
                folded.append("version moved with the commit")
        assert folded == ["version moved with the commit"]
        assert not loop_mod._Shield.pending and loop_mod._Shield.depth == 0
        with pytest.raises(loop_mod.Terminated):  # outside a commit it stops at once
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_commit_that_fails_under_a_held_sigterm_raises_its_own_error():
    """The append's error is what the caller sees, not a graceful stop; the held SIGTERM is
    raised when the next commit completes."""
    from evo_core import loop as loop_mod

    previous = loop_mod._install_sigterm()
    try:
        with pytest.raises(OSError, match="disk full"):
            with loop_mod._uninterrupted():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                raise OSError("disk full")
        assert loop_mod._Shield.pending and loop_mod._Shield.depth == 0
        with pytest.raises(loop_mod.Terminated):
            with loop_mod._uninterrupted():
                pass
        assert not loop_mod._Shield.pending
    finally:
        loop_mod._Shield.pending = False
        signal.signal(signal.SIGTERM, previous)
