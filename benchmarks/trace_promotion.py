"""Trace the files one rollout passes through on its way to ``Promoted``.

Runs an evolving run until its first intervention promotion, with a profile hook
(``sys.setprofile``) that records, for every hand-off object a stage makes, the project files
on the call stack when it is made. After the run it keeps only the promoted proposal's causal
chain, read from the events themselves:

1. ``Promoted`` (the first one of an intervention) names its ``InterventionProposed``;
2. that proposal is ``caused_by`` its ``FailureDiagnosed`` events;
3. each diagnosis's ``evidence`` names main-line rollouts (``RolloutCompleted``), and each of
   those its ``RolloutItem`` (the same rollout id);
4. the ``Finding`` a diagnosis came from (same kind, same evidence, made just before it) and
   the ``Proposal`` the proposer made (same fingerprint, made in the same round);
5. everything made while that one proposal was evaluated, from its ``InterventionProposed``
   to its ``Promoted``: each ``BacktestOutcome`` of the backtests it actually ran, each
   ``GateDecision`` on it, the decision. If it was backtested online, the forked branches'
   rollouts (``RolloutItem``, ``RolloutCompleted``) and the diagnostics measured on them
   (``Finding``) are made in that interval, so the fork is on its path; other proposals'
   forks are not.

The path is the ordered union of those stacks' files, stage by stage. Functions a stage calls
and that return before its hand-off object is made (the evidence window, feature extraction,
the verifier, the store's append, which comes after the pass) are not on it. The path is
*forward* when no stack enters a file twice and no stack enters a file the path has already
moved past (``reentered``): an online fork trains through the trainer again, so its files
are listed there.

    python -m benchmarks.trace_promotion [--config configs/quickstart.toml] [--steps 12] [--json]
    python -m benchmarks.trace_promotion --sim      # the torch-free simulated learner (seconds)
    python -m benchmarks.trace_promotion --sim --set harness.backtest.online=false   # offline backtests only

``docs/architecture.md`` lists the files it prints.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Optional

import attrs

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


@attrs.frozen
class Made:
    """One hand-off object, when it was made (a sequence number) and the stack that made it."""

    seq: int
    stage: str
    obj: Any
    stack: tuple[str, ...]


class Tracer:
    """A profile hook: records every stage object as its ``__init__`` returns (so its fields are
    set), until the first promotion of an intervention."""

    def __init__(self) -> None:
        self.made: list[Made] = []
        self.done = False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if self.done or event != "return" or frame.f_code.co_name != "__init__":
            return
        obj = frame.f_locals.get("self")
        name = type(obj).__name__ if obj is not None else ""
        if name not in STAGES:
            return
        self.made.append(Made(len(self.made), name, obj, tuple(stack_files(frame.f_back))))
        if name == "Promoted" and getattr(obj, "subject", None) == "intervention":
            self.done = True

    def report(self) -> dict[str, Any]:
        return report(self.made)


def promoted_chain(made: list[Made]) -> list[Made]:
    """The promoted proposal's causal chain (see the module docstring), in stage order."""
    prom = next((m for m in made if m.stage == "Promoted" and m.obj.subject == "intervention"), None)
    if prom is None:
        return []
    ip = next(m for m in made if m.stage == "InterventionProposed" and m.obj.event_id == prom.obj.subject_id)
    causes = set(ip.obj.caused_by)
    diagnosed = [m for m in made if m.stage == "FailureDiagnosed" and m.seq < ip.seq and m.obj.event_id in causes]
    cited = {r for d in diagnosed for r in d.obj.evidence}
    logged = _first_by(made, "RolloutCompleted", cited, lambda o: o.event_id)
    sampled = _first_by(made, "RolloutItem", cited, lambda o: o.rollout_id)
    found = []
    for d in diagnosed:
        same = [m for m in made if m.stage == "Finding" and m.seq < d.seq and m.obj.kind == d.obj.kind
                and tuple(m.obj.evidence) == tuple(d.obj.evidence)]
        found += same[-1:]
    round_start = min((d.seq for d in diagnosed), default=0)
    proposed = [m for m in made if m.stage == "Proposal" and round_start < m.seq < ip.seq
                and m.obj.fingerprint == ip.obj.fingerprint]
    evaluated = [m for m in made if ip.seq < m.seq <= prom.seq]
    return sampled + logged + found + diagnosed + proposed + [ip] + evaluated


