"""The math-verify worker pool: ordering, soft and hard timeouts, crashes, threads."""

from __future__ import annotations

import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evo_math.pool import CRASHED, ERROR, OK, TIMEOUT, PoolError, VerifierPool, VerifyJob

# sympy evaluates this tower eagerly: seconds to minutes of work on one answer.
PATHOLOGICAL = "9^{9^{9^{9}}}"


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(2, timeout_s=1.0, grace_s=1.0) as p:
        assert p.wait_ready(60)
        yield p


def test_results_come_back_in_order(pool):
    jobs = [VerifyJob(str(i), (str(i), str(i + 1)), 2) for i in range(40)]
    done = []
    res = pool.map(jobs, on_result=lambda: done.append(1))
    assert len(done) == 40
    assert [r.status for r in res] == [OK] * 40
    assert all(r.match == (True, False) for r in res)
    assert all(r.classes == (0, 1) for r in res)  # two different answers, two classes


def test_equivalent_answers_share_a_class(pool):
    [r] = pool.map([VerifyJob("\\frac12", ("0.5", "\\frac{1}{2}", "2/4", "3"), 4)])
    assert r.classes == (0, 0, 0, 1)
    assert r.match == (True, True, True, False)


def test_soft_timeout_is_reported_and_the_worker_survives(pool):
    before = set(pool.worker_pids())
    res = pool.map([VerifyJob("3", (PATHOLOGICAL,), 1), VerifyJob("2", ("2",), 1)])
    assert res[0].status == TIMEOUT and not res[0].hard_timeout
    assert "exceeded" in (res[0].error or "")
    assert res[1].status == OK and res[1].match == (True,)
    assert set(pool.worker_pids()) == before  # nobody was killed


def test_hard_timeout_kills_and_replaces_the_worker():
    # Without the worker's own alarm only the parent's kill can stop the job.
    with VerifierPool(1, timeout_s=0.5, grace_s=0.5, soft_timeout=False) as p:
        assert p.wait_ready(60)
        [old] = p.worker_pids()
        res = p.map([VerifyJob("3", (PATHOLOGICAL,), 1)] + [VerifyJob("\\frac12", ("0.5",), 1)] * 5)
        assert res[0].status == TIMEOUT and res[0].hard_timeout
        assert "killed" in (res[0].error or "")
        assert [r.status for r in res[1:]] == [OK] * 5  # queued jobs were requeued, not lost
        [new] = p.worker_pids()
        assert new != old
        assert not Path(f"/proc/{old}").exists() or _is_zombie_free(old)
        assert p.stats["hard_timeouts"] == 1


def _is_zombie_free(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return True
    return state != "Z"


def test_a_dead_worker_is_a_crash_not_a_score():
    with VerifierPool(1, timeout_s=30.0) as p:
        assert p.wait_ready(60)
        [pid] = p.worker_pids()
        timer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
        timer.start()
        try:
            res = p.map([VerifyJob("3", (PATHOLOGICAL,), 1), VerifyJob("4", ("4",), 1)])
        finally:
            timer.cancel()
        assert res[0].status == CRASHED and "exit code -9" in (res[0].error or "")
        assert res[1].status == OK  # the next job ran on the replacement
        assert p.stats["crashes"] == 1


def test_usable_from_worker_threads(pool):
    # math-verify's signal.alarm fails off the main thread; the pool must not care.
    def one(i: int):
        return pool.verify(VerifyJob(str(i), (str(i),), 1))

    with ThreadPoolExecutor(4) as ex:
        res = list(ex.map(one, range(12)))
    assert all(r.status == OK and r.match == (True,) for r in res)


def test_workers_do_not_load_torch(pool):
    for pid in pool.worker_pids():
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert "torch" not in maps


def test_workers_that_cannot_start_give_an_error_result():
    # /bin/false exits at once: every start fails, and the jobs come back as errors.
    with VerifierPool(1, timeout_s=1.0, python="/bin/false") as p:
        [r] = p.map([VerifyJob("1", ("1",), 1)])
    assert r.status == ERROR and "failing to start" in (r.error or "")


def test_bad_python_and_bad_config_are_clear_errors():
    with pytest.raises(PoolError, match="cannot start a math-verify worker"):
        VerifierPool(1, python="/nonexistent/python").map([VerifyJob("1", ("1",), 1)])
    with pytest.raises(PoolError, match="workers must be >= 1"):
        VerifierPool(0)
    with pytest.raises(PoolError, match="timeout_s must be > 0"):
        VerifierPool(1, timeout_s=0)
    with pytest.raises(ValueError, match="n_answers"):
        VerifyJob("1", ("1",), 2)


def test_closed_pool_refuses_work():
    p = VerifierPool(1)
    p.close()
    with pytest.raises(PoolError, match="closed"):
        p.map([])


def test_empty_batch_is_fine(pool):
    assert pool.map([]) == []


def test_worker_runs_alone_as_a_module():
    # The worker's own entry point answers a job over its stdio protocol.
    import json
    import subprocess

    job = json.dumps({"id": 0, "gold": "\\frac12", "cands": ["0.5"], "n_answers": 1, "timeout": 5}) + "\n"
    out = subprocess.run([sys.executable, "-m", "evo_math.worker"], input=job, capture_output=True, text=True,
                         timeout=60)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines[0]["ready"] is True
    assert lines[1]["status"] == "ok" and lines[1]["match"] == [True]


def test_worker_never_reaches_sympys_eval_based_parser(monkeypatch):
    # math-verify's plain-expression path calls sympy's parse_expr (eval-based); the
    # worker's extraction config must not use it, whatever the answer looks like.
    import math_verify.parser as mvp
    from math_verify import parse, verify

    from evo_math.worker import extraction_config, run_job

    calls = []
    real = mvp.parse_expr_cached
    monkeypatch.setattr(mvp, "parse_expr_cached", lambda e: calls.append(e) or real(e))
    parse("the answer is 1+2*3 ", parsing_timeout=None)  # control: the default config does call it
    assert calls
    calls.clear()
    job = {"gold": "7", "cands": ["1+2*3", "3*4", "(2+3)/5", "2**10"], "n_answers": 4}
    out = run_job(job, parse, verify, extraction_config())
    assert out["match"][0] is True
    assert calls == []
