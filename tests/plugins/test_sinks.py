"""Sinks: TensorBoard read back from its event files; W&B and MLflow in their offline modes;
a failing sink becomes PluginFailed and never stops the others."""

from __future__ import annotations

import glob

import pytest

from evo_events import EvalCompleted, PluginFailed, Promoted, Rejected, StepCompleted
from evo_core.store import run_stream
from evo_plugins.sinks import MetricsSink, TensorBoardSink, build_sinks, mirror


@pytest.fixture
def events(evo_tiny_run):
    store, run_id = evo_tiny_run
    return run_id, list(store.events(run_stream(run_id)))


def test_tensorboard_event_files_read_back(events, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_id, evs = events
    sinks = build_sinks({"sinks": {"tensorboard": {"logdir": str(tmp_path / "tb")}, "run_id": run_id}})
    assert [type(s) for s in sinks] == [TensorBoardSink]
    half = len(evs) // 2
    assert mirror(sinks, run_id, evs[:half]) == [] and mirror(sinks, run_id, evs[half:]) == []
    sinks[0].close()
    acc = EventAccumulator(str(tmp_path / "tb" / run_id), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    steps = [e for e in evs if isinstance(e, StepCompleted)]
    got = acc.Scalars("train/reward_mean")
    assert [s.step for s in got] == [e.step for e in steps]
    assert [pytest.approx(s.value, rel=1e-6) for s in got] == [e.metrics["reward_mean"] for e in steps]
    evals = [e for e in evs if isinstance(e, EvalCompleted)]
    assert [s.value for s in acc.Scalars("eval/heldout/strict_accuracy")] == pytest.approx([e.metrics["strict_accuracy"] for e in evals])
    decisions = [e for e in evs if isinstance(e, (Promoted, Rejected))]
    texts = [t.tensor_proto.string_val[0].decode() for t in acc.Tensors("decisions")]
    assert len(texts) == len(decisions) and texts[0].startswith("PROMOTED" if isinstance(decisions[0], Promoted) else "REJECTED")
    assert acc.Scalars("harness/promotions")[-1].value == sum(isinstance(e, Promoted) for e in evs)


class _Recorder(MetricsSink):
    name = "recorder"

    def __init__(self):
        super().__init__()
        self.rows = []

    def _scalars(self, step, values):
        self.rows.append((step, dict(values)))

    def _text(self, step, tag, text):
        pass


class _Broken(_Recorder):
    name = "broken"

    def _scalars(self, step, values):
        raise ConnectionError("tracking server went away")


def test_a_failing_sink_is_recorded_and_dropped(events):
    run_id, evs = events
    good, bad = _Recorder(), _Broken()
    sinks = [bad, good]
    failed = mirror(sinks, run_id, evs[:50], step=3)
    assert len(failed) == 1 and isinstance(failed[0], PluginFailed)
    assert failed[0].plugin == "broken" and failed[0].error_type == "ConnectionError" and not failed[0].required
    assert sinks == [good] and good.rows  # the healthy sink got the batch; the broken one is off
    assert mirror(sinks, run_id, evs[50:]) == []


def test_unavailable_or_misconfigured_sink_becomes_plugin_failed(events, monkeypatch):
    run_id, evs = events
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *a, **kw):
        if name == "wandb" or name.startswith("wandb."):
            raise ImportError("No module named 'wandb'")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    sinks = build_sinks({"wandb": {"mode": "offline"}, "tensorboard": {"nonsense": 1}, "someone_elses": {}})
    failed = mirror(sinks, run_id, evs)
    assert sorted(f.plugin for f in failed) == ["tensorboard", "wandb"]
    assert any("pip install 'evotrainer[wandb]'" in f.message for f in failed)
    assert sinks == []


def test_registered_through_the_plugin_manager(evo_plugins, tmp_path):
    got = evo_plugins.sinks({"sinks": {"tensorboard": {"logdir": str(tmp_path)}}})
    assert [s.name for s in got if s.name == "tensorboard"] == ["tensorboard"]
    for s in got:
        s.close()


def test_wandb_offline(events, tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is optional (pip install 'evotrainer[wandb]')")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_id, evs = events
    sinks = build_sinks({"wandb": {"mode": "offline", "dir": str(tmp_path), "project": "t"}, "run_id": run_id})
    assert mirror(sinks, run_id, evs) == []
    sinks[0].close()
    import time

    data = b""
    deadline = time.time() + 60  # wandb's service process finishes writing the file after finish() returns
    while time.time() < deadline and not (b"train/reward_mean" in data and b"eval/heldout/strict_accuracy" in data):
        files = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "*.wandb"))
        assert len(files) <= 1
        data = open(files[0], "rb").read() if files else b""
        time.sleep(0.2)
    assert b"train/reward_mean" in data and b"eval/heldout/strict_accuracy" in data


def test_mlflow_file_store(events, tmp_path, monkeypatch):
    pytest.importorskip("mlflow", reason="mlflow is optional (pip install 'evotrainer[mlflow]')")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    run_id, evs = events
    uri = (tmp_path / "mlruns").as_uri()
    sinks = build_sinks({"mlflow": {"tracking_uri": uri, "experiment": "t"}, "run_id": run_id})
    assert mirror(sinks, run_id, evs) == []
    sinks[0].close()
    from mlflow.tracking import MlflowClient

    hist = MlflowClient(tracking_uri=uri).get_metric_history(sinks[0].mlflow_run_id, "train/reward_mean")
    steps = [e for e in evs if isinstance(e, StepCompleted)]
    assert sorted(m.step for m in hist) == [e.step for e in steps]
