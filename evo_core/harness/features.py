"""Generic response features: computed by the core, the same way for every domain.

They are the vocabulary in which the harness describes what a reward pays for, beside the
domain's own signals (whose names it never assumes). Three kinds:

- the response's own surface (length, character classes, numbers, repetition...);
- the **task's** surface (``prompt_*``: the prompt's length, digits, numbers, lines) and how the
  response relates to it (``prompt_overlap``: copied text; ``prompt_number_share``: the share of
  the response's numbers that occur in the prompt; ``number_digits_gap``: digits of the
  response's last number minus those of the prompt's longest number), so that a predicate can
  pair a property of the task with one of the response;
- the response against the **other samples of its group** (``GROUP_RELATIVE``): distance,
  duplicates, length relative to the group's median, and agreement with the group's majority
  (whole response, and final number: self-consistency, which tracks correctness where the
  policy is mostly right, whatever the verifier pays). Each is cheap (linear in the response
length): they are computed for every rollout of every step, before interventions act, and
logged with ``RolloutCompleted.features``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Optional, Sequence

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
WORD = re.compile(r"\S+")
MAX_CHARS = 4000  # features of very long responses (agent transcripts) read their head


def char_class(ch: Optional[str]) -> str:
    if ch is None:
        return "none"
    if ch.isdigit():
        return "digit"
    if ch.isalpha():
        return "letter"
    if ch.isspace():
        return "space"
    return "symbol"


def _bigrams(text: str) -> set[str]:
    return {text[i:i + 2] for i in range(len(text) - 1)} or ({text} if text else set())


def _similarity(a: str, b: str, ba: Optional[set[str]] = None, bb: Optional[set[str]] = None) -> float:
    """Jaccard similarity of character bigrams: an edit-distance proxy that costs O(length)."""
    if a == b:
        return 1.0
    ba = _bigrams(a) if ba is None else ba
    bb = _bigrams(b) if bb is None else bb
    union = len(ba | bb)
    return len(ba & bb) / union if union else 1.0


def _longest_run(text: str) -> int:
    best = run = 0
    prev = None
    for ch in text:
        run = run + 1 if ch == prev else 1
        prev = ch
        best = max(best, run)
    return best


def _max_ngram_repeats(text: str, n: int = 3) -> int:
    toks = WORD.findall(text)
    if len(toks) < n:
        return 0
    return max(Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)).values())


def _prompt_overlap(text: str, prompt: str) -> float:
    """Share of the response's characters inside its longest run copied from the prompt's
    last line (an echo of the question scores near 1)."""
    text = text[:400]
    if not text or not prompt:
        return 0.0
    tail = prompt.strip().splitlines()[-1][-400:] if prompt.strip() else ""
    best = 0
    for size in range(min(len(text), len(tail)), 0, -1):
        if any(text[i:i + size] in tail for i in range(len(text) - size + 1)):
            best = size
            break
    return round(best / len(text), 4)


def _number_key(n: str) -> str:
    """A number's value as text ("07" and "7.0" are the number 7)."""
    try:
        v = float(n)
    except ValueError:
        return n
    return str(int(v)) if v.is_integer() else repr(v)


def _digits_of(n: str) -> int:
    return sum(ch.isdigit() for ch in n)


def task_features(prompt: str) -> dict[str, Any]:
    """The prompt's own surface: the same for every response to it (a task condition)."""
    p = prompt[:MAX_CHARS]
    nums = NUMBER.findall(p)
    return {
        "prompt_chars": len(prompt),
        "prompt_digits": sum(ch.isdigit() for ch in p),
        "prompt_numbers": len(nums),
        "prompt_max_number_digits": max((_digits_of(n) for n in nums), default=0),
        "prompt_lines": p.count("\n") + (1 if p else 0),
        "prompt_words": len(WORD.findall(p)),
    }


def _prompt_numbers(prompt: str) -> tuple[frozenset[str], int]:
    """The prompt's numbers as values, and the digits of its widest one."""
    pnums = NUMBER.findall(prompt[:MAX_CHARS])
    return frozenset(_number_key(n) for n in pnums), max((_digits_of(n) for n in pnums), default=0)


