"""The RL session: intervention effects in order, reward transforms, masks, infra errors, forks."""

import pytest
import torch

from evo_core.api import Verdict
from evo_core.hookspecs import hookimpl
import evo_arithmetic.plugin as arithmetic
from evo_arithmetic.domain import ArithmeticDomain
from evo_core.plugins import PluginManager
from evo_core.run_setup import build_session
from evo_core.state import HarnessState


def _pm(*plugins):
    pm = PluginManager(load_entrypoints=False)
    pm.register(arithmetic, name="evo_arithmetic")
    for i, p in enumerate(plugins):
        pm.register(p, name=f"p{i}")
    return pm


def _active(*names, **params):
    """A harness state with ``names`` active the way ``[harness.interventions.NAME]`` makes them."""
    from evo_core.state import apply
    from evo_events import RunStarted

    table = {n: dict(params.get(n, {})) for n in names}
    return apply(HarnessState(), RunStarted(run_id="r", config={"harness": {"interventions": table}}, config_hash="",
                                            seed=0, harness_mode="fixed", code_version="", started_at=""))


class Recorder:
    """One intervention with every effect of a step: what the five trainer hooks used to do."""

    name, version, kind, changes, targets = "recorder", "1", "reward_shaping", "everything", ()
    default_params = {"temperature": 0.5}

    def __init__(self):
        self.calls = []

    def task_weights(self, tasks, params):
        self.calls.append("task_weights")
        return {tasks[0].task_id: 1e7}  # nearly every prompt becomes task 0

    def hyperparameters(self, current, params):
        self.calls.append("hyperparameters")
        return {"temperature": params["temperature"], "not_a_knob": 1}

    def prompt_hint(self, task, params):
        if "prompt_hint" not in self.calls:
            self.calls.append("prompt_hint")
        return None

    def new_reward(self, view, params):
        if "new_reward" not in self.calls:
            self.calls.append("new_reward")
        return -1.0 if view.signals["numbers_found"] != 1 else None

    def mask(self, views, params):
        self.calls.append("mask")
        return {views[0].rollout_id}


def _registering(*interventions):
    class P:
        @hookimpl
        def evo_register_interventions(self):
            return list(interventions)

    return P()


def test_interventions_act_at_every_stage_in_order(tiny_cfg):
    rec = Recorder()
    session, _ = build_session(tiny_cfg(), _pm(_registering(rec)))
    res = session.rl_step(_active("recorder"))
    assert rec.calls == ["task_weights", "hyperparameters", "prompt_hint", "new_reward", "mask"]
    # (hyperparameters are read before prompts are built because they may change prompts_per_step)
    assert res.hyperparameters["temperature"] == 0.5 and "not_a_knob" not in res.hyperparameters
    ids = [it.task.task_id for it in res.items]
    assert ids.count(session.train_tasks[0].task_id) > len(ids) // 2
    assert res.extra[0]["advantage"] is None  # masked
    for it in res.items:
        if it.verdict.signals["numbers_found"] != 1:
            assert it.reward == -1.0 and it.notes["interventions"] == ["recorder"]  # the new reward trains…
    assert all(it.verdict.reward in (0.0, 1.0) for it in res.items)  # …the verifier's stays on record
    assert all(it.features and "chars" in it.features for it in res.items)  # generic features, before any effect


def test_a_configured_intervention_is_active_from_the_first_step(tiny_cfg):
    """``[harness.interventions.NAME]``: folded into the state at RunStarted, like a promotion."""
    rec = Recorder()
    cfg = tiny_cfg(harness={"interventions": {"recorder": {"temperature": 0.25}}})
    session, _ = build_session(cfg, _pm(_registering(rec)))
    from evo_core.state import fold
    from evo_events import RunStarted

    state = fold([RunStarted(run_id="r", config=cfg.to_dict(), config_hash="", seed=0, harness_mode="fixed",
                             code_version="", started_at="")])
    assert [(a.proposal_id, a.name, a.params) for a in state.interventions.values()] == \
        [("config:recorder", "recorder", {"temperature": 0.25})]
    assert session.rl_step(state).hyperparameters["temperature"] == 0.25
    off = tiny_cfg(harness={"interventions": {"recorder": {"enabled": False}}})
    assert not fold([RunStarted(run_id="r", config=off.to_dict(), config_hash="", seed=0, harness_mode="fixed",
                                code_version="", started_at="")]).interventions


