# Test-side driver for assert-style tests (HumanEval ``check(candidate)``, MBPP asserts).
# Runs inside the sandbox *without* the candidate's code (stdlib only; _values.py is
# prepended). The candidate is replaced by a stub that answers from ``memo`` (values the
# candidate returned in a separate sandbox run); unknown calls are collected for the next
# round. So the asserts compare plain values decoded here, never candidate objects, and the
# candidate can neither see the expected values nor fake this process's exit or output.
import ast
import json
import sys
import traceback

_req = json.loads(sys.stdin.read())
_memo = {k: v for k, v in _req["memo"]}
_needed = {}
_state = {"blocked": False, "unknown": False}


class _Pending:
    """Stands in for a value not computed yet; absorbs every operation so that one round
    collects as many independent calls as possible. Results of a round that produced any
    _Pending are discarded."""

    def __bool__(self):
        return True

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__

    def _absorb(self, *a, **k):
        return self

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0


for _name in ("lt le gt ge add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow rpow "
              "neg pos abs round getitem call getattr and or xor rand ror rxor invert float int index").split():
    setattr(_Pending, "__%s__" % _name, _Pending._absorb)
_Pending.__float__ = lambda self: 0.0
_Pending.__int__ = lambda self: 0
_Pending.__index__ = lambda self: 0
_Pending.__getattr__ = lambda self, name: self


class CandidateError(Exception):
    pass


class CandidateTimeout(Exception):
    pass


class CandidateBadValue(Exception):
    pass


def _contains_pending(v):
    if isinstance(v, _Pending):
        return True
    if isinstance(v, (list, tuple, set, frozenset)):
        return any(_contains_pending(x) for x in v)
    if isinstance(v, dict):
        return any(_contains_pending(k) or _contains_pending(x) for k, x in v.items())
    return False


def candidate(*args, **kwargs):
    if _contains_pending(args) or _contains_pending(kwargs):
        _state["blocked"] = True
        return _Pending()
    try:
        enc = [encode_value(args), encode_value(kwargs)]
    except Unencodable as e:
        raise CandidateError("test passes an argument that cannot be sent to the candidate: %s" % e)
    key = json.dumps(enc, sort_keys=True)
    rec = _memo.get(key)
    if rec is None:
        _state["unknown"] = True
        _needed[key] = {"key": key, "args": enc[0], "kwargs": enc[1]}
        return _Pending()
    _state["t"] = _state.get("t", 0.0) + float(rec.get("t", 0.0))
    if "ok" in rec:
        return decode_value(rec["ok"])
    if rec.get("timeout"):
        raise CandidateTimeout("candidate call timed out")
    if "bad_value" in rec:
        raise CandidateBadValue(rec["bad_value"])
    raise CandidateError("%s: %s" % (rec.get("exc", "Error"), rec.get("msg", "")))


def _steps_from_check(test_src, check_name):
    """The body statements of ``check`` as separately executable steps."""
    tree = ast.parse(test_src)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == check_name:
            param = node.args.args[0].arg if node.args.args else "candidate"
            return param, [ast.Module(body=[st], type_ignores=[]) for st in node.body]
    raise ValueError("no function %r in the test code" % check_name)


def _run():
    ns = {"__name__": "__test__"}
    if _req.get("setup"):
        exec(compile(_req["setup"], "test_setup.py", "exec"), ns)
    if _req["mode"] == "check":
        src = _req["test"]
        exec(compile(src, "test.py", "exec"), ns)
        param, mods = _steps_from_check(src, _req.get("check_fn", "check"))
        ns[param] = candidate
        steps = []
        for m in mods:
            try:
                steps.append((ast.unparse(m), compile(m, "test.py", "exec")))
            except SyntaxError:  # e.g. a bare return in check's body: run check whole
                steps = [("check(candidate)", compile("%s(%s)" % (_req.get("check_fn", "check"), param), "test.py", "exec"))]
                break
    else:
        steps = [(s, compile(s, "test.py", "exec")) for s in _req["asserts"]]
    ns[_req["entry_point"]] = candidate
    results = []
    for text, code in steps:
        _state["t"] = 0.0  # candidate time spent in this step's calls
        try:
            exec(code, ns)
            results.append({"step": text[:300], "outcome": "pass", "is_assert": text.lstrip().startswith("assert")})
        except CandidateTimeout as e:
            results.append({"step": text[:300], "outcome": "timeout", "msg": str(e)})
        except CandidateBadValue as e:
            results.append({"step": text[:300], "outcome": "wrong_answer", "msg": "non-plain return value: %s" % e})
        except CandidateError as e:
            results.append({"step": text[:300], "outcome": "runtime_error", "msg": str(e)[:500]})
        except AssertionError as e:
            results.append({"step": text[:300], "outcome": "wrong_answer", "msg": str(e)[:300]})
        except BaseException as e:
            results.append({"step": text[:300], "outcome": "test_error", "msg": "".join(traceback.format_exception_only(type(e), e))[-500:]})
        results[-1]["t"] = _state["t"]
    return results


try:
    _results = _run()
    _err = None
except BaseException as e:
    _results, _err = [], "".join(traceback.format_exception_only(type(e), e))[-1000:]
_final = not _state["unknown"] and not _state["blocked"]
sys.stdout.write(json.dumps({
    "final": _final,
    "needed": list(_needed.values()),
    "blocked": _state["blocked"],
    "results": _results if _final else [],
    "error": _err,
}))
