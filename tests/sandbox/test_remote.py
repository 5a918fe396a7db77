"""Remote backend against the project's own ASGI server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from evo_core.sandbox import Limits, LocalSandbox, RunRequest
from evo_core.sandbox.remote import RemoteSandbox
from evo_core.sandbox.server import create_app


class _Server:
    def __init__(self, app):
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            assert time.time() < deadline, "server did not start"
            time.sleep(0.02)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def server():
    sb = LocalSandbox(2)
    srv = _Server(create_app(sb, token="t0ken"))
    yield srv
    srv.stop()
    sb.close()


def test_native_roundtrip(server):
    with RemoteSandbox(server.url, token="t0ken") as rs:
        assert rs.health()["ok"]
        r = rs.run(RunRequest(code="import sys\nprint(sys.stdin.read()[::-1])", stdin="abc", files={"x.bin": b"\x00\x01"}))
        assert r.ok and r.stdout == "cba\n" and r.backend == "remote"
        r = rs.run(RunRequest(code="while True: pass", limits=Limits(wall_seconds=0.5)))
        assert r.timed_out and r.infra_error is None
        outs = rs.run_many([RunRequest(code=f"print({i})") for i in range(6)])
        assert [o.stdout for o in outs] == [f"{i}\n" for i in range(6)]


def test_sandboxfusion_dialect(server):
    with RemoteSandbox(server.url, token="t0ken", api="sandboxfusion") as rs:
        r = rs.run(RunRequest(code="print(input() * 2)", stdin="ab"))
        assert r.stdout == "abab\n" and r.exit_code == 0
        r = rs.run(RunRequest(argv=("bash", "-c", "echo hi > out.txt; echo $((1+2))"), collect=("out.txt",)))
        assert r.stdout == "3\n" and r.files == {"out.txt": "hi\n"}
    raw = httpx.post(f"{server.url}/run_code", json={"code": "import time; time.sleep(5)", "language": "python", "run_timeout": 0.5},
                     headers={"authorization": "Bearer t0ken"}, timeout=30).json()
    assert raw["status"] == "Failed" and raw["run_result"]["status"] == "TimeLimitExceeded"


def test_auth_and_bad_requests_are_infra_errors_not_verdicts(server):
    with RemoteSandbox(server.url, token="wrong") as rs:
        r = rs.run(RunRequest(code="print(1)"))
        assert r.infra_error and "401" in r.infra_error and r.exit_code is None
    r = httpx.post(f"{server.url}/v1/run", json={"argv": None, "code": None}, headers={"authorization": "Bearer t0ken"})
    assert r.status_code == 422


def test_unreachable_service_is_infra_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with RemoteSandbox(f"http://127.0.0.1:{port}", retries=1) as rs:
        r = rs.run(RunRequest(code="print(1)"))
    assert r.infra_error and "unreachable" in r.infra_error and not r.ok


def test_code_grader_over_http(server):
    from pathlib import Path

    pytest.importorskip("evo_code")
    from evo_code import CodeGrader, GradeConfig, load_problems

    fixtures = Path(__file__).parents[2] / "domains" / "code" / "tests" / "fixtures"
    probs = {p.problem_id: p for f in ("taco.jsonl", "humaneval.jsonl") for p in load_problems(fixtures / f)}
    with RemoteSandbox(server.url, token="t0ken") as rs:
        g = CodeGrader(rs, GradeConfig(calibrate=False, default_time_limit_s=2.0))
        assert g.grade(probs["taco-sum"], probs["taco-sum"].reference).reward == 1.0
        assert g.grade(probs["HumanEval/0"], probs["HumanEval/0"].reference).reward == 1.0
        assert g.grade(probs["taco-fn"], "def total(xs):\n    return 0").reward == 0.0


def _flaky_transport(statuses):
    """An in-memory service: answers each status in turn, then a real result."""
    from evo_core.sandbox.protocol import ExecResult

    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) <= len(statuses):
            return httpx.Response(statuses[len(calls) - 1], text="busy")
        return httpx.Response(200, json=ExecResult(stdout="1\n", exit_code=0, backend="remote").to_json())

    return httpx.MockTransport(handle), calls


def test_a_5xx_is_retried_through_the_shared_loop():
    transport, calls = _flaky_transport([503])
    with RemoteSandbox("http://sandbox", retries=1, transport=transport) as rs:
        r = rs.run(RunRequest(code="print(1)"))
    assert r.ok and r.stdout == "1\n" and calls == ["/v1/run", "/v1/run"]


def test_retries_run_out_into_an_infra_error_naming_the_last_failure():
    transport, calls = _flaky_transport([502, 503, 504])
    with RemoteSandbox("http://sandbox", retries=2, transport=transport) as rs:
        r = rs.run(RunRequest(code="print(1)"))
    assert r.infra_error.startswith("sandbox service error 504") and r.exit_code is None and len(calls) == 3


def test_a_4xx_is_not_retried():
    transport, calls = _flaky_transport([400])
    with RemoteSandbox("http://sandbox", retries=3, transport=transport) as rs:
        r = rs.run(RunRequest(code="print(1)"))
    assert "rejected the request (400)" in r.infra_error and len(calls) == 1
