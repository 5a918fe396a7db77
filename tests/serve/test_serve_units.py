"""The server's pieces in process: policy specs, micro-batching, the chat prompt."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from evo_core.serve import ModelHost, PolicySpecError, load_policy
from evo_core.serve.app import ChatMessage, render_chat
from evo_core.trainer.policy import HFPolicy
from evo_core.trainer.protocols import SamplingParams


class CountingPolicy:
    """A real tiny policy that records each ``sample`` call's batch."""

    def __init__(self) -> None:
        self.inner = HFPolicy.tiny(seed=0)
        self.name, self.tokenizer = "tiny", self.inner.tokenizer
        self.calls: list[int] = []

    def sample(self, prompts, params, **kw):
        self.calls.append(len(prompts))
        return self.inner.sample(prompts, params, **kw)


def test_concurrent_requests_with_equal_params_share_one_forward_batch():
    policy = CountingPolicy()
    host = ModelHost(policy, batch_window_s=0.05)
    same = SamplingParams(n=2, temperature=0.0, max_new_tokens=4)

    async def go():
        return await asyncio.gather(*[host.generate(None, [f"{i}+1="], same) for i in range(5)],
                                    host.generate(None, ["9+9="], SamplingParams(n=1, max_new_tokens=3)),
                                    host.generate(None, ["8+8="], SamplingParams(n=1, max_new_tokens=3, seed=1)))

    results = asyncio.run(go())
    assert sorted(policy.calls) == [1, 1, 5]  # 5 merged; other params and the seeded one alone
    # merging changed nothing: each request got its own prompt's greedy samples
    alone = policy.inner.sample([f"{i}+1=" for i in range(5)], same)
    assert [r[0] for r in results[:5]] == alone
    assert results[5][0][0].prompt == "9+9=" and results[6][0][0].prompt == "8+8="


def test_max_batch_splits_large_groups():
    policy = CountingPolicy()
    host = ModelHost(policy, batch_window_s=0.05, max_batch_prompts=3)
    p = SamplingParams(n=1, temperature=0.0, max_new_tokens=2)

    async def go():
        return await asyncio.gather(*[host.generate(None, [f"{i}=", f"{i}+{i}="], p) for i in range(4)])

    out = asyncio.run(go())
    assert sum(policy.calls) == 8 and max(policy.calls) <= 3
    assert [[r[0].prompt for r in rows] for rows in out] == [[f"{i}=", f"{i}+{i}="] for i in range(4)]


def test_policy_specs(tmp_path):
    assert load_policy("tiny:qwen2").model.config.model_type == "qwen2"
    cfg = tmp_path / "p.toml"
    cfg.write_text('[policy]\narch = "llama"\nhidden_size = 32\nnum_layers = 1\nintermediate_size = 64\nseed = 5\n')
    pol = load_policy(str(cfg))
    assert pol.model.config.hidden_size == 32 and pol.digest() == load_policy(str(cfg)).digest()
    cfg.write_text("[policy]\nhiden_size = 32\n")
    with pytest.raises(PolicySpecError, match="policy.hiden_size"):
        load_policy(str(cfg))
    with pytest.raises(PolicySpecError, match="not-here"):
        load_policy("not-here")


def test_chat_prompt_without_a_template_is_the_concatenated_contents():
    tok = HFPolicy.tiny().tokenizer
    msgs = [ChatMessage(role="system", content="1"), ChatMessage(role="user", content=[{"type": "text", "text": "2+2="}])]
    assert render_chat(tok, msgs) == "12+2="


def test_cli_rejects_a_bad_policy_in_one_line():
    r = subprocess.run([sys.executable, "-m", "evo_core.cli.app", "serve", "/no/such/dir"], capture_output=True,
                       text=True, timeout=120, env={"EVO_NO_PLUGIN_COMMANDS": "1", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "/no/such/dir" in r.stderr and "never downloaded" in r.stderr
