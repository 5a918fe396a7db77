"""Audit, counterfactual replay and report on a generated 1,000,000-event run.

    python -m benchmarks.replay --json [--events 1000000] [--store memory://|sqlite:///PATH]

Prints one JSON object:
- ``audit_s``: ``audit_run`` of the last promotion, from scratch (reads the stream, walks
  the chain, verifies the hash chain from the first event shown to the head, checks the
  outcome). Target ≤ 1 s.
- ``counterfactual_events_per_s``: a counterfactual replay over the whole run: the harness
  engine (the standard plugins, the run's own ``[harness]`` config plus one cheap diagnostic)
  runs one pass per step as the live loop does (every event decoded and folded, the window
  rebuilt, diagnostics every 5 steps and at each eval, the policy gate at each eval, the
  proposals the diagnoses lead to), and its events are compared with the recorded ones.
- ``scan_events_per_s``: a plain scan of the same events (read + decode each one).
- ``counterfactual_ratio``: the two rates' ratio (the replay's whole cost, the harness's own
  work included).
- ``counterfactual_engine_share``: the share of the replay spent inside the engine's passes:
  the work the live harness did at every step of the run, repeated.
- ``replay_overhead_ratio``: the scan rate over the rate of everything else the replay does
  (decode, fold, windows, comparing the passes): events / (replay s − engine s), divided by
  the scan rate. Target ≥ 0.3: replay itself costs no more than a few scans of the log.
- ``report_s``, ``report_bytes``: ``evo report`` of the same run (targets < 60 s, < 10 MB).
Ratios come from one process on one machine; absolute figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


from evo_core.api import Finding
from evo_core.hookspecs import hookimpl
from evo_core.testing import isolated_plugins
from evo_core.store import open_store, run_stream
from evo_core.synthetic import iter_run_batches


class ExploitRate:
    """The cheap diagnostic: share of rollouts that took the synthetic log's simulated exploit
    (``sim_count`` > 1)."""

    name, version = "bench_exploit_rate", "1"
    default_params = {"max_rate": 0.5}

    def evaluate(self, window, params):
        rows = window.rollouts
        if not rows:
            return []
        rate = sum(1 for r in rows if (r.signals.get("sim_count") or 1) > 1) / len(rows)
        return [Finding(kind="exploit", severity="invalid", stats={"rate": rate})] if rate > params["max_rate"] else []


class _Plugin:
    @hookimpl
    def evo_register_diagnostics(self):
        return [ExploitRate()]


def generate(store, events: int, rollouts: int, log) -> tuple[str, int]:
    per_step = rollouts + 3.0  # rollouts, StepCompleted, PolicyUpdated, evals and decisions (measured)
    steps = max(10, int(events / per_step))
    run_id = "bench-replay"
    stream = run_stream(run_id)
    version = 0
    t0 = time.time()
    for batch in iter_run_batches(run_id, steps=steps, rollouts_per_step=rollouts, seed=7, decision_every=5, eval_every=5):
        store.append(stream, batch, expected_version=version)
        version += len(batch)
        if version % 100_000 < len(batch):
            log(f"generated {version:,} events ({time.time() - t0:.0f}s)")
    return run_id, version


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--rollouts", type=int, default=32, help="rollouts per step")
    ap.add_argument("--store", default="memory://")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))  # stdout is the JSON
    log = (lambda m: print(m, file=sys.stderr)) if not args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    store = open_store(args.store)
    t = time.time()
    run_id, n = generate(store, args.events, args.rollouts, log)
    gen_s = time.time() - t
    stream = run_stream(run_id)

    from evo_core.audit import audit_run, parse_spec, replay
    from evo_core.report import build_report

    # The last promotion (near the end of the run).
    last = None
    for rec in store.read_stream(stream, from_version=max(1, n - 2000)):
        if rec.type == "evo.Promoted":
            last = rec.event_id
    t = time.time()
    rep = audit_run(store, run_id, last)
    audit_s = time.time() - t
    chain = rep.chains[0]
    assert chain.verification.verified

    # Plain scan: read and decode every event of the run.
    t = time.time()
    k = 0
    for _ in store.events(stream):
        k += 1
    scan_s = time.time() - t

    pm = isolated_plugins()  # the standard library, as a run would have it
    pm.register(_Plugin(), "bench")
    t = time.time()
    res = replay(store, run_id, parse_spec(["bench_exploit_rate"]), pm, write=False)
    cf_s = time.time() - t
    engine_s = res.timings["engine_s"]
    overhead = (res.events_scanned / max(cf_s - engine_s, 1e-9)) / (k / scan_s)

    out_dir = tempfile.mkdtemp(prefix="evo-report-")
    t = time.time()
    path = build_report(store, run_id, out_dir)
    report_s = time.time() - t
    size = path.stat().st_size

    result = {
        "command": "python -m benchmarks.replay --json" + (f" --events {args.events}" if args.events != 1_000_000 else "")
                   + (f" --store {args.store}" if args.store != "memory://" else ""),
        "store": args.store.split("://")[0],
        "events": n,
        "generate_s": round(gen_s, 1),
        "audit_s": round(audit_s, 3),
        "audit_events_verified": chain.verification.events_checked,
        "scan_events_per_s": round(k / scan_s),
        "counterfactual_events_per_s": round(res.events_scanned / cf_s),
        "counterfactual_ratio": round((res.events_scanned / cf_s) / (k / scan_s), 3),
        "counterfactual_engine_share": round(engine_s / cf_s, 3),
        "replay_overhead_ratio": round(overhead, 3),
        "counterfactual_passes": res.passes,
        "counterfactual_steps": len(res.pass_events),
        "counterfactual_decisions": res.decisions.get("replayed_decisions"),
        "counterfactual_findings": len(res.findings),
        "report_s": round(report_s, 1),
        "report_bytes": size,
        "targets_met": {"audit_s<=1": audit_s <= 1.0, "replay_overhead_ratio>=0.3": overhead >= 0.3,
                        "report_s<60": report_s < 60, "report_bytes<10MB": size < 10_000_000},
        "cpu": os.cpu_count(),
    }
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