def _task_relative(numbers: Sequence[str], prompt_numbers: tuple[frozenset[str], int]) -> dict[str, Any]:
    """How the response's numbers relate to the prompt's."""
    pkeys, widest = prompt_numbers
    share = sum(_number_key(n) in pkeys for n in numbers) / len(numbers) if numbers else 0.0
    gap = _digits_of(numbers[-1]) - widest if numbers else 0
    return {"prompt_number_share": round(share, 4), "number_digits_gap": gap}


def response_features(text: str, *, prompt: str = "", n_tokens: int = 0, truncated: bool = False,
                      _prompt_nums: Optional[tuple[frozenset[str], int]] = None) -> dict[str, Any]:
    t = text[:MAX_CHARS]
    stripped = t.strip()
    numbers = NUMBER.findall(t)
    return {
        "chars": len(text),
        "tokens": int(n_tokens),
        "empty": not stripped,
        "digits": sum(ch.isdigit() for ch in t),
        "letters": sum(ch.isalpha() for ch in t),
        "spaces": sum(ch.isspace() for ch in t),
        "symbols": sum(not (ch.isalnum() or ch.isspace()) for ch in t),
        "numbers": len(numbers),
        "lines": t.count("\n") + (1 if t else 0),
        "words": len(WORD.findall(t)),
        "longest_char_run": _longest_run(t),
        "distinct_chars": len(set(t)),
        "repeated_trigrams": _max_ngram_repeats(t),
        "first_class": char_class(stripped[0] if stripped else None),
        "last_class": char_class(stripped[-1] if stripped else None),
        "first_char": stripped[0] if stripped else "",
        "last_char": stripped[-1] if stripped else "",
        "prompt_overlap": _prompt_overlap(stripped, prompt),
        "truncated": bool(truncated),
        **_task_relative(numbers, _prompt_numbers(prompt) if _prompt_nums is None else _prompt_nums),
    }


# Features that describe a response by the other samples of its group, not by itself.
GROUP_RELATIVE = frozenset({"group_distance", "group_duplicates", "group_length_ratio", "group_majority",
                            "group_answer_agreement"})


def _final_number(text: str) -> Optional[str]:
    nums = NUMBER.findall(text)
    return _number_key(nums[-1]) if nums else None


def group_features(texts: Sequence[str]) -> list[dict[str, Any]]:
    """Per response: how it relates to the other responses to the same prompt."""
    out = []
    heads = [t[:MAX_CHARS] for t in texts]
    counts = Counter(heads)
    grams = [_bigrams(t) for t in heads]  # once per response, not once per pair
    lengths = sorted(len(t) for t in texts)
    median = (lengths[(len(lengths) - 1) // 2] + lengths[len(lengths) // 2]) / 2 if lengths else 0.0
    # the majority response, whitespace-normalised: strictly more common than any other
    normal = [" ".join(t.split()) for t in heads]
    modal = Counter(normal).most_common(2)
    majority = modal[0][0] if modal and modal[0][1] > 1 and (len(modal) == 1 or modal[0][1] > modal[1][1]) else None
    finals = [_final_number(t) for t in heads]
    final_counts = Counter(f for f in finals if f is not None)
    for i, t in enumerate(heads):
        others = [j for j in range(len(heads)) if j != i]
        sim = sum(_similarity(t, heads[j], grams[i], grams[j]) for j in others) / len(others) if others else 1.0
        agree = (final_counts[finals[i]] - 1) / len(others) if others and finals[i] is not None else 0.0
        out.append({"group_distance": round(1.0 - sim, 4),
                    "group_duplicates": (counts[t] - 1) / len(others) if others else 0.0,
                    "group_length_ratio": round(len(texts[i]) / median, 4) if median else 1.0,
                    "group_majority": majority is not None and normal[i] == majority,
                    "group_answer_agreement": round(agree, 4)})
    return out


def features_for_group(texts: Sequence[str], prompt: str, n_tokens: Sequence[int], truncated: Sequence[bool]) -> list[dict[str, Any]]:
    rel = group_features(texts)
    task = task_features(prompt)
    pnums = _prompt_numbers(prompt)
    # a group's samples often repeat one another: a response's own features are computed once
    own: dict[tuple[str, int, bool], dict[str, Any]] = {}
    out = []
    for t, n, tr, g in zip(texts, n_tokens, truncated, rel):
        key = (t, int(n), bool(tr))
        feats = own.get(key)
        if feats is None:
            feats = own[key] = response_features(t, prompt=prompt, n_tokens=n, truncated=tr, _prompt_nums=pnums)
        out.append({**task, **feats, **g})
    return out
