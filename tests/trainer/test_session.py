"""The RL session: hook order, reward transforms, masks, infra errors, forks."""

import pytest
import torch

from evo_core.api import Verdict
from evo_core.hookspecs import hookimpl
from evo_core.loop import build_session
from evo_core.plugins import PluginManager
from evo_core.state import HarnessState
import evo_plugins.arithmetic as arithmetic


def _pm(*plugins):
    pm = PluginManager(load_entrypoints=False)
    pm.register(arithmetic, name="evo_arithmetic")
    for i, p in enumerate(plugins):
        pm.register(p, name=f"p{i}")
    return pm


class Recorder:
    def __init__(self):
        self.calls = []

    @hookimpl
    def evo_task_weights(self, tasks, state, step):
        self.calls.append("task_weights")
        return {tasks[0].task_id: 1e7}  # nearly every prompt becomes task 0

    @hookimpl
    def evo_prompt_hint(self, task, state):
        if "prompt_hint" not in self.calls:
            self.calls.append("prompt_hint")
        return None

    @hookimpl
    def evo_hyperparameters(self, params, state, step):
        self.calls.append("hyperparameters")
        return {"temperature": 0.5, "not_a_knob": 1}

    @hookimpl
    def evo_transform_rewards(self, batch, state):
        self.calls.append("transform_rewards")
        assert batch.hyperparameters["temperature"] == 0.5
        for it in batch.items:
            if it.reward is not None:
                it.reward = -1.0 if it.verdict.signals["answer_count"] != 1 else it.reward

    @hookimpl
    def evo_filter_rollouts(self, batch, state):
        self.calls.append("filter_rollouts")
        batch.items[0].mask = False


def test_hooks_run_in_order_and_act(tiny_cfg):
    rec = Recorder()
    session, _ = build_session(tiny_cfg(), _pm(rec))
    res = session.rl_step(HarnessState())
    assert rec.calls == ["task_weights", "hyperparameters", "prompt_hint", "transform_rewards", "filter_rollouts"]
    # (hyperparameters are read before prompts are built because they may change prompts_per_step)
    assert res.hyperparameters["temperature"] == 0.5 and "not_a_knob" not in res.hyperparameters
    ids = [it.task.task_id for it in res.items]
    assert ids.count(session.train_tasks[0].task_id) > len(ids) // 2
    assert res.extra[0]["advantage"] is None  # filtered
    for it in res.items:
        if it.verdict.signals["answer_count"] != 1:
            assert it.reward == -1.0  # transformed reward is what trains…
    assert all(it.verdict.reward in (0.0, 1.0) for it in res.items)  # …the verifier's stays on record


class Boom:
    @hookimpl
    def evo_transform_rewards(self, batch, state):
        raise RuntimeError("plugin bug")


def test_raising_plugin_is_recorded_and_the_step_goes_on(tiny_cfg):
    session, _ = build_session(tiny_cfg(), _pm(Boom()))
    res = session.rl_step(HarnessState())
    assert res.updated
    assert [(f.plugin, f.hook, f.error_type) for f in res.failures] == [("p0", "evo_transform_rewards", "RuntimeError")]


class FlakyDomain(arithmetic.ArithmeticDomain):
    """Every third grading is an infrastructure failure."""

    name = "flaky"

    def __init__(self):
        super().__init__()
        self.n = 0

    def configure(self, options):
        return self

    def verify(self, task, completion):
        self.n += 1
        if self.n % 3 == 0:
            return Verdict.infra("grader timed out")
        return super().verify(task, completion)


class FlakyPlugin:
    @hookimpl
    def evo_register_domains(self):
        return [FlakyDomain()]

    @hookimpl
    def evo_transform_rewards(self, batch, state):
        for it in batch.items:
            it.reward = 1.0  # a buggy shaper that would score infra errors


def test_infra_errors_are_masked_never_scored(tiny_cfg):
    session, _ = build_session(tiny_cfg(task={"domain": "flaky", "options": {}}), _pm(FlakyPlugin()))
    res = session.rl_step(HarnessState())
    infra = [i for i, it in enumerate(res.items) if it.verdict.infra_error]
    assert infra
    for i in infra:
        assert res.items[i].reward is None and not res.items[i].mask and res.extra[i]["advantage"] is None
    assert res.metrics["infra_error_rate"] == pytest.approx(len(infra) / len(res.items))


