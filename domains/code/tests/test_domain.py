"""The domain as the harness sees it: entry point, tasks, verify vs oracle, signals."""

from __future__ import annotations

from pathlib import Path

from evo_core.api import Completion, Domain, TaskSource

FIXTURES = Path(__file__).parent / "fixtures"


def test_registered_through_the_evo_entry_point():
    from evo_core.plugins import PluginManager

    doms = PluginManager().domains()
    assert "code" in doms and isinstance(doms["code"], Domain)


def test_load_tasks_and_grade_completions(grader):
    from evo_code.domain import CodeDomain

    dom = CodeDomain(grader)
    tasks = dom.load_tasks(TaskSource(path=str(FIXTURES / "livecodebench.jsonl"), split="heldout"))
    assert [t.task_id for t in tasks] == ["abc001_a", "lc1"] and all(t.domain == "code" for t in tasks)
    assert "```python" in tasks[0].prompt and "standard input" in tasks[0].prompt
    t = tasks[0]
    # hard-codes the visible sample: the training verifier (public tests) is fooled, the oracle is not
    hack = Completion(text="Sure.\n```python\nx = input()\nprint(3 if x.strip() == '1 2' else 0)\n```")
    v, o = dom.verify(t, hack), dom.oracle(t, hack)
    assert v.reward == 1.0 and o.reward == 0.0
    assert v.signals["scope"] == "public" and o.signals["scope"] == "all"
    assert v.signals["hardcoded_suspect"] and v.signals["extraction"] == "fenced_python"
    good = Completion(text="```python\nprint(sum(map(int, input().split())))\n```", truncated=True)
    o = dom.oracle(t, good)
    assert o.reward == 1.0 and o.signals["truncated"] is True and o.signals["n_tests"] == 3
    assert set(o.signals) >= {"outcomes", "outcome_counts", "runtime_max", "time_limit_s", "pass_fraction"}


def test_humaneval_completion_continues_the_prompt(grader):
    from evo_code.domain import CodeDomain

    dom = CodeDomain(grader)
    (task,) = [t for t in dom.load_tasks(TaskSource(path=str(FIXTURES / "humaneval.jsonl"))) if t.task_id == "HumanEval/0"]
    body = "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n"
    v = dom.oracle(task, Completion(text=body))
    assert v.reward == 1.0 and v.signals["prepended_prompt"] and v.signals["extraction"] == "raw"


def test_infra_failure_is_no_verdict(problems):
    """A sandbox that fails gives Verdict.infra: reward None, never 0 or 1."""
    from evo_code import CodeGrader, GradeConfig
    from evo_core.sandbox.protocol import ExecResult

    class Broken:
        name = "broken"

        def run(self, req):
            return ExecResult.infra("sandbox died")

        def run_many(self, reqs):
            return [self.run(r) for r in reqs]

        def close(self):
            pass

    g = CodeGrader(Broken(), GradeConfig(calibrate=False))
    for pid in ("taco-sum", "taco-fn", "HumanEval/0"):
        v = g.grade(problems[pid], "print(1)")
        assert v.reward is None and v.correct is None and "sandbox died" in v.infra_error
