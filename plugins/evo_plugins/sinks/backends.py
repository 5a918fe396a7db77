"""TensorBoard, Weights & Biases and MLflow sinks. Each library is imported only when its
sink is configured, so none is required to train."""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Mapping, Optional

from evo_plugins.sinks.base import MetricsSink, SinkUnavailable


class TensorBoardSink(MetricsSink):
    """Writes TensorBoard event files (scalars + text) with tensorboard's own writer;
    no TensorFlow or torch needed."""

    name = "tensorboard"
    version = "1"

    def __init__(self, logdir: str, run_id: str = "", flush_secs: float = 10.0) -> None:
        super().__init__()
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError as exc:
            raise SinkUnavailable(f"the tensorboard sink needs tensorboard: pip install 'evotrainer[sinks]' ({exc})") from None
        self._pb = (event_pb2, summary_pb2, tensor_pb2, types_pb2)
        self.logdir = os.path.join(logdir, run_id) if run_id else logdir
        os.makedirs(self.logdir, exist_ok=True)
        self._writer = EventFileWriter(self.logdir, flush_secs=flush_secs, filename_suffix=f".{socket.gethostname()}.evo")

    def _event(self, step: int, values: list) -> None:
        event_pb2, summary_pb2, _, _ = self._pb
        self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary_pb2.Summary(value=values)))

    def _scalars(self, step: int, values: Mapping[str, float]) -> None:
        _, summary_pb2, _, _ = self._pb
        self._event(step, [summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in values.items()])

    def _text(self, step: int, tag: str, text: str) -> None:
        _, summary_pb2, tensor_pb2, types_pb2 = self._pb
        meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[text.encode("utf-8")])
        self._event(step, [summary_pb2.Summary.Value(tag=tag, metadata=meta, tensor=tensor)])

    def _flush(self) -> None:
        self._writer.flush()

    def _close(self) -> None:
        self._writer.close()


class WandbSink(MetricsSink):
    """Weights & Biases; ``mode = "offline"`` writes a local run directory (sync it later).

    ``project`` and ``mode``: the ``[sinks.wandb]`` value, else ``WANDB_PROJECT`` /
    ``WANDB_MODE``, else ``"evotrainer"`` / ``"offline"`` (no account or network unless
    asked for). ``entity`` and ``dir`` left out are wandb's own business (``WANDB_ENTITY``,
    ``WANDB_DIR``)."""

    name = "wandb"
    version = "1"
    DEFAULTS = {"project": "evotrainer", "mode": "offline"}

    def __init__(self, project: Optional[str] = None, run_id: str = "", mode: Optional[str] = None, dir: Optional[str] = None,
                 entity: Optional[str] = None, config: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__()
        try:
            import wandb
        except ImportError:
            raise SinkUnavailable("the wandb sink needs wandb: pip install 'evotrainer[wandb]'") from None
        self._wandb = wandb
        # wandb.init's arguments beat its env vars, so an unset option must not become a default here
        project = project or os.environ.get("WANDB_PROJECT") or self.DEFAULTS["project"]
        mode = mode or os.environ.get("WANDB_MODE") or self.DEFAULTS["mode"]
        self.run = wandb.init(project=project, entity=entity, mode=mode, dir=dir, name=run_id or None,
                              id=run_id or None, config=dict(config or {}), reinit="create_new")
        self._texts: list[list[Any]] = []

    def _scalars(self, step: int, values: Mapping[str, float]) -> None:
        self.run.log(dict(values), step=int(step))

    def _text(self, step: int, tag: str, text: str) -> None:
        self._texts.append([int(step), tag, text])
        self.run.summary[f"last_{tag}"] = text

    def _close(self) -> None:
        if self._texts:
            self.run.log({"decisions": self._wandb.Table(columns=["step", "tag", "text"], data=self._texts)})
        self.run.finish()


class MlflowSink(MetricsSink):
    """MLflow; a ``file://`` tracking URI needs no server."""

    name = "mlflow"
    version = "1"

    def __init__(self, tracking_uri: Optional[str] = None, experiment: str = "evotrainer", run_id: str = "") -> None:
        super().__init__()
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise SinkUnavailable("the mlflow sink needs mlflow: pip install 'evotrainer[mlflow]'") from None
        self.client = MlflowClient(tracking_uri=tracking_uri)
        exp = self.client.get_experiment_by_name(experiment)
        exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(experiment)
        self.mlflow_run_id = self.client.create_run(exp_id, run_name=run_id or None, tags={"evo.run_id": run_id}).info.run_id
        self._lines: list[str] = []

    def _scalars(self, step: int, values: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.mlflow_run_id, metrics=[Metric(k, v, now, int(step)) for k, v in values.items()])

    def _text(self, step: int, tag: str, text: str) -> None:
        self._lines.append(f"{step}\t{tag}\t{text}")

    def _close(self) -> None:
        if self._lines:
            self.client.log_text(self.mlflow_run_id, "\n".join(self._lines) + "\n", "decisions.tsv")
        self.client.set_terminated(self.mlflow_run_id)


SINK_TYPES = {"tensorboard": TensorBoardSink, "wandb": WandbSink, "mlflow": MlflowSink}
