"""The sandbox executor, as domains grade untrusted programs with it: the request and result
types, the backend protocol, and the backends (started lazily: they spawn workers)."""

from typing import Any

from evo_core.sandbox.protocol import ExecResult, Limits, RunRequest, Sandbox, run_code

__all__ = ["ExecResult", "Limits", "RunRequest", "Sandbox", "run_code", "LocalSandbox", "get_sandbox"]  # noqa: F822 (lazy)


def __getattr__(name: str) -> Any:  # lazy: importing the protocol must stay cheap
    if name in ("LocalSandbox", "get_sandbox"):
        from evo_core import sandbox

        return getattr(sandbox, name)
    raise AttributeError(name)
