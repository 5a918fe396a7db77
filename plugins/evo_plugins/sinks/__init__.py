"""Sinks: mirror step metrics and harness decisions to TensorBoard, W&B or MLflow.

Configured from the run config's ``[sinks]`` table::

    [sinks.tensorboard]
    logdir = "runs/tb"
    [sinks.wandb]
    project = "evotrainer"    # else $WANDB_PROJECT, else "evotrainer"
    mode = "offline"          # else $WANDB_MODE, else "offline" (no account or network; `wandb sync` later)
    [sinks.mlflow]
    tracking_uri = "file:///tmp/mlruns"

Each library is optional. A sink that cannot start (library missing, bad option) or
that raises later is reported as ``PluginFailed`` by ``mirror`` and never stops training.
"""

from __future__ import annotations

from typing import Any, Mapping

from evo_core.api import hookimpl
from evo_plugins.sinks.backends import SINK_TYPES, MlflowSink, TensorBoardSink, WandbSink
from evo_plugins.sinks.base import MetricsSink, SinkUnavailable, mirror, sinks_table

__all__ = ["MetricsSink", "SinkUnavailable", "mirror", "TensorBoardSink", "WandbSink", "MlflowSink", "build_sinks"]


class FailedSink:
    """Stands in for a sink that could not start: its first ``handle`` raises the start-up
    error, so ``mirror`` records it as ``PluginFailed`` in the run like any sink failure."""

    version = "1"

    def __init__(self, name: str, error: Exception) -> None:
        self.name, self.error = name, error

    def handle(self, events) -> None:
        raise self.error

    def close(self) -> None:
        pass


def build_sinks(config: Mapping[str, Any] | None) -> list[Any]:
    table = sinks_table(config)
    run_id = str(table.pop("run_id", "") or "")
    out: list[Any] = []
    for name, opts in table.items():
        if opts is False or (isinstance(opts, Mapping) and opts.get("enabled") is False):
            continue
        opts = {} if opts is True else dict(opts or {})
        opts.pop("enabled", None)
        cls = SINK_TYPES.get(name)
        if cls is None:
            continue  # another plugin's sink (each plugin builds the ones it knows)
        try:
            out.append(cls(run_id=run_id, **opts))
        except TypeError as exc:
            out.append(FailedSink(name, ValueError(f"sink {name!r}: bad option ({exc})")))
        except Exception as exc:  # missing library, unreachable server: recorded, never fatal
            out.append(FailedSink(name, exc))
    return out


@hookimpl
def evo_register_sinks(config):
    return build_sinks(config)


@hookimpl
def evo_sink_names():
    return list(SINK_TYPES)
