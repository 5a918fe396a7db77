"""The local backend: behaviour, limits and the adversarial suite at the executor level."""

from __future__ import annotations

import os
import signal
import socket
import textwrap
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo_core.sandbox import ExecResult, Limits, LocalSandbox, RunRequest

from .conftest import uid_processes

FAST = Limits(wall_seconds=3.0, memory_mb=512, processes=32)


def run(sb, code, **kw):
    limits = kw.pop("limits", FAST)
    return sb.run(RunRequest(code=textwrap.dedent(code), limits=limits, **kw))


# --- plain behaviour -----------------------------------------------------------------------


def test_stdout_stdin_exit_code(local_sandbox):
    r = run(local_sandbox, "import sys\nprint(sys.stdin.read().upper())\nsys.exit(3)", stdin="abc")
    assert r.stdout == "ABC\n" and r.exit_code == 3 and r.infra_error is None and not r.timed_out


def test_argv_files_collect_and_cwd(local_sandbox):
    r = local_sandbox.run(
        RunRequest(
            argv=["sh", "-c", "cat in/a.txt; echo out > result.txt; pwd"],
            files={"in/a.txt": "hello\n"},
            collect=("result.txt", "missing.txt"),
        )
    )
    assert r.ok, r
    assert r.stdout.startswith("hello\n")
    assert r.files == {"result.txt": "out\n"}


def test_binary_files_and_stdin(local_sandbox):
    data = bytes(range(256))
    r = run(
        local_sandbox,
        "import sys\nb=open('blob.bin','rb').read()\nsys.stdout.write(str(b==bytes(range(256))))\n"
        "sys.stdout.write(str(len(sys.stdin.buffer.read())))",
        files={"blob.bin": data},
        stdin=data,
    )
    assert r.stdout == "True256"


def test_runtime_error_has_clean_traceback(local_sandbox):
    r = run(local_sandbox, "def f():\n    raise ValueError('boom')\nf()")
    assert r.exit_code == 1 and "ValueError: boom" in r.stderr
    assert "_worker.py" not in r.stderr  # the program's traceback, not ours


def test_a_program_that_breaks_its_error_handling_still_ends_as_itself(local_sandbox):
    # traceback unimportable and os._exit disabled: the child must still exit on its own,
    # never fall back into the worker's code, and the worker must stay healthy.
    r = run(local_sandbox, """
        import os, sys
        sys.modules['traceback'] = None
        os._exit = lambda code: None
        raise ValueError('broken on purpose')
    """)
    assert r.exit_code == 1 and r.infra_error is None
    assert "ValueError: broken on purpose" in r.stderr and "_worker.py" not in r.stderr
    again = run(local_sandbox, "print('still fine')")
    assert again.ok and again.stdout == "still fine\n"


def test_modules_not_preloaded_import_from_the_interpreter(local_sandbox):
    r = run(local_sandbox, "import json, re, shutil, fractions\nprint(json.dumps([re.sub('a', 'b', 'aa')]))")
    assert r.ok and r.stdout == '["bb"]\n', r


def test_environment_is_scrubbed(local_sandbox, monkeypatch):
    monkeypatch.setenv("EVO_SECRET_TOKEN", "s3cr3t")
    r = run(local_sandbox, "import os\nprint(sorted(os.environ))", env={"EXTRA": "1"})
    assert "EVO_SECRET_TOKEN" not in r.stdout and "'EXTRA'" in r.stdout


def test_runs_unprivileged(local_sandbox):
    r = run(local_sandbox, "import os\nprint(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())")
    uid, euid, gid, groups = r.stdout.split(" ", 3)
    assert int(uid) != 0 and int(euid) != 0 and int(gid) != 0 and groups.strip() == "[]"


def test_command_not_found_is_infra_error(local_sandbox):
    r = local_sandbox.run(RunRequest(argv=["definitely-not-a-command-xyz"]))
    assert r.infra_error and "cannot execute" in r.infra_error


