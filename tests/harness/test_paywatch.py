"""The pay watch (``evo_core.harness.paywatch``): a change that raises rewards is retired when
the oracle rejects the rollouts it paid significantly more often than those the verifier
paid, and the ledger does not propose the same repair with the same predicate again.

Real runs: the run loop driving a simulated learner whose verifier also *underpays* (a right
answer to a task with an odd answer is refused), with a restore installed from step 1 that
pays every unpaid single-number answer. In one run the learner's skill drifts down, so the
unpaid answers the restore pays turn wrong over time; in the other it holds, and what the
restore pays stays as right as what the verifier pays. The first is retired, the second kept.
"""

from __future__ import annotations

from typing import Any

import pytest

from evo_core.api import Proposal
from evo_core.config import config_from_dict
from evo_core.harness import paywatch
from evo_core.harness.paycheck import pay_check
from evo_core.loop import RunLoop
from evo_core.simulation import SimDomain, SimSession, sim_config
from evo_core.state import HarnessState, apply
from evo_core.store import open_store, run_stream
from evo_core.hookspecs import hookimpl
from evo_core.testing import isolated_plugins, rollout
from evo_core.trainer.oracle import OracleClient
from evo_core.trainer.port import SessionPort
from evo_events import InterventionProposed, InterventionReverted
from tests.audit import _plugins
from tests.audit._sim import replay_plugins
from tests.audit.test_replay_reproduces import check_reproduced

SINGLE = {"all": [{"feature": "numbers", "op": "==", "value": 1}]}


class UnderpayingDomain(SimDomain):
    """The simulated verifier, also refusing a lone right answer when the answer is odd."""

    def verify(self, task, completion):
        v = super().verify(task, completion)
        if v.reward and int(task.gold) % 2 and completion.text.split() == [task.gold]:
            return type(v)(reward=0.0, correct=False, signals=dict(v.signals))
        return v


class DriftingLearner(SimSession):
    """Its exploit logit is fixed; its skill falls by ``drift`` a step (0: it holds)."""

    def __init__(self, plugins: Any = None, *, drift: float = 0.0, **kw: Any) -> None:
        super().__init__(plugins, lr=0.0, skill_lr=0.0, skill=0.9, **kw)
        self.domain = UnderpayingDomain()
        self.oracle = OracleClient(self.domain)
        self.drift = drift

    def _learn(self, items) -> None:
        self.policy.skill = max(0.05, self.policy.skill - self.drift)


def _factory(drift: float):
    def build(cfg: Any, plugins: Any, *, sft: bool = True, on_sft_step: Any = None):
        from evo_core.harness.config import AuditConfig

        audit = AuditConfig.from_dict(dict(cfg.harness.get("audit") or {}))
        return DriftingLearner(plugins, seed=cfg.run.seed, audit_rate=audit.rate, drift=drift), {}
    return build


OTHER = {"all": [{"feature": "numbers", "op": "==", "value": 3}]}


class Again:
    """A proposer that, from step 15, proposes the restore again (another ``value`` each time,
    so another fingerprint) and one on a predicate never retired."""

    name, version, default_params = "again", "1", {}

    def propose(self, ctx, params):
        if ctx.step < 15:
            return []
        return [Proposal(kind="reward_shaping", name="spec_restore", params={"predicate": pred, "value": 1.0 + ctx.step / 1000},
                         targets=tuple(d.kind for d in ctx.diagnoses)[:1], proposer=self.name)
                for pred in (SINGLE, OTHER)]


class _AgainPlugin:
    @hookimpl
    def evo_register_proposers(self):
        return [Again()]


def _run(store, tmp_path, drift: float, steps: int = 40, again: bool = False) -> tuple[str, Any]:
    harness = {"audit": {"rate": 0.25}, "proposers": {"contrast": {"enabled": False}, **({"again": {}} if again else {})},
               "interventions": {"spec_restore": {"predicate": SINGLE, "value": 1.0}}}
    d = sim_config(steps=steps, seed=0, checkpoint_dir=str(tmp_path), harness=harness)
    plugins = isolated_plugins("+standard", _plugins, _AgainPlugin()) if again else replay_plugins()
    loop = RunLoop(config_from_dict(d).for_arm("evolving"), store, plugins=plugins, session_factory=_factory(drift))
    loop.start()
    loop.run()
    return loop.run_id, loop


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    store = open_store("memory://")
    ck = tmp_path_factory.mktemp("ck")
    drifting, _ = _run(store, ck, drift=0.025)
    steady, _ = _run(store, ck, drift=0.0)
    yield store, drifting, steady
    store.close()