class FlakyDomain(ArithmeticDomain):
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


class PayAll:
    """A buggy shaper that would score infra errors if the core let it."""

    name, version, kind, changes, targets, default_params = "pay_all", "1", "reward_shaping", "reward: 1", (), {}

    def new_reward(self, view, params):
        return 1.0


class FlakyPlugin:
    @hookimpl
    def evo_register_domains(self):
        return [FlakyDomain()]

    @hookimpl
    def evo_register_interventions(self):
        return [PayAll()]


def test_infra_errors_are_masked_never_scored(tiny_cfg):
    session, _ = build_session(tiny_cfg(task={"domain": "flaky", "options": {}}), _pm(FlakyPlugin()))
    res = session.rl_step(_active("pay_all"))
    infra = [i for i, it in enumerate(res.items) if it.verdict.infra_error]
    assert infra
    for i in infra:
        assert res.items[i].reward is None and not res.items[i].mask and res.extra[i]["advantage"] is None
    assert res.metrics["infra_error_rate"] == pytest.approx(len(infra) / len(res.items))


def test_forks_are_independent_reproducible_and_reseedable(tiny_cfg):
    from evo_core.store import open_store
    from evo_core.trainer.port import SessionPort

    session, _ = build_session(tiny_cfg(), _pm())
    before = session.policy.digest()
    port = SessionPort(session, open_store("memory://").blobs, "r")
    a, b, c = port.fork(seed=7), port.fork(seed=7), port.fork(seed=8)
    ra, rb, rc = a.train(2, HarnessState()), b.train(2, HarnessState()), c.train(2, HarnessState())
    assert session.policy.digest() == before and session.step == 0  # the main line is untouched
    assert a.session.policy.digest() == b.session.policy.digest()  # same seed, same data: same result
    assert [r.response_preview for r in ra] == [r.response_preview for r in rb] != [r.response_preview for r in rc]
    assert {r.event_id for r in ra}.isdisjoint({r.event_id for r in session_rollouts(session)})
    assert ra[0].features and ra[0].train.keys() >= {"entropy", "advantage"}
    assert set(a.evaluate().item_scores) == {t.task_id for t in session.splits["validation"]}
    # snapshot and restore: the weights come back under a new version, the training RNG goes on
    snap = port.snapshot()
    assert snap.digest == before and snap.policy_version == 0
    session.rl_step(HarnessState())
    v = session.max_version
    session.restore(port.blobs.get(snap.checkpoint), v + 1)
    assert session.policy.digest() == before and session.policy_version == v + 1
    with pytest.raises(RuntimeError, match="disagree"):
        session.restore(port.blobs.get(snap.checkpoint), v + 5)


def session_rollouts(session):
    """Rollouts the main line would log next (without changing the session)."""
    from evo_core.trainer.step_events import rollout_events

    return rollout_events("r", session.fork().rl_step(HarnessState()))


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
    assert e1.item_scores == e2.item_scores and e1.n == 20 and e1.split == "validation"
    assert torch.equal(session.gen.get_state(), g)
    assert {"strict_accuracy", "strict_accuracy_greedy", "train_reward", "paid_rate", "hack_rate"} <= set(e1.metrics)
    t = session.evaluate("test")
    assert t.split == "test" and not set(t.item_scores) & set(e1.item_scores)


def test_the_reference_trains_on_the_oracle(tiny_cfg):
    session, _ = build_session(tiny_cfg(task={"reward": "oracle", "options": {"flaw": "hedge"}}), _pm())
    res = session.rl_step(HarnessState())
    for it in res.items:
        assert it.verdict.reward == (1.0 if it.completion.text.strip() == it.task.gold else 0.0)


class SomeTasksPay:
    """Only groups of tasks whose first operand is 1 mod 4 carry a learning signal."""

    name, version, kind, changes, targets, default_params = "some_pay", "1", "reward_shaping", "reward", (), {}

    def __init__(self):
        self.seen = set()  # group ids are unique per step: the first rollout of each group pays

    def new_reward(self, view, params):
        first = view.group_id not in self.seen
        self.seen.add(view.group_id)
        return 1.0 if (first and int(view.task_id.split("-")[1]) % 4 == 1) else 0.0


