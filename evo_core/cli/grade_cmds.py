"""``evo grade math|code|swe``: one verdict as JSON, for debugging reward functions.

Exit status: 0 when a verdict was reached (whatever it is); 2 for bad input; 3 when the
grader itself failed (infrastructure error: no verdict). The domains are imported lazily,
so a missing one is a clear one-line error, not a traceback.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import typer

INFRA_EXIT = 3

grade_app = typer.Typer(help="Grade one response with a domain's verifier and print the verdict as JSON.", no_args_is_help=True)


def _fail(msg: str, code: int = 2) -> typer.Exit:
    from evo_core.cli.app import fail

    return fail(msg, code)


def _domain_fn(module: str, dist: str, folder: str) -> Callable[..., dict]:
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise _fail(f"the {folder} domain is not installed: pip install -e domains/{folder}  ({dist})")
        raise
    fn = getattr(mod, "grade_cli", None)
    if fn is None:
        raise _fail(f"{module} has no grade_cli(); is {dist} up to date?")
    return fn


def _text_arg(value: str, what: str) -> str:
    """A literal, ``@path`` for a file, or ``-`` for stdin."""
    # Model output is not guaranteed UTF-8: a file and stdin decode the same bytes the same way.
    if value == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    if value.startswith("@"):
        p = Path(value[1:])
        if not p.is_file():
            raise _fail(f"{what}: no such file: {p}")
        return p.read_bytes().decode("utf-8", errors="replace")
    return value


def _call(fn: Callable[..., dict], **kwargs: Any) -> dict[str, Any]:
    """Bad input (the domain raises ValueError / FileNotFoundError) is a one-line error."""
    try:
        result = fn(**kwargs)
    except ValueError as exc:
        raise _fail(str(exc))
    except (FileNotFoundError, KeyError) as exc:
        raise _fail(f"{type(exc).__name__}: {exc}")
    if not isinstance(result, dict):
        raise _fail(f"{fn.__module__}.grade_cli returned {type(result).__name__}, not a dict", INFRA_EXIT)
    return result


def _emit(result: dict[str, Any]) -> None:
    print(json.dumps(result, indent=2, default=str))
    infra = result.get("infra_error")
    if infra:
        from evo_core.cli.app import err

        err.print(f"[bold red]error:[/] no verdict (infrastructure failure): {infra}", highlight=False, soft_wrap=True)
        raise typer.Exit(INFRA_EXIT)


@grade_app.command("math")
def grade_math(
    gold: str = typer.Option(..., "--gold", help="Gold answer (literal, @file or -)."),
    response: str = typer.Option(..., "--response", help="Model response (literal, @file or -)."),
    mode: str = typer.Option("strict", "--mode", help="strict | lenient"),
) -> None:
    """Math: extracted answers, equivalence with the gold answer, hedging."""
    if mode not in ("strict", "lenient"):
        raise _fail(f"--mode must be strict or lenient, not {mode!r}")
    fn = _domain_fn("evo_math.grading", "evo-plugin-math", "math")
    _emit(_call(fn, gold=_text_arg(gold, "--gold"), response=_text_arg(response, "--response"), mode=mode))


@grade_app.command("swe")
def grade_swe(
    task: Path = typer.Option(..., "--task", help="SWE-bench style task row (JSON)."),
    patch: Path = typer.Option(..., "--patch", help="The candidate's diff."),
) -> None:
    """SWE: apply the patch to a pristine copy, run FAIL_TO_PASS / PASS_TO_PASS."""
    for p, what in ((task, "--task"), (patch, "--patch")):
        if not p.is_file():
            raise _fail(f"{what}: no such file: {p}")
    fn = _domain_fn("evo_swe.grading", "evo-plugin-swe", "swe")
    _emit(_call(fn, task_path=str(task), patch_path=str(patch)))


@grade_app.command("code")
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
    if scope not in ("all", "public"):
        raise _fail(f"--scope must be all or public, not {scope!r}")
    for p, what in ((problem, "--problem"), (solution, "--solution")):
        if not p.is_file():
            raise _fail(f"{what}: no such file: {p}")
    fn = _domain_fn("evo_code.cli", "evo-plugin-code", "code")
    _emit(_call(
        fn, problem=problem, solution=solution, scope=scope, fmt=fmt, row=row, problem_id=problem_id,
        float_tol=float_tol, time_limit=time_limit, k_reference=k_reference, workers=workers,
    ))


def register(app: typer.Typer) -> None:
    app.add_typer(grade_app, name="grade")
