"""Fixtures shared by the serve and scale tests: a saved tiny policy, and ``evo serve`` on it as a real subprocess."""

from __future__ import annotations

import pytest

from evo_core.testing import evo_serve


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> str:
    from evo_core.trainer.policy import HFPolicy

    path = str(tmp_path_factory.mktemp("tiny") / "policy")
    HFPolicy.tiny(seed=3, name="tiny").save(path)
    return path


@pytest.fixture(scope="module")
def served(tiny_dir):
    """``evo serve DIR`` on 127.0.0.1 as a real subprocess; yields its base URL."""
    with evo_serve(tiny_dir, name="tiny", timeout=120) as url:
        yield url
