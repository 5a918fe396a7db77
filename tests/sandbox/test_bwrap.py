"""bubblewrap backend (skipped where bwrap is not installed or cannot create namespaces)."""

from __future__ import annotations

import os
import textwrap

import pytest

from evo_core.sandbox import Limits, RunRequest
from evo_core.sandbox.bwrap import bwrap_usable

ok, why = bwrap_usable()
pytestmark = pytest.mark.skipif(not ok, reason=why)


@pytest.fixture(scope="module")
def bw():
    from evo_core.sandbox.bwrap import BwrapSandbox

    sb = BwrapSandbox(2)
    yield sb
    sb.close()


def test_runs_code_and_argv(bw):
    r = bw.run(RunRequest(code="import sys\nprint(sys.stdin.read().upper())", stdin="abc"))
    assert r.ok and r.stdout == "ABC\n" and r.backend == "bwrap"
    r = bw.run(RunRequest(argv=("sh", "-c", "cat a.txt; echo x > b.txt"), files={"a.txt": "hi\n"}, collect=("b.txt",)))
    assert r.stdout == "hi\n" and r.files == {"b.txt": "x\n"}


def test_filesystem_is_an_allow_list(bw):
    r = bw.run(RunRequest(code=f"import os\nprint(sorted(os.listdir('/')))\nprint(os.path.exists({__file__!r}))"))
    assert "'home'" not in r.stdout and "'var'" not in r.stdout and r.stdout.strip().endswith("False")


def test_attacks_contained(bw):
    fork = bw.run(RunRequest(code="import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", limits=Limits(wall_seconds=1.0, processes=16)))
    assert not fork.ok and fork.infra_error is None
    loop = bw.run(RunRequest(code="while True: pass", limits=Limits(wall_seconds=0.5)))
    assert loop.timed_out
    mem = bw.run(RunRequest(code="x = bytearray(8 << 30)", limits=Limits(memory_mb=256)))
    assert mem.oom
    net = bw.run(RunRequest(code=textwrap.dedent("""
        import socket
        try:
            socket.create_connection(('192.0.2.1', 80), timeout=1); print('CONNECTED')
        except OSError:
            print('blocked')
    """)))
    assert net.stdout == "blocked\n"
    marker = f"/tmp/evo-bwrap-escape-{os.getpid()}"
    bw.run(RunRequest(code=f"open({marker!r}, 'w').write('x')"))
    assert not os.path.exists(marker)
