"""Interventions are one class each: the core applies the active ones, in promotion order, at
their stage of the step; each can also do nothing. Offline replay runs the same methods."""

import pytest

from evo_core.api import Completion, RolloutBatch, RolloutItem, RolloutView, Task, Verdict, apply_to_views, effects
from evo_core.interventions import InterventionApplier
from evo_core.state import ActiveIntervention, HarnessState
from evo_core.testing import rollout
from evo_plugins.interventions import ALL, catalogue
from evo_plugins.priors import INTERVENTIONS as PRIORS

CAT = {**catalogue(), **{cls.name: cls() for cls in PRIORS}}
CORE = InterventionApplier(CAT)
LISTS = {"feature": "numbers", "op": ">", "value": 1}


def item(i, *, reward=1.0, truncated=False, n_tokens=4, group="g", text="42", **signals):
    from evo_core.harness.features import response_features

    v = Verdict(reward=reward, correct=bool(reward), signals=signals) if reward is not None else Verdict.infra("sandbox down")
    return RolloutItem(rollout_id=f"r{i}", group_id=group, task=Task(task_id=f"t{i}", prompt="1+1=", gold="2"),
                       completion=Completion(text=text, truncated=truncated, n_tokens=n_tokens), verdict=v, reward=reward,
                       features=response_features(text, n_tokens=n_tokens, truncated=truncated))


def state_with(*acts):
    s = HarnessState()
    for i, (name, params) in enumerate(acts):
        s.interventions[f"p{i}"] = ActiveIntervention(f"p{i}", CAT[name].kind, name, dict(params or {}), (), i + 1)
    return s


def test_every_intervention_declares_itself():
    kinds = set()
    for cls in ALL + PRIORS:
        iv = cls()
        d = iv.describe()
        assert iv.name and iv.version and iv.changes and iv.kind
        assert effects(iv) or iv.kind == "diagnostic", iv.name  # what it changes, declared by its methods
        kinds.add(iv.kind)
        params = {"set": {"temperature": 1.1}} if iv.kind == "hyperparameter" else iv.default_params
        pred = iv.prediction(params)
        assert pred["falls"] == list(iv.targets) and pred["guard_metric"]
        assert d["name"] == iv.name and d["effects"] == list(effects(iv))
    assert kinds == {"reward_shaping", "rollout_filter", "curriculum", "hyperparameter", "prompt_hint", "diagnostic", "verifier"}


def test_no_intervention_implements_a_trainer_hook():
    import evo_plugins.interventions as mod

    assert not [n for n in dir(mod) if n.startswith("evo_") and n != "evo_register_interventions"]


def test_rewards_act_only_while_active_and_never_score_an_infra_error():
    batch = RolloutBatch(step=1, items=[item(0, text="2 3"), item(1, text="2"), item(2, reward=None, text="2 3 4")])
    CORE.rewards_and_masks(batch, HarnessState())
    assert [i.reward for i in batch.items] == [1.0, 1.0, None]  # nothing active: nothing changes
    CORE.rewards_and_masks(batch, state_with(("spec_penalty", {"predicate": LISTS, "mode": "subtract", "penalty": 0.5})))
    assert [i.reward for i in batch.items] == [0.5, 1.0, None]
    assert batch.items[0].notes["reward_before_interventions"] == 1.0


def test_predicate_repairs():
    def run(name, params=None):
        batch = RolloutBatch(step=1, items=[item(0, text="2 3"), item(1, text="2"), item(2, text="5 2", reward=0.5)],
                             regrade=lambda it: 1.0 if it.completion.text == "2" else 0.0)
        CORE.rewards_and_masks(batch, state_with((name, {"predicate": LISTS, **(params or {})})))
        return [(i.reward, i.mask) for i in batch.items]

    assert run("spec_penalty") == [(0.0, True), (1.0, True), (0.0, True)]
    assert run("spec_screen") == [(1.0, False), (1.0, True), (0.5, False)]
    assert run("oracle_regrade") == [(0.0, True), (1.0, True), (0.0, True)]
    assert run("rollback") == run("spec_penalty") and CAT["rollback"].restore_main


def test_regrade_beyond_the_budget_is_screened_never_paid_unchecked():
    calls = []

    def budget_of_one(it):
        calls.append(it.rollout_id)
        return 0.0 if len(calls) == 1 else None

    batch = RolloutBatch(step=1, items=[item(0, text="2 3"), item(1, text="3 2"), item(2, text="2")], regrade=budget_of_one)
    CORE.rewards_and_masks(batch, state_with(("oracle_regrade", {"predicate": LISTS})))
    assert [(i.reward, i.mask) for i in batch.items] == [(0.0, True), (1.0, False), (1.0, True)]


def test_a_bad_predicate_is_refused():
    from evo_core.harness.specs import SpecError

    with pytest.raises(SpecError):
        CAT["spec_penalty"].params({"predicate": {"feature": "x", "op": "~", "value": 1}})


