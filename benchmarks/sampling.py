"""Sampler benchmark: the in-process sampler's shortcuts against its plain loop, on a run's own warm start.

The shortcuts (``HFPolicy.share_prefill``: one prompt forward per run of identical prompts;
``HFPolicy.drop_finished``: finished rows leave the decode batch) must change no number. This
script builds the configured session (SFT warm start from the cache, as a run does), then times,
alternating plain and shortcut passes so that the machine's drift hits both alike:

- ``rl_step``: whole RL steps (sampling the group rollouts, verifying, the update) on forks
  of the session with the same seed;
- ``evaluate``: the validation split evaluated as the loop does (sampled and greedy, graded).

It checks that the two passes produced the same rollouts, scores and metrics, and reports
time ratios (plain / shortcut) measured in the same process.

    python -m benchmarks.sampling --json [--config configs/quickstart.toml] [--repeats 3] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from benchmarks._warm_session import parser, warm_session


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _fingerprint_step(res: Any) -> Any:
    return ([(s.token_ids, s.logprobs) for s in res.samples], [it.reward for it in res.items],
            {k: v for k, v in res.metrics.items() if not k.endswith(("_s", "_per_s", "time"))})


def main(argv: Any = None) -> int:
    args = parser(__doc__, "plain/shortcut").parse_args(argv)

    from evo_core.state import HarnessState
    from evo_core.trainer.policy import HFPolicy, rows_invariant

    session = warm_session(args)
    state = HarnessState()

    def set_shortcuts(on: bool) -> None:
        HFPolicy.share_prefill = HFPolicy.drop_finished = on

    times: dict[str, dict[str, float]] = {"rl_step": {"plain": 0.0, "shortcut": 0.0},
                                          "evaluate": {"plain": 0.0, "shortcut": 0.0}}
    identical = True
    try:
        for r in range(args.repeats):
            outs = {}
            for mode in ("plain", "shortcut") if r % 2 == 0 else ("shortcut", "plain"):
                set_shortcuts(mode == "shortcut")
                fork = session.fork(seed=1000 + r)
                res, dt = _timed(lambda: [fork.rl_step(state) for _ in range(args.steps)])
                times["rl_step"][mode] += dt
                ev, dt = _timed(lambda: session.evaluate("validation"))
                times["evaluate"][mode] += dt
                outs[mode] = ([_fingerprint_step(x) for x in res], ev.item_scores, ev.metrics)
            identical = identical and outs["plain"] == outs["shortcut"]
    finally:
        set_shortcuts(True)
    result = {
        "config": args.config, "overrides": args.set, "repeats": args.repeats, "steps_per_pass": args.steps,
        "rows_invariant": rows_invariant(session.policy.model), "identical_outputs": identical,
        "seconds": {k: {m: round(v, 2) for m, v in t.items()} for k, t in times.items()},
        "speedup": {k: round(t["plain"] / max(t["shortcut"], 1e-9), 3) for k, t in times.items()},
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:20s} {v}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
