"""``[harness.oracle] budget`` caps the decision-relevant oracle labels of a run (audit,
re-grades, validation; main line and A/B branches together), never the test split's; a draw
the budget cannot pay is shrunk or skipped and the refusal is in the log; and a resumed run
folds what it spent from its log, so the count is exact across a stop (issue 33)."""

import pytest

from evo_core.api import Completion, Task
from evo_core.config import ConfigError, config_from_dict
from evo_core.loop import RunLoop, resume_run
from evo_core.store import open_store, run_stream
from evo_core.testing import isolated_plugins
from evo_core.trainer.oracle import (
    CAPPED,
    LabelCounts,
    OracleBudgetExceeded,
    OracleClient,
    budget_labels,
    label_summary,
    label_totals,
)
from evo_events import BacktestInconclusive, EvalCompleted, StepCompleted

from .test_oracle_labels import CountingDomain, _plugin
from .testlib import tiny_config_dict

STEPS = 4  # x 4 prompts x 4 samples: 64 nominal training rollouts


def _cfg(tmp_path, budget, arm="evolving"):
    h = {"diagnose_every": 2, "window_steps": 2, "audit": {"rate": 0.5}, "backtest": {"k_steps": 1}}
    if budget is not None:
        h["oracle"] = {"budget": budget}
    d = tiny_config_dict(tmp_path, run={"steps": STEPS, "eval_every": 2, "harnesses": [arm]},
                         task={"domain": "counted", "options": {}}, eval={"samples": 2, "greedy": True}, harness=h)
    return config_from_dict(d).for_arm(arm)


def _pm(dom):
    pm = isolated_plugins("evo_arithmetic.plugin", "+standard")
    pm.register(_plugin(dom), name="counted_plugin")
    return pm


def _run(tmp_path, budget, arm="evolving"):
    dom = CountingDomain()
    store = open_store("memory://")
    loop = RunLoop(_cfg(tmp_path, budget, arm), store, plugins=_pm(dom))
    loop.start()
    loop.run()
    return loop, list(store.events(run_stream(loop.run_id))), dom


def _capped(totals):
    return sum(n for k, n in totals.items() if k.split(".")[-1] in CAPPED)


def _budget_metrics(events):
    return [(e.step, {k: v for k, v in e.metrics.items() if k.startswith("oracle_budget.")})
            for e in events if isinstance(e, StepCompleted)]


# --- the counter --------------------------------------------------------------------------------


def test_the_counts_pay_what_is_left_and_record_the_rest():
    c = LabelCounts(limit=10)
    c.add("main", "audit", 6)
    assert c.left() == 4 and c.affordable("audit", 3) == 3
    assert c.affordable("audit", 7) == 4  # shrunk: 3 refused
    assert not c.can_pay("validation", 5) and c.can_pay("validation", 4)
    assert c.affordable("test", 1000) == 1000 and c.affordable("train", 1000) == 1000  # never capped
    c.add("branch", "validation", 4)
    assert c.left() == 0
    assert c.take_budget() == {"oracle_budget.left": 0.0, "oracle_budget.refused.audit": 3.0,
                               "oracle_budget.refused.validation": 5.0}
    assert c.take_budget() == {"oracle_budget.left": 0.0}  # refusals are handed out once
    assert LabelCounts().left() is None and LabelCounts().take_budget() == {}


def test_a_resumed_count_starts_from_what_the_log_holds():
    c = LabelCounts(limit=100)
    c.resumed({"main.audit": 30, "branch.validation": 50, "main.test": 999, "main.train": 999})
    assert c.spent() == 80 and c.left() == 20


def test_the_client_refuses_a_capped_draw_the_budget_cannot_pay():
    client = OracleClient(CountingDomain(), counts=LabelCounts(limit=1))
    t = Task(task_id="a", prompt="1+1=", gold="2")
    pairs = [(t, Completion(text="2")), (t, Completion(text="3"))]
    with pytest.raises(OracleBudgetExceeded, match="2 audit label"):
        client.grade("audit", pairs)
    assert client.counts.total() == 0  # nothing was drawn
    client.grade("test", pairs)  # report-only: never capped
    client.grade_one("regrade", t, Completion(text="2"))
    with pytest.raises(OracleBudgetExceeded):
        client.for_branch().grade_one("validation", t, Completion(text="2"))  # forks share the budget


def test_the_budget_is_a_share_of_the_nominal_training_rollouts():
    assert budget_labels(1.5, prompts_per_step=32, group_size=8, steps=200) == 76_800
    assert budget_labels(0.0, prompts_per_step=32, group_size=8, steps=200) == 0


@pytest.mark.parametrize("value,msg", [(-0.1, ">= 0"), (float("nan"), "finite"), ("lots", "number"), (True, "number")])
def test_a_bad_budget_is_a_clear_config_error(tmp_path, value, msg):
    d = tiny_config_dict(tmp_path, harness={"oracle": {"budget": value}})
    with pytest.raises(ConfigError, match=r"harness\.oracle\.budget.*" + msg):
        config_from_dict(d)
    d = tiny_config_dict(tmp_path, harness={"oracle": {"budgte": 1.0}})
    with pytest.raises(ConfigError, match="budgte"):
        config_from_dict(d)