def _reverts(store, run_id):
    return [e for e in store.events(run_stream(run_id)) if isinstance(e, InterventionReverted)]


def test_a_restore_whose_payments_turn_wrong_is_retired(runs):
    store, run_id, _ = runs
    (rev,) = [e for e in _reverts(store, run_id) if e.proposal_id == "config:spec_restore"]
    f = rev.figures
    assert f["check"] == "pays_rejected" and f["intervention"] == "spec_restore" and f["alpha"] == 0.05
    v = f["against_verifier"]
    assert v["p_value"] < v["alpha"] == 0.025 and v["paid_rejection_rate"] > v["control_rejection_rate"]
    assert f["against_before"] is None  # installed from the start: there is no before
    assert rev.step > 5, "it paid right answers at first: the watch must not fire from the start"
    assert rev.caused_by and "pay watch" in rev.reason
    # the fold remembers the pair, so the ledger blocks it
    state = HarnessState()
    for e in store.events(run_stream(run_id)):
        apply(state, e)
    assert "config:spec_restore" not in state.interventions
    assert paywatch.blocked(state, "spec_restore", {"predicate": SINGLE, "value": 0.5})
    assert not paywatch.blocked(state, "oracle_regrade", {"predicate": SINGLE})


def test_the_ledger_does_not_propose_the_retired_repair_again(tmp_path):
    store = open_store("memory://")
    run_id, _ = _run(store, tmp_path, drift=0.025, steps=30, again=True)
    evs = list(store.events(run_stream(run_id)))
    (rev,) = [e for e in evs if isinstance(e, InterventionReverted) and e.proposal_id == "config:spec_restore"]
    proposed = [e for e in evs if isinstance(e, InterventionProposed) and e.proposer == "again"]
    assert rev.step < 15 and proposed, "the proposer was asked after the retirement"
    assert all(e.params["predicate"] == OTHER for e in proposed)


def test_a_restore_that_pays_right_answers_is_kept(runs):
    store, _, run_id = runs
    assert not [e for e in _reverts(store, run_id) if e.proposal_id == "config:spec_restore"]


def test_replay_reproduces_the_retirement(runs):
    store, run_id, _ = runs
    harness = check_reproduced(store, run_id)
    assert any(isinstance(e, InterventionReverted) and e.figures.get("check") == "pays_rejected" for e in harness)


def test_the_pay_check_fails_both_ways():
    ok = [rollout(i, reward=0.0, strict=True) for i in range(20)]
    bad = [rollout(100 + i, reward=0.0, strict=i < 5) for i in range(20)]
    control = [rollout(200 + i, reward=1.0, strict=i >= 2) for i in range(40)]
    assert not pay_check(ok, control).loophole
    c = pay_check(bad, control)
    assert c.loophole and (c.paid, c.paid_rejected, c.control, c.control_rejected) == (20, 15, 40, 2)
    assert len(c.evidence) == 15
    assert pay_check([], control).p_value is None and not pay_check(bad, []).loophole


def _comma_like(step: int, right_share: float, n: int = 60, start: int = 0):
    """One step's rollouts under a verifier that pays only a wrong form (every paid rollout is
    rejected) and leaves every bare answer unpaid; ``right_share`` of the bare ones are right."""
    rows = []
    for i in range(n):
        bare = i % 3 != 0
        right = bare and (i * 7919 % 100) < 100 * right_share
        rows.append(rollout(start + i, step=step, text="57" if bare else "57,", reward=0.0 if bare else 1.0,
                            reward_final=1.0, strict=right if bare else False))
    return rows