def _first_by(made: Iterable[Made], stage: str, ids: set[str], key: Any) -> list[Made]:
    out: dict[str, Made] = {}
    for m in made:
        if m.stage == stage and key(m.obj) in ids:
            out.setdefault(key(m.obj), m)
    return sorted(out.values(), key=lambda m: m.seq)


def report(made: list[Made]) -> dict[str, Any]:
    chain = promoted_chain(made)
    path: list[str] = []
    jumps: dict[str, list[str]] = {}
    reentered: dict[str, list[str]] = {}
    stages: dict[str, list[list[str]]] = {s: [] for s in STAGES}
    for m in chain:
        stack = list(m.stack)
        if stack in stages[m.stage]:
            continue
        stages[m.stage].append(stack)
        for f in stack:
            if f not in path:
                path.append(f)
        for f in reentries(stack):
            jumps.setdefault(m.stage, []).append(f) if f not in jumps.get(m.stage, []) else None
        furthest = -1
        for f in dict.fromkeys(stack):  # a file the path moved past, entered again from later on
            pos = path.index(f)
            if pos < furthest and f not in reentered.get(m.stage, []):
                reentered.setdefault(m.stage, []).append(f)
            furthest = max(furthest, pos)
    promoted = bool(chain)
    online = any(m.stage == "BacktestOutcome" and m.obj.mode == "online" for m in chain)
    return {"promoted": promoted, "intervention": _name(chain) if promoted else None,
            "backtests": [f"{m.obj.backtester} ({m.obj.mode}, passed={m.obj.passed})" for m in chain
                          if m.stage == "BacktestOutcome"],
            "backtested_online": online, "files": path, "n_files": len(path),
            "forward": not jumps and not reentered, "jumps_back": jumps, "reentered": reentered, "stages": stages}


def _name(chain: list[Made]) -> str:
    ip = next(m for m in chain if m.stage == "InterventionProposed")
    return f"{ip.obj.name} (proposed at step {ip.obj.step} by {ip.obj.proposer})"


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
        return _traced(RunLoop(cfg, store, plugins=get_plugin_manager()))


def trace_sim(steps: int = 60, sets: Optional[list[str]] = None) -> dict[str, Any]:
    from evo_core.config import apply_overrides, config_from_dict
    from evo_core.loop import RunLoop
    from evo_core.simulation import sim_config, sim_factory
    from evo_core.store import open_store
    from evo_core.testing import isolated_plugins

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/trace.sqlite")
        data = apply_overrides(sim_config(steps=steps, checkpoint_dir=f"{tmp}/ckpt"), list(sets or ()))
        cfg = config_from_dict(data).for_arm("evolving")
        return _traced(RunLoop(cfg, store, plugins=isolated_plugins(), session_factory=sim_factory()))


def _traced(loop: Any) -> dict[str, Any]:
    """Start the run (its SFT warm start, untraced: no stage object is made there), then run
    it under the profile hook."""
    tracer = Tracer()
    with contextlib.redirect_stdout(sys.stderr):  # the run's log lines; stdout is the report
        loop.start()
        sys.setprofile(tracer)
        try:
            loop.run()
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
    rep = trace_sim(sets=args.sets) if args.sim else trace_real(args.config, args.steps, args.sets)
    if args.json:
        print(json.dumps(rep, indent=2))
        return 0 if rep["promoted"] else 1
    if not rep["promoted"]:
        print("no intervention was promoted: raise --steps")
        return 1
    back = {**rep["jumps_back"], **rep["reentered"]}
    print(f"{rep['intervention']}; backtests: {', '.join(rep['backtests']) or 'none'}")
    print(f"{rep['n_files']} files, {'forward' if rep['forward'] else 'NOT forward: ' + json.dumps(back)}")
    for i, f in enumerate(rep["files"], 1):
        print(f"{i:3d}. {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
