"""Run summaries: wrong-branch promotions are judged by the oracle labels in the log."""

from evo_core.harness.summary import summarize_run
from evo_events import EvalCompleted, Promoted, Rejected, RunStarted


def ev(step, v, acc):
    return EvalCompleted(run_id="r", step=step, policy_version=v, split="heldout", n=100, metrics={"strict_accuracy": acc})


def prom(e, step):
    return Promoted(run_id="r", subject="policy", subject_id=str(e.policy_version), step=step, gate="policy",
                    harness_version_before=0, harness_version_after=0, caused_by=(e.event_id,))


def test_wrong_branch_counts_promotions_below_the_replaced_main_line():
    e0, e1, e2, e3 = ev(0, 0, 0.6), ev(10, 1, 0.65), ev(20, 2, 0.4), ev(30, 3, 0.3)
    log = [RunStarted(run_id="r", config={}, config_hash="x", seed=0, harness_mode="fixed", code_version="t", started_at="t"),
           e0, e1, prom(e1, 10), e2, prom(e2, 20), e3, prom(e3, 30)]
    s = summarize_run(log)
    assert s["mode"] == "fixed" and s["policy_promotions"] == 3
    assert s["wrong_branch_promotions"] == 2 and s["wrong_branch_steps"] == [20, 30]
    assert s["final_main_strict"] == 0.3 and s["initial_strict"] == 0.6


def test_rejections_keep_the_main_line():
    e0, e1, e2 = ev(0, 0, 0.6), ev(10, 1, 0.4), ev(20, 2, 0.62)
    rej = Rejected(run_id="r", subject="policy", subject_id="1", step=10, gate="validity", harness_version=1,
                   caused_by=(e1.event_id,))
    s = summarize_run([e0, e1, rej, e2, prom(e2, 20)])
    assert s["wrong_branch_promotions"] == 0 and s["policy_rejections"] == 1 and s["final_main_strict"] == 0.62
    assert summarize_run([e0, e1, rej])["final_main_strict"] == 0.6  # nothing promoted: the start stays main
