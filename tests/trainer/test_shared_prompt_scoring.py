"""The update's shared prompt forward (``HFPolicy.score(..., share_prompts=True)``): one forward
per distinct prompt, its cache shared by that prompt's rows. It must compute the same function
as the row-by-row pass, values and gradients alike, up to the order of float sums."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evo_core.testing import require
from evo_core.trainer.policy import HFPolicy
from evo_core.trainer.tiny import TinyModelConfig

from .test_session import AlternatingReward, _active, _pm, _registering
from .testlib import TINY_MODEL

TOL = 1e-5


def _policy(arch: str = "llama") -> HFPolicy:
    pol = HFPolicy.tiny(TinyModelConfig(arch=arch, **TINY_MODEL), seed=0)
    pol.model.train()
    return pol


def _grads(pol, prompts, completions, share, with_entropy=True):
    pol.model.zero_grad(set_to_none=True)
    logp, mask, ent = pol.score(prompts, completions, with_entropy=with_entropy, share_prompts=share)
    # a loss that weighs every position differently, so a gradient sent to the wrong row shows
    w = torch.linspace(0.5, 1.5, logp.numel()).reshape(logp.shape)
    ((logp * w).sum() + (ent * w).sum() * 0.1).backward()
    grads = {n: p.grad.detach().clone() for n, p in pol.model.named_parameters() if p.grad is not None}
    return logp.detach(), mask, ent.detach(), grads


def _assert_same(pol, prompts, completions):
    a = _grads(pol, prompts, completions, share=False)
    b = _grads(pol, prompts, completions, share=True)
    assert a[0].shape == b[0].shape and torch.equal(a[1], b[1])
    assert torch.allclose(a[0], b[0], atol=TOL, rtol=0), (a[0] - b[0]).abs().max()
    assert torch.allclose(a[2], b[2], atol=TOL, rtol=0)
    assert a[3].keys() == b[3].keys()
    for n in a[3]:
        assert torch.allclose(a[3][n], b[3][n], atol=TOL, rtol=1e-4), n


def _ids(seq):
    """Token ids in the character vocabulary (19 ids): 0-2 are pad, BOS, EOS."""
    return [x if x < 3 else 3 + x % 16 for x in seq]


def _groups(prompts, completions_per_prompt):
    p_ids, c_ids = [], []
    for p, cs in zip(prompts, completions_per_prompt):
        for c in cs:
            p_ids.append(_ids(p))
            c_ids.append(_ids(c))
    return p_ids, c_ids


def test_groups_of_equal_length_prompts_give_the_row_by_row_numbers():
    pol = _policy()
    prompts = [[1, 5 + i, 12, 7 + i, 20] for i in range(4)]
    comps = [[[5, 6, 2], [7], [8, 9, 10, 11, 2], [3, 3]] for _ in prompts]
    _assert_same(pol, *_groups(prompts, comps))


def test_prompts_of_different_lengths_are_masked_between_prompt_and_completion():
    pol = _policy()
    prompts = [[1, 5], [1, 6, 7, 8, 9, 10], [1, 11, 12, 13]]
    comps = [[[5, 6, 2], [7], [8, 9, 10, 2]] for _ in prompts]
    _assert_same(pol, *_groups(prompts, comps))


def test_a_qwen2_shaped_model_too():
    pol = _policy("qwen2")
    prompts = [[1, 5, 6], [1, 7, 8, 9]]
    comps = [[[5, 6, 2], [7], [4, 4, 4, 4]] for _ in prompts]
    _assert_same(pol, *_groups(prompts, comps))


def test_empty_and_one_token_completions():
    pol = _policy()
    p_ids, c_ids = _groups([[1, 5, 6], [1, 7, 8]], [[[], [7], []], [[9], [], [2]]])
    _assert_same(pol, p_ids, c_ids)
    p_ids, c_ids = _groups([[1, 5, 6]], [[[], [], []]])  # nothing generated at all
    a = pol.score(p_ids, c_ids, share_prompts=False)
    b = pol.score(p_ids, c_ids, share_prompts=True)
    assert a[0].shape == b[0].shape == (3, 0)


def test_rows_of_a_group_need_not_be_adjacent():
    pol = _policy()
    p_ids, c_ids = _groups([[1, 5, 6], [1, 7, 8]], [[[5, 2], [6, 6, 2]], [[9, 2], [2]]])
    order = [0, 2, 1, 3]  # updates_per_step > 1 shuffles the rows of a minibatch
    _assert_same(pol, [p_ids[i] for i in order], [c_ids[i] for i in order])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.integers(4, 30), min_size=1, max_size=6), min_size=1, max_size=4),
       st.integers(2, 5), st.data())
def test_shared_and_row_by_row_scoring_agree(prompts, group, data):
    pol = _policy()
    comps = [[data.draw(st.lists(st.integers(2, 30), max_size=6)) for _ in range(group)] for _ in prompts]
    p_ids, c_ids = _groups([[1] + p for p in prompts], comps)
    perm = data.draw(st.permutations(range(len(p_ids))))
    _assert_same(pol, [p_ids[i] for i in perm], [c_ids[i] for i in perm])


def test_it_falls_back_to_the_row_by_row_pass_where_sharing_saves_little(monkeypatch):
    pol = _policy()
    calls = []
    real = pol.model.forward

    def counting(*a, **kw):
        calls.append(kw["input_ids"].shape)
        return real(*a, **kw)

    monkeypatch.setattr(pol.model, "forward", counting)
    pol.score([[1, 5], [1, 6], [1, 5]], [[2], [3], [4]], share_prompts=True)  # 2 distinct of 3 rows
    assert calls == [(3, 3)]
    calls.clear()
    pol.score([[1, 5]] * 4, [[2, 3], [3], [4, 4, 4], [5]], share_prompts=True)
    assert calls == [(1, 2), (4, 2)]  # one prompt forward, then the completions on its cache


def test_gradient_checkpointing_takes_the_row_by_row_pass():
    pol = _policy()
    pol.model.gradient_checkpointing_enable()
    assert pol._shared_prompt_logits([[1, 5]] * 4, [[2, 3]] * 4, 2) is None


def test_a_lora_policy_shares_its_prompts_too(tmp_path):
    require("peft", "the lora extra")
    from evo_core.trainer.policy import LoraSettings

    HFPolicy.tiny(TinyModelConfig(**TINY_MODEL)).save(str(tmp_path / "base"))
    pol = HFPolicy.from_pretrained(str(tmp_path / "base"), lora=LoraSettings(r=2, alpha=4))
    with torch.no_grad():
        for n, p in pol.model.named_parameters():
            if "lora_B" in n:
                p.add_(0.01)
    pol.model.train()
    assert pol._shared_prompt_logits([[1, 5]] * 4, [[2, 3]] * 4, 2) is not None
    _assert_same(pol, *_groups([[1, 5, 6], [1, 7, 8]], [[[5, 2], [6, 6, 2]], [[9, 2], [2]]]))


@pytest.mark.parametrize("rl", [{}, {"updates_per_step": 2}, {"kl_coef": 0.1}, {"micro_batch_size": 3}])
def test_an_rl_step_with_shared_prompts_matches_the_row_by_row_step(tiny_cfg, rl):
    """``rl.shared_prompt_forward`` reaches every scoring pass of the update (the policy's, the
    old log-probs', the reference's), and the step moves the weights as the row-by-row one does."""
    from evo_core.run_setup import build_session
    from evo_core.trainer.policy import HFPolicy as Policy

    seen = []
    real = Policy.score

    def spy(self, *a, **kw):
        seen.append(kw.get("share_prompts"))
        return real(self, *a, **kw)

    sessions = {}
    for share in (False, True):
        session, _ = build_session(tiny_cfg(rl={**rl, "shared_prompt_forward": share}),
                                   _pm(_registering(AlternatingReward())))
        sessions[share] = session
    before = sessions[True].policy.digest()
    assert sessions[False].policy.digest() == before
    try:
        Policy.score = spy
        off = sessions[False].rl_step(_active("alternating"))
        n_off = len(seen)
        on = sessions[True].rl_step(_active("alternating"))
    finally:
        Policy.score = real
    assert seen[:n_off] == [False] * n_off and seen[n_off:] == [True] * (len(seen) - n_off) and len(seen) > n_off
    assert off.updated and on.updated and sessions[True].policy.digest() != before
    assert off.metrics["loss"] == pytest.approx(on.metrics["loss"], abs=1e-5)
    for (n, p), (_, q) in zip(sessions[False].policy.model.named_parameters(),
                              sessions[True].policy.model.named_parameters()):
        assert torch.allclose(p, q, atol=1e-5), n


def test_update_benchmark_reports_agreeing_modes(tmp_path, capsys, monkeypatch):
    """benchmarks/update.py on a tiny run: the two modes score the first step's rollouts alike
    (rewards that vary within every group, so the step does update)."""
    import json

    import evo_core.plugins
    import evo_core.state

    from .testlib import TINY_TOML

    real = evo_core.plugins.PluginManager

    def with_alternating_rewards(*a, **kw):
        pm = real(*a, **kw)
        pm.register(_registering(AlternatingReward()), name="alternating")
        return pm

    monkeypatch.setattr(evo_core.plugins, "PluginManager", with_alternating_rewards)
    # the benchmark steps with a fresh HarnessState: make it one where the intervention is active
    monkeypatch.setattr(evo_core.state, "HarnessState", lambda: _active("alternating"))
    import benchmarks.update as bench
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY_TOML + "[sft]\nenabled = false\n[rl]\nprompts_per_step = 6\ngroup_size = 4\nmax_new_tokens = 5\n")
    assert bench.main(["--config", str(cfg), "--repeats", "2", "--steps", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["first_step_rollouts_identical"] is True and out["first_step_updated"] is True
    assert max(out["first_step_relative_gap"].values()) < 1e-4
    assert set(out["speedup"]) == {"update", "rl_step"}
