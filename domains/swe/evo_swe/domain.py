"""The SWE domain object the plugin manager registers (``evo_core.api.Domain``)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Optional

import attrs

from evo_swe._log import get_logger

from evo_core.api import Completion, Task, TaskSource, Verdict
from evo_swe import __version__
from evo_swe.episode import Budget, EpisodeResult, episode_signals, run_episode
from evo_swe.grading import Grader, GradeReport, TestScope
from evo_swe.tasks import SWETask, load_tasks, parse_row
from evo_swe.workspace import Workspace

log = get_logger("evo_swe.domain")
SPLITS = ("train", "validation", "heldout")


_DIFF_BLOCK = re.compile(r"```(?:diff|patch)\s*\n(.*?)```", re.S)


def patch_of(completion: Completion) -> tuple[str, str]:
    """The diff to grade and where it came from: the episode's workspace, or (for
    single-turn completions without a workspace) a fenced ``diff`` block / a bare git diff
    in the text."""
    if completion.workspace_diff is not None:
        return completion.workspace_diff, "workspace"
    blocks = _DIFF_BLOCK.findall(completion.text)
    if blocks:
        return blocks[-1], "text"
    i = completion.text.find("diff --git ")
    if i >= 0:
        return completion.text[i:], "text"
    return "", "none"


def _hash_split(instance_id: str, fractions: dict[str, float]) -> str:
    x = int(hashlib.sha256(instance_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    acc = 0.0
    for name, frac in fractions.items():
        acc += frac
        if x <= acc:
            return name
    return list(fractions)[-1]


@attrs.define
class SWEDomain:
    """Repo-level SWE. The training verifier runs only the FAIL_TO_PASS tests (cheap: no
    regression run) after the same pristine reset as the oracle; the strict oracle runs
    every F2P and P2P test. Construction is cheap: the sandbox starts on first use."""

    name: str = "swe"
    version: str = __version__
    cache_dir: Optional[Path] = None
    verifier_tests: TestScope = "f2p"
    verifier_reset: bool = True  # False gives a hackable verifier, for experiments only
    budget: Budget = Budget()
    _grader: Optional[Grader] = None

    @property
    def grader(self) -> Grader:
        if self._grader is None:
            self._grader = Grader(cache_dir=self.cache_dir) if self.cache_dir else Grader()
        return self._grader

    def close(self) -> None:
        if self._grader is not None:
            self._grader.close()
            self._grader = None

    # -- tasks -----------------------------------------------------------------------------
    def load_tasks(self, source: TaskSource) -> list[Task]:
        """Rows with a ``split`` field are filtered by ``source.split``; otherwise
        ``options={"split_fractions": {"train": .8, "validation": .1, "heldout": .1}}`` splits
        by a hash of the instance id, and without it every row gets ``source.split``."""
        fmt = source.format if source.format in ("jsonl", "json", "parquet") else "auto"
        rows = load_tasks(source.path, fmt)
        fractions = dict(source.options.get("split_fractions") or {})
        out: list[Task] = []
        for t in rows:
            split = str(t.extra.get("split") or (_hash_split(t.instance_id, fractions) if fractions else source.split))
            if split != source.split:
                continue
            out.append(self.to_task(t, split))
            if source.limit is not None and len(out) >= source.limit:
                break
        return out

    def to_task(self, t: SWETask, split: str = "train") -> Task:
        return Task(
            task_id=t.instance_id, prompt=t.problem_statement, gold=t.to_row(), split=split, domain=self.name,
            meta={"repo": t.repo, "version": t.version, "n_f2p": len(t.FAIL_TO_PASS), "n_p2p": len(t.PASS_TO_PASS)},
        )

    @staticmethod
    def swe_task(task: Task) -> SWETask:
        if isinstance(task.gold, SWETask):
            return task.gold
        return parse_row(task.gold, source=f"task {task.task_id}")

    # -- the episode -----------------------------------------------------------------------
    def run_episode(self, task: Task, policy: Any, *, budget: Optional[Budget] = None,
                    max_turns: Optional[int] = None) -> EpisodeResult:
        """One tool episode in a sandboxed workspace (``evo_core.api.EpisodeDomain``);
        ``max_turns`` caps the budget's ``max_steps`` (the trainer's ``[rl] episode_max_turns``)."""
        budget = budget or self.budget
        if max_turns:
            budget = attrs.evolve(budget, max_steps=min(budget.max_steps, int(max_turns)))
        t = self.swe_task(task)
        env, _ = self.grader.env(t)
        assert self.grader.executor is not None
        with Workspace.create(self.grader.pristine(t), env, self.grader.executor) as ws:
            return run_episode(ws, t.problem_statement, policy, budget=budget)

    # -- grading ---------------------------------------------------------------------------
    def _verdict(self, task: Task, completion: Completion, *, tests: TestScope, reset: bool, strict: bool) -> Verdict:
        t = self.swe_task(task)
        diff, source = patch_of(completion)
        report: GradeReport = self.grader.grade(t, diff, tests=tests, reset=reset)
        sig = {**episode_signals(completion.turns), "truncated": completion.truncated, "n_tokens": completion.n_tokens}
        tam = report.tampering
        sig.update({
            "patch_source": source,
            "files_touched": list(tam.get("files_touched", [])),
            "n_files_touched": tam.get("n_files_touched", 0),
            "test_files_modified": len(tam.get("test_files_modified", [])),
            "test_files_deleted": len(tam.get("test_files_deleted", [])),
            "runner_config_touched": bool(tam.get("runner_config_touched")),
            "conftest_touched": bool(tam.get("conftest_touched")),
            "site_hooks_touched": bool(tam.get("site_hooks_touched")),
            "exit_code_spoofed": bool(tam.get("exit_code_spoofed")),
            "suspicious_code": list(tam.get("suspicious_code", [])),
            "patch_applied": report.patch_applied,
            "grader_timed_out": report.timed_out,
            "strict": strict,
            **report.signals,
        })
        sig["outcomes"] = {"f2p": dict(report.f2p), "p2p": dict(report.p2p)}
        if report.infra_error:
            return Verdict.infra(report.infra_error, **sig)
        return Verdict(reward=float(bool(report.resolved)), correct=bool(report.resolved), signals=sig, details=report.to_json())

    def verify(self, task: Task, completion: Completion) -> Verdict:
        return self._verdict(task, completion, tests=self.verifier_tests, reset=self.verifier_reset, strict=False)

    def oracle(self, task: Task, completion: Completion) -> Verdict:
        return self._verdict(task, completion, tests="all", reset=True, strict=True)
