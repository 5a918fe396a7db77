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

import contextlib
import subprocess
from typing import Any, Iterator, Optional, Sequence

import pytest
from evo_events import RolloutCompleted

from evo_core.api import Window

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
            pytest.fail(f"{module} is missing ({why or exc}): `scripts/setup.sh test` installs it")
        pytest.skip(f"{module} is not installed ({why or exc})")


# What the installed ``evo`` console script does, runnable without the script on PATH.
EVO_MAIN = "import sys; from evo_core.cli.app import main; main(sys.argv[1:])"


def run_evo(*args: str, env: Optional[dict] = None, timeout: float = 120, cwd: Any = None,
            threads: Optional[int] = None) -> "subprocess.CompletedProcess[str]":
    """Run the ``evo`` CLI in a fresh process, as a user would, and capture its output.

    Plugin commands stay off unless ``env`` asks for them (they import every plugin), and
    ``threads`` pins torch's thread count so a test run cannot oversubscribe the machine."""
    import os
    import sys

    e = dict(os.environ)
    e.setdefault("EVO_NO_PLUGIN_COMMANDS", "1")
    if threads is not None:
        e["OMP_NUM_THREADS"] = str(threads)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", EVO_MAIN, *args], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=cwd)


@contextlib.contextmanager
def evo_serve(policy: str, *, name: Optional[str] = None, timeout: float = 180) -> Iterator[str]:
    """``evo serve POLICY`` as a subprocess on 127.0.0.1; yields the base URL (no /v1)."""
    import os
    import sys
    import time

    import httpx

    from evo_core.trainer.distributed import free_port

    port = free_port()
    args = [sys.executable, "-c", EVO_MAIN, "serve", policy, "--port", str(port)]
    if name:
        args += ["--served-model-name", name]
    env = dict(os.environ, OMP_NUM_THREADS="1", EVO_NO_PLUGIN_COMMANDS="1")
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"evo serve exited with {proc.returncode}:\n{proc.stdout.read()}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"evo serve did not become healthy in {timeout:.0f} s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
