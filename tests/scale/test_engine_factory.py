from __future__ import annotations

import importlib.util

import pytest

from evo_core.trainer.engine import InProcessEngine
from evo_core.trainer.engine_factory import build_rollout_engine
from evo_core.trainer.http_engine import HTTPEngine
from evo_core.trainer.policy import HFPolicy


def test_engines_from_config():
    pol = HFPolicy.tiny()
    assert isinstance(build_rollout_engine(None, pol), InProcessEngine)
    eng = build_rollout_engine({"engine": "http", "base_url": "http://127.0.0.1:1/v1", "model": "m",
                                "max_retries": 2}, pol)
    assert isinstance(eng, HTTPEngine) and eng.config.root == "http://127.0.0.1:1"
    eng.close()


@pytest.mark.parametrize("table, needle", [
    ({"engine": "grpc"}, "rollout.engine"),
    ({"engine": "http", "base_url": "http://x", "model": "m", "retries": 3}, "rollout.retries"),
    ({"engine": "http", "model": "m"}, "base_url"),
    ({"engine": "http", "base_url": "ftp://x", "model": "m"}, "base_url"),
    ({"temperature": 1}, "rollout.temperature"),
])
def test_bad_rollout_tables_name_the_key(table, needle):
    with pytest.raises(ValueError, match=needle):
        build_rollout_engine(table, HFPolicy.tiny())


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_vllm_engine_without_the_extra():
    from evo_core.trainer.vllm_engine import VLLMMissing

    with pytest.raises(VLLMMissing):
        build_rollout_engine({"engine": "vllm", "model_path": "."}, None)
