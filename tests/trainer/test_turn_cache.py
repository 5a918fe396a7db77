"""Batched episodes with each episode's KV cache kept between turns (``TurnCache``) give the
same episodes as re-encoding every turn's whole transcript: under greedy decoding the same
replies, the same training layout and the same log-probs up to float rounding (where a reply
re-encodes to its tokens: a sampled <eos>, <pad> or <bos> stays in the cache, as in the training
layout, where re-encoding dropped it; the sampler's log-probs are checked against the scorer's
on that layout); under seeded
sampling the same draws, so an episode differs only where a rounding error moved a draw
across a token boundary (none of 128 SFT'd tinyrepo episodes did; a few here, where the
random 1-layer model's distributions are near uniform)."""

from __future__ import annotations

import attrs
import pytest
import torch

from evo_core.api import Completion, Task
from evo_core.trainer.engine import InProcessEngine
from evo_core.trainer.episodes import run_episode_batches
from evo_core.trainer.policy import HFPolicy
from evo_core.trainer.protocols import SamplingParams
from evo_core.trainer.tiny import TinyModelConfig

from .testlib import TINY_MODEL


@attrs.define
class Env:
    prompt: str
    turns: list = attrs.Factory(list)
    done: bool = False


class Echo:
    """A batched episode domain in the tiny model's alphabet: each observation depends on the
    reply (its length and digits); an episode ends after 2 to 4 replies (by its prompt) or at a
    reply with a 9."""

    name, version = "echo", "1"

    def episode_reset(self, task, *, max_turns=None):
        return Env(task.prompt), task.prompt

    def episode_step(self, envs, replies, n_tokens=None):
        out = []
        for env, reply in zip(envs, replies):
            env.turns.append({"role": "assistant", "content": reply})
            env.done = len(env.turns) >= 2 + len(env.prompt) % 3 or "9" in reply
            out.append(("" if env.done else f"={len(reply)}+{sum(c.isdigit() for c in reply)}=", env.done))
        return out

    def episode_outcome(self, env):
        return Completion(text=env.turns[-1]["content"], turns=tuple(env.turns))


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return HFPolicy.tiny(TinyModelConfig(**TINY_MODEL), seed=0)


def episodes(policy, cached, params, tasks):
    eng = InProcessEngine(policy, turn_cache=cached)
    tok = policy.tokenizer
    return run_episode_batches(eng, Echo(), tasks, params, encode=tok.encode, decode=tok.decode,
                               generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cached_turns_give_the_same_episodes(policy, monkeypatch, temperature):
    # 40 tasks x 4 episodes: more rows than the re-encoding sampler's shortcut floor, so its
    # dropping of finished rows within a turn is exercised too
    tasks = [Task(task_id=f"t{i}", prompt=f"{10 + 3 * i}+{i * 7}=") for i in range(40)]
    params = SamplingParams(n=4, temperature=temperature, max_new_tokens=10, stop=(",",))
    old = episodes(policy, False, params, tasks)

    def no_reencoding(*a, **k):
        raise AssertionError("the cached path re-encoded a transcript")

    monkeypatch.setattr(policy, "sample", no_reencoding)
    new = episodes(policy, True, params, tasks)
    (old_s, old_c, _), (new_s, new_c, _) = old, new
    turns = [len(c.turns) for g in new_c for c in g]
    assert min(turns) < max(turns) and max(turns) >= 3  # episodes end at different turns
    tok = policy.tokenizer
    pairs = list(zip([s for g in old_s for s in g], [s for g in new_s for s in g]))
    # A sampled <eos>/<pad>/<bos> decodes to nothing: re-encoding the transcript drops it, the
    # cache (like the training layout) keeps it. Compare the episodes whose replies re-encode.
    keep = [i for i, (a, _) in enumerate(pairs) if all(tok.encode(t) == list(ids) for t, ids in _replies(tok, a))]
    exact = [pairs[i] for i in keep]
    assert len(exact) >= 20  # the random model samples specials often
    same = [(a, b) for a, b in exact if (b.prompt, b.text, b.prompt_ids, b.token_ids, b.loss_mask, b.finish_reason)
            == (a.prompt, a.text, a.prompt_ids, a.token_ids, a.loss_mask, a.finish_reason)]
    if temperature == 0.0:  # greedy: every reply, every tool turn
        assert len(same) == len(exact)
        old_t, new_t = [c.turns for g in old_c for c in g], [c.turns for g in new_c for c in g]
        assert [new_t[i] for i in keep] == [old_t[i] for i in keep]
    else:  # a draw can land on the other side of a CDF boundary that moved by a rounding error
        assert len(same) >= 0.95 * len(exact)
    for a, b in same:
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-4)
    if temperature == 1.0:  # every cached episode: the sampler's log-probs are the scorer's on its layout
        for _, b in pairs:
            logp, mask, _ = policy.score([b.prompt_ids], [b.token_ids])
            got = [x for x, m in zip(logp[0].tolist(), b.loss_mask) if m]
            assert got == pytest.approx([x for x, m in zip(b.logprobs, b.loss_mask) if m], abs=1e-4)


def _replies(tok, sample):
    """(decoded text, token ids) of each reply of an episode's sample (its loss-mask runs)."""
    out, cur = [], []
    for t, m in zip(sample.token_ids, sample.loss_mask):
        if m:
            cur.append(t)
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return [(tok.decode(ids), ids) for ids in out]

def test_a_turn_may_only_drop_episodes(policy):
    from evo_core.trainer.turn_cache import TurnCache

    tc = TurnCache(policy)
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=3)
    (s,), = tc.generate([0], ["12+3="], params)[:1]
    with pytest.raises(ValueError, match="no cache"):
        tc.generate([1], ["1+1="], params)
    with pytest.raises(ValueError, match="does not extend"):
        tc.generate([0], ["99+9="], params)
    with pytest.raises(ValueError, match="one reply per episode"):
        tc.generate([0], [s.prompt + "=1"], attrs.evolve(params, n=2))
