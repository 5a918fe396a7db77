"""Per-step episode cost on ``generate://tinyrepo`` (the agentic flaws' tasks): batched
episodes (one ``generate`` per turn over every live episode, the turn's test runs in one
sandbox round trip, batched grading) against one by one (each episode alone, one generate per
turn, its own tool runs, ``verify`` per episode), on the same tasks in one run.

    python -m benchmarks.episodes --json
    python -m benchmarks.episodes --weights .evo/cache/sft/<key>/weights.pt   # an SFT'd policy

A step is ``--prompts`` x ``--group`` episodes (default 16 x 8, the suite config's). The
policy is the suite config's tiny model: fresh (its replies are mostly not tool calls, so
episodes run to the turn budget: the worst case) or with ``--weights``. ``scripted`` replays
the expert's replies (look, fix, test, submit) through both paths, so the tool and grading
figures compare identical episodes. Times are wall seconds per step on this machine's CPUs
(``cpu`` in the output), split into generation, tools (``episode_step``: file tools and the
turn's sandboxed test runs) and grading (the training verifier); each path starts with a
fresh sandbox pool and nothing remembered. For the policy, the batched step also runs with the
engine's turn cache off (``batched_reencoding``: every turn re-encodes the whole transcript,
the path before ``evo_core/trainer/turn_cache.py``) on the same tasks and seed:
``turn_cache_speedup`` is that step's time over the cached one.

    python -m benchmarks.episodes --json --threads 1 --no-one-by-one --weights ...
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class Timed:
    """Wraps an engine or a domain: the seconds spent in its ``generate`` / ``episode_step``."""

    def __init__(self, inner: Any, method: str) -> None:
        self.inner, self.method, self._seconds, self._calls = inner, method, 0.0, 0
        self._children: list["Timed"] = []

    @property
    def seconds(self) -> float:
        return self._seconds + sum(c.seconds for c in self._children)

    @property
    def calls(self) -> int:
        return self._calls + sum(c.calls for c in self._children)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "open_turns":  # the engine's turn cache generates in its place: time it too
            def opened() -> Any:
                turns = attr()
                if turns is None:
                    return None
                inner = Timed(turns, self.method)
                self._children.append(inner)
                return inner

            return opened
        if name != self.method:
            return attr

        def timed(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return attr(*a, **k)
            finally:
                self._seconds += time.perf_counter() - t
                self._calls += 1

        return timed


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


class Scripted:
    """An engine that replies with the expert's next call for the episode's task."""

    def __init__(self, tok: Any, tasks: Any) -> None:
        from evo_swe import tinyrepo

        self.tok = tok
        self.plans = {t.prompt: tinyrepo.honest_replies(t.gold) for t in tasks}
        self.ps1 = tinyrepo.PS1

    def generate(self, prompts: Any, params: Any, *, generator: Any = None) -> Any:
        from evo_core.trainer.protocols import Sample

        out = []
        for p in prompts:
            first = p[: p.index(self.ps1) + len(self.ps1)]
            plan = self.plans[first]
            reply = plan[min(p.count(self.ps1) - 1, len(plan) - 1)] + "\n"
            ids = tuple(self.tok.encode(reply))
            out.append([Sample(prompt=p, text=reply[:-1], token_ids=ids, logprobs=(0.0,) * len(ids))
                        for _ in range(params.n)])
        return out


def measure(engine: Any, domain_factory: Any, tasks: Any, params: Any, tok: Any, *, batched: bool, seed: int) -> dict[str, Any]:
    import torch

    from evo_core.trainer.episodes import run_episode_batches

    import attrs

    domain = domain_factory()
    domain.runner.sandbox  # noqa: B018 - start the pool before the clock
    eng = Timed(engine, "generate")
    dom = Timed(domain, "episode_step")
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    if batched:
        groups, comps, _ = run_episode_batches(eng, dom, tasks, params, encode=tok.encode, decode=tok.decode, generator=gen)
        pairs = [(t, c) for t, cs in zip(tasks, comps) for c in cs]
        t1 = time.perf_counter()
        verdicts = domain.verify_batch(pairs)
    else:
        one = attrs.evolve(params, n=1)
        pairs = []
        for t in tasks:
            for _ in range(params.n):
                _, comps, _ = run_episode_batches(eng, dom, [t], one, encode=tok.encode, decode=tok.decode, generator=gen)
                pairs.append((t, comps[0][0]))
        t1 = time.perf_counter()
        verdicts = [domain.verify(t, c) for t, c in pairs]
    t2 = time.perf_counter()
    n = len(pairs)
    turns = sum(sum(x.get("role") == "assistant" for x in c.turns) for _, c in pairs)
    tools = [x for _, c in pairs for x in c.turns if x.get("role") == "tool"]
    runs = dict(domain.runner.stats)
    domain.close()
    return {
        "episodes": n, "turns_per_episode": round(turns / n, 2),
        "tool_calls_ok_share": round(sum(not x.get("call_error") for x in tools) / max(len(tools), 1), 3),
        "generate_calls": eng.calls, "generation_s": round(eng.seconds, 3), "tools_s": round(dom.seconds, 3),
        "grading_s": round(t2 - t1, 3), "step_s": round(t2 - t0, 3),
        "paid": round(sum(float(v.reward or 0) for v in verdicts) / n, 3), "sandbox_runs": runs["runs"],
    }


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--weights", default="", help="policy weights (an SFT cache entry's weights.pt)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--no-one-by-one", action="store_true", help="skip the one-by-one path (minutes with a policy)")
    args = ap.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from evo_core.api import TaskSource
    from evo_core.config import load_config
    from evo_core.trainer.policy import HFPolicy
    from evo_core.trainer.protocols import SamplingParams
    from evo_core.trainer.tiny import TinyModelConfig
    from evo_swe.domain import SWEDomain

    cfg = load_config(str(ROOT / "configs/suite/swe-tinyrepo.toml"))
    tiny = cfg.policy.tiny
    policy = HFPolicy.tiny(TinyModelConfig(**{k: getattr(tiny, k) for k in ("arch", "hidden_size", "num_layers", "num_heads",
                                                                              "num_kv_heads", "intermediate_size", "max_positions",
                                                                              "tie_embeddings", "chars")}), seed=0)
    if args.weights:
        policy.load_state_dict(torch.load(args.weights, map_location="cpu", weights_only=True))
    options = dict(cfg.task.options)

    def domain_factory() -> Any:
        return SWEDomain().configure(options)

    tasks = domain_factory().load_tasks(TaskSource(path=cfg.task.train, split="train"))[: args.prompts]
    params = SamplingParams(n=args.group, temperature=cfg.rl.temperature, max_new_tokens=cfg.rl.max_new_tokens,
                            stop=tuple(cfg.rl.stop))
    from evo_core.trainer.engine import InProcessEngine

    out: dict[str, Any] = {"cpu": _cpu(), "threads": torch.get_num_threads(), "prompts": args.prompts, "group": args.group,
                           "policy": "sft" if args.weights else "fresh"}
    engines = {"policy": InProcessEngine(policy), "scripted": Scripted(policy.tokenizer, tasks)}
    for name, eng in engines.items():
        b = measure(eng, domain_factory, tasks, params, policy.tokenizer, batched=True, seed=args.seed)
        out[name] = {"batched": b}
        if name == "policy":  # the same batched step re-encoding every turn's transcript (no turn cache),
            old = InProcessEngine(policy, turn_cache=False)  # alternating, the faster of 2 runs each
            r = measure(old, domain_factory, tasks, params, policy.tokenizer, batched=True, seed=args.seed)
            b = min(b, measure(eng, domain_factory, tasks, params, policy.tokenizer, batched=True, seed=args.seed),
                    key=lambda m: m["step_s"])
            r = min(r, measure(old, domain_factory, tasks, params, policy.tokenizer, batched=True, seed=args.seed),
                    key=lambda m: m["step_s"])
            out[name] = {"batched": b, "batched_reencoding": r}
            out[name]["turn_cache_speedup"] = round(r["step_s"] / max(b["step_s"], 1e-9), 2)
            out[name]["turn_cache_generation_speedup"] = round(r["generation_s"] / max(b["generation_s"], 1e-9), 2)
        if not args.no_one_by_one:
            s = measure(eng, domain_factory, tasks, params, policy.tokenizer, batched=False, seed=args.seed)
            out[name].update(one_by_one=s, speedup=round(s["step_s"] / max(b["step_s"], 1e-9), 2))
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for name in engines:
            r = out[name]
            line = (f"{name}: batched {r['batched']['step_s']}s/step (gen {r['batched']['generation_s']}, tools "
                    f"{r['batched']['tools_s']}, grading {r['batched']['grading_s']})")
            if "batched_reencoding" in r:
                line += f"; re-encoding {r['batched_reencoding']['step_s']}s: x{r['turn_cache_speedup']}"
            if "one_by_one" in r:
                line += f"; one by one {r['one_by_one']['step_s']}s: x{r['speedup']}"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
