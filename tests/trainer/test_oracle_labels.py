"""Every strict-oracle label is counted, by purpose and scope, and a run's log holds the counts
(issue 33: not only the audit's). The domain's oracle is wrapped with a counter, so the log's
figures are checked against the calls that really happened."""

import pytest

from evo_arithmetic.domain import ArithmeticDomain
from evo_core.api import Completion, Task
from evo_core.config import config_from_dict
from evo_core.hookspecs import hookimpl
from evo_core.loop import RunLoop
from evo_core.store import open_store, run_stream
from evo_core.testing import isolated_plugins
from evo_core.trainer.oracle import PURPOSES, SCOPES, LabelCounts, OracleClient, label_totals
from evo_events import EvalCompleted, RunFinished, StepCompleted

from .testlib import tiny_config_dict


class CountingDomain(ArithmeticDomain):
    """Arithmetic, with every oracle call counted (one call grades one pair)."""

    name = "counted"

    def __init__(self, batch=False):
        super().__init__()
        self.calls = 0
        if batch:  # the batch path: one call, many pairs
            self.oracle_batch = self._oracle_batch

    def configure(self, options):
        return self

    def oracle(self, task, completion):
        self.calls += 1
        return super().oracle(task, completion)

    def _oracle_batch(self, pairs):
        self.calls += len(pairs)
        return [ArithmeticDomain.oracle(self, t, c) for t, c in pairs]


def _plugin(domain):
    class P:
        @hookimpl
        def evo_register_domains(self):
            return [domain]

    return P()


def test_the_client_counts_each_pair_once_per_purpose_and_scope():
    dom = CountingDomain(batch=True)
    client = OracleClient(dom)
    t = Task(task_id="a", prompt="1+1=", gold="2")
    pairs = [(t, Completion(text="2")), (t, Completion(text="3"))]
    assert [v.correct for v in client.grade("audit", pairs)] == [True, False]
    client.grade_one("regrade", t, Completion(text="2"))
    branch = client.for_branch()
    branch.grade("validation", pairs)
    assert branch.counts is client.counts and dom.calls == 5
    got = client.counts.take_unlogged()
    assert set(got) == {f"oracle_labels.{s}.{p}" for s in SCOPES for p in PURPOSES}
    assert (got["oracle_labels.main.audit"], got["oracle_labels.main.regrade"],
            got["oracle_labels.branch.validation"]) == (2, 1, 2)
    assert sum(got.values()) == dom.calls
    assert sum(client.counts.take_unlogged().values()) == 0  # handed out once
    with pytest.raises(ValueError, match="purpose"):
        client.grade("training", pairs)
    with pytest.raises(ValueError, match="scope"):
        OracleClient(dom, scope="side")
    assert LabelCounts().total() == 0


def _run(tmp_path, domain, arm, **over):
    d = tiny_config_dict(tmp_path, run={"steps": 4, "eval_every": 2, "harnesses": [arm]},
                         task={"domain": "counted", "options": {}}, eval={"samples": 2, "greedy": True},
                         harness={"diagnose_every": 2, "window_steps": 2, "audit": {"rate": 0.5},
                                  "backtest": {"k_steps": 1}}, **over)
    pm = isolated_plugins("evo_arithmetic.plugin", "+standard")
    pm.register(_plugin(domain), name="counted_plugin")
    store = open_store("memory://")
    loop = RunLoop(config_from_dict(d).for_arm(arm), store, plugins=pm)
    loop.start()
    loop.run()
    return loop, list(store.events(run_stream(loop.run_id)))


@pytest.mark.parametrize("batch", [False, True])
def test_a_runs_logged_labels_equal_the_oracle_calls(tmp_path, batch):
    dom = CountingDomain(batch=batch)
    loop, events = _run(tmp_path, dom, "evolving")
    totals = label_totals(events)
    assert sum(totals.values()) == dom.calls > 0
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.summary["oracle_labels"] == \
        {k: v for k, v in sorted(totals.items())}
    # the main line's evaluations: items x (samples + greedy) labels each
    per_eval = {s: len(loop.session.splits[s]) * 3 for s in ("validation", "test")}
    evals = [e for e in events if isinstance(e, EvalCompleted)]
    for split in ("validation", "test"):
        n = sum(1 for e in evals if e.split == split)
        assert totals[f"main.{split}"] == n * per_eval[split] > 0
    steps = [e for e in events if isinstance(e, StepCompleted)]
    audited = sum(e.metrics["audited"] for e in steps)
    assert totals["main.audit"] + totals["main.regrade"] >= audited > 0  # a re-grade of an audited rollout is free
    assert totals["main.train"] == 0  # the verifier trains
    # online A/B branches trained and evaluated (this seed's harness backtests): their labels count too
    assert loop.port.branch_s > 0 and totals["branch.audit"] > 0 and totals["branch.validation"] > 0
    assert all(k.startswith("oracle_labels.") for k in finished.summary["oracle_labels_after_last_step"])
    # `evo report` reads the same totals from the store
    from evo_core.report.data import collect
    from evo_core.report.figures import final_figures
    from evo_core.report.sections import oracle_cell

    figs = final_figures(collect(loop.store, loop.run_id))
    assert figs.oracle_labels == totals
    assert oracle_cell(figs).startswith(f"{dom.calls:,} ")


def test_the_reference_arm_counts_every_training_reward_as_a_label(tmp_path):
    dom = CountingDomain()
    loop, events = _run(tmp_path, dom, "reference")
    totals = label_totals(events)
    rollouts = sum(e.metrics["n_rollouts"] for e in events if isinstance(e, StepCompleted))
    assert totals["main.train"] == rollouts and sum(totals.values()) == dom.calls
