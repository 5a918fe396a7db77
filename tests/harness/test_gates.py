"""Gates: validity vetoes outrank score; the statistical gate needs evidence; the policy gate guards the main line."""

from evo_core.api import BacktestOutcome, Candidate, GateContext, Proposal
from evo_core.harness import HarnessConfig
from evo_core.state import DiagnosisRecord, HarnessState
from evo_core.testing import rollout as mk
from evo_events import EvalCompleted
from evo_plugins.gates import PolicyGate, StatisticalGate, ValidityGate

EVOLVING, FIXED = HarnessConfig(), HarnessConfig.from_dict({"mode": "fixed"})


def gctx(diagnoses=(), config=EVOLVING):
    return GateContext(run_id="r", step=10, state=HarnessState(), config=config, diagnoses=tuple(diagnoses))


def ev(acc, v=1):
    return EvalCompleted(run_id="r", step=10 * v, policy_version=v, split="validation", n=100, metrics={"strict_accuracy": acc})


INVALID = DiagnosisRecord("d1", 10, "reward_oracle_gap", "invalid", "reward_oracle_gap", "2")
WARN = DiagnosisRecord("d2", 10, "truncation", "warning", "truncation_rate", "1")


def pol(acc, main=0.5, reward=0.9, main_reward=0.7, rollouts=()):
    return Candidate(subject="policy", subject_id="2", step=10, eval=ev(acc, 2), main_eval=ev(main, 1),
                     train_reward=reward, main_train_reward=main_reward, rollouts=tuple(rollouts))


def test_validity_vetoes_an_invalid_branch_even_with_higher_score():
    d = ValidityGate().decide(pol(0.9), gctx([INVALID]), {})
    assert d.veto and not d.passed and "reward_oracle_gap" in d.reasons[0]
    assert ValidityGate().decide(pol(0.9), gctx([WARN]), {}).passed  # warnings do not veto


def test_validity_vetoes_strict_oracle_failures():
    rows = [mk(i, reward=1.0, strict=i % 2 == 0) for i in range(20)]
    d = ValidityGate().decide(pol(0.9, rollouts=rows), gctx(), {})
    assert d.veto and "strict oracle" in d.reasons[0]
    ok = [mk(i, reward=1.0, strict=True) for i in range(20)]
    assert ValidityGate().decide(pol(0.9, rollouts=ok), gctx(), {}).passed


def test_validity_abstains_in_fixed_mode_and_checks_treatment_branches():
    assert ValidityGate().decide(pol(0.1), gctx([INVALID], FIXED), {}).abstain
    p = Proposal(kind="reward_shaping", name="spec_penalty", params={}, targets=("induced_x",))
    bad = BacktestOutcome(backtester="online_ab", mode="online", passed=True, figures={"treatment_new_invalid": ["format_violation"]})
    c = Candidate(subject="intervention", subject_id="p", step=1, proposal=p, backtests=(bad,))
    assert ValidityGate().decide(c, gctx(), {}).veto


def icand(*outcomes):
    p = Proposal(kind="reward_shaping", name="spec_penalty", params={}, targets=("induced_x",))
    return Candidate(subject="intervention", subject_id="p", step=1, proposal=p, backtests=tuple(outcomes))


OFF_OK = BacktestOutcome(backtester="offline_replay", mode="offline", passed=True, reasons=("ok",))
ON_OK = BacktestOutcome(backtester="online_ab", mode="online", passed=True, ci=(0.05, 0.2), figures={"worse_fraction": 0.05})


def test_statistical_gate_passes_with_evidence():
    assert StatisticalGate().decide(icand(OFF_OK, ON_OK), gctx(), {}).passed
    assert StatisticalGate().decide(icand(OFF_OK), gctx(), {}).passed  # offline-only (ablation)


def test_statistical_gate_rejects():
    g, c = StatisticalGate(), gctx()
    assert not g.decide(icand(), c, {}).passed
    assert not g.decide(icand(BacktestOutcome(backtester="offline_replay", mode="offline", passed=False, reasons=("x",))), c, {}).passed
    none = BacktestOutcome(backtester="online_ab", mode="online", passed=None, reasons=("no decision: 3 paired items",))
    assert "no decision" in g.decide(icand(OFF_OK, none), c, {}).reasons[0]
    # the backtesters own their statistics (interval, regression cap): the gate reads their verdicts
    failed_online = BacktestOutcome(backtester="online_ab", mode="online", passed=False,
                                    reasons=("accuracy CI [-0.050, +0.010] does not clear -0.030",))
    assert "does not clear" in g.decide(icand(OFF_OK, failed_online), c, {}).reasons[0]
    only_none = BacktestOutcome(backtester="offline_replay", mode="offline", passed=None, reasons=("cannot",))
    assert not g.decide(icand(only_none), c, {}).passed


def test_policy_gate_strict_in_evolving_mode():
    g = PolicyGate()
    assert g.decide(pol(0.6, main=0.5), gctx(), {}).passed
    assert g.decide(pol(0.5, main=0.5), gctx(), {}).passed  # "does not fall"
    d = g.decide(pol(0.4, main=0.5, reward=1.0), gctx(), {})
    assert not d.passed and "fell" in d.reasons[0]
    assert g.decide(pol(0.45, main=0.5), gctx(), {"tolerance": 0.1}).passed


def test_policy_gate_trusts_reward_in_fixed_mode():
    g = PolicyGate()
    assert g.decide(pol(0.1, main=0.9, reward=0.9, main_reward=0.7), gctx(config=FIXED), {}).passed  # the hack gets through
    assert not g.decide(pol(0.9, main=0.1, reward=0.5, main_reward=0.7), gctx(config=FIXED), {}).passed
