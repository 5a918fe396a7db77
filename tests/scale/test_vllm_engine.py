"""The vLLM engine path: a clear error without the extra; output conversion on vLLM-shaped objects."""

from __future__ import annotations

import importlib.util
import types

import pytest

from evo_core.trainer.vllm_engine import VLLMEngine, VLLMEngineConfig, VLLMMissing, _to_sample


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_missing_extra_is_a_clear_error(tmp_path):
    with pytest.raises(VLLMMissing, match=r"pip install 'evotrainer\[vllm\]'"):
        VLLMEngine(VLLMEngineConfig(model_path=str(tmp_path)))


def test_completion_output_conversion():
    lp = types.SimpleNamespace
    c = types.SimpleNamespace(text="42", token_ids=[7, 8], finish_reason="length",
                              logprobs=[{7: lp(logprob=-0.25), 3: lp(logprob=-2.0)}, {8: lp(logprob=-1.0)}])
    s = _to_sample("40+2=", [1, 2, 3], c)
    assert s.token_ids == (7, 8) and s.logprobs == (-0.25, -1.0)
    assert s.prompt_ids == (1, 2, 3) and s.truncated and s.finish_reason == "length"
    c2 = types.SimpleNamespace(text="", token_ids=[5], finish_reason="stop", logprobs=None)
    s2 = _to_sample("p", [], c2)
    assert s2.logprobs == () and not s2.truncated


def test_bad_config_is_rejected():
    with pytest.raises(ValueError):
        VLLMEngineConfig(model_path="x", gpu_memory_utilization=1.5)
