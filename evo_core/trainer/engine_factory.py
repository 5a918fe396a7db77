"""One place that turns a run config's ``[rollout]`` table into a ``RolloutEngine``.

    [rollout]
    engine = "inprocess"            # or "http" / "vllm"
    # http:  base_url, model, sync_mode ("checkpoint" | "lora" | "none"), sync_dir, ...
    # vllm:  model_path (default: policy.path), dtype, gpu_memory_utilization, enable_lora, ...

Every other key is a field of ``HTTPEngineConfig`` / ``VLLMEngineConfig``; an unknown key
is an error that names it.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

ENGINES = ("inprocess", "http", "vllm")


def _checked(cls: type, table: Mapping[str, Any], kind: str) -> Any:
    known = {a.name for a in attrs.fields(cls)}
    for key in table:
        if key not in known:
            raise ValueError(f"unknown key rollout.{key} for engine {kind!r} (known: engine, {', '.join(sorted(known))})")
    try:
        return cls(**table)
    except TypeError as exc:  # a missing required field
        raise ValueError(f"rollout ({kind}): {exc}") from None


def _config_class(kind: str) -> Any:
    if kind == "http":
        from evo_core.trainer.http_engine import HTTPEngineConfig

        return HTTPEngineConfig
    if kind == "vllm":
        from evo_core.trainer.vllm_engine import VLLMEngineConfig

        return VLLMEngineConfig
    return None


def with_defaults(table: Mapping[str, Any] | None, policy_path: str = "") -> dict[str, Any]:
    """The ``[rollout]`` table with what the run config implies: the vLLM engine samples the
    policy's own model, so its ``model_path`` defaults to ``policy.path``."""
    table = dict(table or {})
    if table.get("engine") == "vllm" and policy_path and "model_path" not in table:
        table["model_path"] = policy_path
    return table


def rollout_config(table: Mapping[str, Any] | None) -> tuple[str, Any]:
    """Validate a ``[rollout]`` table without starting anything (no server is contacted,
    vLLM is not imported): the engine's name and its config (None for ``inprocess``)."""
    table = dict(table or {})
    kind = table.pop("engine", "inprocess")
    if kind not in ENGINES:
        raise ValueError(f"rollout.engine must be one of {', '.join(ENGINES)}, got {kind!r}")
    if kind == "inprocess":
        if table:
            raise ValueError(f"unknown key rollout.{sorted(table)[0]} for engine 'inprocess' (known: engine)")
        return kind, None
    return kind, _checked(_config_class(kind), table, kind)


def build_rollout_engine(table: Mapping[str, Any] | None, policy: Any) -> Any:
    kind, config = rollout_config(table)
    if kind == "inprocess":
        from evo_core.trainer.engine import InProcessEngine

        return InProcessEngine(policy)
    if kind == "http":
        from evo_core.trainer.http_engine import HTTPEngine

        return HTTPEngine(config)
    from evo_core.trainer.vllm_engine import VLLMEngine

    return VLLMEngine(config)
