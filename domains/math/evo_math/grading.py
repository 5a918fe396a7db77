"""Grading: extraction + math-verify (through the worker pool) -> a :class:`Verdict`.

One pool job answers both modes at once (the strict answer set is a subset of the lenient
candidates), so every verdict carries ``strict_correct`` *and* ``lenient_correct``: the
gap between the two is exactly what a reward-hacking diagnostic looks for.
"""

from __future__ import annotations

import time
from typing import Any, Optional, Sequence

import attrs

from evo_core.api import Verdict
from evo_math.extraction import MAX_ANSWER_CHARS, MAX_CANDIDATES, MODES, Extraction, clean_answer, extract, find_boxes
from evo_math.pool import PoolError, VerifierPool, VerifyJob, VerifyResult, shared_pool

PREVIEW_CHARS = 200


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown math verifier mode {mode!r}; expected one of: {', '.join(MODES)}")
    return mode


def normalize_gold(gold: Any) -> str:
    """A gold answer as a bare answer string (``$\\frac12$`` and ``\\boxed{3}`` unwrapped);
    a full solution with a box yields its last box."""
    if isinstance(gold, bool) or not isinstance(gold, (str, int, float)):
        raise ValueError(f"gold answer must be a string or a number, got {type(gold).__name__}")
    text = str(gold).strip()
    boxes = [b for b in find_boxes(text) if b.closed]
    if boxes:
        text = boxes[-1].content
    text = clean_answer(text)
    if not text:
        raise ValueError("gold answer is empty")
    return text


@attrs.frozen
class Graded:
    """Both modes' outcome for one response (``None`` correctness = infrastructure error)."""

    extraction: Extraction
    gold: str
    strict_correct: Optional[bool]
    lenient_correct: Optional[bool]
    answer_count: int
    infra_error: Optional[str]
    verify_ms: float
    gold_parsed: Optional[bool]
    infra_kind: Optional[str] = None  # timeout | crashed | error | gold_unparsed | bad_gold
    hard_timeout: bool = False

    def correct(self, mode: str) -> Optional[bool]:
        return self.strict_correct if mode == "strict" else self.lenient_correct


@attrs.frozen
class _Plan:
    """Which strings go to math-verify, and where each answer/candidate sits in the job."""

    job: Optional[VerifyJob]
    answer_slots: tuple[Optional[int], ...]  # per extraction.answers: index into job.cands
    cand_slots: tuple[Optional[int], ...]  # per extraction.candidates


def _plan(ext: Extraction, gold: str) -> _Plan:
    cands: list[str] = []
    index: dict[str, int] = {}

    def slot(s: str) -> Optional[int]:
        if len(s) > MAX_ANSWER_CHARS:  # never a real answer; the cheapest way to hang sympy
            return None
        if s not in index:
            index[s] = len(cands)
            cands.append(s)
        return index[s]

    # Only the last answers are grouped by math-verify (pairwise comparisons grow
    # quadratically); earlier ones count as distinct, which only matters when there are
    # already more than MAX_CANDIDATES of them, i.e. a hedge either way.
    first = max(0, len(ext.answers) - MAX_CANDIDATES)
    answer_slots = tuple(None if i < first else slot(a) for i, a in enumerate(ext.answers))
    n_answers = len(cands)
    cand_slots = tuple(slot(c) for c in ext.candidates)
    job = VerifyJob(gold, tuple(cands), n_answers) if cands else None
    return _Plan(job, answer_slots, cand_slots)


def _combine(ext: Extraction, gold: str, plan: _Plan, res: Optional[VerifyResult]) -> Graded:
    if res is not None and not res.ok:
        return Graded(ext, gold, None, None, len(ext.answers), res.error or res.status, res.ms, None, res.status, res.hard_timeout)
    match = res.match if res is not None else ()
    classes = res.classes if res is not None else ()
    gold_parsed = res.gold_parsed if res is not None else None
    if res is not None and not res.gold_parsed:
        msg = f"math-verify could not parse the gold answer {gold[:80]!r}"
        return Graded(ext, gold, None, None, len(ext.answers), msg, res.ms, False, "gold_unparsed")
    # Distinct final answers: math-verify's equivalence classes, plus every answer too long
    # to verify (each one its own class).
    sent = [s for s in plan.answer_slots if s is not None]
    answer_count = len({classes[s] for s in sent}) + sum(1 for s in plan.answer_slots if s is None)
    strict = answer_count == 1 and bool(sent) and all(match[s] for s in sent)
    lenient = any(match[s] for s in plan.cand_slots if s is not None)
    return Graded(ext, gold, strict, lenient, answer_count, None, res.ms if res else 0.0, gold_parsed)


