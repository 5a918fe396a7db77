"""Rollout throughput of the HTTP path (HTTPEngine -> evo serve on 127.0.0.1) against
sampling in process, same tiny policy, same prompts, in one run. Prints JSON.

    python -m benchmarks.http_engine --json
"""

from __future__ import annotations

import argparse
import json
import os
import time



def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import structlog
    import torch

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    from evo_core.serve import ModelHost, ServerThread, build_app
    from evo_core.trainer.engine import InProcessEngine
    from evo_core.trainer.http_engine import HTTPEngine, HTTPEngineConfig
    from evo_core.trainer.policy import HFPolicy
    from evo_core.trainer.protocols import SamplingParams

    policy = HFPolicy.tiny(seed=0)
    prompts = [f"{a}+{a * 7 % 100}=" for a in range(args.prompts)]
    params = SamplingParams(n=args.n, temperature=1.0, max_new_tokens=args.max_new_tokens)

    def timed(engine) -> tuple[float, int]:
        engine.generate(prompts[:2], params)  # warm-up
        best, toks = float("inf"), 0
        for _ in range(args.repeats):
            t = time.perf_counter()
            rows = engine.generate(prompts, params)
            best = min(best, time.perf_counter() - t)
            toks = sum(len(s.token_ids) for r in rows for s in r)
        return best, toks

    t_in, tok_in = timed(InProcessEngine(policy))
    host = ModelHost(policy, name="tiny")
    results = {}
    with ServerThread(build_app(host)) as url:
        for ppr in (1, 8, 32):
            with HTTPEngine(HTTPEngineConfig(base_url=url, model="tiny", prompts_per_request=ppr,
                                             max_concurrency=16)) as eng:
                t_http, tok_http = timed(eng)
            results[ppr] = (t_http, tok_http)
    out = {
        "prompts": args.prompts, "n": args.n, "max_new_tokens": args.max_new_tokens,
        "inprocess_tokens_per_s": round(tok_in / t_in, 1),
        "http": {f"prompts_per_request_{k}": {"tokens_per_s": round(tok / t, 1), "seconds": round(t, 4),
                                              "slowdown_vs_inprocess": round(t / t_in, 3)}
                 for k, (t, tok) in results.items()},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
