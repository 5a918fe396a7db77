"""Task loading from local JSONL/JSON/Parquet files in the public datasets' own formats.

Recognised rows (field names are matched case-insensitively):

* BigMath / MATH-500 / DeepScaleR: ``problem`` + ``answer`` (plus ``source``, ``domain``,
  ``llama8b_solve_rate``, ``level``, ... kept in ``meta``);
* MATH: ``problem`` + ``solution`` with a ``\\boxed{}`` answer;
* AIME 2024 (``ID/Problem/Solution/Answer``), AIME 2025 (``question/answer`` or
  ``problem_idx/problem/answer``), CNMO 2024 (``question``/``problem`` + ``answer``);
* OlympiadBench-style ``final_answer`` (a string, or a list of parts);
* GSM8K-style answers ending in ``#### 42``.

Nothing is downloaded. A malformed row raises :class:`TaskFormatError` naming the file,
the row and the field.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from evo_core.api import Task, TaskSource
from evo_math.extraction import find_boxes

PROBLEM_FIELDS = ("problem", "question", "query")
ANSWER_FIELDS = ("answer", "final_answer", "expected_answer", "ground_truth", "gold")
SOLUTION_FIELDS = ("solution", "reasoning")
ID_FIELDS = ("id", "unique_id", "problem_id", "problem_idx", "uid", "idx")
SPLIT_FIELD = "split"
# Scalar fields copied into Task.meta (long texts such as solutions are not).
META_FIELDS = ("source", "domain", "level", "type", "subject", "year", "url", "llama8b_solve_rate", "difficulty")

SPLITS = ("train", "validation", "heldout")
_SPLIT_ALIASES = {
    "train": "train", "training": "train",
    "validation": "validation", "valid": "validation", "val": "validation", "dev": "validation",
    "heldout": "heldout", "held_out": "heldout", "held-out": "heldout", "test": "heldout", "eval": "heldout",
}
FORMATS = ("auto", "jsonl", "json", "parquet", "bigmath", "math", "aime", "cnmo", "gsm8k")
OPTIONS = ("problem_field", "answer_field", "id_field", "id_prefix", "validation_fraction", "split_seed",
           "prompt_template", "verifier")

DEFAULT_TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."


class TaskFormatError(ValueError):
    """A task file is missing, unreadable or has a malformed row."""


def canonical_split(name: str) -> str:
    key = str(name).strip().lower()
    if key not in _SPLIT_ALIASES:
        raise TaskFormatError(f"unknown split {name!r}; expected one of {', '.join(SPLITS)} (or an alias: test, val, dev)")
    return _SPLIT_ALIASES[key]


def render_prompt(template: str, problem: str) -> str:
    """``{problem}`` is the only placeholder; ``{{``/``}}`` are literal braces. Done by hand
    because problems are full of braces that ``str.format`` would choke on."""
    return template.replace("{problem}", "\0").replace("{{", "{").replace("}}", "}").replace("\0", problem)


def check_template(template: str) -> str:
    if not isinstance(template, str) or "{problem}" not in template:
        raise TaskFormatError("prompt_template must be a string containing the placeholder {problem}")
    return template


# -- reading rows ----------------------------------------------------------------------------


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def _detect(path: Path, fmt: str) -> str:
    if fmt not in FORMATS:
        raise TaskFormatError(f"{path}: unknown task format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt in ("jsonl", "json", "parquet"):
        return fmt
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".jsonl") or name.endswith(".ndjson"):
        return "jsonl"
    if name.endswith(".json"):
        return "json"
    raise TaskFormatError(f"{path}: cannot tell the file format from its name; use .jsonl, .json or .parquet, or set format")


def iter_rows(path: Path, fmt: str) -> Iterator[tuple[int, Any]]:
    """``(row_number, row)`` with 1-based row numbers (JSONL: the line number)."""
    kind = _detect(path, fmt)
    if kind == "parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - pyarrow is a declared dependency
            raise TaskFormatError(f"{path}: reading Parquet needs pyarrow (pip install evo-plugin-math[parquet])") from exc
        try:
            pf = pq.ParquetFile(path)
        except Exception as exc:
            raise TaskFormatError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        n = 0
        for batch in pf.iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                n += 1
                yield n, row
        return
    with _open_text(path) as fh:
        if kind == "json":
            try:
                data = json.load(fh)
            except ValueError as exc:
                raise TaskFormatError(f"{path}: invalid JSON ({exc})") from None
            if isinstance(data, dict):  # {"data": [...]} / {"rows": [...]}
                lists = [v for v in data.values() if isinstance(v, list)]
                if len(lists) != 1:
                    raise TaskFormatError(f"{path}: expected a JSON list of rows (or an object holding exactly one list)")
                data = lists[0]
            if not isinstance(data, list):
                raise TaskFormatError(f"{path}: expected a JSON list of rows, got {type(data).__name__}")
            yield from enumerate(data, 1)
            return
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except ValueError as exc:
                raise TaskFormatError(f"{path}: row {n}: invalid JSON ({exc})") from None


# -- interpreting a row ----------------------------------------------------------------------


def _field(row: Mapping[str, Any], names: tuple[str, ...], override: Optional[str]) -> tuple[Optional[str], Any]:
    lower = {str(k).lower(): k for k in row}
    for name in (override,) if override else names:
        key = lower.get(name.lower())
        if key is not None and row[key] is not None:
            return str(key), row[key]
    return None, None


def _answer_text(value: Any, where: str) -> str:
    if isinstance(value, bool):
        raise TaskFormatError(f"{where}: expected a string or number, got a boolean")
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        parts = [_answer_text(v, where) for v in value]
        if not parts:
            raise TaskFormatError(f"{where}: empty answer list")
        return ", ".join(parts)
    if not isinstance(value, str):
        raise TaskFormatError(f"{where}: expected a string or number, got {type(value).__name__}")
    text = value.strip()
    if "####" in text:  # GSM8K: worked solution, then "#### 42"
        text = text.rsplit("####", 1)[1].strip().replace(",", "")
    boxes = [b for b in find_boxes(text) if b.closed]
    if boxes:  # an answer field holding a whole solution
        text = boxes[-1].content.strip()
    if len(text) >= 2 and text[0] == "$" and text[-1] == "$":
        text = text.strip("$").strip()
    if not text:
        raise TaskFormatError(f"{where}: empty answer")
    return text


def parse_row(row: Any, *, where: str, options: Mapping[str, Any]) -> tuple[Optional[str], str, str, dict[str, Any], Optional[str]]:
    """``(id or None, problem, gold, meta, split or None)`` for one row."""
    if not isinstance(row, Mapping):
        raise TaskFormatError(f"{where}: expected an object with problem/answer fields, got {type(row).__name__}")
    pkey, problem = _field(row, PROBLEM_FIELDS, options.get("problem_field"))
    if pkey is None:
        want = options.get("problem_field") or "/".join(PROBLEM_FIELDS)
        raise TaskFormatError(f"{where}: field {want!r}: missing (no problem text in this row)")
    if not isinstance(problem, str) or not problem.strip():
        raise TaskFormatError(f"{where}: field {pkey!r}: expected non-empty text, got {problem!r:.60}")
    akey, answer = _field(row, ANSWER_FIELDS, options.get("answer_field"))
    if akey is not None:
        gold = _answer_text(answer, f"{where}: field {akey!r}")
    else:
        # An explicit answer_field must be present; otherwise a MATH-style solution will do.
        skey, solution = (None, None) if options.get("answer_field") else _field(row, SOLUTION_FIELDS, None)
        if skey is None:
            want = options.get("answer_field") or "/".join(ANSWER_FIELDS + SOLUTION_FIELDS)
            raise TaskFormatError(f"{where}: field {want!r}: missing (no answer in this row)")
        if not isinstance(solution, str):
            raise TaskFormatError(f"{where}: field {skey!r}: expected text, got {type(solution).__name__}")
        boxes = [b for b in find_boxes(solution) if b.closed]
        if not boxes or not boxes[-1].content.strip():
            raise TaskFormatError(f"{where}: field {skey!r}: the solution has no \\boxed{{}} final answer")
        gold = boxes[-1].content.strip()
    ikey, rid = _field(row, ID_FIELDS, options.get("id_field"))
    if ikey is not None and not isinstance(rid, (str, int)):
        raise TaskFormatError(f"{where}: field {ikey!r}: expected a string or integer id, got {type(rid).__name__}")
    if options.get("id_field") and ikey is None:
        raise TaskFormatError(f"{where}: field {options['id_field']!r}: missing")
    meta: dict[str, Any] = {}
    for name in META_FIELDS:
        k, v = _field(row, (name,), None)
        if k is not None and isinstance(v, (str, int, float, bool)):
            meta[name] = v
    skey, split = _field(row, (SPLIT_FIELD,), None)
    if skey is not None:
        try:
            split = canonical_split(split)
        except TaskFormatError as exc:
            raise TaskFormatError(f"{where}: field {skey!r}: {exc}") from None
    return (None if rid is None else str(rid)), problem.strip(), gold, meta, split


def _in_validation(task_id: str, fraction: float, seed: str) -> bool:
    h = hashlib.sha256(f"{seed}:{task_id}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < fraction


def load_tasks(source: TaskSource, *, domain: str, template: str) -> list[Task]:
    """Load, validate and split the tasks of one file."""
    unknown = set(source.options) - set(OPTIONS)
    if unknown:
        raise TaskFormatError(f"unknown math task option(s) {sorted(unknown)}; known: {', '.join(OPTIONS)}")
    opts = source.options
    split = canonical_split(source.split)
    template = check_template(opts.get("prompt_template", template))
    fraction = opts.get("validation_fraction")
    if fraction is not None and not (isinstance(fraction, (int, float)) and 0 < float(fraction) < 1):
        raise TaskFormatError(f"validation_fraction must be a number between 0 and 1, got {fraction!r}")
    verifier = opts.get("verifier")
    if verifier is not None and verifier not in ("strict", "lenient"):
        raise TaskFormatError(f"verifier must be 'strict' or 'lenient', got {verifier!r}")
    if source.limit is not None and source.limit < 0:
        raise TaskFormatError(f"limit must be >= 0, got {source.limit}")

    path = Path(os.path.expanduser(source.path))
    if not path.is_file():
        raise TaskFormatError(f"{path}: no such task file (tasks are read from local files only)")
    stem = path.name.split(".")[0]
    prefix = opts.get("id_prefix", stem)
    seen: dict[str, tuple[int, str]] = {}
    tasks: list[Task] = []
    for n, row in iter_rows(path, source.format):
        where = f"{path}: row {n}"
        rid, problem, gold, meta, row_split = parse_row(row, where=where, options=opts)
        local_id = rid if rid is not None else str(n)
        task_id = f"{prefix}:{local_id}" if prefix else local_id
        if task_id in seen:
            first_row, first_problem = seen[task_id]
            if first_problem == problem:
                raise TaskFormatError(f"{where}: field 'id': duplicate task {local_id!r} (same problem as row {first_row})")
            # A combined eval file (AIME 2024 + AIME 2025 + CNMO) reuses ids across its
            # sources: qualify the id by source where the row has one, else by row number.
            qualifier = f"{meta['source']}/" if "source" in meta else ""
            local_id = f"{qualifier}{local_id}" if qualifier else f"{local_id}@row{n}"
            task_id = f"{prefix}:{local_id}" if prefix else local_id
            if task_id in seen:
                task_id = f"{task_id}@row{n}"
        seen[task_id] = (n, problem)
        if row_split is not None:
            task_split = row_split
        elif fraction is not None and split in ("train", "validation"):
            task_split = "validation" if _in_validation(task_id, float(fraction), str(opts.get("split_seed", 0))) else "train"
        else:
            task_split = split
        if task_split != split:
            continue
        meta.update({"source_file": str(path), "row": n})
        meta.setdefault("source", stem)
        if verifier is not None:
            meta["verify_mode"] = verifier
        tasks.append(Task(task_id=task_id, prompt=render_prompt(template, problem), gold=gold,
                          split=split, domain=domain, meta=meta))
        if source.limit is not None and len(tasks) >= source.limit:
            break
    return tasks
