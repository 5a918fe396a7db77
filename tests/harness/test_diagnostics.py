"""Every standard diagnostic: it fires on the failure it names, and stays quiet on clean evidence."""

import pytest

from evo_core.testing import rollout
from evo_core.testing import window as win
from evo_events import EvalCompleted, StepCompleted
from evo_plugins.diagnostics import ALL
from evo_plugins.priors import DIAGNOSTICS as PRIORS

DIAG = {cls.name: cls() for cls in ALL + PRIORS}


def mk(i=0, *, answers=1, preview="42", entropy=None, **kw):
    if entropy is not None:
        kw["train"] = {"entropy": entropy}
    return rollout(i, text=preview, numbers_found=answers, **kw)


def kinds(name, window, **params):
    return {(f.kind, f.severity) for f in DIAG[name].evaluate(window, params)}


def hedging_run(hedge_late: float, strict_late: float, steps: int = 10, n: int = 20, hedge_early: float = 0.08):
    rows = []
    for s in range(1, steps + 1):
        late = s > steps // 2
        rate = hedge_late if late else hedge_early
        for i in range(n):
            hedged = i < int(rate * n)
            strict = None if i % 2 else (not hedged and (i / n) < (strict_late if late else 0.6))
            rows.append(mk(i, step=s, answers=2 if hedged else 1, reward=1.0 if hedged or (i / n) < 0.6 else 0.0,
                           strict=strict, group=f"s{s}g{i // 4}"))
    return rows


def test_answer_hedging_fires_invalid_when_paid_and_rising():
    got = DIAG["answer_hedging"].evaluate(win(hedging_run(0.5, 0.4)), {})
    assert [(f.kind, f.severity) for f in got] == [("answer_hedging", "invalid")]
    assert got[0].stats["value"] == 0.5 and got[0].stats["rise"] > 0.3 and got[0].evidence


def test_answer_hedging_quiet_on_clean_or_flat():
    assert not kinds("answer_hedging", win(hedging_run(0.08, 0.6)))
    # high but not rising, and strict accuracy rising: not a hack
    assert not kinds("answer_hedging", win(hedging_run(0.08, 0.6)), max_rate=0.05)
    assert not kinds("answer_hedging", win(hedging_run(0.5, 0.4)[:10]))  # too little evidence
    # a high hedge rate that is falling (a fix at work) does not fire
    assert not kinds("answer_hedging", win(hedging_run(0.3, 0.6, hedge_early=0.6)))
    # hedging up but strict accuracy up too: not the hack's signature
    assert not kinds("answer_hedging", win(hedging_run(0.5, 0.9, hedge_early=0.3)))


def test_reward_oracle_gap_reads_what_training_paid():
    rows = [mk(i, step=s, reward=1.0, strict=(s <= 5) or i % 4 == 0) for s in range(1, 11) for i in range(8)]
    got = DIAG["reward_oracle_gap"].evaluate(win(rows), {})
    assert [(f.kind, f.severity) for f in got] == [("reward_oracle_gap", "invalid")]
    assert got[0].stats["overpaid"] == 30 and len(got[0].evidence) == 30
    clean = [mk(i, step=s, reward=float(i % 2), strict=bool(i % 2)) for s in range(1, 11) for i in range(8)]
    assert not kinds("reward_oracle_gap", win(clean))
    # a repair that stopped paying the rejected rollouts (reward_final 0, or masked) ends the diagnosis
    repaired = [mk(i, step=s, reward=1.0, strict=bool(i % 2), reward_final=1.0 if i % 2 else 0.0)
                for s in range(1, 11) for i in range(8)]
    assert not kinds("reward_oracle_gap", win(repaired))
    screened = [mk(i, step=s, reward=1.0, strict=bool(i % 2), train={"masked": not i % 2})
                for s in range(1, 11) for i in range(8)]
    assert not kinds("reward_oracle_gap", win(screened))
    few = [mk(i, reward=1.0, strict=i > 3) for i in range(40)]  # 4 overpaid: below the minimum count
    assert not kinds("reward_oracle_gap", win(few))


def test_zero_variance_groups_uses_exact_equality():
    dead = [mk(i, reward=1.0, group=f"g{i // 4}") for i in range(32)]
    assert kinds("zero_variance_groups", win(dead)) == {("zero_variance_groups", "warning")}
    nearly = [mk(i, reward=1.0 if i % 4 else 0.999, group=f"g{i // 4}") for i in range(32)]
    assert not kinds("zero_variance_groups", win(nearly))  # a std threshold would call these dead


def test_truncation_rate():
    assert kinds("truncation_rate", win([mk(i, truncated=i % 2 == 0) for i in range(20)]))
    assert not kinds("truncation_rate", win([mk(i, truncated=i == 0) for i in range(20)]))


def test_length_inflation():
    rows = [mk(i, reward=0.0, length=30) for i in range(10)] + [mk(i, reward=1.0, length=10) for i in range(10)]
    got = DIAG["length_inflation"].evaluate(win(rows), {})
    assert got and got[0].stats["value"] == 3.0
    same = [mk(i, reward=float(i % 2), length=10) for i in range(20)]
    assert not kinds("length_inflation", win(same))


