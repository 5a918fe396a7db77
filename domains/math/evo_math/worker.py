"""The math-verify worker process: ``python -m evo_math.worker``.

math-verify bounds its work with ``signal.alarm``, which only works on a process's main
thread; a grader called from a trainer's thread pool would either crash or run without any
bound. So grading runs here, on this process's main thread, one job at a time:

* a *soft* per-job deadline (``setitimer``, sub-second resolution) interrupts sympy between
  bytecodes and reports ``timeout``; the worker survives;
* the parent (:mod:`evo_math.pool`) keeps a *hard* deadline and SIGKILLs a worker that
  does not answer (a computation stuck in C never sees the signal).

Protocol: newline-delimited JSON. stdin carries jobs, fd 3-equivalent (a dup of the
original stdout) carries results; the real stdout is pointed at stderr so that nothing a
library prints can corrupt the channel. The worker imports math-verify and sympy only:
never torch, so it is cheap to start and to kill.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import sys
import time
from typing import Any


class _Deadline(BaseException):
    """Raised by the soft-deadline timer. A BaseException, so that math-verify's and
    sympy's ``except Exception`` blocks cannot swallow it and turn a timeout into False."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Deadline()


def _limit_memory(megabytes: int) -> None:
    if megabytes > 0:
        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _wrap(answer: str) -> str:
    # Gold and candidates are bare answers; a box makes math-verify's LaTeX extractor take
    # the whole string as one expression instead of hunting for one inside it.
    return "\\boxed{" + answer + "}"


def extraction_config() -> list[Any]:
    """LaTeX extraction only. Every answer arrives wrapped in ``\\boxed{}``, and
    math-verify's plain-expression extractor is the one path that hands text to sympy's
    ``parse_expr``, which is eval-based. The LaTeX path uses an ANTLR parser instead."""
    from math_verify import LatexExtractionConfig

    return [LatexExtractionConfig()]


def run_job(job: dict[str, Any], mv_parse: Any, mv_verify: Any, config: Any) -> dict[str, Any]:
    """Parse gold and every candidate, compare each candidate with gold (gold first), and
    group the first ``n_answers`` candidates into classes of equivalent answers."""
    cands: list[str] = job["cands"]
    n_answers: int = job.get("n_answers", 0)
    gold = mv_parse(_wrap(job["gold"]), extraction_config=config, parsing_timeout=None)
    parsed = [mv_parse(_wrap(c), extraction_config=config, parsing_timeout=None) for c in cands]
    match = [bool(p) and bool(gold) and mv_verify(gold, p, timeout_seconds=None) for p in parsed]
    # Equivalence classes among the final answers: "1/2" and "0.5" are one answer, not a hedge.
    classes: list[int] = []
    reps: list[int] = []
    for i in range(n_answers):
        cls = -1
        for ci, r in enumerate(reps):
            if parsed[i] and parsed[r] and (
                mv_verify(parsed[r], parsed[i], timeout_seconds=None)
                or mv_verify(parsed[i], parsed[r], timeout_seconds=None)
            ):
                cls = ci
                break
        if cls < 0:
            reps.append(i)
            cls = len(reps) - 1
        classes.append(cls)
    return {
        "status": "ok",
        "match": match,
        "classes": classes,
        "gold_parsed": bool(gold),
        "parsed": [bool(p) for p in parsed],
    }


def main() -> None:
    memory_mb = int(os.environ.get("EVO_MATH_WORKER_MEMORY_MB", "0"))
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.CRITICAL)
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    _limit_memory(memory_mb)

    from math_verify import parse, verify

    config = extraction_config()
    # Warm the parser and sympy's caches before declaring ready, so that the first real
    # job does not pay seconds of lazy imports against its deadline.
    verify(parse(_wrap("\\frac{1}{2}"), config, parsing_timeout=None),
           parse(_wrap("0.5"), config, parsing_timeout=None), timeout_seconds=None)
    signal.signal(signal.SIGALRM, _on_alarm)
    channel.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")

    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        t0 = time.perf_counter()
        soft = float(job.get("timeout", 0) or 0)
        try:
            if soft > 0:
                signal.setitimer(signal.ITIMER_REAL, soft)
            try:
                out = run_job(job, parse, verify, config)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _Deadline:
            out = {"status": "timeout", "error": f"math-verify exceeded {soft:g}s (soft deadline)"}
        except MemoryError:
            out = {"status": "error", "error": f"math-verify ran out of memory ({memory_mb} MiB limit)"}
        except RecursionError:
            out = {"status": "error", "error": "math-verify hit the recursion limit"}
        except Exception as exc:  # a grader bug is an infrastructure error, never a score
            out = {"status": "error", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        out["id"] = job["id"]
        out["ms"] = (time.perf_counter() - t0) * 1000.0
        channel.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
