"""A fixed-seed tiny run's events, reduced to one digest: a refactor that changes no behaviour
leaves it unchanged.

    .venv/bin/python scripts/event_digest.py [--steps N] [--arm evolving] [--json] [--skip-prefix oracle_labels]

Event ids, run ids, wall-clock times and timing metrics are random or machine-dependent, so
they are normalised away (an id becomes its event's place in the log); everything else, every
reward, metric, decision and rollout id, is hashed as logged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a file from a checkout
    sys.path.insert(0, str(ROOT))

TIMING = ("_time_s", "_per_s", "_s")
VOLATILE = {"event_id", "run_id", "started_at", "resumed_at", "finished_at", "recorded_at", "code_version",
            "resume_checkpoint", "checkpoint_dir", "config_hash", "head_hash", "timings"}


def tiny_run_config(tmp: str, steps: int) -> dict[str, Any]:
    return {
        "run": {"name": "digest", "seed": 7, "steps": steps, "eval_every": 2, "harnesses": ["evolving"],
                "checkpoint_dir": os.path.join(tmp, "ck"), "progress": False, "threads": 1},
        "task": {"train": "generate://addition?digits=2&validation=12&test=12&seed=0", "options": {"flaw": "hedge"}},
        "policy": {"tiny": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2,
                            "intermediate_size": 64}},
        "rl": {"prompts_per_step": 4, "group_size": 4, "max_new_tokens": 4, "lr": 1e-3, "warmup_steps": 0},
        "eval": {"samples": 2},
        "harness": {"diagnose_every": 2, "window_steps": 2, "audit": {"rate": 0.5},
                    "backtest": {"k_steps": 1}},
    }


def normalised(events: list[Any], *, skip_prefix: str = "") -> list[tuple[str, Any]]:
    """Events as plain data; keys starting with ``skip_prefix`` (when given) are left out."""
    import attrs

    ids = {e.event_id: f"#{i}" for i, e in enumerate(events)}

    def norm(v: Any, key: str = "") -> Any:
        if isinstance(v, str):
            return ids.get(v, v)
        if isinstance(v, dict):
            return {k: norm(x, k) for k, x in sorted(v.items())
                    if k not in VOLATILE and not (key == "metrics" and k.endswith(TIMING))
                    and not (skip_prefix and k.startswith(skip_prefix))}
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        if isinstance(v, float):
            return round(v, 9)
        return v

    return [(type(e).__name__, norm(attrs.asdict(e))) for e in events]


def run_digest(steps: int, arm: str, skip_prefix: str = "") -> dict[str, Any]:
    import torch

    from evo_core.config import config_from_dict
    from evo_core.loop import RunLoop
    from evo_core.store import open_store, run_stream
    from evo_core.testing import isolated_plugins

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config_from_dict(tiny_run_config(tmp, steps)).for_arm(arm)
        store = open_store("memory://")
        loop = RunLoop(cfg, store, plugins=isolated_plugins("evo_arithmetic.plugin", "+standard"))
        loop.start(run_id="digest-run")
        loop.run()
        events = list(store.events(run_stream("digest-run")))
    rows = normalised(events, skip_prefix=skip_prefix)
    blob = json.dumps(rows, sort_keys=True, default=str).encode()
    kinds: dict[str, int] = {}
    for name, _ in rows:
        kinds[name] = kinds.get(name, 0) + 1
    return {"digest": hashlib.sha256(blob).hexdigest(), "events": len(rows), "kinds": kinds,
            "branch_s": round(loop.port.branch_s, 3), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--arm", default="evolving")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dump", help="write the normalised events here (one per line), to diff two runs")
    ap.add_argument("--skip-prefix", default="",
                    help="leave out keys with this prefix (e.g. oracle_labels: compare with a log from before they existed)")
    a = ap.parse_args()
    out = run_digest(a.steps, a.arm, a.skip_prefix)
    rows = out.pop("rows")
    if a.dump:
        Path(a.dump).write_text("".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows))
    print(json.dumps(out, sort_keys=True) if a.json else f"{out['digest']}  ({out['events']} events: {out['kinds']})")


if __name__ == "__main__":
    main()
