# Candidate-side harness for call-based tests (runs inside the sandbox, stdlib only;
# _values.py is prepended). It calls the candidate's function on each argument list and
# reports the *returned values*; it never sees expected outputs and compares nothing.
import io
import json
import os
import signal
import sys
import time
import traceback

_req = json.loads(sys.stdin.read())
sys.stdin = io.StringIO("")
_NONCE = _req["nonce"]
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


def _load():
    with open("solution.py", encoding="utf-8") as f:
        src = f.read()
    ns = {"__name__": "solution", "__file__": "solution.py", "__builtins__": __builtins__}
    try:
        code = compile(src, "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        _emit({"load_error": "compile_error", "exc": type(e).__name__, "msg": str(e)[:2000]})
        raise SystemExit(0)
    signal.setitimer(signal.ITIMER_REAL, _req.get("load_s", 5.0))
    try:
        exec(code, ns)
    except _CallTimeout:
        _emit({"load_error": "timeout", "exc": "Timeout", "msg": "module load exceeded its time limit"})
        raise SystemExit(0)
    except BaseException as e:
        _emit({"load_error": "runtime_error", "exc": type(e).__name__, "msg": "".join(traceback.format_exception_only(type(e), e))[-2000:]})
        raise SystemExit(0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    fn = _req["fn"]
    target = ns.get(fn)
    if callable(target):
        return lambda: target
    cls = ns.get("Solution")
    if isinstance(cls, type) and callable(getattr(cls, fn, None)):
        return lambda: getattr(cls(), fn)  # LeetCode style: a fresh instance per test
    _emit({"load_error": "runtime_error", "exc": "NameError", "msg": "no function or Solution method named %r" % fn})
    raise SystemExit(0)


signal.signal(signal.SIGALRM, _alarm)
_get = _load()
_emit({"loaded": True})
for _i, _call in enumerate(_req["calls"]):
    _args = decode_value(_call["args"])
    _kwargs = decode_value(_call.get("kwargs") or {"$d": []})
    _t0 = time.perf_counter()
    try:
        signal.setitimer(signal.ITIMER_REAL, _req["per_call_s"])
        try:
            _res = _get()(*_args, **_kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _dt = time.perf_counter() - _t0
        try:
            _rec = {"i": _i, "ok": encode_value(_res), "t": _dt}
        except Unencodable as e:
            _rec = {"i": _i, "bad_value": str(e), "t": _dt}
    except _CallTimeout:
        _rec = {"i": _i, "timeout": True, "t": time.perf_counter() - _t0}
    except MemoryError:
        _rec = {"i": _i, "exc": "MemoryError", "msg": "", "t": time.perf_counter() - _t0}
    except BaseException as e:  # SystemExit, SkipTest, ... all count as the call failing
        _rec = {"i": _i, "exc": type(e).__name__, "msg": str(e)[:500], "t": time.perf_counter() - _t0}
    _emit(_rec)
try:
    sys.stderr.flush()
except BaseException:
    pass
os._exit(0)
