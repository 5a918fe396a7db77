"""The device-side sampler (``sample_inverse_cdf``, used off the CPU): it draws from the
distribution it is given, never a zero-probability token, and reproducibly per seed. It is
device-agnostic, so it is checked here on CPU tensors."""

import torch
from hypothesis import given, settings, strategies as st

from evo_core.trainer.policy import sample_inverse_cdf


def test_frequencies_match_the_distribution():
    probs = torch.tensor([0.5, 0.0, 0.2, 0.3])
    logp = probs.log().expand(20000, -1).contiguous()
    g = torch.Generator().manual_seed(0)
    draws = sample_inverse_cdf(logp, g)
    freq = torch.bincount(draws, minlength=4).float() / len(draws)
    assert freq[1] == 0  # probability 0 (what top-p leaves) is never drawn
    assert torch.allclose(freq, probs, atol=0.015), freq


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-20, 5), min_size=2, max_size=40), st.integers(0, 2**31 - 1))
def test_draws_are_in_support_and_reproducible(logits, seed):
    lp = torch.log_softmax(torch.tensor(logits, dtype=torch.float32), -1)
    lp[0] = float("-inf")  # a filtered token
    lp = lp.expand(8, -1).contiguous()
    a = sample_inverse_cdf(lp, torch.Generator().manual_seed(seed))
    b = sample_inverse_cdf(lp, torch.Generator().manual_seed(seed))
    assert torch.equal(a, b)
    assert ((a >= 1) & (a < lp.shape[1])).all()
