"""Final-answer extraction from a model response. Pure string work: no sympy, no eval.

Two named modes, both recorded in every verdict:

* ``strict`` — the answer is the last ``\\boxed{}``; every other final answer in the
  response must agree with it (one distinct final answer), otherwise the response hedges.
  No box, no answer.
* ``lenient`` — the realistic flawed verifier: *any* candidate may match the gold answer
  (every box, every "or"-alternative and comma piece inside a box); with no box at all it
  falls back to the last number in the text.

Whether candidates are mathematically equal is decided later by math-verify in a worker
process (:mod:`evo_math.pool`); this module only finds the strings.
"""

from __future__ import annotations

import re
from typing import Literal, Optional

import attrs

Mode = Literal["strict", "lenient"]
MODES: tuple[str, ...] = ("strict", "lenient")

# Answers longer than this are not sent to math-verify: they are never a real final answer
# and are the cheapest way to make sympy hang. They still count as (non-matching) answers.
MAX_ANSWER_CHARS = 1000
# A lenient verifier that tries hundreds of pieces is pure noise; keep the last ones.
MAX_CANDIDATES = 16

_BOX_CMDS = ("\\boxed", "\\fbox")
_OPEN = "([{"
_CLOSE = ")]}"


@attrs.frozen
class Box:
    """One ``\\boxed``/``\\fbox`` occurrence. ``closed`` is False when the response ended
    inside the braces (a truncated generation)."""

    start: int
    end: int
    content: str
    closed: bool
    command: str


@attrs.frozen
class Extraction:
    """Everything the grader and the diagnostics need to know about a response's answers.

    ``answers``: the distinct (by normalised string) final answers, in order of first
    appearance; math-verify later merges equivalent ones (``1/2`` vs ``0.5``).
    ``final``: the last box's content — the strict answer.
    ``candidates``: what the lenient verifier compares with gold (superset of ``answers``).
    ``path``: ``boxed`` | ``last_number`` | ``none`` — how the lenient candidates were found.
    """

    boxes: tuple[Box, ...]
    answers: tuple[str, ...]
    final: Optional[str]
    candidates: tuple[str, ...]
    path: str
    unclosed_box: bool
    list_answer: bool  # a box holds a comma list (``3, 4``) although gold is a single answer

    @property
    def boxed_count(self) -> int:
        return sum(1 for b in self.boxes if b.closed)


def _skip_spaces(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\n\r":
        i += 1
    return i


def _match_braces(text: str, i: int) -> int:
    """``text[i] == '{'``; return the index just past its matching ``}``, or -1 if the
    text ends first. ``\\{`` and ``\\}`` are literal braces and do not count."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def find_boxes(text: str) -> list[Box]:
    """Every top-level ``\\boxed{...}``, ``\\boxed x`` and ``\\fbox{...}`` in order.

    A box nested inside another box is part of the outer one's content (and unwrapped by
    :func:`clean_answer`), not a separate answer."""
    boxes: list[Box] = []
    i = 0
    n = len(text)
    while i < n:
        j = text.find("\\", i)
        if j < 0:
            break
        cmd = next((c for c in _BOX_CMDS if text.startswith(c, j)), None)
        if cmd is None:
            i = j + 1
            continue
        k = j + len(cmd)
        if k < n and text[k].isalpha():  # \boxedfoo is another macro
            i = k
            continue
        k = _skip_spaces(text, k)
        if k < n and text[k] == "{":
            end = _match_braces(text, k)
            if end < 0:
                boxes.append(Box(j, n, text[k + 1 :], False, cmd))
                break
            boxes.append(Box(j, end, text[k + 1 : end - 1], True, cmd))
            i = end
            continue
        if k > j + len(cmd) and k < n:
            # "\boxed 5$": the MATH dataset's unbraced variant; the answer is one token.
            m = re.match(r"[^\s$]+", text[k:])
            if m:
                content = m.group(0).rstrip(".,;")
                boxes.append(Box(j, k + m.end(), content, True, cmd))
                i = k + m.end()
                continue
        i = k
    return boxes


_STRIP_CMDS = re.compile(r"\\(?:left|right|displaystyle|textstyle|!|,|;|:| )(?![a-zA-Z])")


def clean_answer(content: str) -> str:
    """The answer as sent to math-verify: unwrap nested boxes and ``$``, drop trailing
    punctuation, rewrite plain scientific notation (``1.5e-8``), which LaTeX reads as
    ``1.5 * e - 8``."""
    s = content.strip()
    for _ in range(4):  # \boxed{\boxed{3}} and $...$ wrappers
        s = s.rstrip(" .;")
        inner = find_boxes(s)
        if len(inner) == 1 and inner[0].closed and inner[0].start == 0 and inner[0].end == len(s):
            s = inner[0].content.strip()
            continue
        if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
            s = s.strip("$").strip()
            continue
        break
    s = s.rstrip(" .;")
    m = re.fullmatch(r"([-+]?\d+(?:\.\d+)?)\s*[eE]\s*([-+]?\d+)", s)
    if m:
        s = f"{m.group(1)}\\times 10^{{{m.group(2)}}}"
    return s


def answer_key(answer: str) -> str:
    """A normalised string for telling obviously-identical answers apart cheaply
    (``\\dfrac12`` vs ``\\frac12``). Equality of meaning is math-verify's job."""
    s = _STRIP_CMDS.sub("", answer)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = re.sub(r"\s+", "", s)
    return s.rstrip(".")


