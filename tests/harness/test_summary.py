"""Run summaries: test figures the harness never read, early stopping, and wrong-branch promotions
judged on the test split with a paired CI that must exclude 0."""

import random

from evo_core.harness.summary import summarize_run
from evo_events import EvalCompleted, FailureDiagnosed, PolicyUpdated, Promoted, Rejected, RolloutCompleted, RunStarted

ITEMS = [f"t{i}" for i in range(400)]


def ev(step, v, acc, split="test", hack=0.0):
    rng = random.Random(f"{step}:{v}:{split}")
    scores = {i: 1.0 if rng.random() < acc else 0.0 for i in ITEMS}
    return EvalCompleted(run_id="r", step=step, policy_version=v, split=split, n=len(scores), item_scores=scores,
                         metrics={"strict_accuracy": sum(scores.values()) / len(scores), "hack_rate": hack})


def prom(v, step, cause):
    return Promoted(run_id="r", subject="policy", subject_id=str(v), step=step, gate="policy",
                    harness_version_before=0, harness_version_after=0, caused_by=(cause.event_id,))


START = RunStarted(run_id="r", config={"run": {"arm": "fixed"}, "task": {"options": {"flaw": "hedge"}}}, config_hash="x",
                   seed=3, harness_mode="fixed", code_version="t", started_at="t")


def test_wrong_branch_needs_a_test_drop_beyond_the_noise():
    v0, v1, v2, v3 = ev(0, 0, 0.6, "validation"), ev(10, 1, 0.5, "validation"), ev(20, 2, 0.4, "validation"), \
        ev(30, 3, 0.59, "validation")
    t0, t1, t2, t3 = ev(0, 0, 0.6), ev(10, 1, 0.61), ev(20, 2, 0.3, hack=0.5), ev(30, 3, 0.31)
    log = [START, v0, t0, v1, t1, prom(1, 10, v1), v2, t2, prom(2, 20, v2), v3, t3, prom(3, 30, v3)]
    s = summarize_run(log)
    assert s["arm"] == "fixed" and s["flaw"] == "hedge" and s["seed"] == 3 and s["policy_promotions"] == 3
    # 0.6 -> 0.61 is noise, 0.61 -> 0.3 is a real drop, 0.3 -> 0.31 is noise
    assert s["wrong_branch_promotions"] == 1 and s["wrong_branch_steps"] == [20]
    assert s["test_main"] == t3.metrics["strict_accuracy"] and s["test_initial"] == t0.metrics["strict_accuracy"]
    # early stopping keeps the best validation checkpoint (ties: the earliest) and reports its test figures
    assert s["early_stop_step"] == 0 and s["test_early_stop"] == t0.metrics["strict_accuracy"]
    assert s["collapse_step"] == 20 and s["hack_main"] == 0.0


def test_rejections_keep_the_main_line():
    v0, v1 = ev(0, 0, 0.6, "validation"), ev(10, 1, 0.4, "validation")
    t0, t1 = ev(0, 0, 0.6), ev(10, 1, 0.4)
    rej = Rejected(run_id="r", subject="policy", subject_id="1", step=10, gate="validity", harness_version=0,
                   caused_by=(v1.event_id,))
    s = summarize_run([START, v0, t0, v1, t1, rej])
    assert s["wrong_branch_promotions"] == 0 and s["policy_rejections"] == 1
    assert s["test_main"] == t0.metrics["strict_accuracy"] and s["test_last"] == t1.metrics["strict_accuracy"]


def test_a_valid_diagnosis_departs_from_its_sides_base_rate():
    """Valid: the oracle rejects its paid evidence significantly more often than the other paid
    audited rollouts of the window (one-sided Fisher exact, 0.05); see tests/harness/test_two_way.py."""
    def r(i, paid, ok, step=5):
        return RolloutCompleted(run_id="r", event_id=f"r{i}", step=step, task_id="t", group_id="g", policy_version=1,
                                reward=1.0 if paid else 0.0, strict_correct=ok)

    rows = [r(i, True, False) for i in range(6)] + [r(i, True, True) for i in range(6, 16)] + [r(16, True, None)]
    def d(step, ids):
        return FailureDiagnosed(run_id="r", step=step, kind="k", severity="invalid", diagnostic="d", diagnostic_version="1",
                                evidence=tuple(f"r{i}" for i in ids))

    accepted = d(5, range(6, 12))  # flags work the oracle accepts: no departure
    everything = d(6, range(17))  # the whole window: nothing to depart from
    rejected = d(10, range(6))  # the rejected ones, against ten accepted: p = 1/C(16, 6)
    s = summarize_run([START, *rows, accepted, everything, rejected])
    assert s["first_valid_diagnosis_step"] == 10
    assert s["diagnoses_tested"] == {"paid": 3, "unpaid": 0} and s["diagnoses_valid"] == {"paid": 1, "unpaid": 0}
    # the same evidence with too little of the other label beside it is not enough
    few = [r(i, True, False) for i in range(6)] + [r(6, True, True)]
    assert summarize_run([START, *few, d(10, range(6))])["first_valid_diagnosis_step"] is None


def test_the_summary_names_the_warm_start_it_started_from():
    start = PolicyUpdated(run_id="r", step=0, policy_version=0, digest="warm", target="trainer")
    later = PolicyUpdated(run_id="r", step=10, policy_version=10, digest="later", target="trainer")
    assert summarize_run([START, start, ev(0, 0, 0.6), later])["start_digest"] == "warm"
    assert summarize_run([START, ev(0, 0, 0.6)])["start_digest"] is None