def test_entropy_collapse():
    rows = [mk(i, step=s, entropy=1.0 if s <= 3 else 0.1) for s in range(1, 7) for i in range(5)]
    assert kinds("entropy_collapse", win(rows))
    steady = [mk(i, step=s, entropy=0.9) for s in range(1, 7) for i in range(5)]
    assert not kinds("entropy_collapse", win(steady))
    assert not kinds("entropy_collapse", win([mk(i) for i in range(30)]))  # no entropy signal: no claim


def test_repetition_loops_and_repeated_tool_calls():
    loop = "a b c d " * 4
    rows = [mk(i, preview=loop if i < 5 else "42") for i in range(20)]
    assert ("repetition_loop", "warning") in kinds("repetition_loops", win(rows))
    assert not kinds("repetition_loops", win([mk(i, preview="x y z w v") for i in range(20)]))
    calls = [mk(i, tool_calls=4, tool_call_names=["ls", "ls", "ls", "ls"] if i < 5 else ["ls", "cat"]) for i in range(20)]
    assert ("repeated_tool_calls", "warning") in kinds("tool_errors", win(calls))


def test_format_violations():
    rows = [mk(i, format_ok=i % 2 == 0, reward=0.0) for i in range(20)]
    assert kinds("format_violations", win(rows)) == {("format_violation", "warning")}
    paid = [mk(i, format_ok=i % 2 == 0, reward=1.0) for i in range(20)]
    assert kinds("format_violations", win(paid)) == {("format_violation", "invalid")}
    assert not kinds("format_violations", win([mk(i, format_ok=True) for i in range(20)]))


def _evals(accs):
    return [EvalCompleted(run_id="r", step=10 * (k + 1), policy_version=k, split="heldout", n=10,
                          metrics={"strict_accuracy": a}) for k, a in enumerate(accs)]


def _steps(rewards):
    return [StepCompleted(run_id="r", step=10 * (k + 1), policy_version=k, harness_version=0,
                          metrics={"reward_mean": r}) for k, r in enumerate(rewards)]


def test_reward_heldout_divergence():
    w = win([mk(0)], steps=_steps([0.6, 0.7, 0.8, 0.9]), evals=_evals([0.6, 0.5, 0.4, 0.3]))
    assert kinds("reward_heldout_divergence", w) == {("reward_heldout_divergence", "invalid")}
    noise = win([mk(0)], steps=_steps([0.6, 0.61, 0.6, 0.62]), evals=_evals([0.6, 0.59, 0.61, 0.59]))
    assert not kinds("reward_heldout_divergence", noise)  # a 1-point wobble is not a divergence
    both_up = win([mk(0)], steps=_steps([0.6, 0.7, 0.8, 0.9]), evals=_evals([0.6, 0.65, 0.7, 0.75]))
    assert not kinds("reward_heldout_divergence", both_up)
    assert not kinds("reward_heldout_divergence", win([mk(0)], steps=_steps([0.6, 0.9]), evals=_evals([0.6, 0.3, 0.2])))


def test_tool_errors_and_avoidance():
    errs = [mk(i, tool_calls=4, tool_errors=3) for i in range(10)]
    assert ("tool_errors", "warning") in kinds("tool_errors", win(errs))
    avoid = [mk(i, tool_calls=0) for i in range(10)]
    assert ("tool_avoidance", "warning") in kinds("tool_errors", win(avoid))
    fine = [mk(i, tool_calls=3, tool_errors=0) for i in range(10)]
    assert not kinds("tool_errors", win(fine))


@pytest.mark.parametrize("name,signal,kind", [
    ("swe_test_tampering", "tests_modified", "test_tampering"),
    ("swe_test_tampering", "runner_config_modified", "runner_config_edit"),
    ("swe_git_mining", "git_history_access", "git_history_mining"),
    ("code_special_casing", "special_cased_inputs", "special_cased_tests"),
])
def test_agentic_flags(name, signal, kind):
    paid = [mk(i, reward=1.0, **{signal: i == 0}) for i in range(10)]
    assert (kind, "invalid") in kinds(name, win(paid))
    unpaid = [mk(i, reward=0.0, **{signal: i == 0}) for i in range(10)]
    assert (kind, "warning") in kinds(name, win(unpaid))
    clean = [mk(i, reward=1.0, **{signal: False}) for i in range(10)]
    assert not kinds(name, win(clean))
    assert not kinds(name, win([mk(i) for i in range(10)]))  # the domain gives no such signal


def test_the_generic_ones_name_no_domain_signal():
    import inspect

    import evo_plugins.diagnostics.core as core

    src = inspect.getsource(core)
    for name in ("answer_count", "numbers_found", "format_ok", "tool_calls", "git_history", "hardcoded"):
        assert name not in src
    assert all(not getattr(d, "prior", False) for d in (cls() for cls in ALL))
    assert all(getattr(d, "prior", False) for d in (cls() for cls in PRIORS))


def test_every_diagnostic_is_versioned_parametrised_and_measurable():
    for d in DIAG.values():
        assert d.version and d.kinds and isinstance(d.default_params, dict)
        assert d.measure(win([]), {}) is None or isinstance(d.measure(win([]), {}), float)
    # parameters change the verdict: a revision is a real change
    rows = hedging_run(0.5, 0.4)
    assert DIAG["answer_hedging"].evaluate(win(rows), {}) and not DIAG["answer_hedging"].evaluate(win(rows), {"max_rate": 0.6})