@pytest.mark.parametrize("name,params,hit,miss", [
    ("flag_penalty", {"signal": "git_history_access"}, {"git_history_access": True}, {"git_history_access": False}),
    ("repetition_penalty", {}, {"text": "a b c a b c a b c a b c"}, {"text": "a b c d"}),
    ("overlong_penalty", {"max_len": 20, "cache": 10}, {"n_tokens": 20}, {"n_tokens": 8}),
    ("multi_answer_penalty", {}, {"numbers_found": 2}, {"numbers_found": 1}),
    ("reset_tests_before_grading", {}, {"tests_modified": True}, {"tests_modified": False}),
])
def test_shaping_hits_and_misses(name, params, hit, miss):
    batch = RolloutBatch(step=1, items=[item(0, **hit), item(1, **miss)])
    CORE.rewards_and_masks(batch, state_with((name, params)))
    assert batch.items[0].reward < 1.0 and batch.items[1].reward == 1.0


def test_filters():
    items = [item(0, group="a"), item(1, group="a"), item(2, group="b", reward=0.0), item(3, group="b"),
             item(4, group="c", truncated=True, reward=0.0)]
    CORE.rewards_and_masks(RolloutBatch(step=1, items=items), state_with(("dynamic_sampling", {})))
    assert [i.mask for i in items] == [False, False, True, True, True]  # group a is all 1.0; c has one rollout
    items2 = [item(0, truncated=True), item(1)]
    CORE.rewards_and_masks(RolloutBatch(step=1, items=items2), state_with(("overlong_mask", {})))
    assert [i.mask for i in items2] == [False, True]


def test_curriculum_hyperparameters_hint():
    tasks = [Task(task_id="a", prompt=""), Task(task_id="b", prompt="")]
    assert CORE.task_weights(tasks, HarnessState()) is None
    assert CORE.task_weights(tasks, state_with(("task_reweight", {"weights": {"a": 0.25}}))) == {"a": 0.25}
    assert CORE.hyperparameters({"temperature": 1.0}, state_with(("hyperparameter", {"set": {"temperature": 1.2}}))) \
        == {"temperature": 1.2}
    assert CORE.hyperparameters({}, HarnessState()) == {}
    assert CORE.prompt_hints(tasks[0], state_with(("prompt_hint", {"hint": "One answer."}))) == ["One answer."]
    assert CORE.prompt_hints(tasks[0], HarnessState()) == []


def test_promotion_order_is_application_order():
    batch = RolloutBatch(step=1, items=[item(0, text="2 3")])
    CORE.rewards_and_masks(batch, state_with(("spec_penalty", {"predicate": LISTS, "mode": "subtract", "penalty": 0.25}),
                                             ("flag_penalty", {"signal": "x", "value": 0.9})))
    assert batch.items[0].reward == 0.75  # the flag signal is absent; the penalty acted once


def test_hyperparameter_change_is_single_factor():
    with pytest.raises(ValueError, match="exactly one"):
        CAT["hyperparameter"].hyperparameters({}, {"set": {"temperature": 1.2, "kl_coef": 0.1}})


def test_replay_on_logged_events_matches_the_live_rule():
    rows = [rollout(0, text="2 3 4"), rollout(1, text="2"), rollout(2, text="2 5", reward=0.0)]
    views = [RolloutView.of_event(r) for r in rows]
    new, masked, regrade = apply_to_views([(CAT["spec_penalty"], {"predicate": LISTS})], views)
    assert new == {rows[0].event_id: 0.0, rows[1].event_id: 1.0, rows[2].event_id: 0.0} and not masked and not regrade
    live = RolloutBatch(step=1, items=[item(0, text="2 3 4"), item(1, text="2"), item(2, text="2 5", reward=0.0)])
    CORE.rewards_and_masks(live, state_with(("spec_penalty", {"predicate": LISTS})))
    assert [i.reward for i in live.items] == list(new.values())


def test_reverted_intervention_stops_acting():
    from evo_core.state import apply
    from evo_events import InterventionReverted

    s = state_with(("spec_penalty", {"predicate": LISTS}))
    apply(s, InterventionReverted(run_id="r", proposal_id="p0", step=3, harness_version_before=1, harness_version_after=2))
    batch = RolloutBatch(step=1, items=[item(0, text="2 3")])
    CORE.rewards_and_masks(batch, s)
    assert batch.items[0].reward == 1.0 and s.harness_version == 2


def test_a_third_party_intervention_is_one_class(evo_plugins, evo_plugin):
    from evo_core.hookspecs import hookimpl

    class CapLength:
        name, version, kind = "cap_length", "1", "reward_shaping"
        changes, targets, default_params = "reward: 0 above max_chars", (), {"max_chars": 3}

        def new_reward(self, view, params):
            return 0.0 if len(view.text) > params["max_chars"] else None

    class Plugin:
        @hookimpl
        def evo_register_interventions(self):
            return [CapLength()]

    pm = evo_plugin(Plugin(), name="cap")
    core = InterventionApplier(pm.interventions())
    batch = RolloutBatch(step=1, items=[item(0, text="12345"), item(1, text="12")])
    s = HarnessState()
    s.interventions["p"] = ActiveIntervention("p", "reward_shaping", "cap_length", {}, (), 1)
    core.rewards_and_masks(batch, s)
    assert [i.reward for i in batch.items] == [0.0, 1.0]
