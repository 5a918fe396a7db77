"""Offline replay and the online A/B: each passes on a real fix and fails (or abstains) otherwise."""

import attrs
import pytest

from evo_core.api import BacktestContext, Proposal
from evo_core.harness.config import HarnessConfig
from evo_core.harness import backtesting
from evo_core.harness.diagnosis import Diagnoses, with_watched
from evo_core.simulation import SimSession
from evo_core.state import HarnessState
from evo_core.store import open_store
from evo_core.testing import rollout
from evo_core.testing import window as win
from evo_core.trainer.port import SessionPort
from evo_events import FailureDiagnosed
from evo_plugins.backtests import OfflineReplay, OnlineAB
from evo_plugins.interventions import catalogue

LISTS = {"feature": "numbers", "op": ">", "value": 1}  # "more than one number": the sim's loophole
SPEC = {"kind": "induced_lists", "severity": "invalid", "population": {"field": "split", "op": "==", "value": "train"},
        "where": {"all": [LISTS, {"field": "reward", "op": ">", "value": 0}]}, "statistic": {"type": "rate"},
        "threshold": {"op": ">", "value": 0.05}, "min_n": 8}


def hacked_window():
    rows = []
    for s in range(1, 11):
        for i in range(16):
            hedged = i < 6
            strict = None if i % 2 else (not hedged and i < 12)
            text = f"{40 + i} {41 + i}" if hedged else str(40 + i)
            rows.append(rollout(i, step=s, text=text, reward=1.0 if hedged or i < 12 else 0.0, strict=strict))
    return rows


def diag(kind="reward_oracle_gap", severity="invalid"):
    return FailureDiagnosed(run_id="r", step=10, kind=kind, severity=severity, diagnostic=kind, diagnostic_version="2",
                            stats={"value": 0.4})


def bctx(pm, rows, diagnoses=(diag(),), trainer=None, config=None, state=None, proposal=None):
    """The context the engine's pass builds for ``proposal`` (arms and the diagnostics reader included)."""
    config = config or HarnessConfig.from_dict({"backtest": {"k_steps": 6, "replicates": 3, "min_n": 30, "n_boot": 300}})
    diags = Diagnoses(config.diagnostics, pm.diagnostics())
    state = state or HarnessState()
    watched = with_watched(state, proposal.diagnostic) if proposal is not None else state
    arms = None
    if proposal is not None:
        arms = backtesting.arms(state, proposal, bool(getattr(catalogue().get(proposal.name), "restore_main", False)))
    return BacktestContext(run_id="r", step=10, state=state, window=win(rows), config=config,
                           interventions=catalogue(), diagnostics=pm.diagnostics(), diagnoses=tuple(diagnoses),
                           trainer=trainer, seed=1, history=tuple(rows), reader=diags.view(watched, "r", 10), arms=arms)


PENALTY = Proposal(kind="reward_shaping", name="spec_penalty", params={"predicate": LISTS}, targets=("induced_lists",),
                   diagnostic={"name": "induced_lists", "version": "spec-1", "spec": SPEC})


def test_offline_penalty_hits_invalid_not_genuine(pm):
    out = OfflineReplay().backtest(PENALTY, bctx(pm, hacked_window()))
    assert out.passed is True and out.figures["recall"] == 1.0 and out.figures["false_positive_rate"] == 0.0
    assert out.figures["gap_after"] < out.figures["gap_before"] and out.evidence


