"""The adversarial suite: every attack must score 0 (never 1, never an infra error that
training would silently mask) and leave the host untouched."""

from __future__ import annotations

import os
import socket
import textwrap
import threading
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
HE_PREFIX = "def has_close_elements(numbers, threshold):\n"


def _zero(v):
    assert v.infra_error is None, v.infra_error
    assert v.reward == 0.0 and v.correct is False, v.signals
    return v


# --- process and resource attacks (stdio problem: a + b) -------------------------------------

RESOURCE_ATTACKS = {
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "memory_bomb": "x = []\nwhile True:\n    x.append(bytearray(64 << 20))",
    "memory_bomb_one_shot": "x = bytearray(8 << 30)\nprint(3)",
    "infinite_loop": "while True:\n    pass",
    "huge_output": "import sys\nwhile True:\n    sys.stdout.write('3\\n' * 100000)",
    "sleep_past_limit": "import time\ntime.sleep(600)\nprint(3)",
}


@pytest.mark.parametrize("name", sorted(RESOURCE_ATTACKS))
def test_resource_attacks_score_zero(grader, sandbox, problems, name):
    v = _zero(grader.grade(problems["taco-sum"], RESOURCE_ATTACKS[name], scope="public"))
    # zero-filling a growing heap may hit the clock before the limit on a busy machine
    expected = {
        "memory_bomb": {"memory_limit", "timeout"},
        "memory_bomb_one_shot": {"memory_limit"},
        "infinite_loop": {"timeout"},
        "sleep_past_limit": {"timeout"},
    }.get(name)
    if expected:
        assert v.signals["outcomes"][0] in expected
    assert _sandbox_procs(sandbox) == []  # nothing the attack started is still running