# --- in a run -------------------------------------------------------------------------------------


def test_an_unset_budget_caps_nothing(tmp_path):
    loop, events, _ = _run(tmp_path, None)
    assert loop.session.oracle.counts.limit is None
    assert all(m == {} for _, m in _budget_metrics(events))
    assert label_totals(events)["branch.validation"] > 0  # the A/B ran


def test_a_run_never_draws_more_capped_labels_than_its_budget_and_logs_what_it_refused(tmp_path):
    loop, events, dom = _run(tmp_path, 1.0)
    limit = budget_labels(1.0, prompts_per_step=4, group_size=4, steps=STEPS)
    totals = label_totals(events)
    assert loop.session.oracle.counts.limit == limit == 64
    assert 0 < _capped(totals) <= limit
    assert sum(totals.values()) == dom.calls  # every call counted, the capped ones within the budget
    metrics = dict(_budget_metrics(events))
    assert metrics[STEPS]["oracle_budget.left"] == limit - _capped(totals)
    refused = {k for m in metrics.values() for k in m if k.startswith("oracle_budget.refused.")}
    assert {"oracle_budget.refused.audit", "oracle_budget.refused.validation"} <= refused
    # the audit shrank, a validation evaluation the budget could not pay was skipped, and the
    # test split (report only) was evaluated at every due step all the same
    evals = [(e.step, e.split) for e in events if isinstance(e, EvalCompleted) and e.branch == "main"]
    assert (0, "validation") in evals and (STEPS, "validation") not in evals
    assert {s for s, split in evals if split == "test"} == {0, 2, STEPS}
    # an A/B the budget cannot pay is not started: no decision, with the reason
    unpaid = [e for e in events if isinstance(e, BacktestInconclusive) and e.mode == "online"]
    assert unpaid and all("oracle budget cannot pay" in r for e in unpaid for r in e.reasons)
    assert all(e.figures.get("oracle_budget_exhausted") for e in unpaid)
    assert totals["branch.audit"] == totals["branch.validation"] == 0


def test_a_stopped_and_resumed_run_spends_exactly_what_an_uninterrupted_one_does(tmp_path):
    budget = 4.0
    _, whole, _ = _run(tmp_path / "a", budget)

    dom = CountingDomain()
    store = open_store("memory://")
    cfg = _cfg(tmp_path / "b", budget)

    def stop(step, _metrics):
        if step == 2:
            raise KeyboardInterrupt

    loop = RunLoop(cfg, store, plugins=_pm(dom), on_step=stop)
    loop.start()
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    resume_run(cfg, store, loop.run_id, plugins=_pm(dom))
    resumed = list(store.events(run_stream(loop.run_id)))
    assert label_totals(resumed) == label_totals(whole)
    assert _budget_metrics(resumed) == _budget_metrics(whole)
    assert dict(_budget_metrics(resumed))[STEPS]["oracle_budget.left"] < budget_labels(
        budget, prompts_per_step=4, group_size=4, steps=STEPS)


def test_the_label_summary_reports_what_each_arm_decides_on(tmp_path):
    _, events, _ = _run(tmp_path, None)
    started = events[0]
    s = label_summary(label_totals(events), started.config)
    assert s["training_rollouts"] == 64 and s["decision_purposes"] == ["audit", "regrade", "validation"]
    assert s["decision_relevant"] == _capped(label_totals(events)) and s["decision_share"] == s["decision_relevant"] / 64
    assert s["backtest_branches"] > 0 and s["test_report_only"] > 0
    fixed = {**started.config, "harness": {**started.config["harness"], "mode": "fixed"}}
    assert label_summary(label_totals(events), fixed)["decision_relevant"] == 0  # a fixed harness acts on nothing
    early = {**fixed, "harness": {**fixed["harness"], "gates": {"policy": {"trust": "validation"}}}}
    es = label_summary(label_totals(events), early)
    assert es["decision_relevant"] == label_totals(events)["main.validation"] + label_totals(events)["branch.validation"]
    assert es["early_stop_validation"] == label_totals(events)["main.validation"]


def test_a_runs_summary_carries_its_labels_and_its_validation_schedule(tmp_path):
    from evo_core.harness.summary import summarize_run

    _, events, _ = _run(tmp_path, 1.0)
    s = summarize_run(events)
    assert s["oracle_labels"] == label_summary(label_totals(events), events[0].config)
    assert s["oracle_labels"]["budget_share"] == 1.0 and s["labels_decision"] <= 64
    assert s["eval_schedule"] == {"steps": STEPS, "eval_every": 2, "samples": 2, "greedy": True,
                                  "validation_evals": 1}  # steps 2 and 4 were skipped: the budget was spent
