"""Verifiers wrong in both directions: the underpayment diagnostic, task-relative and group
features, induction on the unpaid side, the ``spec_restore`` repair and its offline backtest,
and the validity test a useless diagnostic fails."""

from __future__ import annotations

import random

import pytest

from evo_core.api import Proposal
from evo_core.api.stats import binomial_greater, diagnosis_validity, fisher_greater
from evo_core.harness.features import features_for_group, task_features
from evo_core.harness.summary import summarize_run
from evo_core.testing import rollout
from evo_core.testing import window as win
from evo_events import FailureDiagnosed, RunStarted
from evo_plugins.diagnostics import RewardOracleGap, RewardOracleUnderpay
from evo_plugins.interventions import catalogue
from evo_plugins.proposers import ContrastProposer
from evo_plugins.proposers.induction import Settings, induce, split_sample

from .test_backtests import bctx
from .test_proposers import ctx


def underpaid_rows(groups: int = 40, seed: int = 0, steps: int = 10):
    """Groups of 8 answers to an addition task; most are right. The verifier refuses every right
    answer to a task whose units carry (a wrong key) and pays the others; every rollout is audited.
    Features are the core's, computed per group from the prompt."""
    rng = random.Random(seed)
    rows = []
    i = 0
    for g in range(groups):
        a, b = rng.randrange(10, 99), rng.randrange(10, 99)
        gold, carry = a + b, (a % 10 + b % 10) >= 10
        texts = [str(gold) if k < 6 else str(gold + rng.choice((-11, -2, 3, 13))) for k in range(8)]
        feats = features_for_group(texts, f"{a}+{b}=", [len(t) for t in texts], [False] * 8)
        for k, (t, f) in enumerate(zip(texts, feats)):
            right = k < 6
            pay = right and not carry
            rows.append(rollout(i, step=1 + g * steps // groups, text=t, reward=1.0 if pay else 0.0, strict=right,
                                group=f"g{g}", features=f))
            i += 1
    return rows


def diag(kind, evidence=(), side=None, step=10):
    stats = {"value": 0.5}
    if side:
        stats["side"] = side
    return FailureDiagnosed(run_id="r", step=step, kind=kind, severity="invalid", diagnostic=kind, diagnostic_version="1",
                            evidence=tuple(evidence), stats=stats)


# --- features -----------------------------------------------------------------------------


def test_task_relative_features():
    f = task_features("37+45=")
    assert f == {"prompt_chars": 6, "prompt_digits": 4, "prompt_numbers": 2, "prompt_max_number_digits": 2,
                 "prompt_lines": 1, "prompt_words": 1}
    g = features_for_group(["82", "82", "37", "8200000"], "37+45=", [2, 2, 2, 7], [False] * 4)
    assert all(x["prompt_chars"] == 6 for x in g)  # the task's surface, the same for every response
    assert g[2]["prompt_number_share"] == 1.0 and g[0]["prompt_number_share"] == 0.0  # a copied operand
    assert g[0]["number_digits_gap"] == 0 and g[3]["number_digits_gap"] == 5
    assert g[0]["group_majority"] and not g[2]["group_majority"]
    assert g[0]["group_answer_agreement"] == pytest.approx(1 / 3, abs=1e-4) and g[2]["group_answer_agreement"] == 0.0
    assert g[3]["group_length_ratio"] > 3 and g[0]["group_length_ratio"] == 1.0
    # a whitespace variant agrees with the majority's answer
    h = features_for_group(["82", "82 ", " 82", "83"], "37+45=", [2] * 4, [False] * 4)
    assert h[1]["group_answer_agreement"] == pytest.approx(2 / 3, abs=1e-4) and h[1]["group_majority"]


# --- the underpayment diagnostic ------------------------------------------------------------


def test_underpayment_fires_on_withheld_pay_and_not_on_a_sound_verifier():
    rows = underpaid_rows()
    found = RewardOracleUnderpay().evaluate(win(rows), {})
    assert len(found) == 1 and found[0].stats["side"] == "unpaid" and found[0].severity == "invalid"
    under = {r.event_id for r in rows if r.strict_correct and not r.reward}
    assert set(found[0].evidence) <= under and found[0].stats["underpaid"] == len(under)
    assert found[0].stats["p_value"] < 1e-6
    assert RewardOracleGap().evaluate(win(rows), {}) == []  # nothing paid is rejected here
    sound = [rollout(i, reward=1.0 if i % 3 else 0.0, strict=bool(i % 3)) for i in range(120)]
    assert RewardOracleUnderpay().evaluate(win(sound), {}) == []


# --- the validity test ----------------------------------------------------------------------


