"""Task sources: ``generate://addition?...`` (three disjoint splits) or a JSONL file."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlparse

from evo_core.api import Task, TaskSource, generated_splits

SPLITS = ("train", "validation", "test")


class ArithmeticTaskError(ValueError):
    """A bad task source for the arithmetic domain (the message names the source)."""


def load(source: TaskSource, domain: str) -> list[Task]:
    if source.split not in SPLITS:
        raise ArithmeticTaskError(f"arithmetic: unknown split {source.split!r} ({'|'.join(SPLITS)})")
    tasks = _generate(source, domain) if source.path.startswith("generate://") else _jsonl(source, domain)
    return tasks[: source.limit] if source.limit is not None else tasks


def _generate(source: TaskSource, domain: str) -> list[Task]:
    url = urlparse(source.path)
    if url.netloc != "addition":
        raise ArithmeticTaskError(f"arithmetic: unknown generator {url.netloc!r} in {source.path!r} (known: addition)")
    q = dict(parse_qsl(url.query))
    q.update({k: str(v) for k, v in source.options.items()})
    if "heldout" in q:
        raise ArithmeticTaskError(f"arithmetic: 'heldout=' in {source.path!r} was split in two: use validation=N&test=M")
    known = {"digits", "validation", "test", "seed"}
    if set(q) - known:
        raise ArithmeticTaskError(f"arithmetic: unknown parameter(s) {sorted(set(q) - known)} in {source.path!r} "
                                  f"(known: {', '.join(sorted(known))})")
    try:
        digits, n_val, n_test, seed = (int(q.get("digits", 2)), int(q.get("validation", 200)),
                                       int(q.get("test", 400)), int(q.get("seed", 0)))
    except ValueError as exc:
        raise ArithmeticTaskError(f"arithmetic: non-integer parameter in {source.path!r}: {exc}") from None
    if digits < 1 or n_val < 0 or n_test < 0:
        raise ArithmeticTaskError(f"arithmetic: digits must be >= 1 and split sizes >= 0 in {source.path!r}")
    lo, hi = 10 ** (digits - 1) if digits > 1 else 0, 10 ** digits
    pairs = [(a, b) for a in range(lo, hi) for b in range(lo, hi)]
    if n_val + n_test >= len(pairs):
        raise ArithmeticTaskError(f"arithmetic: validation={n_val} + test={n_test} leave no training pairs "
                                  f"(only {len(pairs)})")
    # The splits depend only on (digits, sizes, seed): fixed across runs, disjoint by construction.
    splits = generated_splits(len(pairs), n_val, n_test, f"addition:{digits}:{seed}")
    return [Task(task_id=f"add-{a}-{b}", prompt=f"{a}+{b}=", gold=str(a + b), split=source.split, domain=domain,
                 meta={"a": a, "b": b})
            for split, (a, b) in zip(splits, pairs) if split == source.split]


def _jsonl(source: TaskSource, domain: str) -> list[Task]:
    """``{"id", "prompt", "answer"[, "split"]}`` per line. A file with a ``split`` column holds
    several splits (rows without one are train); a file without one is the requested split."""
    try:
        fh = open(source.path, encoding="utf-8")
    except OSError as exc:
        raise ArithmeticTaskError(f"arithmetic: cannot read tasks from {source.path!r}: {exc.strerror}") from None
    rows: list[tuple[int, dict]] = []
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                int(row["answer"])
                if not isinstance(row["prompt"], str):
                    raise TypeError("prompt must be a string")
            except (ValueError, KeyError, TypeError) as exc:
                raise ArithmeticTaskError(f"{source.path}:{n}: bad task row ({type(exc).__name__}: {exc})") from None
            if row.get("split", "train") not in SPLITS:
                raise ArithmeticTaskError(f"{source.path}:{n}: unknown split {row['split']!r} ({'|'.join(SPLITS)})")
            rows.append((n, row))
    has_split = any("split" in r for _, r in rows)
    out = [Task(task_id=str(r.get("id", f"line-{n}")), prompt=r["prompt"], gold=str(int(r["answer"])),
                split=r.get("split", "train") if has_split else source.split, domain=domain) for n, r in rows]
    return [t for t in out if t.split == source.split]
