# Test-side driver for assert-style tests (HumanEval ``check(candidate)``, MBPP asserts).
# Runs inside the sandbox *without* the candidate's code (stdlib only; _values.py is
# prepended). The candidate is replaced by a stub that answers from ``memo`` (values the
# candidate returned in a separate sandbox run); unknown calls are collected for the next
# round. So the asserts compare plain values decoded here, never candidate objects, and the
# candidate can neither see the expected values nor fake this process's exit or output.
#
# Before the tests: the trusted ``setup`` (HumanEval's prompt helpers such as ``poly``,
# MBPP's test_imports) and the ``fixture`` (MBPP test_setup_code) run here. A fixture that
# needs the solution's own classes runs in the candidate's process instead; the names it
# assigns become references the stub sends by name. Likewise a test that constructs one of
# the solution's classes (``solution_classes``) sends the construction, not an object.
#
# Determinism: every round must replay the same calls, or the memo never settles. Each
# step starts from a seed of its own (the global ``random`` state, and ``random.Random()``
# built without a seed), and sets are encoded in a canonical order.
#
# Early exit (``early_exit``: "first_failure" | "first_timeout" | null): once a step fails
# for real (it used no value still unknown, nor did any step before it), the steps after it
# are reported "skipped". ``finalize``: the grading budget ran out; calls still unknown
# count as "budget_exhausted" and this round is the last.
import ast
import copy
import json
import random
import sys
import traceback

_req = json.loads(sys.stdin.read())
_memo = {k: v for k, v in _req["memo"]}
_needed = {}
_state = {"blocked": False, "unknown": False, "pending": 0}


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


class _Remote:
    """An object only the candidate's process can build (from the solution's own classes):
    sent there as the expression that builds it, never as a value."""

    def __init__(self, expr, label):
        self.expr, self.label = expr, label

    def __repr__(self):
        return self.label


_REF_TYPE = _Remote  # encode_value sends these as their expression


class CandidateError(Exception):
    pass


class CandidateBadValue(Exception):
    pass


# BaseException: a test's own ``except Exception`` must not turn these into a pass.
class CandidateTimeout(BaseException):
    pass


class CandidateBudget(BaseException):
    pass


def _contains_pending(v):
    if isinstance(v, _Pending):
        return True
    if isinstance(v, (list, tuple, set, frozenset)):
        return any(_contains_pending(x) for x in v)
    if isinstance(v, dict):
        return any(_contains_pending(k) or _contains_pending(x) for k, x in v.items())
    return False


def _pending():
    _state["pending"] += 1
    return _Pending()


def candidate(*args, **kwargs):
    if _contains_pending(args) or _contains_pending(kwargs):
        _state["blocked"] = True
        return _pending()
    try:
        enc = [encode_value(args), encode_value(kwargs)]
    except Unencodable as e:
        raise CandidateError("test passes an argument that cannot be sent to the candidate: %s" % e)
    key = json.dumps(enc, sort_keys=True)
    rec = _memo.get(key)
    if rec is None or rec.get("skipped"):  # skipped: the candidate's run stopped before it
        if _req.get("finalize"):
            raise CandidateBudget("not started: the grading budget ran out before this call")
        _state["unknown"] = True
        _needed[key] = {"key": key, "args": enc[0], "kwargs": enc[1]}
        return _pending()
    _state["t"] = _state.get("t", 0.0) + float(rec.get("t", 0.0))
    if "ok" in rec:
        return decode_value(rec["ok"])
    if rec.get("budget"):
        raise CandidateBudget("the grading budget ran out during this call")
    if rec.get("timeout"):
        raise CandidateTimeout("candidate call timed out")
    if "bad_value" in rec:
        raise CandidateBadValue(rec["bad_value"])
    raise CandidateError("%s: %s" % (rec.get("exc", "Error"), rec.get("msg", "")))


class _DisarmAsserts(ast.NodeTransformer):
    """``assert x`` -> ``_evo_collect(x)``: the test still evaluates (and calls the
    candidate), but a failing check no longer stops it."""

    def visit_Assert(self, node):
        self.generic_visit(node)
        call = ast.Call(func=ast.Name(id="_evo_collect", ctx=ast.Load()), args=[node.test], keywords=[])
        return ast.copy_location(ast.Expr(value=call), node)


def _disarmed(tree):
    try:
        tree = ast.fix_missing_locations(_DisarmAsserts().visit(copy.deepcopy(tree)))
        return compile(tree, "test.py", "exec")
    except (SyntaxError, ValueError):
        return None


