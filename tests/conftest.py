"""Shared by every test under tests/: the hypothesis profile, a saved tiny policy, and ``evo serve``
on it as a real subprocess."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from evo_core.testing import evo_serve

# Hypothesis's deadline and "too slow" checks are timed assertions: on a loaded 2-core machine
# they fail tests whose logic is fine. Properties are judged on their outcomes only.
settings.register_profile("evo", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("evo")


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
