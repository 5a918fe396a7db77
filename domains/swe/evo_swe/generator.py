"""Tasks from real code, the SWE-smith way: inject a bug, keep the tests it breaks.

Given a pure-Python project (a source folder, a local git repository, or a local sdist /
source archive; nothing is downloaded):

1. the clean tree's test suite runs once in the sandbox; its passing tests are the pool;
2. candidate bugs are AST mutations inside functions of non-test modules — flip a
   comparison, swap an arithmetic operator, off-by-one on an integer literal, swap the
   operands of a non-commutative operator, ``and`` ↔ ``or``;
3. each mutant's suite runs; tests of the pool that now fail are ``FAIL_TO_PASS``, the rest
   ``PASS_TO_PASS``; mutants that break nothing (or too much) are dropped;
4. each kept mutant becomes a commit on top of the clean tree in a generated git
   repository; the row's ``patch`` is the fix (the reverse of the mutation). With
   ``hide_tests`` the test files holding the F2P tests are removed from the base commit and
   come back through ``test_patch`` (hidden tests); otherwise ``test_patch`` is empty.

:func:`qa_task` checks that the gold patch resolves a task and the empty patch does not.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Optional, Sequence

import attrs

from evo_swe._log import get_logger
from rich.console import Console
from rich.progress import Progress

from evo_swe.envs import EnvSpec
from evo_swe.grading import Grader, run_tests
from evo_swe.repo import export_tree, git, snapshot_repo
from evo_swe.sanitize import is_test_path
from evo_swe.tasks import SWETask

log = get_logger("evo_swe.generator")

_FLIP_CMP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
             ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_SWAP_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.FloorDiv, ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


class GeneratorError(RuntimeError):
    pass


@attrs.frozen(kw_only=True)
class Mutation:
    path: str  # relative, posix
    function: str  # qualified name of the enclosing function
    kind: str  # flip_compare | swap_arith | off_by_one | swap_operands | bool_op
    lineno: int
    start: int  # byte offsets of the replaced segment in the file
    end: int
    before: str
    after: str

    @property
    def id(self) -> str:
        return hashlib.sha256(f"{self.path}:{self.start}:{self.end}:{self.after}".encode()).hexdigest()[:8]

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.after.encode() + source[self.end :]


def _offset(line_starts: list[int], lineno: int, col: int) -> int:
    return line_starts[lineno - 1] + col


def _variants(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    import copy

    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP_CMP:
        new = copy.deepcopy(node)
        new.ops = [_FLIP_CMP[type(node.ops[0])]()]
        yield "flip_compare", new
    if isinstance(node, ast.BinOp):
        if type(node.op) in _SWAP_ARITH:
            new = copy.deepcopy(node)
            new.op = _SWAP_ARITH[type(node.op)]()
            yield "swap_arith", new
        if isinstance(node.op, _NON_COMMUTATIVE):
            new = copy.deepcopy(node)
            new.left, new.right = new.right, new.left
            yield "swap_operands", new
    if isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "bool_op", new
    if isinstance(node, ast.Constant) and type(node.value) is int:
        yield "off_by_one", ast.Constant(node.value + 1)
        if node.value > 0:
            yield "off_by_one", ast.Constant(node.value - 1)


def find_mutations(tree: Path, *, paths: Optional[Sequence[str]] = None) -> list[Mutation]:
    """Every candidate mutation inside functions of the non-test modules of ``tree``."""
    out: list[Mutation] = []
    if paths is None:
        paths = sorted(
            str(p.relative_to(tree)).replace(os.sep, "/") for p in tree.rglob("*.py")
            if ".git" not in p.parts and not is_test_path(str(p.relative_to(tree))) and p.name not in ("setup.py", "conftest.py")
        )
    for rel in paths:
        src = (tree / rel).read_bytes()
        try:
            mod = ast.parse(src)
        except SyntaxError:
            continue
        starts = [0]
        for line in src.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))

        def visit_stmt(stmt: ast.AST, qual: list[str], in_func: bool) -> None:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                is_func = not isinstance(stmt, ast.ClassDef)
                for s in stmt.body:
                    visit_stmt(s, qual + [stmt.name], in_func or is_func)
                return
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return  # docstrings
            visit_expr(stmt, qual, in_func)

        def visit_expr(node: ast.AST, qual: list[str], in_func: bool) -> None:
            if in_func and hasattr(node, "end_col_offset") and node.end_lineno is not None:
                for kind, new in _variants(node):
                    a = _offset(starts, node.lineno, node.col_offset)
                    b = _offset(starts, node.end_lineno, node.end_col_offset)
                    before = src[a:b].decode("utf-8", "replace")
                    after = ast.unparse(new)
                    if not isinstance(new, ast.Constant):
                        after = f"({after})"  # keeps the grouping of the surrounding expression
                    if after == before:
                        continue
                    mutated = src[:a] + after.encode() + src[b:]
                    try:
                        ast.parse(mutated)
                    except SyntaxError:
                        continue
                    out.append(Mutation(path=rel, function=".".join(qual), kind=kind, lineno=node.lineno, start=a, end=b,
                                        before=before, after=after))
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    if isinstance(child, ast.Lambda):
                        visit_expr(child.body, qual, in_func)
                    else:
                        visit_stmt(child, qual, in_func)
                    continue
                visit_expr(child, qual, in_func)

        for stmt in mod.body:
            visit_stmt(stmt, [], False)
    return out


def _test_files(tree: Path) -> list[str]:
    return sorted(
        str(p.relative_to(tree)).replace(os.sep, "/") for p in tree.rglob("*.py")
        if ".git" not in p.parts and (p.name.startswith("test_") or p.name.endswith("_test.py"))
    )


@attrs.define
class TaskGenerator:
    """Builds SWE tasks from a clean project. ``grader`` supplies the env cache and the
    sandbox; the generated repository and ``tasks.jsonl`` go to ``out_dir``."""

    grader: Grader
    max_f2p: int = 20
    timeout: float = 300.0

    def generate(
        self,
        source: str | Path,
        out_dir: str | Path,
        *,
        name: Optional[str] = None,
        max_tasks: int = 5,
        max_candidates: int = 200,
        hide_tests: bool = False,
        seed: int = 0,
        version: str = "",
    ) -> list[SWETask]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        src = Path(source)
        name = name or src.name.split(".tar")[0].split(".zip")[0]
        repo = out / f"{name}.git-src"
        if repo.exists():
            shutil.rmtree(repo)
        if src.is_dir() and not (src / ".git").exists():
            shutil.copytree(src, repo, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache"))
        else:
            export_tree(str(src.resolve()), "HEAD", repo)
        clean = snapshot_repo(repo)
        git(["tag", "evo-clean", clean], cwd=repo)
        spec = EnvSpec(repo=str(repo), version=version)
        env, _ = self.grader.envs.get(spec, repo)
        tests = _test_files(repo)
        if not tests:
            raise GeneratorError(f"{source}: no test files (test_*.py / *_test.py) found")
        executor = self.grader.executor
        assert executor is not None

        def suite(tree: Path) -> tuple[dict[str, str], Optional[int]]:
            with tempfile.TemporaryDirectory(prefix="evo-swe-gen-") as tmp:
                work = Path(tmp) / "t"
                shutil.copytree(tree, work, symlinks=True, ignore=shutil.ignore_patterns(".git"))
                run, outcomes, problem = run_tests(executor, env, work, tests, timeout=self.timeout)
            if run is not None and run.infra_error:
                raise GeneratorError(f"sandbox failed while running the suite: {run.infra_error}")
            return outcomes, (run.exit_code if run else None)

        baseline, _ = suite(repo)
        pool = sorted(t for t, o in baseline.items() if o == "passed")
        if not pool:
            raise GeneratorError(f"{source}: no test passes on the clean tree; cannot build tasks")
        muts = find_mutations(repo)
        random.Random(seed).shuffle(muts)
        muts = muts[:max_candidates]
        tasks: list[SWETask] = []
        seen_functions: set[tuple[str, str]] = set()
        with Progress(transient=True, console=Console(stderr=True)) as progress:
            bar = progress.add_task(f"mutants of {name}", total=len(muts))
            for m in muts:
                progress.advance(bar)
                if len(tasks) >= max_tasks:
                    break
                if (m.path, m.function) in seen_functions:
                    continue  # one bug per function keeps tasks diverse
                target = repo / m.path
                original = target.read_bytes()
                target.write_bytes(m.apply(original))
                try:
                    outcomes, _ = suite(repo)
                finally:
                    target.write_bytes(original)
                f2p = [t for t in pool if outcomes.get(t) != "passed"]
                p2p = [t for t in pool if outcomes.get(t) == "passed"]
                if not f2p or len(f2p) > self.max_f2p:
                    continue
                seen_functions.add((m.path, m.function))
                tasks.append(self._emit(repo, clean, name, m, f2p, p2p, hide_tests=hide_tests, version=version))
                log.info("swe_task_generated", instance_id=tasks[-1].instance_id, kind=m.kind, n_f2p=len(f2p))
        git(["checkout", "-q", "--detach", "evo-clean"], cwd=repo)
        from evo_swe.tasks import write_jsonl

        write_jsonl(tasks, out / "tasks.jsonl")
        return tasks

    def _emit(self, repo: Path, clean: str, name: str, m: Mutation, f2p: list[str], p2p: list[str], *,
              hide_tests: bool, version: str) -> SWETask:
        git(["checkout", "-q", "--detach", clean], cwd=repo)
        target = repo / m.path
        target.write_bytes(m.apply(target.read_bytes()))
        git(["add", "-A", "."], cwd=repo)
        git(["commit", "-q", "-m", "bug"], cwd=repo)
        buggy = git(["rev-parse", "HEAD"], cwd=repo).stdout.decode().strip()
        hidden = sorted({t.split("::", 1)[0] for t in f2p}) if hide_tests else []
        base = buggy
        if hidden:
            git(["rm", "-q", "--", *hidden], cwd=repo)
            git(["commit", "-q", "-m", "hide tests"], cwd=repo)
            base = git(["rev-parse", "HEAD"], cwd=repo).stdout.decode().strip()
        test_patch = git(["diff", "--binary", base, buggy, "--", *hidden], cwd=repo).stdout.decode() if hidden else ""
        patch = git(["diff", "--binary", buggy, clean, "--", m.path], cwd=repo).stdout.decode()
        iid = f"{name}__{m.function.replace('.', '_')}-{m.id}"
        git(["tag", "-f", f"evo-task/{iid}", base], cwd=repo)
        git(["checkout", "-q", "--detach", clean], cwd=repo)  # later mutants start from the clean tree
        statement = (
            f"`{m.function}` in `{m.path}` gives wrong results.\n\n"
            f"{len(f2p)} test(s) fail because of it, for example `{f2p[0]}`"
            + (" (the failing tests are not in the repository; write your own checks)." if hidden else ".")
            + " Fix the implementation without changing the tests."
        )
        return SWETask(
            instance_id=iid, repo=str(repo), base_commit=base, problem_statement=statement, patch=patch, test_patch=test_patch,
            FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, version=version,
            extra={"mutation": {"kind": m.kind, "path": m.path, "function": m.function, "line": m.lineno, "before": m.before,
                                "after": m.after}, "generator": "evo_swe.generator/swe-smith"},
        )


def qa_task(task: SWETask, grader: Grader) -> dict[str, object]:
    """Task QA: the gold patch must resolve the task and the empty patch must not."""
    gold = grader.grade(task, task.patch)
    empty = grader.grade(task, "")
    ok = gold.resolved is True and empty.resolved is False
    return {"instance_id": task.instance_id, "ok": ok, "gold_resolved": gold.resolved, "empty_resolved": empty.resolved,
            "gold_infra_error": gold.infra_error, "empty_f2p": dict(empty.f2p)}