def _steps_from_check(test_src, check_name):
    """The body statements of ``check`` as separately executable steps."""
    tree = ast.parse(test_src)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == check_name:
            param = node.args.args[0].arg if node.args.args else "candidate"
            return param, [ast.Module(body=[st], type_ignores=[]) for st in node.body]
    raise ValueError("no function %r in the test code" % check_name)


def _solution_class(name):
    """The test constructs an instance of the solution's class (MBPP 601's ``Pair``)."""

    def build(*args, **kwargs):
        if _contains_pending(args) or _contains_pending(kwargs):
            _state["blocked"] = True
            return _pending()
        try:
            enc = [encode_value(args), encode_value(kwargs)]
        except Unencodable as e:
            raise CandidateError("test passes an argument that cannot be sent to the candidate: %s" % e)
        return _Remote({"$new": [name, enc[0], enc[1]]}, "%s(...)" % name)

    return build


def _assigned_names(src):
    names = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
            names.append(node.id)
    return names


_seed_base = "%s:" % _req.get("seed", 0)
_seed_count = [0]
_orig_seed = random.Random.seed


def _deterministic_seed(self, a=None, version=2):
    if a is None:  # random.Random() / random.seed(): derive from the step, never from the clock
        _seed_count[0] += 1
        a = "%sunseeded:%d" % (_seed_base, _seed_count[0])
    _orig_seed(self, a, version)


random.Random.seed = _deterministic_seed


def _reseed(step):
    _seed_count[0] = 0
    random.seed("%sstep:%d" % (_seed_base, step))


def _setup(ns):
    """Run the trusted setup and the fixture; True when the fixture must run in the
    candidate's process."""
    if _req.get("setup"):
        exec(compile(_req["setup"], "test_setup.py", "exec"), ns)
    in_candidate = False
    fixture = _req.get("fixture")
    if fixture:
        _reseed(-1)
        try:
            exec(compile(fixture, "test_fixture.py", "exec"), ns)
        except NameError:  # it builds objects from the solution's own definitions
            in_candidate = True
            for name in _assigned_names(fixture):
                ns[name] = _Remote({"$ref": name}, name)
    for name in _req.get("solution_classes") or ():
        if name not in ns:
            ns[name] = _solution_class(name)
    return in_candidate


def _failed_for_real(outcome, mode):
    if outcome in ("pass", "budget_exhausted") or not mode:
        return False
    return mode == "first_failure" or outcome == "timeout"


def _run():
    ns = {"__name__": "__test__"}
    _state["fixture_in_candidate"] = _setup(ns)
    if _req["mode"] == "check":
        src = _req["test"]
        exec(compile(src, "test.py", "exec"), ns)
        param, mods = _steps_from_check(src, _req.get("check_fn", "check"))
        ns[param] = candidate
        steps = []
        for m in mods:
            try:
                steps.append((ast.unparse(m), compile(m, "test.py", "exec"), m))
            except SyntaxError:  # e.g. a bare return in check's body: run check whole
                steps = [("check(candidate)", compile("%s(%s)" % (_req.get("check_fn", "check"), param), "test.py", "exec"), None)]
                break
    else:
        steps = [(s, compile(s, "test.py", "exec"), ast.parse(s)) for s in _req["asserts"]]
    ns[_req["entry_point"]] = candidate
    ns["_evo_collect"] = lambda value: None
    mode = _req.get("early_exit")
    results = []
    stopped = False
    for i, (text, code, tree) in enumerate(steps):
        if stopped:
            results.append({"step": text[:300], "outcome": "skipped", "t": 0.0, "ran": False})
            continue
        _state["t"] = 0.0  # candidate time spent in this step's calls
        pending_before = _state["pending"]
        _reseed(i)
        try:
            exec(code, ns)
            results.append({"step": text[:300], "outcome": "pass", "is_assert": text.lstrip().startswith("assert")})
        except CandidateBudget as e:
            results.append({"step": text[:300], "outcome": "budget_exhausted", "msg": str(e),
                            "ran": not str(e).startswith("not started")})
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
        if results[-1]["outcome"] != "pass" and _state["pending"] > pending_before and tree is not None:
            # The failure may be a stand-in's doing (HumanEval/32 feeds each answer to
            # poly() and asserts on it): this round is not final anyway, so run the step
            # again with its asserts disarmed, to ask for every call it would make.
            lenient = _disarmed(tree)
            if lenient is not None:
                _reseed(i)
                try:
                    exec(lenient, ns)
                except BaseException:
                    pass
        # A failure counts only when neither this step nor any before it used a value
        # still unknown (a _Pending can fail an assert that the real value would pass).
        stopped = _state["pending"] == 0 and _failed_for_real(results[-1]["outcome"], mode)
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
    "fixture_in_candidate": _state.get("fixture_in_candidate", False),
    "results": _results if _final else [],
    "error": _err,
}))
