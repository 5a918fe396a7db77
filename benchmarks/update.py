"""Update benchmark: the RL update with each distinct prompt's forward shared by its group
(``rl.shared_prompt_forward = true``, the default) against the row-by-row pass, on a run's own
warm start.

The shared pass computes the same function; only the order of float sums differs, so the
weights after an update agree to rounding, not bit for bit. This script builds the configured
session (SFT warm start from the cache, as a run does), then runs whole RL steps on forks with
the same seed, alternating the two modes so that the machine's drift hits both alike. It
reports the time of the update alone and of the whole step, the ratios (row-by-row / shared),
and how far apart the two modes are: the first step's gradient norm and entropy (its rollouts
are the same in both, sampled before the update) and the weights after the steps.

    python -m benchmarks.update --json [--config configs/quickstart.toml] [--repeats 3] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from benchmarks._warm_session import parser, warm_session


def main(argv: Any = None) -> int:
    args = parser(__doc__, "row-by-row/shared").parse_args(argv)

    import attrs
    import torch

    from evo_core.state import HarnessState

    session = warm_session(args)
    state = HarnessState()

    seconds = {k: {"row_by_row": 0.0, "shared": 0.0} for k in ("update", "rl_step")}
    weight_gap, same_rollouts, updated = 0.0, True, True
    gaps = {"grad_norm": 0.0, "entropy": 0.0}
    for r in range(args.repeats):
        outs: dict[str, Any] = {}
        for mode in ("row_by_row", "shared") if r % 2 == 0 else ("shared", "row_by_row"):
            fork = session.fork(seed=1000 + r)
            fork.rl = attrs.evolve(fork.rl, shared_prompt_forward=mode == "shared")
            real_update = fork._update

            def timed_update(*a: Any, _real: Any = real_update, _mode: str = mode, **kw: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return _real(*a, **kw)
                finally:
                    seconds["update"][_mode] += time.perf_counter() - t0

            fork._update = timed_update  # type: ignore[method-assign]
            t0 = time.perf_counter()
            res = [fork.rl_step(state) for _ in range(args.steps)]
            seconds["rl_step"][mode] += time.perf_counter() - t0
            outs[mode] = (res, dict(fork.policy.model.named_parameters()))
        (a, pa), (b, pb) = outs["row_by_row"], outs["shared"]
        updated = updated and a[0].updated and b[0].updated
        same_rollouts = same_rollouts and [s.token_ids for s in a[0].samples] == [s.token_ids for s in b[0].samples]
        with torch.no_grad():
            weight_gap = max(weight_gap, max(float((pa[n] - pb[n]).abs().max()) for n in pa))
        # the first step scores the same rollouts with the same weights, so its gradient norm and
        # entropy must agree (the loss would not tell: at ratio 1 it is the advantages' mean)
        for key in ("grad_norm", "entropy"):
            x, y = float(a[0].metrics[key] or 0), float(b[0].metrics[key] or 0)
            gaps[key] = max(gaps[key], abs(x - y) / max(abs(x), 1e-12))
    result = {
        "config": args.config, "overrides": args.set, "repeats": args.repeats, "steps_per_pass": args.steps,
        "first_step_rollouts_identical": same_rollouts, "first_step_updated": updated,
        "first_step_relative_gap": gaps,
        "max_weight_gap_after_steps": weight_gap,
        "seconds": {k: {m: round(v, 2) for m, v in t.items()} for k, t in seconds.items()},
        "speedup": {k: round(t["row_by_row"] / max(t["shared"], 1e-9), 3) for k, t in seconds.items()},
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:30s} {v}")
    # the two modes must stay the same function (AdamW's normalised steps would hide a wrong
    # gradient in the weights, so the check is the first step's gradient norm and entropy)
    return 0 if same_rollouts and updated and max(gaps.values()) < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
