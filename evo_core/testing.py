"""Test support for plugin authors and the core's own tests (loaded through ``pytest11``).

Fixtures:
- ``evo_store``: a fresh in-memory store.
- ``evo_plugins``: a plugin manager with the installed plugins.
- ``evo_plugin``: ``evo_plugin(obj, name=None)`` registers a plugin for this test only.
- ``evo_tiny_run``: a small, generated run log (see ``evo_core.synthetic``) in ``evo_store``.

Builders (plain functions):
- ``rollout(...)`` and ``window(rollouts)``: evidence for a diagnostic, a proposer or a gate;
- ``isolated_plugins(*plugins)``: a plugin manager holding only what a test registers
  (the standard library by default);
- ``SimSession`` (``evo_core.simulation``): a torch-free learner with a loophole that the
  real run loop can drive, for fast end-to-end harness tests.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import pytest

from evo_core.api import Window
from evo_events import RolloutCompleted

CORE_DISTRIBUTION = "evotrainer"


def rollout(i: int = 0, *, step: int = 1, reward: Optional[float] = 1.0, correct: Optional[bool] = None,
            strict: Optional[bool] = None, group: str = "g0", truncated: bool = False, length: int = 4,
            text: str = "42", split: str = "train", reward_final: Optional[float] = None,
            features: Optional[dict[str, Any]] = None, train: Optional[dict[str, Any]] = None,
            run_id: str = "r", **signals: Any) -> RolloutCompleted:
    """One logged rollout. ``features`` default to the core's features of ``text``."""
    from evo_core.harness.features import features_for_group

    feats = features if features is not None else features_for_group([text], "1+1=", [length], [truncated])[0]
    return RolloutCompleted(run_id=run_id, event_id=f"{step:04d}{i:028d}", step=step, task_id=f"t{i % 7}",
                            group_id=group, policy_version=step, reward=reward,
                            correct=(reward or 0) > 0 if correct is None else correct, strict_correct=strict,
                            split=split, truncated=truncated, length=length, response_preview=text,
                            signals=dict(signals), reward_final=reward if reward_final is None else reward_final,
                            features=feats, train=dict(train or {}))


def window(rollouts: Sequence[RolloutCompleted], **kw: Any) -> Window:
    return Window(run_id="r", step=max((r.step for r in rollouts), default=0), rollouts=tuple(rollouts), **kw)


def standard_plugins() -> list[str]:
    """The import paths of the standard library's plugins, as its distribution declares them."""
    import importlib.metadata as md

    return [ep.value for ep in md.entry_points(group="evo")
            if getattr(ep, "dist", None) is not None and ep.dist.metadata["Name"] == CORE_DISTRIBUTION]


def isolated_plugins(*plugins: Any) -> Any:
    """A ``PluginManager`` that loads no entry points but the given plugin modules or objects
    (import paths allowed): the standard library when none are given, and with
    ``"+standard"`` among them, the standard library too."""
    import importlib

    from evo_core.plugins import PluginManager

    wanted = list(plugins) or ["+standard"]
    if "+standard" in wanted:
        wanted = [p for p in wanted if p != "+standard"]
        wanted += [s for s in standard_plugins() if s not in wanted]  # e.g. evo_arithmetic: named and standard
    pm = PluginManager(load_entrypoints=False)
    for p in wanted:
        mod = importlib.import_module(p) if isinstance(p, str) else p
        pm.register(mod, name=p if isinstance(p, str) else getattr(p, "__name__", None))
    return pm


@pytest.fixture
def evo_store():
    from evo_core.store import open_store

    store = open_store("memory://")
    yield store
    store.close()


@pytest.fixture
def evo_plugins():
    from evo_core.plugins import PluginManager

    return PluginManager()


@pytest.fixture
def evo_plugin(evo_plugins):
    names: list[str] = []

    def register(obj, name=None):
        names.append(evo_plugins.register(obj, name=name))
        return evo_plugins

    yield register
    for n in names:
        evo_plugins.unregister(n)


@pytest.fixture
def evo_tiny_run(evo_store):
    """(store, run_id) for a short generated run with rollouts, diagnoses and a promotion."""
    from evo_core.synthetic import generate_run

    run_id = generate_run(evo_store, steps=12, rollouts_per_step=16, seed=0)
    return evo_store, run_id


def require(module: str, why: str = "") -> Any:
    """Import ``module`` for a test. Where the project's setup installs it (an extra, a domain),
    a missing one is a failure under ``CI=true``, never a silent skip; elsewhere it skips."""
    import importlib
    import os

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is missing ({why or exc}): scripts/setup.sh installs it")
        pytest.skip(f"{module} is not installed ({why or exc})")