def test_workdir_mode_keeps_files_and_hands_back_ownership(local_sandbox, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    r = local_sandbox.run(RunRequest(argv=["sh", "-c", "echo y=2 >> a.py; touch new.txt"], workdir=str(ws)))
    assert r.ok, r
    assert (ws / "a.py").read_text() == "x = 1\ny=2\n"
    assert (ws / "new.txt").stat().st_uid == os.getuid()


def test_run_many_parallel(local_sandbox):
    reqs = [RunRequest(code=f"print({i}*2)") for i in range(12)]
    outs = [r.stdout.strip() for r in local_sandbox.run_many(reqs)]
    assert outs == [str(i * 2) for i in range(12)]


@settings(max_examples=15, deadline=None)
@given(st.text(max_size=200))
def test_stdin_roundtrip_any_text(local_sandbox, text):
    text = text.replace("\r", "")  # universal newlines on text stdin
    r = run(local_sandbox, "import sys\nsys.stdout.write(sys.stdin.read())", stdin=text)
    assert r.stdout == text.encode("utf-8", "replace").decode("utf-8", "replace")


@settings(max_examples=30)
@given(
    code=st.text(min_size=1, max_size=50),
    stdin=st.one_of(st.text(max_size=20), st.binary(max_size=20)),
    files=st.dictionaries(st.from_regex(r"[a-z]{1,8}(/[a-z]{1,8})?", fullmatch=True), st.binary(max_size=10), max_size=3),
    wall=st.floats(min_value=0.1, max_value=100),
)
def test_request_json_roundtrip(code, stdin, files, wall):
    req = RunRequest(code=code, stdin=stdin, files=files, limits=Limits(wall_seconds=wall))
    assert RunRequest.from_json(req.to_json()) == req


def test_bad_requests_are_rejected():
    with pytest.raises(ValueError, match="exactly one"):
        RunRequest()
    with pytest.raises(ValueError, match="relative"):
        RunRequest(code="", files={"../x": "y"})
    with pytest.raises(ValueError, match="wall_seconds"):
        Limits(wall_seconds=0)


# --- resource attacks ---------------------------------------------------------------------


def test_infinite_loop_times_out(local_sandbox):
    r = run(local_sandbox, "while True: pass", limits=Limits(wall_seconds=1.0))
    assert r.timed_out and r.exit_code != 0 and r.infra_error is None


def test_sleep_past_limit_killed(local_sandbox):
    r = run(local_sandbox, "import time\ntime.sleep(60)", limits=Limits(wall_seconds=0.5))
    assert r.timed_out and r.wall_time < 5


def test_memory_bomb_flags_oom(local_sandbox):
    r = run(local_sandbox, "x = []\nwhile True: x.append(bytearray(50 << 20))", limits=Limits(memory_mb=256))
    assert r.oom and not r.ok


def test_huge_output_is_capped(local_sandbox):
    r = run(
        local_sandbox,
        "import sys\nwhile True: sys.stdout.write('x' * 65536)",
        limits=Limits(wall_seconds=1.0, output_bytes=10_000),
    )
    # output is a file: it stops at RLIMIT_FSIZE (EFBIG in Python, which ignores SIGXFSZ)
    # or at the clock, whichever comes first
    assert r.stdout_truncated and len(r.stdout) == 10_000 and not r.ok
    assert r.timed_out or r.signal == signal.SIGXFSZ or "File too large" in r.stderr


def test_big_output_completes_truncated_without_blocking(local_sandbox):
    r = run(local_sandbox, "import sys\nsys.stdout.write('y' * (3 << 20))\nsys.stderr.write('done')", limits=Limits(output_bytes=1 << 20))
    assert r.exit_code == 0 and r.stdout_truncated and len(r.stdout) == 1 << 20 and r.stderr == "done"


def test_file_size_limit(local_sandbox):
    r = run(local_sandbox, "open('big','wb').write(b'x' * (3 << 20))", limits=Limits(file_size_mb=1))
    assert r.exit_code != 0 or r.signal is not None


def test_fork_bomb_contained_and_cleaned_up(local_sandbox):
    r = run(
        local_sandbox,
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        limits=Limits(wall_seconds=1.5, processes=32),
    )
    assert not r.ok and r.infra_error is None
    assert uid_processes(r.isolation["uid"]) == []
    # the pool still works afterwards
    assert run(local_sandbox, "print('alive')").stdout == "alive\n"


def test_daemonised_grandchild_is_killed(local_sandbox):
    r = run(
        local_sandbox,
        """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(300)
            os._exit(0)
        print('parent done')
        """,
    )
    assert r.stdout == "parent done\n"
    assert uid_processes(r.isolation["uid"]) == []


def test_no_zombies_left_in_worker(local_sandbox):
    for _ in range(3):
        run(local_sandbox, "import os\nfor _ in range(5):\n    os.fork() or os._exit(0)")
    zombies = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    rest = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if rest[0] == "Z" and int(rest[1]) in {w.proc.pid for w in local_sandbox._all}:
                zombies.append(name)
    assert zombies == []


# --- escapes ------------------------------------------------------------------------------


def test_no_network_to_loopback(local_sandbox):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        code = f"""
        import socket
        s = socket.socket(); s.settimeout(1.0)
        try:
            s.connect(('127.0.0.1', {port})); print('CONNECTED')
        except OSError as e:
            print('blocked', e)
        """
        r = run(local_sandbox, code)
        assert "blocked" in r.stdout and "CONNECTED" not in r.stdout
        if local_sandbox.isolation.get("network") == "namespace":
            # with network=True the job is back in the host namespace and can connect
            r2 = local_sandbox.run(RunRequest(code=textwrap.dedent(code), limits=Limits(network=True)))
            assert "CONNECTED" in r2.stdout
    finally:
        srv.close()


def test_no_network_to_outside(local_sandbox):
    # TEST-NET-1 (RFC 5737) is unroutable: no real traffic leaves the host either way.
    r = run(
        local_sandbox,
        """
        import socket
        s = socket.socket(); s.settimeout(1.0)
        try:
            s.connect(('192.0.2.1', 80)); print('CONNECTED')
        except OSError as e:
            print('blocked', type(e).__name__)
        """,
    )
    assert "blocked" in r.stdout


def test_cannot_read_or_write_outside(local_sandbox, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("expected output 42")
    hidden_dir = "/usr/local/share/evo-sandbox-test-hidden"  # visible by default: hidden on request
    os.makedirs(hidden_dir, exist_ok=True)
    with open(f"{hidden_dir}/answers.txt", "w") as f:
        f.write("answers")
    os.chmod(f"{hidden_dir}/answers.txt", 0o644)
    marker = f"/tmp/evo-escape-{os.getpid()}"
    try:
        r = local_sandbox.run(
            RunRequest(
                code=textwrap.dedent(
                    f"""
                    for path in [{str(secret)!r}, '{hidden_dir}/answers.txt', '/root/.bashrc', {__file__!r}]:
                        try:
                            print('READ', path, open(path).read()[:20])
                        except OSError as e:
                            print('denied', path, type(e).__name__)
                    for path in [{marker!r}, '/etc/evo-escape', '/usr/evo-escape', {str(tmp_path / 'w')!r}]:
                        try:
                            open(path, 'w').write('pwned'); print('WROTE', path)
                        except OSError as e:
                            print('denied', path, type(e).__name__)
                    """
                ),
                hide_paths=(hidden_dir,),
            )
        )
        assert "READ" not in r.stdout, r.stdout
        # a write may land in the job's private tmpfs, never on the host
        assert not os.path.exists(marker)
        assert not os.path.exists("/etc/evo-escape") and not os.path.exists("/usr/evo-escape")
        assert not (tmp_path / "w").exists()
    finally:
        os.remove(f"{hidden_dir}/answers.txt")
        os.rmdir(hidden_dir)


@pytest.mark.parametrize("per_job_namespace", [False, True])
def test_proc_shows_only_the_jobs_own_processes(local_sandbox, tmp_path, per_job_namespace):
    # The trainer's command line (URLs, tokens) and every other process stay out of sight.
    code = textwrap.dedent(
        f"""
        import os
        pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
        print(pids == [os.getpid()], {os.getpid()} in pids)
        try:
            print('READ', open('/proc/{os.getpid()}/cmdline').read()[:40])
        except OSError as e:
            print('denied', type(e).__name__)
        """
    )
    workdir = tmp_path if per_job_namespace else None  # a workdir takes the per-job mount namespace
    r = local_sandbox.run(RunRequest(code=code, workdir=str(workdir) if workdir else None))
    assert r.ok, r
    assert r.stdout.splitlines()[0] == "True False" and "READ" not in r.stdout, r.stdout
    assert local_sandbox.isolation["proc"] == "own processes only"


def test_control_proc_shows_the_host_without_the_mount_namespace():
    with LocalSandbox(1, mount_namespace=False) as sb:
        r = sb.run(RunRequest(code=f"import os\nprint(os.path.exists('/proc/{os.getpid()}'))"))
    assert r.stdout == "True\n"  # so the test above is testing something


# --- infrastructure failures --------------------------------------------------------------


def test_worker_death_is_infra_error_and_pool_recovers():
    sb = LocalSandbox(1)
    try:
        w = sb._all[0]
        threading.Timer(0.3, w.proc.kill).start()
        r = sb.run(RunRequest(code="import time\ntime.sleep(5)", limits=Limits(wall_seconds=10)))
        assert r.infra_error is not None and r.exit_code is None
        assert isinstance(r, ExecResult)
        r2 = sb.run(RunRequest(code="print(7)"))
        assert r2.stdout == "7\n", r2.infra_error
    finally:
        sb.close()


def test_workers_have_no_torch_loaded(local_sandbox):
    import torch  # noqa: F401  (the parent has it; the workers must not)

    for w in local_sandbox._all:
        with open(f"/proc/{w.proc.pid}/maps") as f:
            assert "libtorch" not in f.read()
    r = run(local_sandbox, "import sys\nprint('torch' in sys.modules)")
    assert r.stdout == "False\n"


def test_namespaces_switched_off_still_runs_and_says_so():
    with LocalSandbox(1, network_namespace=False, mount_namespace=False) as sb:
        assert sb.isolation["network"] == "host" and sb.isolation["mounts"] == "host"
        r = sb.run(RunRequest(code="import os\nprint(os.getuid() != 0)", hide_paths=("/srv",)))
        assert r.ok and r.stdout == "True\n"
