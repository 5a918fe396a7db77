"""Cheap static signals about a solution, for diagnostics (never part of the reward).

Hard-coding: a solution that prints the visible expected outputs literally, or branches on
the visible inputs, passes visible tests without solving the problem. We look at the
solution's AST constants, so comments and docstrings that merely quote the samples do not
count as much as code that uses them.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from evo_code.problem import CALL, STDIO, CodeProblem

_TRIVIAL = {"", "0", "1", "-1", "yes", "no", "true", "false", "none", "impossible", "possible"}


def _const_strings(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(every constant, as stripped text; constants that appear inside comparisons)."""
    consts: set[str] = set()
    compared: set[str] = set()
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docstrings and isinstance(node.value, (str, int, float)):
            consts.add(str(node.value).strip())
        elif isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in node.elts) and node.elts:
            try:
                consts.add(json.dumps(ast.literal_eval(node)))
            except (ValueError, TypeError):
                pass
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and isinstance(side.value, (str, int, float)):
                    compared.add(str(side.value).strip())
                elif isinstance(side, (ast.List, ast.Tuple)):
                    try:
                        compared.add(json.dumps(ast.literal_eval(side)))
                    except (ValueError, TypeError):
                        pass
    return consts, compared


def _forms(v: Any, kind: str) -> set[str]:
    if kind == STDIO:
        s = str(v).strip()
        return {s, s.split("\n")[0].strip()} if s else set()
    out = {json.dumps(v)}
    if isinstance(v, list) and len(v) == 1:
        out.add(json.dumps(v[0]))
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        out.add(str(v).strip())
    return out


def hardcode_signals(solution: str, problem: CodeProblem, public_k: int = 3) -> dict[str, Any]:
    visible = problem.public_tests(public_k) if problem.kind in (STDIO, CALL) else ()
    try:
        tree = ast.parse(solution)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {"hardcoded_output_hits": 0, "input_branch_hits": 0, "hardcoded_suspect": False, "n_visible": len(visible)}
    consts, compared = _const_strings(tree)
    out_hits = in_hits = nontrivial = 0
    for t in visible:
        outs = {f for f in _forms(t.output, problem.kind) if f.lower() not in _TRIVIAL and len(f) > 1}
        if outs:
            nontrivial += 1
            if outs & consts:
                out_hits += 1
        ins = {f for f in _forms(t.input, problem.kind) if f.lower() not in _TRIVIAL and len(f) > 1}
        if ins & compared:
            in_hits += 1
    suspect = bool(in_hits) or (nontrivial > 0 and out_hits * 2 >= nontrivial and out_hits > 0)
    return {
        "hardcoded_output_hits": out_hits,
        "input_branch_hits": in_hits,
        "n_visible": len(visible),
        "hardcoded_suspect": suspect,
    }
