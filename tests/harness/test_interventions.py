"""Interventions act only while active, through the trainer hooks, and each can do nothing."""

import pytest

from conftest import mk
from evo_core.api import Completion, RolloutBatch, RolloutItem, Task, Verdict
from evo_core.state import ActiveIntervention, HarnessState
from evo_plugins.interventions import ALL, RolloutView, apply_to_views, catalogue

CAT = catalogue()


def item(i, *, reward=1.0, answers=1, truncated=False, n_tokens=4, group="g", text="42", **signals):
    v = Verdict(reward=reward, correct=bool(reward), signals={"answer_count": answers, **signals}) if reward is not None \
        else Verdict.infra("sandbox down", answer_count=answers)
    return RolloutItem(rollout_id=f"r{i}", group_id=group, task=Task(task_id=f"t{i}", prompt="1+1="),
                       completion=Completion(text=text, truncated=truncated, n_tokens=n_tokens), verdict=v, reward=reward)


def state_with(name, params=None, kind=None):
    s = HarnessState()
    s.interventions["p1"] = ActiveIntervention("p1", kind or CAT[name].kind, name, dict(params or {}), (), 1)
    return s


def test_every_intervention_declares_itself():
    kinds = set()
    for cls in ALL:
        iv = cls()
        d = iv.describe()
        assert iv.name and iv.version and iv.changes and iv.kind
        kinds.add(iv.kind)
        pred = iv.prediction(iv.default_params if iv.kind != "hyperparameter" else {"set": {"temperature": 1.1}})
        assert pred["falls"] == list(iv.targets) and pred["guard_metric"]
        assert d["name"] == iv.name
    assert kinds == {"reward_shaping", "rollout_filter", "curriculum", "hyperparameter", "prompt_hint", "diagnostic", "verifier"}


def test_reward_hooks_act_only_while_active(pm):
    batch = RolloutBatch(step=1, items=[item(0, answers=2), item(1, answers=1), item(2, reward=None, answers=3)])
    pm.call("evo_transform_rewards", batch=batch, state=HarnessState())
    assert [i.reward for i in batch.items] == [1.0, 1.0, None]  # nothing active: nothing changes
    pm.call("evo_transform_rewards", batch=batch, state=state_with("multi_answer_penalty", {"penalty": 0.5}))
    assert [i.reward for i in batch.items] == [0.5, 1.0, None]  # infra error never scored
    assert batch.items[0].notes["reward_before_interventions"] == 1.0


def test_strict_extraction_and_reset_tests(pm):
    batch = RolloutBatch(step=1, items=[item(0, answers=2), item(1, answers=1), item(2, answers=0)])
    pm.call("evo_transform_rewards", batch=batch, state=state_with("strict_extraction"))
    assert [i.reward for i in batch.items] == [0.0, 1.0, 0.0]
    b2 = RolloutBatch(step=1, items=[item(0, tests_modified=True, reward_pristine=0.0), item(1, runner_config_modified=True),
                                     item(2, tests_modified=False)])
    pm.call("evo_transform_rewards", batch=b2, state=state_with("reset_tests_before_grading"))
    assert [i.reward for i in b2.items] == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("name,params,hit,miss", [
    ("flag_penalty", {"signal": "git_history_access"}, {"git_history_access": True}, {"git_history_access": False}),
    ("repetition_penalty", {}, {"text": "a b c d a b c d a b c d"}, {"text": "a b c d"}),
    ("overlong_penalty", {"max_len": 20, "cache": 10}, {"n_tokens": 20}, {"n_tokens": 8}),
])
def test_shaping_hits_and_misses(pm, name, params, hit, miss):
    batch = RolloutBatch(step=1, items=[item(0, **hit), item(1, **miss)])
    pm.call("evo_transform_rewards", batch=batch, state=state_with(name, params))
    assert batch.items[0].reward < 1.0 and batch.items[1].reward == 1.0


def test_filters(pm):
    items = [item(0, group="a"), item(1, group="a"), item(2, group="b", reward=0.0), item(3, group="b"),
             item(4, group="c", truncated=True, reward=0.0)]
    pm.call("evo_filter_rollouts", batch=RolloutBatch(step=1, items=items), state=state_with("dynamic_sampling"))
    assert [i.mask for i in items] == [False, False, True, True, True]  # group a is all 1.0; c has one rollout
    items2 = [item(0, truncated=True), item(1)]
    pm.call("evo_filter_rollouts", batch=RolloutBatch(step=1, items=items2), state=state_with("overlong_mask"))
    assert [i.mask for i in items2] == [False, True]


def test_curriculum_hyperparameters_hint(pm):
    tasks = [Task(task_id="a", prompt=""), Task(task_id="b", prompt="")]
    assert pm.call("evo_task_weights", tasks=tasks, state=HarnessState(), step=1) == []
    got = pm.call("evo_task_weights", tasks=tasks, state=state_with("task_reweight", {"weights": {"a": 0.25}}), step=1)
    assert {"a": 0.25} in got
    hp = pm.call("evo_hyperparameters", params={"temperature": 1.0}, state=state_with("hyperparameter", {"set": {"temperature": 1.2}}), step=1)
    assert {"temperature": 1.2} in hp
    assert pm.call("evo_hyperparameters", params={}, state=HarnessState(), step=1) == []
    hint = pm.call("evo_prompt_hint", task=tasks[0], state=state_with("prompt_hint", {"hint": "One answer."}))
    assert "One answer." in hint
    assert pm.call("evo_prompt_hint", task=tasks[0], state=HarnessState()) == []


def test_hyperparameter_change_is_single_factor():
    with pytest.raises(ValueError, match="exactly one"):
        CAT["hyperparameter"].hyperparameters({}, {"set": {"temperature": 1.2, "kl_coef": 0.1}})


def test_replay_on_logged_events_matches_live_rule():
    rows = [mk(0, answers=3), mk(1, answers=1), mk(2, answers=2, reward=0.0)]
    views = [RolloutView.of_event(r) for r in rows]
    new, masked = apply_to_views([(CAT["multi_answer_penalty"], {"penalty": 1.0})], views)
    assert new == {rows[0].event_id: 0.0, rows[1].event_id: 1.0, rows[2].event_id: 0.0} and not masked


def test_reverted_intervention_stops_acting(pm):
    s = state_with("multi_answer_penalty")
    from evo_core.state import apply
    from evo_events import InterventionReverted

    apply(s, InterventionReverted(run_id="r", proposal_id="p1", step=3, harness_version_before=1, harness_version_after=2))
    batch = RolloutBatch(step=1, items=[item(0, answers=2)])
    pm.call("evo_transform_rewards", batch=batch, state=s)
    assert batch.items[0].reward == 1.0 and s.harness_version == 2
