"""pytest fixtures for plugin authors (loaded automatically through ``pytest11``).

- ``evo_store``: a fresh in-memory store.
- ``evo_plugins``: a plugin manager with the installed plugins, plus ``register``.
- ``evo_plugin``: ``evo_plugin(obj, name=None)`` registers a plugin for this test only.
- ``evo_tiny_run``: a small, real run log (see ``evo_core.synthetic``) in ``evo_store``.
"""

from __future__ import annotations

import pytest


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
