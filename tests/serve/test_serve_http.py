"""The HTTP rollout engine against a real ``evo serve`` subprocess."""

from __future__ import annotations

import httpx
import pytest
import torch

from evo_core.trainer.http_engine import HTTPEngine, HTTPEngineConfig, HTTPEngineError
from evo_core.trainer.policy import HFPolicy
from evo_core.trainer.protocols import RolloutEngine, SamplingParams

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def engine(served):
    with HTTPEngine(HTTPEngineConfig(base_url=served + "/v1", model="tiny", prompts_per_request=3,
                                     max_concurrency=4)) as eng:
        eng.wait_ready()
        yield eng


@pytest.fixture(scope="module")
def local(tiny_dir):
    return HFPolicy.load(tiny_dir)


PROMPTS = ["12+7=", "3+4=", "55+5=", "9+9=", "1+80=", "23+23=", "7+0="]


def test_is_a_rollout_engine(engine):
    assert isinstance(engine, RolloutEngine)


def test_models_endpoint(served):
    data = httpx.get(served + "/v1/models").json()
    assert [m["id"] for m in data["data"]] == ["tiny"]


def test_n_samples_with_token_ids_and_logprobs_match_the_policy(engine, local):
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=6, seed=11)
    rows = engine.generate(PROMPTS, params)
    assert len(rows) == len(PROMPTS) and all(len(r) == 3 for r in rows)
    tok = local.tokenizer
    for prompt, row in zip(PROMPTS, rows):
        for s in row:
            assert s.prompt == prompt
            assert list(s.prompt_ids) == local.encode_prompt(prompt)
            assert 1 <= len(s.token_ids) <= 6 and len(s.logprobs) == len(s.token_ids)
            assert tok.decode(s.token_ids).startswith(s.text)
            assert s.truncated == (s.finish_reason == "length")
    # the server's log-probs are the policy's own (temperature 1): recompute them in process
    flat = [s for row in rows for s in row]
    with torch.no_grad():
        lp = local.logprobs([s.prompt_ids for s in flat], [s.token_ids for s in flat])
    for i, s in enumerate(flat):
        assert torch.allclose(lp[i, :len(s.token_ids)], torch.tensor(s.logprobs), atol=1e-4), s


def test_greedy_matches_in_process_sampling(engine, local):
    params = SamplingParams(n=2, temperature=0.0, max_new_tokens=8)
    remote = engine.generate(PROMPTS[:4], params)
    here = local.sample(PROMPTS[:4], params)
    for r_row, h_row in zip(remote, here):
        assert [s.token_ids for s in r_row] == [s.token_ids for s in h_row]
        assert [s.text for s in r_row] == [s.text for s in h_row]


def test_stop_strings_cut_the_text(engine, local):
    greedy = local.sample(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=10))
    # pick a character the untrained model actually emits, so the stop must fire
    texts = [row[0].text for row in greedy]
    stop_char = next(c for t in texts for c in t[1:] if c.strip())
    rows = engine.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=10, stop=(stop_char,)))
    fired = 0
    for full, row in zip(texts, rows):
        s = row[0]
        assert stop_char not in s.text
        if stop_char in full:
            fired += 1
            assert s.text == full[:full.index(stop_char)] and s.finish_reason == "stop" and not s.truncated
    assert fired >= 1


def test_chat_path(served, local):
    with HTTPEngine(HTTPEngineConfig(base_url=served, model="tiny", chat=True)) as eng:
        rows = eng.generate(["4+4=", "10+1="], SamplingParams(n=2, temperature=0.0, max_new_tokens=5))
    here = local.sample(["4+4=", "10+1="], SamplingParams(n=2, temperature=0.0, max_new_tokens=5))
    assert [[s.text for s in r] for r in rows] == [[s.text for s in r] for r in here]
    assert all(s.token_ids and len(s.logprobs) == len(s.token_ids) for r in rows for s in r)


def test_client_errors_are_not_retried(served):
    with HTTPEngine(HTTPEngineConfig(base_url=served, model="no-such-model", max_retries=3)) as eng:
        with pytest.raises(HTTPEngineError, match="no-such-model"):
            eng.generate(["1+1="], SamplingParams(max_new_tokens=2))
        assert eng.retries == 0


def test_bad_request_is_a_400_naming_the_field(served):
    r = httpx.post(served + "/v1/completions", json={"prompt": "1+1=", "temperature": -1})
    assert r.status_code == 400 and "temperature" in r.json()["error"]["message"]


def test_the_trainers_generator_makes_http_sampling_reproducible(engine):
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=6)
    a = engine.generate(PROMPTS, params, generator=torch.Generator().manual_seed(5))
    b = engine.generate(PROMPTS, params, generator=torch.Generator().manual_seed(5))
    c = engine.generate(PROMPTS, params, generator=torch.Generator().manual_seed(6))
    ids = lambda rows: [[s.token_ids for s in r] for r in rows]  # noqa: E731
    assert ids(a) == ids(b) != ids(c)
