"""Trace the files a rollout passes through on its way to ``Promoted``.

Runs an evolving run until its first intervention promotion, with a profile hook
(``sys.setprofile``) that records the project files on the call stack at each stage of the
rollout's way: the rollout is sampled (``RolloutItem``), becomes evidence
(``RolloutCompleted``), a diagnostic finds it (``Finding``, then ``FailureDiagnosed``), a
proposer proposes a change from it (``Proposal``, then ``InterventionProposed``), the change
is backtested (each ``BacktestOutcome``; an online A/B's forked branch samples its own
rollouts), gated (each ``GateDecision``) and promoted (``Promoted``). The path is the ordered union
of those stacks' files; a file that appears on one stack, then other files, then again is a
jump back (the path is not forward).

    python -m benchmarks.trace_promotion [--config configs/quickstart.toml] [--steps 12] [--json]
    python -m benchmarks.trace_promotion --sim      # the torch-free simulated learner (seconds)

``docs/architecture.md`` lists the files it prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("RolloutItem", "RolloutCompleted", "Finding", "FailureDiagnosed", "Proposal", "InterventionProposed",
          "BacktestOutcome", "GateDecision", "Promoted")


def project_file(filename: str) -> Optional[str]:
    """The repository-relative path of a project source file; None for libraries, the
    standard library, generated code and this script."""
    if filename.startswith("<"):
        return None
    p = Path(filename).resolve()
    try:
        rel = p.relative_to(ROOT)
    except ValueError:
        return None
    if rel.parts[0] in (".venv", "benchmarks", "tests") or "site-packages" in rel.parts:
        return None
    return str(rel)


def stack_files(frame: Any) -> list[str]:
    """Project files on the stack, outermost first, consecutive frames of one file merged."""
    out: list[str] = []
    while frame is not None:
        f = project_file(frame.f_code.co_filename)
        if f is not None and (not out or out[-1] != f):
            out.append(f)
        frame = frame.f_back
    return out[::-1]


def reentries(stack: list[str]) -> list[str]:
    """Files a stack enters again after leaving them for another file (a jump back)."""
    seen: set[str] = set()
    back = []
    for f in stack:
        if f in seen and f not in back:
            back.append(f)
        seen.add(f)
    return back


class Tracer:
    """Records the stack at the first construction of each stage's object (by class name), and
    stops recording at the first promotion of an intervention."""

    def __init__(self) -> None:
        self.stacks: dict[str, list[list[str]]] = {s: [] for s in STAGES}
        self.done = False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if self.done or event != "call" or frame.f_code.co_name != "__init__":
            return
        obj = frame.f_locals.get("self")
        name = type(obj).__name__ if obj is not None else ""
        if name not in self.stacks:
            return
        if name == "Promoted" and frame.f_locals.get("subject") != "intervention":
            return
        stack = stack_files(frame.f_back)
        if stack and stack not in self.stacks[name]:
            self.stacks[name].append(stack)
        if name == "Promoted":
            self.done = True

    def report(self) -> dict[str, Any]:
        path: list[str] = []
        jumps: dict[str, list[str]] = {}
        for stage in STAGES:
            for stack in self.stacks[stage]:
                for f in stack:
                    if f not in path:
                        path.append(f)
                back = reentries(stack)
                if back:
                    jumps.setdefault(stage, []).extend(b for b in back if b not in jumps.get(stage, []))
        return {"promoted": self.done, "files": path, "n_files": len(path), "forward": not jumps, "jumps_back": jumps,
                "stages": {s: self.stacks[s] for s in STAGES}}


def trace_real(config: str, steps: int, sets: list[str]) -> dict[str, Any]:
    from evo_core.config import load_config
    from evo_core.loop import RunLoop
    from evo_core.plugins import get_plugin_manager
    from evo_core.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        over = [f"run.steps={steps}", f"run.checkpoint_dir={tmp}/ckpt", "run.progress=false",
                "run.harnesses=['evolving']", *sets]
        cfg = load_config(config, over).for_arm("evolving")
        store = open_store(f"sqlite:///{tmp}/trace.sqlite")
        return _traced(lambda: _run(RunLoop(cfg, store, plugins=get_plugin_manager())))


def trace_sim() -> dict[str, Any]:
    from evo_core.config import config_from_dict
    from evo_core.loop import RunLoop
    from evo_core.simulation import sim_config, sim_factory
    from evo_core.store import open_store
    from evo_core.testing import isolated_plugins

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/trace.sqlite")
        cfg = config_from_dict(sim_config(steps=60)).for_arm("evolving")
        return _traced(lambda: _run(RunLoop(cfg, store, plugins=isolated_plugins(), session_factory=sim_factory())))


def _run(loop: Any) -> None:
    loop.start()
    loop.run()


def _traced(fn: Any) -> dict[str, Any]:
    tracer = Tracer()
    sys.setprofile(tracer)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return tracer.report()


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/quickstart.toml")
    ap.add_argument("--steps", type=int, default=12, help="RL steps (the quickstart promotes its first repair at step 10)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="config override, as for evo run")
    ap.add_argument("--sim", action="store_true", help="the torch-free simulated learner instead of a real run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rep = trace_sim() if args.sim else trace_real(args.config, args.steps, args.sets)
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        print(f"{rep['n_files']} files, {'forward' if rep['forward'] else 'NOT forward: ' + json.dumps(rep['jumps_back'])}"
              + ("" if rep["promoted"] else " (no intervention was promoted: raise --steps)"))
        for i, f in enumerate(rep["files"], 1):
            print(f"{i:3d}. {f}")
    return 0 if rep["promoted"] else 1


if __name__ == "__main__":
    sys.exit(main())
