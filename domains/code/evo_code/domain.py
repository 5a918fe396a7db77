"""The ``code`` domain: task loading, the single-turn episode, verifier and oracle."""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional

import attrs

from evo_code import __version__
from evo_code.extract import extract_code
from evo_code.grader import CodeGrader, GradeConfig
from evo_code.loaders import load_problems
from evo_code.problem import ASSERT, CALL, CodeProblem
from evo_core.api import Completion, Task, TaskSource, Verdict

# [task] options of a run config: GradeConfig's fields (budget_s, scoring, early_exit, ...)
# and the loader's split options.
GRADE_KEYS = tuple(a.name for a in attrs.fields(GradeConfig))
LOAD_KEYS = ("validation_fraction", "heldout_fraction", "seed")
_OFF = (False, "off", "none", "None")  # TOML has no null: budget_s = "off" switches the budget off

INSTRUCTIONS = {
    "stdio": "Write a Python 3 program that reads from standard input and writes to standard output.",
    "call": "Write a Python 3 function `{fn}` (a `Solution` class method is fine) that returns the answer.",
    "assert": "Complete the Python 3 function `{fn}`.",
}


class CodeDomain:
    """Training verifier: the visible tests. Strict oracle: every test, hidden included,
    in a fresh sandbox run. Both run the candidate only in the sandbox."""

    name = "code"
    version = __version__

    def __init__(self, grader: Optional[CodeGrader] = None, config: GradeConfig = GradeConfig(),
                 load_options: Optional[Mapping[str, Any]] = None) -> None:
        self._grader = grader
        self._config = config
        self.load_options = dict(load_options or {})

    def configure(self, options: Mapping[str, Any]) -> "CodeDomain":
        """A copy with the run config's ``[task] options`` applied, e.g.
        ``budget_s = 120``, ``scoring = "fraction"``, ``early_exit = "never"``."""
        unknown = set(options) - set(GRADE_KEYS) - set(LOAD_KEYS)
        if unknown:
            raise ValueError(f"code: unknown option(s) {sorted(unknown)} (known: {', '.join(GRADE_KEYS + LOAD_KEYS)})")
        grading = {k: (None if k.endswith("budget_s") and v in _OFF else v) for k, v in options.items() if k in GRADE_KEYS}
        try:
            config = attrs.evolve(self._config, **grading)
        except TypeError as exc:
            raise ValueError(f"code: {exc}") from None
        return CodeDomain(config=config, load_options={**self.load_options, **{k: v for k, v in options.items() if k in LOAD_KEYS}})

    @property
    def grader(self) -> CodeGrader:
        if self._grader is None:
            self._grader = CodeGrader(config=self._config)
        return self._grader

    def load_tasks(self, source: TaskSource) -> list[Task]:
        options = {**self.load_options, **source.options}  # the source's own options win
        probs = load_problems(source.path, fmt=source.format if source.format not in ("jsonl", "parquet", "json") else "auto",
                              split=source.split, limit=source.limit, options=options)
        return [self.task_from_problem(p, source.split) for p in probs]

    def task_from_problem(self, p: CodeProblem, split: str = "train") -> Task:
        instr = INSTRUCTIONS[p.kind].format(fn=p.fn_name)
        prompt = f"{p.prompt.rstrip()}\n\n{instr} Put the code in one ```python block."
        return Task(task_id=p.problem_id, prompt=prompt, gold=p.to_json(), split=split, domain=self.name,
                    meta={"kind": p.kind, "source_format": p.source_format, "n_tests": len(p.tests)})

    def solution_from(self, problem: CodeProblem, completion: Completion) -> tuple[str, dict[str, Any]]:
        code, sig = extract_code(completion.text)
        if problem.kind in (ASSERT, CALL) and problem.starter_code and problem.fn_name:
            # HumanEval-style completions continue the prompt: put the signature back.
            if not re.search(rf"def\s+{re.escape(problem.fn_name)}\s*\(", code):
                code = problem.starter_code + code
                sig = dict(sig, prepended_prompt=True)
        return code, dict(sig, truncated=completion.truncated)

    def _grade(self, task: Task, completion: Completion, scope: str) -> Verdict:
        problem = task.gold if isinstance(task.gold, CodeProblem) else CodeProblem.from_json(task.gold)
        code, sig = self.solution_from(problem, completion)
        v = self.grader.grade(problem, code, scope=scope)
        return attrs.evolve(v, signals={**v.signals, **sig})

    def verify(self, task: Task, completion: Completion) -> Verdict:
        return self._grade(task, completion, "public")

    def oracle(self, task: Task, completion: Completion) -> Verdict:
        return self._grade(task, completion, "all")
