import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from evo_core.config import RLSection
from evo_core.trainer.grpo import LossSettings, group_advantages, overlong_penalty, pg_loss, resolve


@given(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=6), min_size=1, max_size=5),
       st.booleans())
def test_advantages_are_centred_per_group_and_zero_variance_is_exact(groups, scale):
    rewards, gids = [], []
    for g, rs in enumerate(groups):
        rewards += rs
        gids += [f"g{g}"] * len(rs)
    adv, zero = group_advantages(rewards, gids, [True] * len(rewards), scale=scale)
    for g, rs in enumerate(groups):
        a = [x for x, gid in zip(adv, gids) if gid == f"g{g}"]
        assert abs(sum(a)) < 1e-6 * max(1, len(a))
        assert (f"g{g}" in zero) == (len(set(rs)) == 1)
        if f"g{g}" in zero:
            assert all(x == 0 for x in a)


def test_std_scaling_and_dr_grpo():
    adv, _ = group_advantages([1.0, 0.0, 0.0, 0.0], ["g"] * 4, [True] * 4, scale=False)
    assert adv == [0.75, -0.25, -0.25, -0.25]
    adv_s, _ = group_advantages([1.0, 0.0, 0.0, 0.0], ["g"] * 4, [True] * 4, scale=True)
    std = math.sqrt((0.75 ** 2 + 3 * 0.25 ** 2) / 3)
    assert adv_s[0] == pytest.approx(0.75 / std, rel=1e-4)


def test_invalid_and_infra_items_get_no_advantage_and_do_not_count():
    adv, zero = group_advantages([1.0, None, 0.0, 1.0], ["g"] * 4, [True, False, False, True], scale=False)
    assert adv[1] is None and adv[2] is None
    assert adv[0] == 0.0 and "g" in zero  # only the two valid (equal) rewards count


def test_overlong_soft_penalty_ramps():
    assert overlong_penalty(4, 8, 2, 1.0) == 0.0
    assert overlong_penalty(6, 8, 2, 1.0) == 0.0
    assert overlong_penalty(7, 8, 2, 1.0) == -0.5
    assert overlong_penalty(8, 8, 2, 1.0) == -1.0


def test_algorithm_presets():
    s, scale, dyn = resolve(RLSection(algorithm="dapo"))
    assert (s.clip_low, s.clip_high, s.agg, scale, dyn) == (0.2, 0.28, "token_mean", True, True)
    s, scale, dyn = resolve(RLSection(algorithm="dr_grpo", max_new_tokens=16))
    assert (s.agg, s.norm_len, scale, dyn) == ("seq_mean_token_sum_norm", 16, False, False)
    s, scale, dyn = resolve(RLSection(algorithm="grpo", clip_high=0.3, scale_rewards=False))
    assert (s.agg, s.clip_high, scale) == ("seq_mean_token_mean", 0.3, False)


def _example():
    logp = torch.log(torch.tensor([[0.5, 0.5, 0.0], [0.25, 0.0, 0.0]]).clamp(min=1e-9))
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    return logp * mask, mask, torch.tensor([1.0, -1.0])


@pytest.mark.parametrize("agg,expected", [
    # on-policy (ratio 1): the loss is -adv averaged as each aggregation says
    ("seq_mean_token_mean", (-1.0 + 1.0) / 2),
    ("token_mean", (-1.0 * 2 + 1.0) / 3),
    ("seq_mean_token_sum_norm", (-2.0 / 4 + 1.0 / 4) / 2),
])
def test_loss_aggregations(agg, expected):
    logp, mask, adv = _example()
    loss, st_ = pg_loss(logp, logp.detach(), adv, mask, LossSettings(agg=agg, norm_len=4), n_seqs=2, n_tokens=3)
    assert loss.item() == pytest.approx(expected)
    assert st_["clipped_tokens"] == 0


def test_clipping_asymmetric_and_counted():
    mask = torch.ones(1, 2)
    old = torch.zeros(1, 2)
    logp = torch.log(torch.tensor([[1.5, 0.5]]))  # ratios 1.5 and 0.5
    s = LossSettings(clip_low=0.2, clip_high=0.28, agg="token_mean")
    loss, st_ = pg_loss(logp, old, torch.tensor([1.0]), mask, s, n_seqs=1, n_tokens=2)
    # positive advantage: the high ratio is clipped at 1.28; the low one is not (min of the pessimistic pair)
    assert loss.item() == pytest.approx(-(1.28 + 0.5) / 2, rel=1e-5)
    assert st_["clipped_tokens"] == 1


def test_kl_term_is_zero_at_the_reference_and_positive_elsewhere():
    logp, mask, adv = _example()
    s = LossSettings(kl_coef=0.5, agg="token_mean")
    base, _ = pg_loss(logp, logp.detach(), adv, mask, LossSettings(agg="token_mean"), n_seqs=2, n_tokens=3)
    same, st_ = pg_loss(logp, logp.detach(), adv, mask, s, ref_logp=logp.detach(), n_seqs=2, n_tokens=3)
    assert same.item() == pytest.approx(base.item()) and st_["kl_sum"] == pytest.approx(0.0)
    other, st2 = pg_loss(logp, logp.detach(), adv, mask, s, ref_logp=logp.detach() - 0.3, n_seqs=2, n_tokens=3)
    assert other.item() > base.item() and st2["kl_sum"] > 0
