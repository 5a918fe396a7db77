"""Sandbox throughput: the warm worker pool vs one fresh ``python`` subprocess per program.

Both sides run the same tiny programs (read stdin, compute, print) under the same limits
(CPU, address space, file size, open files, processes, core dumps, wall timeout, output
cap), with the same number of programs in flight (the pool size), in the same run.

    python -m benchmarks.sandbox --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


from evo_core.sandbox import Limits, LocalSandbox, RunRequest

PROGRAMS = [
    "a, b = map(int, input().split()[:2])\nprint(a + b)",
    "import sys\nxs = list(map(int, sys.stdin.read().split()))\nprint(max(xs) - min(xs))",
    "n = int(input().split()[0])\nprint(sum(i * i for i in range(n)))",
    "from collections import Counter\nprint(Counter(input().split()).most_common(1)[0][1])",
]
LIMITS = Limits(wall_seconds=10.0, memory_mb=512, processes=32, open_files=64, file_size_mb=16, output_bytes=1 << 16)


def _stdin(i: int) -> str:
    return f"{i % 97 + 3} {i * 7 % 13 + 1} 5 8"


def _fresh_subprocess(code: str, stdin: str) -> str:
    """The baseline: a fresh interpreter per program, with the same rlimits."""

    def limits() -> None:
        os.setsid()
        cpu = int(LIMITS.effective_cpu_seconds())
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (LIMITS.memory_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMITS.file_size_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (LIMITS.open_files,) * 2)
        resource.setrlimit(resource.RLIMIT_NPROC, (LIMITS.processes,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    p = subprocess.run(
        [sys.executable, "-c", code],
        input=stdin.encode(),
        capture_output=True,
        timeout=LIMITS.wall_seconds,
        preexec_fn=limits,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
    )
    return p.stdout.decode()[: LIMITS.output_bytes]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _pool_cpu(sb: LocalSandbox) -> float:
    """CPU of the pool's workers and their reaped children (from /proc), in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for w in list(sb._all):
        try:
            with open(f"/proc/{w.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("-n", type=int, default=400, help="programs per side")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    jobs = [(PROGRAMS[i % len(PROGRAMS)], _stdin(i)) for i in range(args.n)]

    t = time.perf_counter()
    sb = LocalSandbox(args.workers)
    startup_s = time.perf_counter() - t
    # Interleave the two sides in small rounds so that load from other processes on a
    # shared machine hits both alike; the ratio of summed times is the figure.
    rounds = max(1, args.n // 40)
    pool_cpu = base_cpu = 0.0
    pool_s = base_s = 0.0
    pool_out: list[str] = []
    base_out: list[str] = []
    failures = 0
    ratios = []
    try:
        sb.run_many([RunRequest(code=c, stdin=s, limits=LIMITS) for c, s in jobs[: args.workers * 2]])  # warm
        with ThreadPoolExecutor(args.workers) as ex:
            for r in range(rounds):
                chunk = jobs[r::rounds]
                c0 = _pool_cpu(sb)
                t = time.perf_counter()
                res = sb.run_many([RunRequest(code=c, stdin=s, limits=LIMITS) for c, s in chunk])
                dp = time.perf_counter() - t
                pool_cpu += _pool_cpu(sb) - c0
                c0 = _children_cpu()
                t = time.perf_counter()
                base_out += list(ex.map(lambda j: _fresh_subprocess(*j), chunk))
                db = time.perf_counter() - t
                base_cpu += _children_cpu() - c0
                pool_s, base_s = pool_s + dp, base_s + db
                ratios.append(db / dp)
                pool_out += [x.stdout for x in res]
                failures += sum(1 for x in res if not x.ok)
    finally:
        sb.close()
    ratios.sort()

    out = {
        "programs": args.n,
        "workers": args.workers,
        "pool_programs_per_s": round(args.n / pool_s, 1),
        "subprocess_programs_per_s": round(args.n / base_s, 1),
        "speedup_vs_subprocess": round(base_s / pool_s, 2),
        "speedup_median_round": round(ratios[len(ratios) // 2], 2),
        # CPU spent per program (workers + their children; fresh interpreters): the
        # figure that load from other processes on a shared machine does not distort.
        "pool_cpu_ms_per_program": round(pool_cpu / args.n * 1000, 2),
        "subprocess_cpu_ms_per_program": round(base_cpu / args.n * 1000, 2),
        "speedup_cpu": round(base_cpu / pool_cpu, 2) if pool_cpu else None,
        "pool_startup_s": round(startup_s, 3),
        "outputs_agree": pool_out == base_out,
        "pool_failures": failures,
        "isolation": {k: v for k, v in sb.isolation.items() if k != "uid"},
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>28}: {v}")


if __name__ == "__main__":
    main()
