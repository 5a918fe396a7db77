"""Output comparison in the grading process, following LiveCodeBench's rules.

stdio: strip the whole output, split into lines, strip each line; line counts must match;
a line matches if equal as text or, failing that, if both parse as whitespace-separated
decimals that are equal (``Decimal``: exact by default; ``float_tol`` allows a relative /
absolute tolerance). call: the returned value equals the expected one after tuples become
lists (values come from JSON); floats may use ``float_tol``. APPS/TACO call-based outputs
are often wrapped in a one-element list: the unwrapped form is accepted too.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any, Optional


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.strip().split("\n")]


def _decimals(line: str) -> Optional[list[Decimal]]:
    try:
        return [Decimal(tok) for tok in line.split()]
    except (InvalidOperation, ValueError):
        return None


def _close(a: Decimal | float, b: Decimal | float, tol: Optional[float]) -> bool:
    if tol is None:
        return a == b
    fa, fb = float(a), float(b)
    if math.isnan(fa) or math.isnan(fb):
        return False
    return math.isclose(fa, fb, rel_tol=tol, abs_tol=tol)


def stdout_matches(actual: str, expected: str, float_tol: Optional[float] = None) -> bool:
    a, e = _lines(actual), _lines(expected)
    if len(a) != len(e):
        return False
    for la, le in zip(a, e):
        if la == le:
            continue
        da, de = _decimals(la), _decimals(le)
        if da is None or de is None or len(da) != len(de) or not da:
            return False
        if not all(_close(x, y, float_tol) for x, y in zip(da, de)):
            return False
    return True


def _norm(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def _eq(a: Any, b: Any, tol: Optional[float]) -> bool:
    # Exact types only on the actual side: values come from the tagged decoder, so they
    # are plain builtins; bool is not int here (True must not pass for 1).
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if tol is None or (isinstance(a, int) and isinstance(b, int)):
            return a == b
        return _close(a, b, tol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_eq(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_eq(a[k], b[k], tol) for k in a)
    return type(a) is type(b) and a == b


def value_matches(actual: Any, expected: Any, float_tol: Optional[float] = None, allow_unwrap: bool = True) -> bool:
    a, e = _norm(actual), _norm(expected)
    if _eq(a, e, float_tol):
        return True
    return bool(allow_unwrap and isinstance(e, list) and len(e) == 1 and _eq(a, e[0], float_tol))
