# Candidate-side harness for call-based tests (runs inside the sandbox, stdlib only;
# _values.py is prepended). It calls the candidate's function on each argument list and
# reports the *returned values*; it never sees expected outputs and compares nothing.
#
# Request fields: fn, calls, nonce, per_call_s, load_s; optional budget_s (seconds this
# process may spend in all, load included: a call cut by it is reported as "budget"),
# stop_on ("timeout": stop after the first timed-out call; "failure": also after the first
# exception or unplain value; the grader marks the calls left as skipped), and fixture
# (trusted test setup code run after the solution, in its namespace; {"$ref": name}
# arguments resolve to what it defined).
import io
import json
import os
import signal
import sys
import time
import traceback

# Our own references, taken before the candidate's code can replace the module attributes.
_clock = time.perf_counter
_setitimer = signal.setitimer
_T0 = _clock()
_req = json.loads(sys.stdin.read())
sys.stdin = io.StringIO("")
_NONCE = _req["nonce"]
_BUDGET = _req.get("budget_s")
_STOP = _req.get("stop_on")
_out = os.dup(1)
os.dup2(2, 1)  # the candidate's own prints go to stderr, not the results channel
sys.stdout = sys.stderr


def _emit(rec):
    data = (_NONCE + " " + json.dumps(rec) + "\n").encode()
    while data:
        data = data[os.write(_out, data):]


class _CallTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _CallTimeout()


def _timer(limit):
    """Arm the alarm for min(limit, budget left); True when the budget is the binding one."""
    left = None if _BUDGET is None else _BUDGET - (_clock() - _T0)
    capped = left is not None and left < limit
    _setitimer(signal.ITIMER_REAL, max(0.001, left) if capped else limit)
    return capped


def _load():
    with open("solution.py", encoding="utf-8") as f:
        src = f.read()
    ns = {"__name__": "solution", "__file__": "solution.py", "__builtins__": __builtins__}
    try:
        code = compile(src, "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        _emit({"load_error": "compile_error", "exc": type(e).__name__, "msg": str(e)[:2000]})
        raise SystemExit(0)
    capped = _timer(_req.get("load_s", 5.0))
    try:
        exec(code, ns)
        if _req.get("fixture"):
            exec(compile(_req["fixture"], "test_setup.py", "exec"), ns)
    except _CallTimeout:
        if capped:
            _emit({"load_error": "budget", "exc": "Timeout", "msg": "the grading budget ran out while loading"})
        else:
            _emit({"load_error": "timeout", "exc": "Timeout", "msg": "module load exceeded its time limit"})
        raise SystemExit(0)
    except BaseException as e:
        _emit({"load_error": "runtime_error", "exc": type(e).__name__, "msg": "".join(traceback.format_exception_only(type(e), e))[-2000:]})
        raise SystemExit(0)
    finally:
        _setitimer(signal.ITIMER_REAL, 0)
    fn = _req["fn"]
    target = ns.get(fn)
    if callable(target):
        return (lambda: target), ns
    cls = ns.get("Solution")
    if isinstance(cls, type) and callable(getattr(cls, fn, None)):
        return (lambda: getattr(cls(), fn)), ns  # LeetCode style: a fresh instance per test
    _emit({"load_error": "runtime_error", "exc": "NameError", "msg": "no function or Solution method named %r" % fn})
    raise SystemExit(0)


signal.signal(signal.SIGALRM, _alarm)
_get, _ns = _load()
_emit({"loaded": True})
for _i, _call in enumerate(_req["calls"]):
    if _BUDGET is not None and _clock() - _T0 >= _BUDGET:
        _emit({"stop": "budget", "at": _i})
        break
    _t0 = _clock()
    _capped = False
    try:
        # Arguments may be built by the solution's own classes, and a returned value may
        # be costly to read: both count towards the call's time.
        _capped = _timer(_req["per_call_s"])
        try:
            _args = decode_value(_call["args"], _ns)
            _kwargs = decode_value(_call.get("kwargs") or {"$d": []}, _ns)
            _res = _get()(*_args, **_kwargs)
            _dt = _clock() - _t0
            try:
                _rec = {"i": _i, "ok": encode_value(_res), "t": _dt}
            except Unencodable as e:
                _rec = {"i": _i, "bad_value": str(e), "t": _dt}
        finally:
            _setitimer(signal.ITIMER_REAL, 0)
    except _CallTimeout:
        _rec = {"i": _i, ("budget" if _capped else "timeout"): True, "t": _clock() - _t0}
    except MemoryError:
        _rec = {"i": _i, "exc": "MemoryError", "msg": "", "t": _clock() - _t0}
    except BaseException as e:  # SystemExit, SkipTest, ... all count as the call failing
        _rec = {"i": _i, "exc": type(e).__name__, "msg": str(e)[:500], "t": _clock() - _t0}
    _emit(_rec)
    if "budget" in _rec:
        _emit({"stop": "budget", "at": _i + 1})
        break
    if _STOP and ("timeout" in _rec or (_STOP == "failure" and "ok" not in _rec)):
        _emit({"stop": "timeout" if "timeout" in _rec else "failure", "at": _i + 1})
        break
try:
    sys.stderr.flush()
except BaseException:
    pass
os._exit(0)