@pytest.mark.parametrize("later_right, retired", [(0.2, True), (0.9, False)])
def test_a_promoted_restore_is_judged_against_what_it_was_promoted_on(later_right, retired):
    """Against the verifier alone, nothing could be worse than a verifier whose payments are
    all wrong; against the window before its promotion, a restore whose payments turn wrong
    is retired, and one whose payments stay right is kept."""
    from evo_core.state import ActiveIntervention
    from evo_plugins.interventions import catalogue

    before = [r for s in range(1, 11) for r in _comma_like(s, 0.9, start=1000 * s)]
    for r in before:  # before the promotion training paid only the verifier's
        object.__setattr__(r, "reward_final", r.reward)
    after = [r for s in range(11, 16) for r in _comma_like(s, later_right, start=1000 * s)]
    state = HarnessState()
    state.interventions["p"] = ActiveIntervention("p", "reward_shaping", "spec_restore",
                                                  {"predicate": SINGLE, "value": 1.0}, ("x",), 1, step=10)
    (w,) = paywatch.watch(state, catalogue(), after, before + after, window_steps=10).values()
    assert w.verifier.control_rate == 1.0 and not w.verifier.loophole
    assert w.before is not None and w.before.control_rate < 0.2
    assert w.loophole is retired
    if retired:
        (ev,) = paywatch.retire_events("r", 15, state, state.interventions["p"], w)
        assert ev.figures["against_before"]["p_value"] < 0.025 and "before its promotion" in ev.reason


def test_a_blocked_pair_is_folded_and_only_that_pair():
    state = HarnessState()
    key = paywatch.predicate_key("spec_restore", {"predicate": SINGLE})
    apply(state, InterventionReverted(run_id="r", proposal_id="p", step=3, harness_version_before=1,
                                      harness_version_after=2, figures={"blocks": key}))
    assert state.blocked_repairs == [key] and state.harness_version == 2
    other = {"all": [{"feature": "numbers", "op": "==", "value": 2}]}
    assert not paywatch.blocked(state, "spec_restore", {"predicate": other})
    apply(state, InterventionReverted(run_id="r", proposal_id="q", step=4, harness_version_before=2,
                                      harness_version_after=3))
    assert state.blocked_repairs == [key]



# --- the backtests' veto -------------------------------------------------------------------


RESTORE = Proposal(kind="reward_shaping", name="spec_restore", params={"predicate": SINGLE, "value": 1.0},
                   targets=("induced_unpaid_x",), prediction={"side": "unpaid"})


def _online(pm, sess):
    from evo_plugins.backtests import OnlineAB

    from .test_backtests import bctx, hacked_window

    trainer = SessionPort(sess, open_store("memory://").blobs, "r")
    return OnlineAB().backtest(RESTORE, bctx(pm, hacked_window(), trainer=trainer, proposal=RESTORE))


def test_online_ab_refuses_a_restore_whose_treatment_pays_wrong_answers(pm):
    # the plain simulated verifier never underpays: every unpaid single answer is wrong
    out = _online(pm, SimSession(pm, seed=3, h=-2.0))
    pc = out.figures["pay_check"]["against_control_paid"]
    assert pc["paid_rejection_rate"] == 1.0 and pc["p_value"] < pc["alpha"] == 0.025
    assert out.passed is False and any("pays oracle-rejected" in r for r in out.reasons)


def test_online_ab_lets_a_restore_of_right_answers_through_the_pay_check(pm):
    out = _online(pm, DriftingLearner(pm, seed=3, drift=0.0))
    for pc in out.figures["pay_check"].values():
        assert pc["paid_audited"] > 20 and pc["p_value"] > 0.025
    assert not any("pays oracle-rejected" in r for r in out.reasons)


def test_offline_replay_refuses_a_restore_that_would_pay_wrong_answers(pm):
    from evo_plugins.backtests import OfflineReplay

    from .test_backtests import bctx

    def rows(wrong_share: float):
        out = []
        for i in range(200):
            unpaid = i % 2 == 0
            right = (i // 2) % 10 >= 10 * wrong_share if unpaid else i % 20 != 1
            out.append(rollout(i, step=1 + i // 20, text="57" if right or unpaid else "57 58",
                               reward=0.0 if unpaid else 1.0, strict=right))
        return out

    bad = OfflineReplay().backtest(RESTORE, bctx(pm, rows(0.5), proposal=RESTORE))
    assert bad.passed is False and bad.reasons[0].startswith("pays oracle-rejected")
    assert bad.figures["pay_check"]["paid_rejected"] == 50 and bad.figures["pay_check"]["control_rejected"] == 10
    good = OfflineReplay().backtest(RESTORE, bctx(pm, rows(0.0), proposal=RESTORE))
    assert not good.figures["pay_check"]["paid_rejected"] and not any("pays oracle-rejected" in r for r in good.reasons)