def test_offline_judges_a_learned_change_only_on_rollouts_it_was_not_fitted_on(pm):
    rows = hacked_window()
    audited = [r.event_id for r in rows if r.strict_correct is not None]
    learned = attrs.evolve(PENALTY, prediction={"fitted_on": audited[: len(audited) // 2]})
    out = OfflineReplay().backtest(learned, bctx(pm, rows))
    assert out.figures["judged_on_unseen"] and out.figures["audited_invalid"] + out.figures["audited_genuine"] < len(audited)
    assert out.figures["replayed"] == len(rows) - len(audited) // 2


def test_offline_rejects_a_rule_that_punishes_genuine_work(pm):
    # a predicate that flags every paid rollout hits the correct ones too
    p = attrs.evolve(PENALTY, params={"predicate": {"field": "reward", "op": ">", "value": 0}})
    out = OfflineReplay().backtest(p, bctx(pm, hacked_window()))
    assert out.passed is False and any("genuinely correct" in r for r in out.reasons)


def test_offline_regrade_and_screen_replay_on_audited_labels(pm):
    for name in ("oracle_regrade", "spec_screen", "rollback"):
        p = attrs.evolve(PENALTY, kind=catalogue()[name].kind, name=name)
        out = OfflineReplay().backtest(p, bctx(pm, hacked_window()))
        assert out.passed is True and out.figures["recall"] == 1.0 and out.figures["false_positive_rate"] == 0.0, name


def test_offline_no_decision_without_audited_invalid(pm):
    rows = [rollout(i, step=s, strict=None) for s in range(1, 5) for i in range(10)]
    assert OfflineReplay().backtest(PENALTY, bctx(pm, rows)).passed is None
    hp = Proposal(kind="hyperparameter", name="hyperparameter", params={"set": {"temperature": 1.2}}, targets=("entropy_collapse",))
    out = OfflineReplay().backtest(hp, bctx(pm, hacked_window()))
    assert out.passed is None and "cannot" in out.reasons[0]


def test_offline_diagnostic_spec_precision_recall(pm):
    good = Proposal(kind="diagnostic", name="diagnostic_revision", targets=("reward_oracle_gap",),
                    params={"diagnostic": "induced_lists", "version": "spec-1", "params": {}, "spec": SPEC})
    out = OfflineReplay().backtest(good, bctx(pm, hacked_window()))
    assert out.passed is True and out.figures["precision"] == 1.0 and out.figures["recall"] == 1.0
    assert out.figures["would_fire_at_steps"]
    # a spec that flags every rewarded rollout also flags genuine ones: rejected
    loose = dict(SPEC, where={"field": "reward", "op": ">=", "value": 1})
    bad = attrs.evolve(good, params={**good.params, "spec": loose})
    out2 = OfflineReplay().backtest(bad, bctx(pm, hacked_window()))
    assert out2.passed is False and out2.figures["false_positive_rate"] == 1.0


@pytest.fixture
def port(pm):
    sess = SimSession(pm, seed=3, h=0.5)
    return sess, SessionPort(sess, open_store("memory://").blobs, "r")


def test_online_ab_passes_a_real_fix(pm, port):
    sess, trainer = port
    out = OnlineAB().backtest(PENALTY, bctx(pm, hacked_window(), trainer=trainer, proposal=PENALTY))
    assert out.passed is True, out.reasons
    assert out.n == 60 and out.figures["replicates"] == 3 and len(out.figures["pair_diffs"]) == 3
    fp = out.figures["fingerprint"]
    assert out.figures["fingerprint_ok"] is True and fp["treatment"] < fp["control"] and fp["ci"][1] < 0
    assert out.figures["interval"] == "t over pairs"
    assert sess.step == 0  # the live session was forked, never trained


def test_online_ab_a_no_op_never_passes(pm, port):
    _, trainer = port
    noop = Proposal(kind="prompt_hint", name="prompt_hint", params={"hint": "be good"}, targets=("induced_lists",),
                    diagnostic=PENALTY.diagnostic)
    out = OnlineAB().backtest(noop, bctx(pm, hacked_window(), trainer=trainer, proposal=noop))
    # paired branches with the same seed and no change are identical: nothing falls, nothing improves
    assert out.passed is False and out.figures["fingerprint"]["changes"] == [0.0, 0.0, 0.0]
    assert out.figures["pair_diffs"] == [0.0, 0.0, 0.0]


def test_online_ab_without_a_checkable_target_needs_an_improvement(pm, port):
    _, trainer = port
    blind = attrs.evolve(PENALTY, targets=("nothing_measures_this",), diagnostic=None)
    out = OnlineAB().backtest(blind, bctx(pm, hacked_window(), trainer=trainer, proposal=blind))
    assert out.figures["fingerprint_ok"] is None
    assert out.passed is (out.figures["accuracy_ci"][0] > 0)


def test_online_rollback_starts_treatment_from_the_main_line(pm):
    sess = SimSession(pm, seed=3, h=2.0)  # the loophole already took over the current weights
    store = open_store("memory://")
    trainer = SessionPort(sess, store.blobs, "r")
    main = SimSession(pm, seed=3, h=-3.0)
    state = HarnessState()
    state.main.checkpoint = {"digest": (ref := store.blobs.put(main.weights_bytes(), "x")).digest, "size": ref.size,
                             "media_type": ref.media_type}
    rollback = attrs.evolve(PENALTY, kind="reward_shaping", name="rollback")
    out = OnlineAB().backtest(rollback, bctx(pm, hacked_window(), trainer=trainer, state=state, proposal=rollback))
    assert out.figures["rollback"] is True and out.figures["treatment_strict"] > out.figures["control_strict"]
    assert out.passed is True, out.reasons


def test_online_ab_no_decision_below_min_n(pm):
    sess = SimSession(pm, seed=3, h=0.5, validation=10)
    trainer = SessionPort(sess, open_store("memory://").blobs, "r")
    out = OnlineAB().backtest(PENALTY, bctx(pm, hacked_window(), trainer=trainer, proposal=PENALTY))
    assert out.passed is None and "no decision" in out.reasons[0]
    assert OnlineAB().backtest(PENALTY, bctx(pm, hacked_window(), trainer=None, proposal=PENALTY)).passed is None