def test_dapo_refill_samples_until_the_batch_is_informative(tiny_cfg):
    session, _ = build_session(tiny_cfg(rl={"algorithm": "dapo", "dynamic_sampling_rounds": 8}), _pm(_registering(SomeTasksPay())))
    res = session.rl_step(_active("some_pay"))
    trained = {it.group_id for it, e in zip(res.items, res.extra) if e["advantage"] is not None}
    assert len(trained) == 4  # prompts_per_step informative groups, trimmed to size
    assert all(it.task.meta["a"] % 4 == 1 for it in res.items if it.group_id in trained)
    assert res.metrics["dynamic_sampling_rounds"] >= 1
    assert len({it.group_id for it in res.items}) > 4  # the extra groups are kept as evidence


class AlternatingReward:
    """Every group gets rewards 1, 0, 1, 0, … so every group carries a signal."""

    name, version, kind, changes, targets, default_params = "alternating", "1", "reward_shaping", "reward", (), {}

    def __init__(self):
        self.i = -1  # the core calls new_reward once per rollout, in batch order

    def new_reward(self, view, params):
        self.i += 1
        return float(self.i % 2 == 0)


@pytest.mark.parametrize("algorithm", ["grpo", "dr_grpo", "dapo"])
def test_gradient_accumulation_matches_the_whole_batch(tiny_cfg, algorithm):
    whole, _ = build_session(tiny_cfg(rl={"algorithm": algorithm}), _pm(_registering(AlternatingReward())))
    micro, _ = build_session(tiny_cfg(rl={"algorithm": algorithm, "micro_batch_size": 3}),
                             _pm(_registering(AlternatingReward())))
    before = whole.policy.digest()
    a, b = whole.rl_step(_active("alternating")), micro.rl_step(_active("alternating"))
    assert a.updated and b.updated and whole.policy.digest() != before
    assert a.metrics["loss"] == pytest.approx(b.metrics["loss"], abs=1e-5)
    for (n, p), (_, q) in zip(whole.policy.model.named_parameters(), micro.policy.model.named_parameters()):
        assert torch.allclose(p, q, atol=1e-5), n


class BatchDomain(ArithmeticDomain):
    """Grades through its optional batch methods; records how it was called."""

    name = "batchy"

    def __init__(self, broken=False):
        super().__init__()
        self.calls, self.broken = [], broken

    def configure(self, options):
        return self

    def verify_batch(self, pairs):
        self.calls.append(("verify", len(pairs)))
        out = [self.verify(t, c) for t, c in pairs]
        return out[:-1] if self.broken else out

    def oracle_batch(self, pairs):
        self.calls.append(("oracle", len(pairs)))
        return [self.oracle(t, c) for t, c in pairs]


def _batch_pm(domain):
    class P:
        @hookimpl
        def evo_register_domains(self):
            return [domain]

    return _pm(P())


def test_a_domain_with_batch_methods_grades_a_step_an_audit_and_an_evaluation_in_one_call(tiny_cfg):
    dom = BatchDomain()
    session, _ = build_session(tiny_cfg(task={"domain": "batchy", "options": {}}), _batch_pm(dom))
    res = session.rl_step(HarnessState())
    n = len(res.items)
    assert dom.calls[0] == ("verify", n)  # every rollout of the step at once
    audited = [it for it in res.items if it.strict is not None]
    assert dom.calls[1:] == ([("oracle", len(audited))] if audited else [])  # the audit sample at once
    for it in res.items:  # the verdicts are those verify gives one by one
        assert it.verdict.reward == dom.verify(it.task, it.completion).reward
    dom.calls.clear()
    e = session.evaluate()
    per = e.n * (session.eval_cfg.samples)
    assert ("oracle", per) in dom.calls and ("verify", per) in dom.calls  # the sampled completions, in one call each


def test_a_batch_method_that_answers_wrongly_stops_the_run(tiny_cfg):
    from evo_core.trainer.evaluation import VerifierFailed

    session, _ = build_session(tiny_cfg(task={"domain": "batchy", "options": {}}), _batch_pm(BatchDomain(broken=True)))
    with pytest.raises(VerifierFailed, match="returned .* items for"):
        session.rl_step(HarnessState())