def test_fork_is_independent_and_reproducible(tiny_cfg):
    session, _ = build_session(tiny_cfg(), _pm())
    before = session.policy.digest()
    a, b = session.fork(), session.fork()
    ma = a.train_steps(2, HarnessState())
    mb = b.train_steps(2, HarnessState())
    assert session.policy.digest() == before and session.step == 0  # the main line is untouched
    assert a.policy.digest() == b.policy.digest()  # same seeds, same data: same result
    assert [m["reward_mean"] for m in ma] == [m["reward_mean"] for m in mb]
    assert ma[0]["rollouts"][0].keys() >= {"rollout_id", "reward", "strict_correct", "signals", "entropy"}
    snap = session.checkpoint()
    session.rl_step(HarnessState())
    v = session.policy_version
    session.restore(snap)
    assert session.policy.digest() == before and session.policy_version == v + 1 and session.restored


def test_dapo_drops_zero_variance_groups_and_kl_is_reported(tiny_cfg):
    session, _ = build_session(tiny_cfg(rl={"algorithm": "dapo", "kl_coef": 0.1, "updates_per_step": 2}), _pm())
    res = session.rl_step(HarnessState())
    zero = {it.group_id for it in res.items if len({x.reward for x in res.items if x.group_id == it.group_id}) == 1}
    for it, e in zip(res.items, res.extra):
        if it.group_id in zero:
            assert e["advantage"] is None
    if res.updated:
        assert res.metrics["kl"] is not None and res.metrics["clip_frac"] is not None


def test_evaluate_is_seeded_and_leaves_training_rng_alone(tiny_cfg):
    session, _ = build_session(tiny_cfg(), _pm())
    g = session.gen.get_state()
    e1, e2 = session.evaluate(), session.evaluate()
    assert e1.item_scores == e2.item_scores and e1.n == 20
    assert torch.equal(session.gen.get_state(), g)
    assert {"strict_accuracy", "strict_accuracy_greedy", "train_reward", "hedge_rate"} <= set(e1.metrics)


class SomeTasksPay:
    """Only groups of tasks whose first operand is 1 mod 4 carry a learning signal."""

    @hookimpl
    def evo_transform_rewards(self, batch, state):
        seen = set()
        for it in batch.items:
            first = it.group_id not in seen
            seen.add(it.group_id)
            it.reward = 1.0 if (first and it.task.meta["a"] % 4 == 1) else 0.0


def test_dapo_refill_samples_until_the_batch_is_informative(tiny_cfg):
    session, _ = build_session(tiny_cfg(rl={"algorithm": "dapo", "dynamic_sampling_rounds": 8}), _pm(SomeTasksPay()))
    res = session.rl_step(HarnessState())
    trained = {it.group_id for it, e in zip(res.items, res.extra) if e["advantage"] is not None}
    assert len(trained) == 4  # prompts_per_step informative groups, trimmed to size
    assert all(it.task.meta["a"] % 4 == 1 for it in res.items if it.group_id in trained)
    assert res.metrics["dynamic_sampling_rounds"] >= 1
    assert len({it.group_id for it in res.items}) > 4  # the extra groups are kept as evidence


class AlternatingReward:
    """Every group gets rewards 1, 0, 1, 0, … so every group carries a signal."""

    @hookimpl
    def evo_transform_rewards(self, batch, state):
        for i, it in enumerate(batch.items):
            it.reward = float(i % 2 == 0)


@pytest.mark.parametrize("algorithm", ["grpo", "dr_grpo", "dapo"])
def test_gradient_accumulation_matches_the_whole_batch(tiny_cfg, algorithm):
    whole, _ = build_session(tiny_cfg(rl={"algorithm": algorithm}), _pm(AlternatingReward()))
    micro, _ = build_session(tiny_cfg(rl={"algorithm": algorithm, "micro_batch_size": 3}), _pm(AlternatingReward()))
    before = whole.policy.digest()
    a, b = whole.rl_step(HarnessState()), micro.rl_step(HarnessState())
    assert a.updated and b.updated and whole.policy.digest() != before
    assert a.metrics["loss"] == pytest.approx(b.metrics["loss"], abs=1e-5)
    for (n, p), (_, q) in zip(whole.policy.model.named_parameters(), micro.policy.model.named_parameters()):
        assert torch.allclose(p, q, atol=1e-5), n
