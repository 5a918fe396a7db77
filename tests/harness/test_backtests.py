"""Offline replay and the online A/B: each passes on a real fix and fails (or abstains) otherwise."""

import attrs

from conftest import mk, win
from evo_core.harness import BacktestContext, HarnessConfig, Proposal
from evo_core.harness.engine import HarnessEngine
from evo_core.state import HarnessState
from evo_events import FailureDiagnosed
from evo_plugins.backtests import OfflineReplay, OnlineAB
from evo_plugins.interventions import catalogue
from harness_sim import SimSession


def hacked_window():
    rows = []
    for s in range(1, 11):
        for i in range(16):
            hedged = i < 6
            strict = None if i % 2 else (not hedged and i < 12)
            rows.append(mk(i, step=s, answers=2 if hedged else 1, reward=1.0 if hedged or i < 12 else 0.0, strict=strict))
    return rows


def diag(kind="answer_hedging", severity="invalid"):
    return FailureDiagnosed(run_id="r", step=10, kind=kind, severity=severity, diagnostic=kind, diagnostic_version="1",
                            stats={"value": 0.4})


def bctx(pm, rows, diagnoses=(diag(),), session=None, config=None, state=None):
    config = config or HarnessConfig.from_dict({"backtest": {"k_steps": 6, "min_n": 30, "n_boot": 300}})
    eng = HarnessEngine(config, pm, run_id="r")
    state = state or HarnessState()
    return BacktestContext(run_id="r", step=10, state=state, window=win(rows), config=config, interventions=catalogue(),
                           diagnostics=eng.diag_catalog, diagnoses=tuple(diagnoses), session=session, seed=1,
                           history=tuple(rows), diagnose=eng._diagnose_window, measure=eng.measure_kind,
                           resolve=eng.resolve_diagnostic)


P_PENALTY = Proposal(kind="reward_shaping", name="multi_answer_penalty", params={"penalty": 1.0},
                     targets=("answer_hedging",))


def test_offline_penalty_hits_invalid_not_genuine(pm):
    out = OfflineReplay().backtest(P_PENALTY, bctx(pm, hacked_window()))
    assert out.passed is True and out.figures["recall"] == 1.0 and out.figures["false_positive_rate"] == 0.0
    assert out.figures["gap_after"] < out.figures["gap_before"] and out.evidence


def test_offline_rejects_a_rule_that_punishes_genuine_work(pm):
    # an overlong penalty with a tiny limit hits every rollout, correct ones included
    p = Proposal(kind="reward_shaping", name="overlong_penalty", params={"max_len": 2, "cache": 1}, targets=("answer_hedging",))
    out = OfflineReplay().backtest(p, bctx(pm, hacked_window()))
    assert out.passed is False and any("genuinely correct" in r for r in out.reasons)


def test_offline_no_decision_without_audited_invalid(pm):
    rows = [mk(i, step=s, strict=None) for s in range(1, 5) for i in range(10)]
    assert OfflineReplay().backtest(P_PENALTY, bctx(pm, rows)).passed is None
    hp = Proposal(kind="hyperparameter", name="hyperparameter", params={"set": {"temperature": 1.2}}, targets=("entropy_collapse",))
    out = OfflineReplay().backtest(hp, bctx(pm, hacked_window()))
    assert out.passed is None and "cannot" in out.reasons[0]


def test_offline_diagnostic_spec_precision_recall(pm):
    from evo_plugins.proposers.rules import MULTI_ANSWER_REWARDED_SPEC

    good = Proposal(kind="diagnostic", name="diagnostic_revision", targets=("reward_oracle_gap",),
                    params={"diagnostic": "multi_answer_rewarded", "version": "spec-1", "params": {},
                            "spec": dict(MULTI_ANSWER_REWARDED_SPEC, min_n=8)})
    out = OfflineReplay().backtest(good, bctx(pm, hacked_window()))
    assert out.passed is True and out.figures["precision"] == 1.0 and out.figures["recall"] == 1.0
    assert out.figures["would_fire_at_steps"]
    # a spec that flags every rewarded rollout also flags genuine ones: rejected
    loose = dict(MULTI_ANSWER_REWARDED_SPEC, where={"field": "reward", "op": ">=", "value": 1})
    bad = attrs.evolve(good, params={**good.params, "spec": loose})
    out2 = OfflineReplay().backtest(bad, bctx(pm, hacked_window()))
    assert out2.passed is False and out2.figures["false_positive_rate"] == 1.0


def test_online_ab_passes_a_real_fix(pm):
    sess = SimSession(pm, seed=3, hedge_logit=0.5)
    out = OnlineAB().backtest(P_PENALTY, bctx(pm, hacked_window(), session=sess))
    assert out.passed is True, out.reasons
    assert out.ci[0] > 0 and out.n == 60 and out.figures["fingerprint_ok"] is True
    assert out.figures["fingerprint"]["answer_hedging"]["treatment"] < out.figures["fingerprint"]["answer_hedging"]["control"]
    assert sess.step == 0  # the live session was forked, never trained


def test_online_ab_fails_a_change_that_does_nothing(pm):
    sess = SimSession(pm, seed=3, hedge_logit=0.5)
    noop = Proposal(kind="prompt_hint", name="prompt_hint", params={"hint": "be good"}, targets=("answer_hedging",))
    out = OnlineAB().backtest(noop, bctx(pm, hacked_window(), session=sess))
    assert out.passed is False and any("does not exclude" in r for r in out.reasons)


def test_online_ab_no_decision_below_min_n(pm):
    sess = SimSession(pm, seed=3, hedge_logit=0.5, heldout=10)
    out = OnlineAB().backtest(P_PENALTY, bctx(pm, hacked_window(), session=sess))
    assert out.passed is None and "no decision" in out.reasons[0]
    assert OnlineAB().backtest(P_PENALTY, bctx(pm, hacked_window(), session=None)).passed is None
