"""Generic response features: computed by the core, the same way for every domain.

They are the vocabulary in which the harness describes what a reward pays for, beside the
domain's own signals (whose names it never assumes). Each is cheap (linear in the response
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


def response_features(text: str, *, prompt: str = "", n_tokens: int = 0, truncated: bool = False) -> dict[str, Any]:
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
    }


# Features that describe a response by the other samples of its group, not by itself.
GROUP_RELATIVE = frozenset({"group_distance", "group_duplicates"})


def group_features(texts: Sequence[str]) -> list[dict[str, Any]]:
    """Per response: how it relates to the other responses to the same prompt."""
    out = []
    heads = [t[:MAX_CHARS] for t in texts]
    counts = Counter(heads)
    grams = [_bigrams(t) for t in heads]  # once per response, not once per pair
    for i, t in enumerate(heads):
        others = [j for j in range(len(heads)) if j != i]
        sim = sum(_similarity(t, heads[j], grams[i], grams[j]) for j in others) / len(others) if others else 1.0
        out.append({"group_distance": round(1.0 - sim, 4),
                    "group_duplicates": (counts[t] - 1) / len(others) if others else 0.0})
    return out


def features_for_group(texts: Sequence[str], prompt: str, n_tokens: Sequence[int], truncated: Sequence[bool]) -> list[dict[str, Any]]:
    rel = group_features(texts)
    return [{**response_features(t, prompt=prompt, n_tokens=n, truncated=tr), **g}
            for t, n, tr, g in zip(texts, n_tokens, truncated, rel)]