def grade_many(items: Sequence[tuple[Any, str]], pool: VerifierPool, *, progress: bool = False) -> list[Graded]:
    """Grade ``(gold, response)`` pairs with one batched trip through the pool
    (``progress``: a transient rich progress bar on stderr)."""
    golds: list[str] = []
    bad_gold: dict[int, str] = {}
    for i, (g, _) in enumerate(items):
        try:
            golds.append(normalize_gold(g))
        except ValueError as exc:  # one broken task must not take the batch down
            golds.append(str(g))
            bad_gold[i] = f"bad gold answer: {exc}"
    exts = [extract(text, gold=None if i in bad_gold else g) for i, (g, (_, text)) in enumerate(zip(golds, items))]
    plans = [_plan(e, g) for e, g in zip(exts, golds)]
    todo = [i for i, p in enumerate(plans) if p.job is not None and i not in bad_gold]
    results: dict[int, VerifyResult] = {}
    if todo:
        try:
            jobs = [plans[i].job for i in todo]
            if progress:
                from rich.console import Console
                from rich.progress import Progress

                with Progress(console=Console(stderr=True), transient=True) as bar:
                    tid = bar.add_task("math-verify", total=len(jobs))
                    out = pool.map(jobs, on_result=lambda: bar.advance(tid))  # type: ignore[arg-type]
            else:
                out = pool.map(jobs)  # type: ignore[arg-type]
        except (PoolError, OSError) as exc:
            out = [VerifyResult(status="error", error=f"math-verify pool failed: {exc}") for _ in todo]
        results = dict(zip(todo, out))
    out_graded = []
    for i, (e, g, p) in enumerate(zip(exts, golds, plans)):
        if i in bad_gold:
            out_graded.append(Graded(e, g, None, None, len(e.answers), bad_gold[i], 0.0, False, "bad_gold"))
        else:
            out_graded.append(_combine(e, g, p, results.get(i)))
    return out_graded


def signals_for(graded: Graded, mode: str, *, response: str, truncated: bool = False, n_tokens: int = 0) -> dict[str, Any]:
    """The verdict's diagnostic signals: JSON primitives only (they go into events)."""
    ext = graded.extraction
    final = ext.final if mode == "strict" else (ext.final if ext.final is not None else (ext.candidates[-1] if ext.candidates else None))
    return {
        "mode": mode,
        "extraction_mode": mode,
        "extraction_path": ("boxed" if ext.final is not None else "none") if mode == "strict" else ext.path,
        "answer_count": graded.answer_count,
        "boxed_count": ext.boxed_count,
        "hedged": graded.answer_count > 1,
        "no_answer": final is None,
        "list_answer": ext.list_answer,
        "candidate_count": len(ext.candidates),
        "extracted": None if final is None else final[:PREVIEW_CHARS],
        "truncated": bool(truncated or ext.unclosed_box),
        "unclosed_box": ext.unclosed_box,
        "response_chars": len(response),
        "n_tokens": int(n_tokens),
        "strict_correct": graded.strict_correct,
        "lenient_correct": graded.lenient_correct,
        "gold_parsed": graded.gold_parsed,
        "verify_ms": round(graded.verify_ms, 3),
        "infra_kind": graded.infra_kind,
        "timeout": graded.infra_kind == "timeout",
        "hard_timeout": graded.hard_timeout,
    }


def to_verdict(graded: Graded, mode: str, *, response: str, truncated: bool = False, n_tokens: int = 0) -> Verdict:
    sig = signals_for(graded, mode, response=response, truncated=truncated, n_tokens=n_tokens)
    details = {
        "answers": list(graded.extraction.answers),
        "candidates": list(graded.extraction.candidates),
        "gold": graded.gold,
    }
    if graded.infra_error is not None:
        return Verdict(reward=None, correct=None, infra_error=graded.infra_error, signals=sig, details=details)
    ok = bool(graded.correct(mode))
    return Verdict(reward=1.0 if ok else 0.0, correct=ok, signals=sig, details=details)


def grade_cli(gold: str, response: str, mode: str = "strict", *, timeout_s: float = 5.0) -> dict[str, Any]:
    """What ``evo grade math`` prints: one JSON-ready verdict.

    Raises ValueError for bad input. An infrastructure failure (math-verify timed out or
    its worker died) is *not* an exception: ``reward`` is None and ``infra_error`` says
    why, so the command can print the verdict and still exit non-zero."""
    check_mode(mode)
    if not isinstance(response, str):
        raise ValueError(f"response must be a string, got {type(response).__name__}")
    if not isinstance(gold, str):
        raise ValueError(f"gold answer must be a string, got {type(gold).__name__}")
    normalize_gold(gold)  # raises ValueError with the reason
    t0 = time.perf_counter()
    pool = shared_pool(workers=1, timeout_s=timeout_s)
    graded = grade_many([(gold, response)], pool)[0]
    verdict = to_verdict(graded, mode, response=response)
    return {
        "mode": mode,
        "reward": verdict.reward,
        "correct": verdict.correct,
        "gold": graded.gold,
        "extracted": verdict.signals["extracted"],
        "answers": list(graded.extraction.answers),
        "candidates": list(graded.extraction.candidates),
        "hedged": verdict.signals["hedged"],
        "infra_error": verdict.infra_error,
        "signals": dict(verdict.signals),
        "elapsed_ms": round((time.perf_counter() - t0) * 1000.0, 1),
    }
