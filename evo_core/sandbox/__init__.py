"""Sandbox executor: run untrusted programs under limits (see ``protocol``).

Backends: ``LocalSandbox`` (warm worker pool, namespaces + rlimits + uid drop),
``BwrapSandbox`` (bubblewrap, where ``bwrap`` is installed), ``RemoteSandbox`` (HTTP,
SandboxFusion-style; ``evo_core.sandbox.server`` serves a local backend over ASGI).
"""

from evo_core.sandbox.protocol import ExecResult, Limits, RunRequest, Sandbox, run_code

__all__ = ["ExecResult", "Limits", "RunRequest", "Sandbox", "run_code", "LocalSandbox", "get_sandbox"]  # noqa: F822 (lazy)


def __getattr__(name: str):  # lazy: importing the protocol must stay cheap
    if name == "LocalSandbox":
        from evo_core.sandbox.pool import LocalSandbox

        return LocalSandbox
    if name == "get_sandbox":
        from evo_core.sandbox.factory import get_sandbox

        return get_sandbox
    raise AttributeError(name)
