"""``evo grade code``: the code domain's grade command (added through ``evo_register_commands``)
and the verdict it prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import attrs
import typer

from evo_core.api import Completion
from evo_core.api.grading import grade_command, run_grader
from evo_core.api.sandbox import LocalSandbox

from evo_code.domain import CodeDomain
from evo_code.grader import CodeGrader, GradeConfig
from evo_code.loaders import CodeFormatError, load_problems


def grade_cli(
    problem: Union[str, Path],
    solution: Union[str, Path],
    *,
    scope: str = "all",
    fmt: str = "auto",
    row: Optional[int] = None,
    problem_id: Optional[str] = None,
    float_tol: Optional[float] = None,
    time_limit: Optional[float] = None,
    k_reference: float = 3.0,
    workers: int = 2,
) -> dict[str, Any]:
    """What ``evo grade code`` prints: one JSON-ready verdict. Bad input raises ValueError."""
    if scope not in ("all", "public"):
        raise ValueError(f"--scope must be all or public, not {scope!r}")
    if time_limit is not None and not (time_limit > 0):
        raise ValueError(f"--time-limit must be a positive number of seconds, got {time_limit}")
    problem, solution = Path(problem), Path(solution)
    for p, what in ((problem, "--problem"), (solution, "--solution")):
        if not p.is_file():
            raise ValueError(f"{what}: no such file: {p}")
    try:
        probs = load_problems(problem, fmt=fmt)
    except (CodeFormatError, ValueError, OSError) as exc:
        raise ValueError(str(exc))
    if problem_id is not None:
        probs = [p for p in probs if p.problem_id == problem_id]
        if not probs:
            raise ValueError(f"{problem}: no problem with id {problem_id!r}")
    elif row is not None:
        if not 1 <= row <= len(probs):
            raise ValueError(f"{problem}: --row {row} out of range (1..{len(probs)})")
        probs = [probs[row - 1]]
    if len(probs) != 1:
        raise ValueError(f"{problem}: holds {len(probs)} problems; pick one with --row or --id")
    prob = probs[0]

    text = solution.read_text(encoding="utf-8", errors="replace")
    cfg = GradeConfig(
        float_tol=float_tol,
        k_reference=k_reference,
        calibrate=time_limit is None,
        default_time_limit_s=time_limit or GradeConfig().default_time_limit_s,
    )
    if time_limit is not None:
        prob = attrs.evolve(prob, time_limit_s=time_limit)
    with LocalSandbox(max(1, workers)) as sb:
        grader = CodeGrader(sb, cfg)
        code, extraction = CodeDomain(grader).solution_from(prob, Completion(text=text))
        v = grader.grade(prob, code, scope=scope)
    return {
        "problem_id": prob.problem_id,
        "format": prob.source_format,
        "kind": prob.kind,
        "scope": scope,
        "reward": v.reward,
        "correct": v.correct,
        "infra_error": v.infra_error,
        "tests": list(v.details.get("tests", [])),
        "signals": {**v.signals, **extraction},
    }


def add_grade_command() -> None:
    @grade_command("code")
    def grade_code(
        problem: Path = typer.Option(..., "--problem", help="Problem file: TACO/APPS, LiveCodeBench, HumanEval, MBPP row (JSON or JSONL)."),
        solution: Path = typer.Option(..., "--solution", help="Candidate solution (.py, or a completion with a ```python block)."),
        scope: str = typer.Option("all", "--scope", help="all (strict oracle: every test) | public (training verifier)."),
        fmt: str = typer.Option("auto", "--format", help="auto | taco | apps | livecodebench | humaneval | mbpp | evo"),
        row: Optional[int] = typer.Option(None, "--row", help="Row number (1-based) when the file holds several problems."),
        problem_id: Optional[str] = typer.Option(None, "--id", help="Pick the problem with this id."),
        float_tol: Optional[float] = typer.Option(None, "--float-tol", help="Tolerance for numeric outputs (default: exact, as LiveCodeBench)."),
        time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Per-test seconds (skips calibration)."),
        k_reference: float = typer.Option(3.0, "--k-reference", help="Time limit = k x reference runtime."),
        workers: int = typer.Option(2, "--workers", help="Sandbox workers."),
    ) -> None:
        """Code: run the solution on the problem's tests in the sandbox; per-test outcomes."""
        run_grader(grade_cli, problem=problem, solution=solution, scope=scope, fmt=fmt, row=row, problem_id=problem_id,
                   float_tol=float_tol, time_limit=time_limit, k_reference=k_reference, workers=workers)
