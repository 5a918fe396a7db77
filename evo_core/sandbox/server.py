"""An HTTP sandbox service (FastAPI on uvicorn) wrapping a local backend.

Endpoints:
- ``POST /v1/run``       native: a ``RunRequest`` as JSON -> an ``ExecResult`` as JSON;
- ``POST /v1/run_batch`` ``{"requests": [...]}`` -> ``{"results": [...]}`` (run in parallel);
- ``POST /run_code``     SandboxFusion-compatible subset (``code``, ``language`` python|bash,
  ``stdin``, ``run_timeout``, ``memory_limit_MB``, ``files`` base64, ``fetch_files``);
- ``GET  /v1/health``    backend name, pool size and the isolation that holds.

Run it: ``python -m evo_core.sandbox.server --host 127.0.0.1 --port 8080 --workers 4``.
Bind to 127.0.0.1 (the default) unless a token is set: it executes arbitrary code.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hmac
import os
from typing import Any, AsyncIterator, Optional

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from evo_core.sandbox.protocol import ExecResult, Limits, RunRequest, Sandbox


def create_app(sandbox: Optional[Sandbox] = None, token: Optional[str] = None, workers: Optional[int] = None):
    state: dict[str, Any] = {"sandbox": sandbox}

    def get_sandbox() -> Sandbox:
        if state["sandbox"] is None:
            from evo_core.sandbox.pool import LocalSandbox

            state["sandbox"] = LocalSandbox(workers)
        return state["sandbox"]

    def auth(request: Request) -> None:
        if token is None:
            return
        got = request.headers.get("authorization", "")
        if not hmac.compare_digest(got, f"Bearer {token}"):
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        yield
        if sandbox is None and state["sandbox"] is not None:  # ours to close
            state["sandbox"].close()

    app = FastAPI(title="evo sandbox", version="1", dependencies=[Depends(auth)], lifespan=lifespan)

    def parse(data: Any) -> RunRequest:
        try:
            return RunRequest.from_json(data)
        except (ValueError, TypeError, KeyError) as exc:
            raise HTTPException(status_code=422, detail=f"bad RunRequest: {exc}")

    @app.get("/v1/health")
    def health() -> dict[str, Any]:
        sb = get_sandbox()
        return {"ok": True, "backend": sb.name, "size": getattr(sb, "size", None), "isolation": getattr(sb, "isolation", {})}

    @app.post("/v1/run")
    async def run(body: dict[str, Any]) -> dict[str, Any]:
        req = parse(body)
        res = await run_in_threadpool(get_sandbox().run, req)
        return res.to_json()

    @app.post("/v1/run_batch")
    async def run_batch(body: dict[str, Any]) -> dict[str, Any]:
        reqs = [parse(r) for r in body.get("requests") or []]
        res = await run_in_threadpool(get_sandbox().run_many, reqs)
        return {"results": [r.to_json() for r in res]}

    @app.post("/run_code")
    async def run_code(body: dict[str, Any]) -> dict[str, Any]:
        try:
            req = _from_sandboxfusion(body)
        except (ValueError, TypeError, KeyError) as exc:
            raise HTTPException(status_code=422, detail=f"bad request: {exc}")
        res = await run_in_threadpool(get_sandbox().run, req)
        return _to_sandboxfusion(res)

    return app


def _from_sandboxfusion(body: dict[str, Any]) -> RunRequest:
    lang = body.get("language", "python")
    code = body["code"]
    files = {k: base64.b64decode(v) for k, v in (body.get("files") or {}).items()}
    limits = Limits(
        wall_seconds=float(body.get("run_timeout") or 10.0),
        memory_mb=int(body.get("memory_limit_MB") or 1024),
        network=False,
    )
    common = dict(files=files, stdin=body.get("stdin") or "", limits=limits, collect=tuple(body.get("fetch_files") or ()))
    if lang in ("python", "python3"):
        return RunRequest(code=code, **common)
    if lang == "bash":
        return RunRequest(argv=("bash", "-c", code), **common)
    raise ValueError(f"unsupported language {lang!r} (python, bash)")


def _to_sandboxfusion(res: ExecResult) -> dict[str, Any]:
    if res.infra_error:
        return {"status": "SandboxError", "message": res.infra_error, "run_result": None, "files": {}, "evo": res.to_json()}
    run_status = "TimeLimitExceeded" if res.timed_out else "Finished"
    ok = run_status == "Finished" and res.exit_code == 0
    return {
        "status": "Success" if ok else "Failed",
        "message": "",
        "compile_result": None,
        "run_result": {
            "status": run_status,
            "execution_time": res.wall_time,
            "return_code": res.exit_code,
            "stdout": res.stdout,
            "stderr": res.stderr,
        },
        "files": {k: base64.b64encode(v.encode()).decode() for k, v in res.files.items()},
        "evo": res.to_json(),  # the full result, for clients that know it
    }


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description="evo sandbox HTTP service")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--workers", type=int, default=None, help="sandbox workers (default: CPU count)")
    ap.add_argument("--token", default=os.environ.get("EVO_SANDBOX_TOKEN"), help="require this bearer token")
    args = ap.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.token:
        ap.error("refusing to serve arbitrary code execution beyond localhost without --token")
    import uvicorn

    uvicorn.run(create_app(token=args.token, workers=args.workers), host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
