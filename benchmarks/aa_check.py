"""Is the online A/B calibrated? Run it with treatments that do nothing and count the passes.

    python -m benchmarks.aa_check --seeds 20 --json

On the quickstart's SFT start (the hedge flaw), the online backtest (``online_ab``: replicated,
seed-paired arms, t-intervals over pairs) is run many times with different seeds against:

- ``noop``: a repair whose predicate matches nothing. Paired arms with the same seed and no
  change are identical, so it must never pass;
- ``placebo``: screens a pseudo-random 10% of rollouts from the loss, whatever they say. It
  perturbs training like a real change but targets nothing; under the null it should pass at
  most at the nominal rate (the fingerprint's one-sided 5% at ``confidence = 0.9``; the
  acceptance criterion is at most 10%);
- ``repair``: the real predicate repair (``spec_penalty`` on "more than one number"), for the
  power of the same test on a true effect.

All three watch the same induced diagnostic (paid responses with more than one number), so the
fingerprint is checkable in every arm.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]

LISTS = {"feature": "numbers", "op": ">", "value": 1}
SPEC = {"kind": "induced_lists", "severity": "invalid", "population": {"field": "split", "op": "==", "value": "train"},
        "where": {"all": [LISTS, {"field": "reward", "op": ">", "value": 0}]}, "statistic": {"type": "rate"},
        "threshold": {"op": ">", "value": 0.05}, "min_n": 32}


class RandomScreen:
    """The placebo: masks a pseudo-random share of rollouts (by a hash of the rollout id)."""

    name, version, kind = "random_screen", "1", "rollout_filter"
    changes, targets, default_params = "loss: masks a random `share` of rollouts", (), {"share": 0.1}

    def mask(self, views: Any, params: Any) -> set[str]:
        share = float(params.get("share", 0.1))
        return {v.rollout_id for v in views
                if int(hashlib.sha256(v.rollout_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/quickstart.toml")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--noop-seeds", type=int, default=5)
    ap.add_argument("--repair-seeds", type=int, default=10)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import torch

    from evo_core.trainer.logs import configure_logging

    configure_logging("WARNING")  # structlog to stderr: stdout is the JSON
    from evo_core.api import BacktestContext, Proposal
    from evo_core.config import load_config
    from evo_core.harness.config import HarnessConfig
    from evo_core.harness.diagnosis import Diagnoses
    from evo_core.hookspecs import hookimpl
    from evo_core.plugins import PluginManager
    from evo_core.run_setup import build_session
    from evo_core.state import HarnessState
    from evo_core.store import open_store
    from evo_core.trainer.port import SessionPort
    from evo_plugins.backtests import OnlineAB

    torch.set_num_threads(1)
    cfg = load_config(str(ROOT / args.config), ["run.threads=1", *args.overrides]).for_arm("evolving")

    class Placebo:
        @hookimpl
        def evo_register_interventions(self):
            return [RandomScreen()]

    pm = PluginManager()
    pm.register(Placebo(), name="aa_placebo")
    session, _ = build_session(cfg, pm)
    port = SessionPort(session, open_store("memory://").blobs, "aa")
    hcfg = HarnessConfig.from_dict(cfg.harness)
    diags = Diagnoses(hcfg.diagnostics, pm.diagnostics())
    diagnostic = {"name": "induced_lists", "version": "spec-1", "spec": SPEC}
    treatments = {
        "noop": Proposal(kind="reward_shaping", name="spec_penalty", targets=("induced_lists",), diagnostic=diagnostic,
                         params={"predicate": {"feature": "chars", "op": ">", "value": 10_000}}),
        "placebo": Proposal(kind="rollout_filter", name="random_screen", targets=("induced_lists",), diagnostic=diagnostic,
                            params={"share": 0.1}),
        "repair": Proposal(kind="reward_shaping", name="spec_penalty", targets=("induced_lists",), diagnostic=diagnostic,
                           params={"predicate": LISTS}),
    }
    runs = {"noop": args.noop_seeds, "placebo": args.seeds, "repair": args.repair_seeds}
    out: dict[str, Any] = {"command": "python -m benchmarks.aa_check " + " ".join(argv if argv is not None else sys.argv[1:]),
                           "backtest": {k: getattr(hcfg.backtest, k) for k in ("k_steps", "replicates", "confidence",
                                                                               "min_effect", "min_n")}, "results": {}}
    t0 = time.perf_counter()
    for name, prop in treatments.items():
        rows = []
        for seed in range(runs[name]):
            ctx = BacktestContext(run_id="aa", step=0, state=HarnessState(), window=None, config=hcfg,  # type: ignore[arg-type]
                                  interventions=pm.interventions(), diagnostics=pm.diagnostics(), trainer=port,
                                  seed=1000 + seed, diagnose=diags.summary, measure=diags.measure, resolve=diags.resolve)
            res = OnlineAB().backtest(prop, ctx)
            fp = res.figures.get("fingerprint") or {}
            rows.append({"seed": seed, "passed": res.passed, "accuracy_ci": res.figures.get("accuracy_ci"),
                         "fingerprint_ci": fp.get("ci"), "fingerprint_control": fp.get("control"),
                         "fingerprint_treatment": fp.get("treatment")})
            if not args.json:
                print(f"{name} seed {seed}: passed={res.passed} acc CI {res.figures.get('accuracy_ci')} "
                      f"fingerprint CI {fp.get('ci')}", file=sys.stderr, flush=True)
        passes = sum(1 for r in rows if r["passed"])
        out["results"][name] = {"runs": len(rows), "passes": passes, "pass_rate": passes / len(rows) if rows else None,
                                "rows": rows}
    out["total_wall_s"] = time.perf_counter() - t0
    out["nominal"] = "one-sided 5% on the fingerprint (confidence 0.9); acceptance: at most 10% for placebo and noop"
    print(json.dumps(out, indent=2, default=str) if args.json else json.dumps(
        {k: {kk: vv for kk, vv in v.items() if kk != "rows"} for k, v in out["results"].items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
