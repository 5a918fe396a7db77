"""The in-process sampler's two shortcuts (one prompt forward per run of identical prompts;
finished rows leave the decode batch) must not change a single token or log-prob: runs are
reproduced from their seeds, and stored results were measured without the shortcuts."""

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evo_core.trainer.policy import MIN_SHORTCUT_ROWS, HFPolicy, _select_rows, rows_invariant
from evo_core.trainer.protocols import SamplingParams
from evo_core.trainer.tiny import TinyModelConfig

from .testlib import TINY_MODEL


@pytest.fixture(scope="module")
def policy():
    pol = HFPolicy.tiny(TinyModelConfig(**TINY_MODEL), seed=0)
    with torch.no_grad():  # EOS about as likely as a digit, so rows finish at different lengths
        head = pol.model.get_output_embeddings().weight
        head[pol.tokenizer.eos_id] = head.mean(0) + 0.05
    return pol


def _sample(pol, prompts, params, *, shortcuts, chunk_size=1024, seed=7):
    pol.share_prefill = pol.drop_finished = shortcuts
    try:
        return pol.sample(prompts, params, generator=torch.Generator().manual_seed(seed), chunk_size=chunk_size)
    finally:
        pol.share_prefill = pol.drop_finished = True


def _fields(groups):
    return [[(s.token_ids, s.logprobs, s.text, s.finish_reason, s.truncated) for s in g] for g in groups]


PROMPTS = [f"{a}+{b}=" for a, b in zip(range(11, 99, 7), range(98, 10, -5))] + ["1+2=", "5="]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompts=st.lists(st.sampled_from(PROMPTS), min_size=1, max_size=16), n=st.integers(1, 16),
       temperature=st.sampled_from([0.0, 0.7, 1.0]), top_p=st.sampled_from([1.0, 0.9]),
       max_new_tokens=st.integers(1, 10), stop=st.sampled_from([(), ("+",), ("9", "0")]),
       chunk_size=st.sampled_from([1024, 70, 101, 3]))
# found when the shortcuts had no floor: the last row of a chunk of two, alone in the batch, got
# different last bits in its log-probs
@example(prompts=["1+2=", "1+2="], n=4, temperature=0.7, top_p=1.0, max_new_tokens=4, stop=(), chunk_size=3)
def test_shortcuts_change_no_token_or_logprob(policy, prompts, n, temperature, top_p, max_new_tokens, stop, chunk_size):
    # up to 256 rows (the shortcuts take batches of MIN_SHORTCUT_ROWS or more): repeated prompts
    # side by side (a GRPO group), a chunk boundary that splits a run of them, stop strings and
    # greedy decoding
    params = SamplingParams(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=stop)
    fast = _sample(policy, prompts, params, shortcuts=True, chunk_size=chunk_size)
    slow = _sample(policy, prompts, params, shortcuts=False, chunk_size=chunk_size)
    assert _fields(fast) == _fields(slow)


def test_shortcuts_engage(policy, monkeypatch):
    """The prompt forward runs once per distinct prompt, and later decode steps run on fewer rows."""
    sizes = []
    forward = policy.model.forward

    def spy(*a, **kw):
        sizes.append(int(kw["input_ids"].shape[0]))
        return forward(*a, **kw)

    monkeypatch.setattr(policy.model, "forward", spy)
    assert rows_invariant(policy.model), "this machine's BLAS rounds a row by its batch: no shortcut is taken"
    prompts = PROMPTS[:12]
    out = _sample(policy, prompts, SamplingParams(n=8, max_new_tokens=10), shortcuts=True)
    lengths = sorted(len(s.token_ids) for g in out for s in g)
    assert sizes[0] == 12  # one prompt row each, not 96
    assert lengths[0] < lengths[-1]  # rows did finish at different steps...
    assert MIN_SHORTCUT_ROWS <= min(sizes[1:]) < 96  # ...and left the batch, down to the floor


def test_select_rows_on_legacy_tuple_caches():
    k = torch.arange(3.0)[:, None, None, None].expand(3, 1, 2, 1)
    cache = ((k, k + 10),)
    out = _select_rows(cache, torch.tensor([2, 2, 0]))
    assert out[0][0][:, 0, 0, 0].tolist() == [2.0, 2.0, 0.0]
    assert out[0][1][:, 0, 0, 0].tolist() == [12.0, 12.0, 10.0]


def test_sampling_benchmark_reports_identical_outputs(tmp_path, capsys):
    """benchmarks/sampling.py on a tiny run: the plain and shortcut passes agree, and it says so."""
    import json

    from .testlib import TINY_TOML

    import benchmarks.sampling as bench
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY_TOML + "[sft]\nenabled = false\n[rl]\nprompts_per_step = 12\ngroup_size = 8\nmax_new_tokens = 6\n"
                   "[eval]\nsamples = 4\n")
    assert bench.main(["--config", str(cfg), "--repeats", "2", "--steps", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["identical_outputs"] is True and out["rows_invariant"] is True
    assert set(out["speedup"]) == {"rl_step", "evaluate"}