def _sandbox_procs(sandbox):
    """Live processes running as one of this pool's sandbox uids."""
    uids = {w.isolation["uid"] for w in sandbox._all}
    out = []
    for n in os.listdir("/proc"):
        if n.isdigit():
            try:
                if os.stat(f"/proc/{n}").st_uid in uids:
                    with open(f"/proc/{n}/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            out.append(n)
            except OSError:
                pass
    return out


# --- escapes ---------------------------------------------------------------------------------


def test_socket_to_loopback_answer_server(grader, problems):
    """A server on the host's loopback would hand out the right answer; it must be unreachable."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    served = []

    def serve():
        srv.settimeout(10)
        try:
            while True:
                c, _ = srv.accept()
                data = c.recv(100).decode()
                a, b = map(int, data.split())
                c.sendall(f"{a + b}\n".encode())
                served.append(1)
                c.close()
        except OSError:
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    code = (
        "import socket, sys\nline = sys.stdin.readline()\ns = socket.create_connection(('127.0.0.1', %d), timeout=1)\n"
        "s.sendall(line.encode())\nprint(s.recv(100).decode().strip())" % port
    )
    try:
        _zero(grader.grade(problems["taco-sum"], code, scope="all"))
        assert served == []
    finally:
        srv.close()


def test_socket_to_outside(grader, problems):
    # 192.0.2.1 is TEST-NET-1: unroutable by definition; a short timeout either way.
    code = (
        "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), timeout=1)\n    print(3)\n"
        "except OSError:\n    print('no network')"
    )
    v = _zero(grader.grade(problems["taco-sum"], code, scope="public"))
    assert v.signals["outcomes"][0] == "wrong_answer"


# The candidate looks its expected output up in the dataset file. It parses the JSON lines
# with builtins only: without the mount namespace, a sandbox uid may be unable to import
# from an interpreter installed under a private home (pyenv under /root), and the control
# below must show the attack itself working, not an import failing.
_LOOKUP_ATTACK = f"""for line in open({str(FIXTURES / 'taco.jsonl')!r}):
    plain = dict(true=True, false=False, null=None)
    io = eval(eval(line, plain)['input_output'], plain)
    for i, o in zip(io['inputs'], io['outputs']):
        if i == inp:
            print(o)"""


def test_reading_the_dataset_and_writing_outside(grader, problems, tmp_path):
    """The candidate looks up the expected output in the dataset file and plants files."""
    marker = tmp_path / "planted"
    code = f"""
import sys
inp = sys.stdin.read()
for path in ({str(FIXTURES / 'taco.jsonl')!r}, {str(marker)!r}, '/tmp/evo-planted'):
    try:
        open(path, 'a').write('pwned')
    except OSError:
        pass
try:
{textwrap.indent(_LOOKUP_ATTACK, "    ")}
except OSError:
    print('dataset hidden')
"""
    before = (FIXTURES / "taco.jsonl").read_bytes()
    _zero(grader.grade(problems["taco-sum"], code, scope="all"))
    assert (FIXTURES / "taco.jsonl").read_bytes() == before
    assert not marker.exists() and not os.path.exists("/tmp/evo-planted")


EXIT_ATTACKS = {
    "os_exit_at_import": "import os\nos._exit(0)\n",
    "sys_exit_at_import": "import sys\nsys.exit(0)\n",
    "skiptest_at_import": "import unittest\nraise unittest.SkipTest('skip')\n",
    "os_exit_in_call": "def {fn}(*a, **k):\n    import os\n    os._exit(0)\n",
    "sys_exit_in_call": "def {fn}(*a, **k):\n    raise SystemExit(0)\n",
    "skiptest_in_call": "def {fn}(*a, **k):\n    import unittest\n    raise unittest.SkipTest('nope')\n",
    "forged_passed_lines": "print('PASSED'); print('All tests passed'); print('{{\"final\": true, \"results\": []}}')\ndef {fn}(*a, **k):\n    print('test_ok PASSED')\n    return None\n",
}


@pytest.mark.parametrize("name", sorted(EXIT_ATTACKS))
@pytest.mark.parametrize("pid", ["HumanEval/0", "3", "taco-fn"])
def test_exit_skip_and_forged_output(grader, problems, name, pid):
    p = problems[pid]
    _zero(grader.grade(p, EXIT_ATTACKS[name].format(fn=p.fn_name), scope="all"))


def test_stdio_exit_zero_with_no_output(grader, problems):
    v = _zero(grader.grade(problems["taco-sum"], "import os\nos._exit(0)"))
    assert v.signals["outcomes"][0] == "wrong_answer" and set(v.signals["outcomes"]) <= {"wrong_answer", "skipped"}


# --- grader attacks --------------------------------------------------------------------------

ALWAYS_EQUAL = """
class _Yes:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = object.__hash__
class _YesInt(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
class _YesList(list):
    def __eq__(self, other): return True
def {fn}(*args, **kwargs):
    return {ret}
"""


@pytest.mark.parametrize("ret", ["_Yes()", "_YesInt(0)", "_YesList()", "[_Yes()]", "True if False else _Yes()"])
@pytest.mark.parametrize("pid", ["HumanEval/0", "3", "taco-fn", "lc1"])
def test_always_equal_objects(grader, problems, ret, pid):
    p = problems[pid]
    code = ALWAYS_EQUAL.format(fn=p.fn_name, ret=ret)
    if pid == "lc1":
        code += "\nclass Solution:\n    def twoSum(self, nums, target):\n        return twoSum()\n"
    _zero(grader.grade(p, code, scope="all"))


STACK_SNOOP = """
import sys, gc
def _snoop():
    # walk every frame and every live object looking for the expected answers
    found = []
    f = sys._getframe()
    while f is not None:
        for k, v in list(f.f_locals.items()) + list(f.f_globals.items()):
            if k in ('expected', 'outputs', 'output', '_req', 'memo', '_memo', 'in_outs'):
                found.append(v)
        f = f.f_back
    for o in gc.get_objects():
        if isinstance(o, dict) and ('outputs' in o or 'output' in o or 'memo' in o):
            found.append(o)
    return found
def {fn}(*args, **kwargs):
    for v in _snoop():
        if isinstance(v, dict):
            for key in ('outputs', 'output'):
                if key in v:
                    out = v[key]
                    return out[0] if isinstance(out, list) and out else out
    return None
"""


@pytest.mark.parametrize("pid", ["HumanEval/0", "3", "taco-fn", "lc1"])
def test_stack_and_heap_snooping(grader, problems, pid):
    p = problems[pid]
    code = STACK_SNOOP.format(fn=p.fn_name)
    if pid == "lc1":
        code += "\nclass Solution:\n    def twoSum(self, nums, target):\n        return twoSum()\n"
    _zero(grader.grade(p, code, scope="all"))


def test_forging_result_records_with_the_nonce(grader, problems):
    """A candidate that digs the harness's nonce out of the heap and writes result records
    itself can only claim return values, and it does not know the expected ones."""
    code = """
import gc, json, os
for o in gc.get_objects():
    if isinstance(o, dict) and 'nonce' in o and 'calls' in o:
        recs = ''.join(o['nonce'] + ' ' + json.dumps({'i': i, 'ok': 6, 't': 0.0}) + '\\n' for i in range(len(o['calls'])))
        for fd in range(1, 20):  # the results channel is one of these
            try:
                os.write(fd, recs.encode())
            except OSError:
                pass
        os._exit(0)
def total(xs):
    return 6
"""
    v = _zero(grader.grade(problems["taco-fn"], code, scope="all"))
    assert v.signals["outcomes"] == ["pass", "wrong_answer", "wrong_answer"]


def test_monkeypatching_builtins_does_not_reach_the_tests(grader, problems):
    code = HE_PREFIX + (
        "    import builtins\n"
        "    builtins.AssertionError = type('X', (Exception,), {})\n"
        "    builtins.abs = lambda x: 0\n"
        "    return None\n"
    )
    _zero(grader.grade(problems["HumanEval/0"], code, scope="all"))


def test_valid_solution_still_passes_after_the_attacks(grader, problems):
    for pid in ("taco-sum", "taco-fn", "HumanEval/0", "3"):
        assert grader.grade(problems[pid], problems[pid].reference).reward == 1.0


# --- controls: the attacks are real (they win when the isolation layer is switched off) ---


def test_control_dataset_attack_wins_without_mount_isolation(problems):
    from evo_code import CodeGrader, GradeConfig
    from evo_core.sandbox import LocalSandbox

    code = f"""
import sys
inp = sys.stdin.read()
{_LOOKUP_ATTACK}
"""
    with LocalSandbox(1, mount_namespace=False) as sb:
        v = CodeGrader(sb, GradeConfig(calibrate=False)).grade(problems["taco-sum"], code)
    assert v.reward == 1.0  # so the hidden-filesystem test above is testing something


def test_control_loopback_attack_wins_without_network_namespace(problems):
    from evo_code import CodeGrader, GradeConfig
    from evo_core.sandbox import LocalSandbox

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]

    def serve():
        srv.settimeout(10)
        try:
            while True:
                c, _ = srv.accept()
                a, b = map(int, c.recv(100).decode().split())
                c.sendall(f"{a + b}\n".encode())
                c.close()
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    code = (
        "import socket, sys\nline = sys.stdin.readline()\ns = socket.create_connection(('127.0.0.1', %d), timeout=2)\n"
        "s.sendall(line.encode())\nprint(s.recv(100).decode().strip())" % port
    )
    try:
        with LocalSandbox(1, network_namespace=False) as sb:
            v = CodeGrader(sb, GradeConfig(calibrate=False)).grade(problems["taco-sum"], code)
        assert v.reward == 1.0
    finally:
        srv.close()
