"""Load code problems from local JSONL / Parquet / JSON files in the public formats.

Formats (detected per row from its fields, or forced with ``fmt``):
- ``taco`` / ``apps``: ``question``, ``input_output`` (JSON string with ``inputs``,
  ``outputs`` and optional ``fn_name``), ``solutions`` (JSON list), ``starter_code``;
- ``livecodebench``: ``question_content``, ``public_test_cases`` / ``private_test_cases``
  (JSON lists of ``{input, output, testtype}``; private ones may be base64+zlib+pickle as
  released, decoded with a pickle reader that refuses every global), ``metadata.func_name``;
- ``humaneval``: ``prompt``, ``entry_point``, ``test`` (defines ``check(candidate)``),
  ``canonical_solution``;
- ``mbpp``: ``text``/``prompt``, ``code``, ``test_list`` (asserts), ``test_setup_code``,
  ``challenge_test_list``; the sanitized variant's ``prompt`` and ``test_imports``;
- ``evo``: our own ``CodeProblem.to_json()`` rows.

A malformed row raises :class:`CodeFormatError` naming the file, the row and the field.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import pickle
import re
import zlib
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from evo_code.problem import ASSERT, CALL, STDIO, AssertSuite, CodeProblem, TestCase

FORMATS = ("taco", "apps", "livecodebench", "humaneval", "mbpp", "evo")
SPLIT_ALIASES = {"test": "heldout", "held-out": "heldout", "held_out": "heldout", "eval": "heldout", "valid": "validation", "val": "validation", "dev": "validation"}


class CodeFormatError(ValueError):
    def __init__(self, path: str, row: Any, field: str, problem: str) -> None:
        super().__init__(f"{path}: row {row}: field {field!r}: {problem}")
        self.path, self.row, self.field = path, row, field


def detect_format(row: Mapping[str, Any]) -> Optional[str]:
    if "kind" in row and "problem_id" in row and "tests" in row:
        return "evo"
    if "input_output" in row:
        return "taco"
    if "public_test_cases" in row or "private_test_cases" in row:
        return "livecodebench"
    if "entry_point" in row and "test" in row:
        return "humaneval"
    if "test_list" in row:
        return "mbpp"
    return None


def read_rows(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number starting at 1, row) for .jsonl, .json (list or one object), .parquet."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file")
    suffix = p.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - pyarrow is in the parquet extra
            raise RuntimeError("reading Parquet needs pyarrow (pip install 'evotrainer[parquet]')") from exc
        for i, row in enumerate(pq.read_table(p).to_pylist(), 1):
            yield i, row
        return
    text = p.read_text(encoding="utf-8")
    if suffix == ".json" or (text.lstrip().startswith(("[", "{")) and "\n{" not in text.strip()):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CodeFormatError(str(p), 1, "<json>", f"invalid JSON: {exc}") from None
        rows = data if isinstance(data, list) else [data]
        for i, row in enumerate(rows, 1):
            if not isinstance(row, dict):
                raise CodeFormatError(str(p), i, "<row>", "not a JSON object")
            yield i, row
        return
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CodeFormatError(str(p), i, "<json>", f"invalid JSON: {exc}") from None
        if not isinstance(row, dict):
            raise CodeFormatError(str(p), i, "<row>", "not a JSON object")
        yield i, row


def load_problems(
    path: str | Path,
    fmt: str = "auto",
    split: Optional[str] = None,
    limit: Optional[int] = None,
    options: Optional[Mapping[str, Any]] = None,
) -> list[CodeProblem]:
    """Every problem in ``path`` that belongs to ``split`` (see :func:`in_split`)."""
    opts = dict(options or {})
    if fmt not in ("auto", *FORMATS):
        raise ValueError(f"unknown code format {fmt!r}; expected one of auto, {', '.join(FORMATS)}")
    out: list[CodeProblem] = []
    for rownum, row in read_rows(path):
        f = detect_format(row) if fmt == "auto" else fmt
        if f is None:
            raise CodeFormatError(str(path), rownum, "<row>", f"unrecognised format (fields: {sorted(row)[:12]})")
        prob = parse_row(row, f, str(path), rownum)
        if split is not None and not in_split(prob, row, split, opts):
            continue
        out.append(prob)
        if limit is not None and len(out) >= limit:
            break
    return out


def in_split(prob: CodeProblem, row: Mapping[str, Any], split: str, opts: Mapping[str, Any]) -> bool:
    """A row's own ``split`` field wins; else, if ``validation_fraction`` /
    ``heldout_fraction`` are given, a stable hash of the problem id assigns it; else every
    row belongs to the split being loaded (the file *is* the split)."""
    want = SPLIT_ALIASES.get(split, split)
    if row.get("split"):
        return SPLIT_ALIASES.get(str(row["split"]), str(row["split"])) == want
    vf, hf = float(opts.get("validation_fraction", 0.0)), float(opts.get("heldout_fraction", 0.0))
    if vf <= 0 and hf <= 0:
        return True
    h = int(hashlib.sha256(f"{opts.get('seed', 0)}:{prob.problem_id}".encode()).hexdigest()[:12], 16) / float(1 << 48)
    got = "heldout" if h < hf else "validation" if h < hf + vf else "train"
    return got == want


# --- per format ---------------------------------------------------------------------------


def parse_row(row: Mapping[str, Any], fmt: str, path: str = "<memory>", rownum: Any = 1) -> CodeProblem:
    try:
        if fmt in ("taco", "apps"):
            return _taco(row, path, rownum, fmt)
        if fmt == "livecodebench":
            return _lcb(row, path, rownum)
        if fmt == "humaneval":
            return _humaneval(row, path, rownum)
        if fmt == "mbpp":
            return _mbpp(row, path, rownum)
        if fmt == "evo":
            return CodeProblem.from_json(row)
    except CodeFormatError:
        raise
    except (TypeError, KeyError, ValueError) as exc:
        raise CodeFormatError(path, rownum, "<row>", f"{type(exc).__name__}: {exc}") from None
    raise ValueError(f"unknown format {fmt!r}")


def _req(row: Mapping[str, Any], field: str, path: str, rownum: Any, typ: type | tuple = str) -> Any:
    if field not in row or row[field] is None:
        raise CodeFormatError(path, rownum, field, "missing")
    v = row[field]
    if not isinstance(v, typ):
        raise CodeFormatError(path, rownum, field, f"expected {getattr(typ, '__name__', typ)}, got {type(v).__name__}")
    return v


def _json_field(row: Mapping[str, Any], field: str, path: str, rownum: Any) -> Any:
    v = row.get(field)
    if isinstance(v, (dict, list)):
        return v
    if not isinstance(v, str):
        raise CodeFormatError(path, rownum, field, "missing" if v is None else f"expected a JSON string, got {type(v).__name__}")
    try:
        return json.loads(v)
    except json.JSONDecodeError as exc:
        raise CodeFormatError(path, rownum, field, f"invalid JSON: {exc}") from None


def _text(v: Any) -> str:
    if isinstance(v, list):
        return "\n".join(str(x) for x in v)
    return str(v)


def _parse_time_limit(v: Any) -> Optional[float]:
    if v is None or v == "":
        return None
    if isinstance(v, (int, float)):
        return float(v)
    m = re.search(r"([\d.]+)\s*(ms|milli|s|sec|second)?", str(v))
    if not m:
        return None
    x = float(m.group(1))
    return x / 1000.0 if (m.group(2) or "").startswith("m") else x


def _taco(row: Mapping[str, Any], path: str, rownum: Any, fmt: str) -> CodeProblem:
    pid = str(row.get("id", row.get("problem_id", row.get("task_id", f"{Path(path).stem}-{rownum}"))))
    question = _req(row, "question", path, rownum)
    io_ = _json_field(row, "input_output", path, rownum)
    if not isinstance(io_, dict) or not isinstance(io_.get("inputs"), list) or not isinstance(io_.get("outputs"), list):
        raise CodeFormatError(path, rownum, "input_output", "needs 'inputs' and 'outputs' lists")
    if len(io_["inputs"]) != len(io_["outputs"]):
        raise CodeFormatError(path, rownum, "input_output", f"{len(io_['inputs'])} inputs but {len(io_['outputs'])} outputs")
    if not io_["inputs"]:
        raise CodeFormatError(path, rownum, "input_output", "no tests")
    fn = io_.get("fn_name")
    if fn:
        for j, args in enumerate(io_["inputs"]):
            if not isinstance(args, list):
                raise CodeFormatError(path, rownum, "input_output", f"inputs[{j}] must be an argument list for fn_name {fn!r}")
        tests = tuple(TestCase(input=list(i), output=o) for i, o in zip(io_["inputs"], io_["outputs"]))
    else:
        tests = tuple(TestCase(input=_text(i), output=_text(o)) for i, o in zip(io_["inputs"], io_["outputs"]))
    sols = row.get("solutions")
    if isinstance(sols, str) and sols.strip():
        try:
            sols = json.loads(sols)
        except json.JSONDecodeError as exc:
            raise CodeFormatError(path, rownum, "solutions", f"invalid JSON: {exc}") from None
    reference = sols[0] if isinstance(sols, list) and sols and isinstance(sols[0], str) else None
    starter = row.get("starter_code") or ""
    return CodeProblem(
        problem_id=pid,
        prompt=question + (f"\n\n{starter}" if starter else ""),
        kind=CALL if fn else STDIO,
        tests=tests,
        fn_name=fn or None,
        reference=reference,
        starter_code=starter,
        time_limit_s=_parse_time_limit(row.get("time_limit")),
        source_format=fmt,
        meta={k: row[k] for k in ("difficulty", "source", "url", "tags") if k in row and row[k] is not None},
    )


class _NoGlobalsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # pragma: no cover - refusal path
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")


def _lcb_tests(row: Mapping[str, Any], field: str, path: str, rownum: Any) -> list[dict[str, Any]]:
    v = row.get(field)
    if v is None or v == "" or v == []:
        return []
    if isinstance(v, list):
        data: Any = v
    else:
        try:
            data = json.loads(v)
        except json.JSONDecodeError:
            try:  # the released private tests: base64(zlib(pickle(json string)))
                raw = _NoGlobalsUnpickler(io.BytesIO(zlib.decompress(base64.b64decode(v)))).load()
                data = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
            except Exception as exc:
                raise CodeFormatError(path, rownum, field, f"neither JSON nor base64/zlib/pickle: {exc}") from None
    if not isinstance(data, list):
        raise CodeFormatError(path, rownum, field, "expected a list of test cases")
    for j, t in enumerate(data):
        if not isinstance(t, dict) or "input" not in t or "output" not in t:
            raise CodeFormatError(path, rownum, field, f"test {j} needs 'input' and 'output'")
    return data


def _lcb(row: Mapping[str, Any], path: str, rownum: Any) -> CodeProblem:
    pid = str(row.get("question_id", row.get("task_id", f"{Path(path).stem}-{rownum}")))
    content = _req(row, "question_content", path, rownum)
    pub = _lcb_tests(row, "public_test_cases", path, rownum)
    priv = _lcb_tests(row, "private_test_cases", path, rownum)
    if not pub and not priv:
        raise CodeFormatError(path, rownum, "public_test_cases", "no tests")
    meta_raw = row.get("metadata") or {}
    if isinstance(meta_raw, str):
        try:
            meta_raw = json.loads(meta_raw) if meta_raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise CodeFormatError(path, rownum, "metadata", f"invalid JSON: {exc}") from None
    fn = meta_raw.get("func_name") if isinstance(meta_raw, dict) else None
    types = {t.get("testtype", "stdin") for t in pub + priv}
    functional = "functional" in types
    if functional and not fn:
        raise CodeFormatError(path, rownum, "metadata", "functional tests need metadata.func_name")
    tests = []
    for public, group in ((True, pub), (False, priv)):
        for j, t in enumerate(group):
            if functional:
                try:
                    args = [json.loads(line) for line in str(t["input"]).split("\n") if line.strip()]
                    out = json.loads(t["output"])
                except json.JSONDecodeError as exc:
                    field = "public_test_cases" if public else "private_test_cases"
                    raise CodeFormatError(path, rownum, field, f"test {j}: functional input/output is not JSON: {exc}") from None
                tests.append(TestCase(input=args, output=out, public=public))
            else:
                tests.append(TestCase(input=str(t["input"]), output=str(t["output"]), public=public))
    starter = row.get("starter_code") or ""
    return CodeProblem(
        problem_id=pid,
        prompt=content + (f"\n\n{starter}" if starter else ""),
        kind=CALL if functional else STDIO,
        tests=tuple(tests),
        fn_name=fn,
        starter_code=starter,
        source_format="livecodebench",
        meta={k: row[k] for k in ("platform", "contest_id", "contest_date", "difficulty", "question_title") if row.get(k) is not None},
    )


def _humaneval(row: Mapping[str, Any], path: str, rownum: Any) -> CodeProblem:
    pid = str(_req(row, "task_id", path, rownum))
    prompt = _req(row, "prompt", path, rownum)
    entry = _req(row, "entry_point", path, rownum)
    test = _req(row, "test", path, rownum)
    if not re.search(r"def\s+check\s*\(", test):
        raise CodeFormatError(path, rownum, "test", "must define check(candidate)")
    canon = row.get("canonical_solution")
    return CodeProblem(
        problem_id=pid,
        prompt=prompt,
        kind=ASSERT,
        asserts=AssertSuite(mode="check", test=test, setup=prompt_helpers(prompt, entry)),
        fn_name=entry,
        reference=(prompt + canon) if isinstance(canon, str) else None,
        starter_code=prompt,
        source_format="humaneval",
    )


def prompt_helpers(prompt: str, entry_point: str) -> str:
    """The prompt's own definitions (imports, helper functions such as HumanEval/32's
    ``poly``, constants) without the entry point's stub: what HumanEval's harness has in
    scope when ``check`` runs. Trusted: it comes from the dataset row, never the candidate."""
    import ast

    tree = None
    for src in (prompt, prompt.rstrip() + "\n    pass\n"):  # a prompt may end on a bare signature
        try:
            tree = ast.parse(src)
            break
        except SyntaxError:
            continue
    if tree is None:
        return ""
    keep = [n for n in tree.body if not (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry_point)
            and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) if keep else ""


def _mbpp(row: Mapping[str, Any], path: str, rownum: Any) -> CodeProblem:
    pid = str(row.get("task_id", f"{Path(path).stem}-{rownum}"))
    text = row.get("text", row.get("prompt"))
    if not isinstance(text, str):
        raise CodeFormatError(path, rownum, "text", "missing (or 'prompt')")
    tl = _req(row, "test_list", path, rownum, list)
    if not tl or not all(isinstance(s, str) and s.strip().startswith("assert") for s in tl):
        raise CodeFormatError(path, rownum, "test_list", "must be a non-empty list of assert statements")
    imports = row.get("test_imports") or []
    if not isinstance(imports, list) or not all(isinstance(s, str) for s in imports):
        raise CodeFormatError(path, rownum, "test_imports", "must be a list of import statements")
    fixture = row.get("test_setup_code") or ""
    if not isinstance(fixture, str):
        raise CodeFormatError(path, rownum, "test_setup_code", f"expected str, got {type(fixture).__name__}")
    hidden = tuple(s for s in (row.get("challenge_test_list") or []) if isinstance(s, str) and s.strip())
    code = row.get("code")
    fn = _mbpp_entry(code, tl)
    if fn is None:
        raise CodeFormatError(path, rownum, "test_list", "cannot tell which function the asserts call")
    defined = _top_level(code)
    called = _called_names([*tl, *hidden])
    # MBPP's harness runs the tests after the solution, in its namespace: the modules the
    # reference imports (MBPP 596's tests call sys.getsizeof) are in scope there, so they
    # are here; the reference's classes that the tests construct are built by the candidate.
    setup = "\n".join([*imports, *_imports_of(code)])
    classes = tuple(n for n in called if defined.get(n) == "class" and n != fn)
    return CodeProblem(
        problem_id=str(pid),
        prompt=f"{text}\nYour code should pass these tests:\n" + "\n".join(tl),
        kind=ASSERT,
        asserts=AssertSuite(mode="asserts", asserts=tuple(tl), hidden_asserts=hidden, setup=setup, fixture=fixture.strip(),
                            solution_classes=classes),
        fn_name=fn,
        reference=code if isinstance(code, str) else None,
        source_format="mbpp",
    )


def _parse(code: Any) -> Optional[Any]:
    import ast

    if not isinstance(code, str):
        return None
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _top_level(code: Any) -> dict[str, str]:
    """Names the code defines at top level: "function" or "class"."""
    import ast

    tree = _parse(code)
    if tree is None:
        return {}
    return {n.name: "class" if isinstance(n, ast.ClassDef) else "function"
            for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _imports_of(code: Any) -> list[str]:
    import ast

    tree = _parse(code)
    if tree is None:
        return []
    out = []
    for n in tree.body:
        if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and n.level == 0 and n.module != "__future__"):
            # optional: a module the sandbox lacks must not stop tests that never use it
            out.append(f"try:\n    {ast.unparse(n)}\nexcept ImportError:\n    pass")
    return out


def _called_names(asserts: list[str]) -> list[str]:
    import ast

    called: list[str] = []
    for s in asserts:
        try:
            tree = ast.parse(s)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in called:
                called.append(node.func.id)
    return called


def _mbpp_entry(code: Any, asserts: list[str]) -> Optional[str]:
    """The function the asserts call: the first called name the reference defines (even one
    that shadows a builtin, as MBPP 126's ``sum``), else the first non-builtin called."""
    import builtins

    defined = _top_level(code)
    called = _called_names(asserts)
    for name in called:
        if defined.get(name) == "function":
            return name
    return next((n for n in called if not hasattr(builtins, n) and defined.get(n) != "class"), None)
