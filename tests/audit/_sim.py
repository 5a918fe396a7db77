"""Real runs for the replay tests: the run loop driving the simulated learner
(``evo_core.simulation``; a few seconds a run, no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from evo_core.config import config_from_dict
from evo_core.loop import RunLoop
from evo_core.simulation import sim_factory
from evo_core.testing import isolated_plugins


def replay_plugins() -> Any:
    """The standard library plus the replay tests' own diagnostics. A replay reproduces a
    run only with the plugins the run had (their versions are in every decision), so runs
    and replays in these tests share this set."""
    from tests.audit import _plugins

    return isolated_plugins("+standard", _plugins)


def sim_run(store: Any, checkpoints: Path, *, arm: str = "evolving", steps: int = 30, seed: int = 0,
            eval_every: int = 10, diagnose_every: int = 5, window_steps: int = 10, stop_at: Optional[int] = None,
            plugins: Any = None, **learner: Any) -> str:
    """One run of ``arm`` in ``store``; with ``stop_at``, stopped after that step (as Ctrl-C
    does) and resumed. Returns the run id."""
    d = {"run": {"name": "sim", "steps": steps, "seed": seed, "eval_every": eval_every,
                 "checkpoint_dir": str(checkpoints), "trajectories": False},
         "task": {"domain": "sim"},
         "harness": {"window_steps": window_steps, "diagnose_every": diagnose_every, "audit": {"rate": 0.25},
                     "backtest": {"k_steps": 6, "replicates": 2, "min_n": 30, "n_boot": 200}}}
    cfg = config_from_dict(d).for_arm(arm)
    pm = plugins or replay_plugins()

    def stop(step: int, metrics: dict) -> None:
        if step == stop_at:
            raise KeyboardInterrupt

    loop = RunLoop(cfg, store, plugins=pm, session_factory=sim_factory(**learner), on_step=stop)
    loop.start()
    try:
        loop.run()
    except KeyboardInterrupt:
        again = RunLoop(cfg, store, plugins=pm, session_factory=sim_factory(**learner))
        again.resume(loop.run_id)
        again.run()
    return loop.run_id
