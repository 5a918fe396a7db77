"""Tiny, fast settings for trainer tests (a 1-layer, 32-wide model; a few steps)."""

from __future__ import annotations

import os

import pytest

from .testlib import tiny_config_dict

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def tiny_cfg(tmp_path):
    from evo_core.config import config_from_dict

    def make(**over):
        return config_from_dict(tiny_config_dict(tmp_path, **over))

    return make
