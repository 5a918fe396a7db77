"""Retries with backoff against a flaky local server (a real uvicorn on 127.0.0.1)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from evo_core.serve import ServerThread
from evo_core.trainer.http_engine import HTTPEngine, HTTPEngineConfig, HTTPEngineError, backoff_delays
from evo_core.trainer.protocols import SamplingParams

pytestmark = pytest.mark.timeout(120)


def flaky_app(failures: int, status: int = 503):
    """Answers ``status`` to the first ``failures`` requests, then a valid completion
    that echoes the prompts (so the client's parsing is checked, not a canned blob)."""
    calls = {"n": 0}

    async def completions(request: Request):
        calls["n"] += 1
        if calls["n"] <= failures:
            return JSONResponse({"error": {"message": "overloaded, try later"}}, status_code=status)
        body = await request.json()
        choices = []
        for i, p in enumerate(body["prompt"]):
            for j in range(body["n"]):
                ids = [ord(c) for c in p[:2]]
                choices.append({"index": i * body["n"] + j, "text": p[::-1], "finish_reason": "length",
                                "logprobs": {"tokens": [f"token_id:{t}" for t in ids], "token_logprobs": [-0.5, -1.5]}})
        return JSONResponse({"choices": choices})

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"])]), calls


def _cfg(url, **kw):
    return HTTPEngineConfig(base_url=url, model="m", backoff_initial_s=0.01, backoff_max_s=0.05, **kw)


def test_503s_are_retried_until_success():
    app, calls = flaky_app(failures=2)
    with ServerThread(app) as url, HTTPEngine(_cfg(url, max_retries=4)) as eng:
        rows = eng.generate(["ab+c", "xy"], SamplingParams(n=2, max_new_tokens=2))
    assert calls["n"] == 3 and eng.retries == 2
    assert [[s.text for s in r] for r in rows] == [["c+ba"] * 2, ["yx"] * 2]
    s = rows[0][0]
    assert s.token_ids == (ord("a"), ord("b")) and s.logprobs == (-0.5, -1.5) and s.truncated


def test_retries_exhausted_is_an_error_naming_the_cause():
    app, calls = flaky_app(failures=100)
    with ServerThread(app) as url, HTTPEngine(_cfg(url, max_retries=2)) as eng:
        with pytest.raises(HTTPEngineError, match="after 3 attempts: HTTP 503: overloaded"):
            eng.generate(["a"], SamplingParams())
    assert calls["n"] == 3


def test_connection_refused_is_retried_then_fails():
    from evo_core.trainer.distributed import free_port

    with HTTPEngine(_cfg(f"http://127.0.0.1:{free_port()}", max_retries=1)) as eng:
        with pytest.raises(HTTPEngineError, match="ConnectError"):
            eng.generate(["a"], SamplingParams())
        assert eng.retries == 1


def test_4xx_fails_at_once():
    app, calls = flaky_app(failures=1, status=422)
    with ServerThread(app) as url, HTTPEngine(_cfg(url, max_retries=5)) as eng:
        with pytest.raises(HTTPEngineError, match="rejected"):
            eng.generate(["a"], SamplingParams())
    assert calls["n"] == 1


def test_requests_are_batched_and_concurrent():
    app, calls = flaky_app(failures=0)
    prompts = [f"p{i}" for i in range(23)]
    with ServerThread(app) as url, HTTPEngine(_cfg(url, prompts_per_request=5, max_concurrency=3)) as eng:
        rows = eng.generate(prompts, SamplingParams(n=1))
    assert calls["n"] == 5  # ceil(23 / 5)
    assert [r[0].text for r in rows] == [p[::-1] for p in prompts]  # order preserved across batches


@settings(max_examples=50, deadline=None)
@given(initial=st.floats(0.001, 2), cap=st.floats(0.001, 30), retries=st.integers(0, 12), seed=st.integers(0, 10**6))
def test_backoff_grows_and_is_capped(initial, cap, retries, seed):
    cfg = HTTPEngineConfig(base_url="http://x", model="m", backoff_initial_s=initial, backoff_max_s=cap,
                           max_retries=retries)
    d = backoff_delays(cfg, random.Random(seed))
    assert len(d) == retries
    for k, x in enumerate(d):
        ceiling = min(cap, initial * 2 ** k)
        assert 0.5 * ceiling <= x <= ceiling
