"""Client for an HTTP sandbox service: ours (``server.py``, native ``/v1/run``) or a
SandboxFusion deployment (``api="sandboxfusion"``, ``POST /run_code``; python/bash only,
and fewer fields come back: no OOM flag or signal).

Every transport failure — refused connection, HTTP 5xx, a response that does not parse,
a request that outlives its wall limit plus a grace — becomes ``ExecResult.infra``: it is
never mistaken for the program's behaviour.
"""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Sequence

import httpx
import structlog

from evo_core.retry import Backoff, RetriesExhausted, Retryable, retry_call
from evo_core.sandbox.protocol import ExecResult, RunRequest

log = structlog.get_logger("evo.sandbox.remote")


class RemoteSandbox:
    name = "remote"

    def __init__(
        self,
        base_url: str,
        *,
        token: Optional[str] = None,
        api: str = "evo",
        concurrency: int = 8,
        retries: int = 1,
        grace_s: float = 30.0,
        transport: Optional[httpx.BaseTransport] = None,
    ) -> None:
        if api not in ("evo", "sandboxfusion"):
            raise ValueError(f"api must be 'evo' or 'sandboxfusion', not {api!r}")
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.api = api
        self.size = concurrency
        # a short, jittered wait: a sandbox that restarts is back within a second or two
        self._backoff = Backoff(retries=retries, initial_s=0.2, max_s=2.0)
        self._grace = grace_s
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            limits=httpx.Limits(max_connections=concurrency),
            transport=transport,
        )

    def health(self) -> dict[str, Any]:
        r = self._client.get("/v1/health", timeout=10.0)
        r.raise_for_status()
        return r.json()

    def run(self, request: RunRequest) -> ExecResult:
        timeout = request.limits.wall_seconds + self._grace
        path, body = ("/v1/run", request.to_json()) if self.api == "evo" else ("/run_code", _to_sandboxfusion(request))
        t0 = time.monotonic()

        def attempt() -> ExecResult:
            try:
                r = self._client.post(path, json=body, timeout=timeout)
            except httpx.TimeoutException:
                # Never retried: the program may have run; report no verdict instead.
                return ExecResult.infra(f"sandbox service did not answer within {timeout:.0f}s", self.name, time.monotonic() - t0)
            except httpx.HTTPError as exc:
                raise Retryable(f"sandbox service unreachable: {type(exc).__name__}: {exc}") from exc
            if r.status_code >= 500:
                raise Retryable(f"sandbox service error {r.status_code}: {r.text[:200]}")
            if r.status_code >= 400:  # our request is wrong: retrying will not help
                return ExecResult.infra(f"sandbox service rejected the request ({r.status_code}): {r.text[:300]}", self.name)
            try:
                data = r.json()
                return _from_sandboxfusion(data) if self.api == "sandboxfusion" else ExecResult.from_json(dict(data, backend=self.name))
            except (ValueError, TypeError, KeyError) as exc:
                return ExecResult.infra(f"unreadable sandbox response: {exc}", self.name)

        try:
            return retry_call(attempt, self._backoff)
        except RetriesExhausted as exc:
            log.warning("remote sandbox failed", error=str(exc.last), attempts=exc.attempts)
            return ExecResult.infra(str(exc.last), self.name, time.monotonic() - t0)

    def run_many(self, requests: Sequence[RunRequest]) -> list[ExecResult]:
        if not requests:
            return []
        with ThreadPoolExecutor(min(self.size, len(requests))) as ex:
            return list(ex.map(self.run, requests))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "RemoteSandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _to_sandboxfusion(req: RunRequest) -> dict[str, Any]:
    if req.code is not None:
        code, lang = req.code, "python"
    elif req.argv and req.argv[:2] == ("bash", "-c") and len(req.argv) == 3:
        code, lang = req.argv[2], "bash"
    else:
        import shlex

        code, lang = shlex.join(req.argv or ()), "bash"
    files = {k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode() for k, v in req.files.items()}
    stdin = req.stdin.decode("utf-8", "replace") if isinstance(req.stdin, bytes) else req.stdin
    return {
        "code": code,
        "language": lang,
        "stdin": stdin,
        "run_timeout": req.limits.wall_seconds,
        "memory_limit_MB": req.limits.memory_mb or 1024,
        "files": files,
        "fetch_files": list(req.collect),
    }


def _from_sandboxfusion(data: dict[str, Any]) -> ExecResult:
    if "evo" in data:  # our own server answers both dialects with the full result too
        return ExecResult.from_json(dict(data["evo"], backend="remote"))
    if data.get("status") == "SandboxError":
        return ExecResult.infra(f"SandboxFusion: {data.get('message', '')}", "remote")
    rr = data.get("run_result") or {}
    files = {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in (data.get("files") or {}).items()}
    return ExecResult(
        stdout=rr.get("stdout") or "",
        stderr=rr.get("stderr") or "",
        exit_code=rr.get("return_code"),
        timed_out=rr.get("status") == "TimeLimitExceeded",
        wall_time=float(rr.get("execution_time") or 0.0),
        backend="remote",
        files=files,
    )
