"""The promotion trace (benchmarks/trace_promotion.py) keeps the promoted proposal's causal
chain only: its rollouts, diagnosis, proposal, the backtests it ran (an online fork among
them) and its gates, and not another proposal's fork."""

from types import SimpleNamespace as NS

import pytest

from benchmarks.trace_promotion import Made, report

LOOP, TRAINER, EVENTS, PASS = "loop.py", "trainer.py", "step_events.py", "pass.py"
DIAG, PLUGIN, PROPOSALS, PROPOSER = "diagnosis.py", "diagnostic.py", "proposals.py", "proposer.py"
OFFLINE, ONLINE, FORK, GATES = "offline.py", "online.py", "fork.py", "gates.py"


def _made(*rows):
    return [Made(i, stage, obj, tuple(stack)) for i, (stage, obj, stack) in enumerate(rows)]


def _run(promoted_online: bool):
    """Two proposals in one round: a decoy ("b") backtested online and rejected, then the
    promoted one ("a"), backtested online only when ``promoted_online``."""
    fork = [LOOP, PASS, ONLINE, FORK]
    rows = [
        ("RolloutItem", NS(rollout_id="r1"), [LOOP, TRAINER]),
        ("RolloutCompleted", NS(event_id="r1"), [LOOP, EVENTS]),
        ("RolloutItem", NS(rollout_id="r2"), [LOOP, TRAINER]),  # not cited by the diagnosis
        ("Finding", NS(kind="k", evidence=("r1",)), [LOOP, PASS, DIAG, PLUGIN]),
        ("FailureDiagnosed", NS(event_id="d1", kind="k", evidence=("r1",)), [LOOP, PASS]),
        ("Proposal", NS(fingerprint="fb"), [LOOP, PASS, PROPOSER]),
        ("Proposal", NS(fingerprint="fa"), [LOOP, PASS, PROPOSER]),
        ("InterventionProposed", NS(event_id="pb", fingerprint="fb", caused_by=("d1",), name="b", step=5,
                                    proposer="x"), [LOOP, PASS, PROPOSALS]),
        ("RolloutItem", NS(rollout_id="fork-b"), fork + ["decoy_trainer.py"]),
        ("BacktestOutcome", NS(mode="online", backtester="ab", passed=False), [LOOP, PASS, ONLINE]),
        ("GateDecision", NS(), [LOOP, PASS, GATES]),
        ("InterventionProposed", NS(event_id="pa", fingerprint="fa", caused_by=("d1",), name="a", step=5,
                                    proposer="x"), [LOOP, PASS, PROPOSALS]),
        ("BacktestOutcome", NS(mode="offline", backtester="replay", passed=True), [LOOP, PASS, OFFLINE]),
    ]
    if promoted_online:
        rows += [("RolloutItem", NS(rollout_id="fork-a"), fork + [TRAINER]),
                 ("BacktestOutcome", NS(mode="online", backtester="ab", passed=True), [LOOP, PASS, ONLINE])]
    rows += [("GateDecision", NS(), [LOOP, PASS, GATES]),
             ("Promoted", NS(subject="intervention", subject_id="pa"), [LOOP, PASS, "gating.py"])]
    return report(_made(*rows))


def test_the_chain_of_an_offline_promotion_leaves_other_proposals_forks_out():
    rep = _run(promoted_online=False)
    assert rep["intervention"] == "a (proposed at step 5 by x)"
    assert rep["files"] == [LOOP, TRAINER, EVENTS, PASS, DIAG, PLUGIN, PROPOSER, PROPOSALS, OFFLINE, GATES,
                            "gating.py"]
    assert rep["forward"] and not rep["backtested_online"]


def test_an_online_promotion_has_its_fork_on_the_path_and_its_reentry_reported():
    rep = _run(promoted_online=True)
    assert rep["backtested_online"] and "decoy_trainer.py" not in rep["files"]
    assert rep["files"][-4:] == [ONLINE, FORK, GATES, "gating.py"]
    assert rep["reentered"] == {"RolloutItem": [TRAINER]} and not rep["forward"]


def test_no_promotion_no_path():
    rep = report(_made(("RolloutItem", NS(rollout_id="r1"), [LOOP, TRAINER])))
    assert not rep["promoted"] and rep["files"] == []


@pytest.mark.slow
def test_the_simulated_run_traces_its_first_promotion():
    from benchmarks.trace_promotion import trace_sim

    rep = trace_sim()
    assert rep["promoted"] and not rep["jumps_back"]
    assert rep["files"][0] == "evo_core/loop.py" and rep["n_files"] <= 14