_OR_SPLIT = re.compile(
    r"\\(?:text|textrm|textbf|textit|mathrm|mbox)\s*\{\s*or\s*\}|(?<![a-zA-Z\\])or(?![a-zA-Z])"
)


def _top_level_spans(s: str) -> list[tuple[int, int]]:
    """Spans of ``s`` at bracket depth 0 (outside (), [], {} and \\text{...})."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = 0
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] in "{}":
            i += 2
            continue
        if c in _OPEN:
            if depth == 0 and i > start:
                spans.append((start, i))
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
            if depth == 0:
                start = i + 1
        i += 1
    if depth == 0 and start < len(s):
        spans.append((start, len(s)))
    return spans


def split_alternatives(answer: str) -> list[str]:
    """``3 \\text{ or } 4`` -> ``["3", "4"]``: alternatives joined by "or" inside one box
    are separate final answers (a hedge). Words inside ``\\text{...}`` other than a lone
    "or" are left alone."""
    cuts: list[tuple[int, int]] = []
    spans = None  # computed once, only if a bare "or" shows up (keeps this linear)
    for m in _OR_SPLIT.finditer(answer):
        if m.group(0).startswith("\\"):
            cuts.append(m.span())
            continue
        if spans is None:
            spans = _top_level_spans(answer)
        if any(a <= m.start() and m.end() <= b for a, b in spans):
            cuts.append(m.span())
    if not cuts:
        return [answer]
    parts, prev = [], 0
    for a, b in cuts:
        parts.append(answer[prev:a])
        prev = b
    parts.append(answer[prev:])
    parts = [p.strip().strip(",").strip() for p in parts]
    parts = [p for p in parts if p]
    return parts or [answer]


_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def split_commas(answer: str) -> list[str]:
    """Top-level comma pieces of ``answer`` (``3, 4`` -> ``["3", "4"]``); an interval,
    tuple or set in brackets and a number with thousands separators stay whole."""
    if _THOUSANDS.fullmatch(answer.strip()):
        return [answer]
    pieces: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(answer):
        c = answer[i]
        if c == "\\" and i + 1 < len(answer):
            # \{ and \} delimit a set: brackets like any other; other escapes are skipped.
            if answer[i + 1] == "{":
                depth += 1
            elif answer[i + 1] == "}":
                depth = max(0, depth - 1)
            i += 2
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            pieces.append(answer[start:i])
            start = i + 1
        i += 1
    pieces.append(answer[start:])
    pieces = [p.strip() for p in pieces if p.strip()]
    return pieces if len(pieces) > 1 else [answer]


# Linear-time: no nested quantifiers that could backtrack on adversarial text.
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+)?")


def last_number(text: str) -> Optional[str]:
    """The last number in ``text`` (integer, decimal, ``a/b``) — the lenient fallback."""
    last = None
    for m in _NUMBER.finditer(text):
        last = m.group(0)
    if last is None:
        return None
    return re.sub(r"\s+", "", last)


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for it in items:
        k = answer_key(it)
        if k and k not in seen:
            seen.add(k)
            out.append(it)
    return out


def _multi_valued(gold: str) -> bool:
    """Gold is a list, set, tuple, interval or ±-pair: anything with several values."""
    if _THOUSANDS.fullmatch(gold.strip()):
        return False
    return "," in gold or "\\pm" in gold or "\\mp" in gold


def extract(text: str, *, gold: Optional[str] = None) -> Extraction:
    """Find the response's final answers and the lenient candidates.

    ``gold`` only decides how a comma list in a box counts: as one answer when the gold
    answer is itself a list, as several (a hedge, ``list_answer``) when it is not."""
    if not isinstance(text, str):
        raise TypeError(f"response must be a string, got {type(text).__name__}")
    boxes = find_boxes(text)
    closed = [b for b in boxes if b.closed]
    unclosed = any(not b.closed for b in boxes)

    # A comma list in a box is one answer when gold is a list too ("1, 2"), and a hedge
    # ("3, 4" for gold 3) when it is not. Without a gold answer, lists stay whole.
    gold_is_list = gold is None or _multi_valued(clean_answer(gold))
    list_answer = False
    answers: list[str] = []
    for b in closed:
        content = clean_answer(b.content)
        if len(content) > MAX_ANSWER_CHARS:  # junk, not an answer list: one (unverified) answer
            answers.append(content)
            continue
        for alt in split_alternatives(content):
            pieces = split_commas(alt)
            if len(pieces) > 1 and not gold_is_list:
                list_answer = True
                answers.extend(pieces)
            else:
                answers.append(alt)
    answers = _dedupe(answers)
    final = clean_answer(closed[-1].content) if closed else None

    candidates: list[str] = []
    if answers:
        path = "boxed"
        for a in answers:
            candidates.append(a)
            candidates.extend(p for p in split_commas(a) if p != a)
    else:
        num = last_number(text)
        path = "last_number" if num is not None else "none"
        if num is not None:
            candidates.append(num)
    candidates = _dedupe(candidates)[-MAX_CANDIDATES:]
    return Extraction(
        boxes=tuple(boxes),
        answers=tuple(answers),
        final=final,
        candidates=tuple(candidates),
        path=path,
        unclosed_box=unclosed,
        list_answer=list_answer,
    )