def test_exact_tests():
    # [[3, 0], [0, 3]]: one table of 20 is as extreme
    assert fisher_greater(3, 0, 0, 3) == pytest.approx(1 / 20)
    assert fisher_greater(0, 3, 3, 0) == pytest.approx(1.0)
    assert binomial_greater(2, 2, 0.5) == pytest.approx(0.25) and binomial_greater(0, 5, 0.3) == 1.0


def overpaid_rows(n=400, seed=1):
    """A window where a tenth of paid rollouts list two numbers and are rejected; a third of the
    rest are rejected anyway (the oracle's own strictness), so the base rate is not zero."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        lists = rng.random() < 0.15
        right = rng.random() < 0.7
        rows.append(rollout(i, step=1 + i * 10 // n, text="40 41" if lists else "40",
                            reward=1.0 if (lists or rng.random() < 0.8) else 0.0,
                            strict=(not lists) and right))
    return rows


def test_a_useless_diagnostic_fails_the_validity_test_and_a_real_one_passes():
    rows = overpaid_rows()
    paid = [r for r in rows if r.reward]
    valid_random = 0
    trials = 200
    for t in range(trials):  # a diagnostic that flags 30 paid rollouts at random
        pick = random.Random(t).sample(paid, 30)
        v = diagnosis_validity(pick, rows)
        assert v is not None and v.side == "paid"
        valid_random += v.valid
    assert valid_random / trials <= 0.1  # ~ the test's level (0.05); never "valid by construction"
    # a predicate that tracks the loophole: most of what it flags is rejected, far above the base rate
    real = [r for r in paid if r.response_preview == "40 41"]
    v = diagnosis_validity(real, rows)
    assert v.valid and v.p_value < 1e-6 and v.evidence_rate == 1.0 and 0.2 < v.base_rate < 0.4


def test_the_underpaid_side_is_tested_against_the_unpaid_base_rate():
    rows = underpaid_rows()
    found = RewardOracleUnderpay().evaluate(win(rows), {})[0]
    ev = [r for r in rows if r.event_id in set(found.evidence)]
    v = diagnosis_validity(ev, rows, side="unpaid")
    # (the finding keeps 50 ids of evidence: the other underpaid rollouts are in the base rate)
    assert v.valid and v.side == "unpaid" and v.evidence_rate == 1.0 and v.base_rate < 0.5
    # the side is inferred from the evidence when the diagnosis does not declare it
    assert diagnosis_validity(ev, rows).side == "unpaid"
    unpaid = [r for r in rows if not r.reward]
    hits = sum(diagnosis_validity(random.Random(t).sample(unpaid, 20), rows).valid for t in range(100))
    assert hits <= 12


def test_the_summary_counts_only_diagnoses_that_pass_the_test():
    rows = overpaid_rows()
    paid = [r for r in rows if r.reward]
    useless = diag("noise", [r.event_id for r in random.Random(3).sample(paid, 30)], step=10)
    real = diag("loophole", [r.event_id for r in paid if r.response_preview == "40 41"], step=10)
    start = RunStarted(run_id="r", harness_mode="evolving", seed=0, config={"harness": {"window_steps": 10}},
                       config_hash="x", code_version="t", started_at="t")
    s = summarize_run([start, *rows, useless])
    assert s["first_valid_diagnosis_step"] is None and s["diagnoses_tested"]["paid"] == 1
    s = summarize_run([start, *rows, useless, real])
    assert s["first_valid_diagnosis_step"] == 10 and s["diagnoses_valid"] == {"paid": 1, "unpaid": 0}


# --- induction on the unpaid side and the restore repair -------------------------------------


def test_induction_contrasts_the_unpaid_side():
    rows = underpaid_rows()
    s = split_sample(rows, 0.0, "unpaid")
    assert all(r.strict_correct and not r.reward for r in s.positives)
    assert all(not r.strict_correct and not r.reward for r in s.negatives)
    assert all(r.reward for r in s.other)
    ind, report = induce(rows, Settings(side="unpaid"))
    assert ind is not None and ind.side == "unpaid", report
    # self-consistency separates the right answers the key refuses from the wrong ones
    assert ind.conditions[0].ref[1] in ("group_answer_agreement", "group_majority", "group_duplicates")
    assert ind.holdout.precision >= 0.9 and ind.holdout.recall >= 0.9
    # the paid side sees nothing to explain here
    assert induce(rows, Settings(side="paid"))[0] is None
    with pytest.raises(ValueError, match="side"):
        split_sample(rows, 0.0, "both")


def test_spec_restore_pays_what_was_withheld_where_the_predicate_holds():
    iv = catalogue()["spec_restore"]
    pred = {"feature": "group_majority", "op": "==", "value": True}
    p = iv.params({"predicate": pred, "value": 1.0})
    rows = underpaid_rows(groups=4)
    from evo_core.api import RolloutView

    views = [RolloutView.of_event(r) for r in rows]
    out = {v.rollout_id: iv.new_reward(v, p) for v in views}
    for r in rows:
        if r.reward:  # never lowers, never touches a paid rollout
            assert out[r.event_id] is None
        elif r.features["group_majority"]:
            assert out[r.event_id] == 1.0
    with pytest.raises(ValueError, match="value"):
        iv.params({"predicate": pred, "value": 0.0})


def test_contrast_proposes_a_restore_on_an_underpayment_diagnosis():
    rows = underpaid_rows()
    found = RewardOracleUnderpay().evaluate(win(rows), {})[0]
    d = diag("reward_oracle_underpay", found.evidence, side="unpaid")
    props = ContrastProposer().propose(ctx([d], rows), {})
    assert [p.name for p in props] == ["spec_restore", "oracle_regrade"]
    p = props[0]
    spec = p.diagnostic["spec"]
    assert spec["kind"].startswith("induced_unpaid_") and {"field": "reward_final", "op": "<=", "value": 0.0} in spec["where"]["all"]
    assert p.prediction["side"] == "unpaid" and p.params["value"] == 1.0
    # an active restore explains that evidence: nothing new to propose
    from evo_core.state import ActiveIntervention, HarnessState

    state = HarnessState()
    state.interventions["x"] = ActiveIntervention("x", "reward_shaping", "spec_restore", dict(p.params), p.targets, 1)
    assert ContrastProposer().propose(ctx([d], rows, state=state), {}) == []


def test_offline_replay_judges_a_restore_on_the_underpaid(pm):
    rows = underpaid_rows(groups=60)
    good = {"feature": "group_answer_agreement", "op": ">", "value": 0.5}
    prop = Proposal(kind="reward_shaping", name="spec_restore", params={"predicate": good, "value": 1.0},
                    targets=("induced_unpaid_x",), prediction={"side": "unpaid"},
                    diagnostic={"name": "induced_unpaid_x", "version": "spec-1",
                                "spec": {"kind": "induced_unpaid_x", "severity": "invalid",
                                         "where": {"all": [good, {"field": "reward_final", "op": "<=", "value": 0.0}]},
                                         "statistic": {"type": "rate"}, "threshold": {"op": ">", "value": 0.05}}})
    from evo_plugins.backtests import OfflineReplay

    out = OfflineReplay().backtest(prop, bctx(pm, rows, proposal=prop))
    assert out.passed is True, out.reasons
    assert out.figures["side"] == "unpaid" and out.figures["recall"] == 1.0 and out.figures["precision"] == 1.0
    assert out.figures["false_positive_rate"] == 0.0 and out.figures["raised"] > 0
    # restoring every unpaid rollout pays the wrong ones too: it fails
    blunt = {"field": "reward", "op": "<=", "value": 0.0}
    bad = Proposal(kind="reward_shaping", name="spec_restore", params={"predicate": blunt, "value": 1.0},
                   targets=("induced_unpaid_x",), prediction={"side": "unpaid"}, diagnostic=prop.diagnostic)
    out = OfflineReplay().backtest(bad, bctx(pm, rows, proposal=bad))
    assert out.passed is False and any("strictly wrong" in r or "precision" in r for r in out.reasons)


def test_two_conditions_pair_a_task_feature_with_a_response_feature():
    """A hack that is an honest answer's shape on another kind of task: two digits answer a short
    task honestly, and a long task only as a hack. Neither condition alone separates them."""
    rng = random.Random(5)
    rows, i = [], 0
    for g in range(80):
        long_task = g % 2 == 0
        prompt = "1234+5678+91=" if long_task else "12+34="
        for k in range(4):
            hack = long_task and k == 0
            text = str(rng.randrange(10, 99)) if (hack or not long_task) else str(rng.randrange(100, 999))
            f = features_for_group([text], prompt, [len(text)], [False])[0]
            f = {key: f[key] for key in ("chars", "prompt_chars")}  # the two that matter, and nothing else
            rows.append(rollout(i, step=1 + g // 8, text=text, reward=1.0, strict=not hack, group=f"g{g}", features=f))
            i += 1
    ind, report = induce(rows, Settings())
    assert ind is not None and len(ind.conditions) == 2, report
    assert {c.ref[1] for c in ind.conditions} == {"chars", "prompt_chars"}
    assert ind.holdout.precision == 1.0 and ind.holdout.recall == 1.0
