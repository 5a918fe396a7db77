"""Building the served policy from a spec, and running the server (blocking, or in a
background thread for tests and notebooks)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Optional

import structlog

from evo_core.serve.app import build_app
from evo_core.serve.host import ModelHost

log = structlog.get_logger("evo.serve")


class PolicySpecError(ValueError):
    """``evo serve POLICY`` got something that is not a model directory, ``tiny`` or a config."""


def load_policy(spec: str, *, seed: int = 0, device: str = "cpu") -> Any:
    """``spec`` is a local model directory, ``tiny`` / ``tiny:qwen2`` (the embedded model,
    freshly initialised from ``seed``) or a TOML config with a ``[policy]`` table
    (``path = "..."`` or the tiny model's fields)."""
    from evo_core.trainer.policy import HFPolicy

    if spec in ("tiny", "tiny:llama", "tiny:qwen2"):
        from evo_core.trainer.tiny import TinyModelConfig

        arch = spec.partition(":")[2] or "llama"
        return HFPolicy.tiny(TinyModelConfig(arch=arch), seed=seed, device=device)
    if os.path.isdir(spec):
        return HFPolicy.load(spec, device=device)
    if spec.endswith(".toml") and os.path.isfile(spec):
        return _from_config(spec, seed=seed, device=device)
    raise PolicySpecError(
        f"policy {spec!r} is neither a local model directory, 'tiny', nor a .toml config (models are never downloaded)")


def _from_config(path: str, *, seed: int, device: str) -> Any:
    import tomllib

    import attrs

    from evo_core.trainer.policy import HFPolicy
    from evo_core.trainer.tiny import TinyModelConfig

    with open(path, "rb") as fh:
        table = tomllib.load(fh).get("policy")
    if not isinstance(table, dict):
        raise PolicySpecError(f"{path}: no [policy] table")
    table = dict(table)
    if "path" in table:
        p = os.path.join(os.path.dirname(os.path.abspath(path)), str(table["path"]))
        return load_policy(p, seed=seed, device=device)
    seed = int(table.pop("seed", seed))
    table.pop("kind", None)
    known = {a.name for a in attrs.fields(TinyModelConfig)}
    extra = sorted(set(table) - known)
    if extra:
        raise PolicySpecError(f"{path}: unknown key policy.{extra[0]} for the tiny model (known: {', '.join(sorted(known))})")
    return HFPolicy.tiny(TinyModelConfig(**table), seed=seed, device=device)


def make_host(spec: str, *, name: Optional[str] = None, seed: int = 0, device: str = "cpu") -> ModelHost:
    policy = load_policy(spec, seed=seed, device=device)

    def loader(path: str) -> Any:
        from evo_core.trainer.policy import HFPolicy

        return HFPolicy.load(path, device=device)

    return ModelHost(policy, name=name or getattr(policy, "name", "policy"), loader=loader)


class ServerThread:
    """uvicorn in a daemon thread on 127.0.0.1; ``with ServerThread(app) as url: ...``."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self.config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="evo-serve")

    @property
    def url(self) -> str:
        sock = self.server.servers[0].sockets[0]
        host, port = sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self, timeout_s: float = 30.0) -> str:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("evo serve: the server thread did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def run_server(host: ModelHost, *, bind: str = "127.0.0.1", port: int = 8000) -> None:
    import logging

    import uvicorn

    if not structlog.is_configured():  # per-batch debug lines would flood a busy server's log
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    log.info("serving", models=list(host.models), url=f"http://{bind}:{port}/v1")
    uvicorn.run(build_app(host), host=bind, port=port, log_level="warning")
