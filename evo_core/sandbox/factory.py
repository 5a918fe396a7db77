"""Pick a backend by name: ``local`` (default), ``bwrap``, or an ``http(s)://`` URL
(remote; ``sandboxfusion+http://...`` for a SandboxFusion deployment). The environment
variable ``EVO_SANDBOX`` supplies the default; ``EVO_SANDBOX_TOKEN`` a bearer token."""

from __future__ import annotations

import os
from typing import Any, Optional

from evo_core.sandbox.protocol import Sandbox


def get_sandbox(spec: Optional[str] = None, **kwargs: Any) -> Sandbox:
    spec = spec or os.environ.get("EVO_SANDBOX") or "local"
    if spec == "local":
        from evo_core.sandbox.pool import LocalSandbox

        return LocalSandbox(**kwargs)
    if spec == "bwrap":
        from evo_core.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(**kwargs)
    api = "evo"
    if spec.startswith("sandboxfusion+"):
        api, spec = "sandboxfusion", spec[len("sandboxfusion+"):]
    if spec.startswith(("http://", "https://")):
        from evo_core.sandbox.remote import RemoteSandbox

        kwargs.setdefault("token", os.environ.get("EVO_SANDBOX_TOKEN"))
        return RemoteSandbox(spec, api=api, **kwargs)
    raise ValueError(f"unknown sandbox {spec!r}: expected local, bwrap, or an http(s):// URL")
