"""``evo runs | log | checkout | diff | verify``: output and one-line errors."""

from __future__ import annotations

import json

import pytest

from evo_core.store import open_store
from evo_core.synthetic import generate_run
from tests.core.helpers import evo


@pytest.fixture(scope="module")
def store_with_run(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('cli')}/evo.sqlite"
    st = open_store(url)
    run_id = generate_run(st, steps=20, rollouts_per_step=6)
    st.close()
    return url, run_id


def test_runs_log_checkout_diff_json(store_with_run):
    url, run_id = store_with_run
    r = evo("runs", "--store", url, "--json")
    assert r.returncode == 0, r.stderr
    [row] = json.loads(r.stdout)
    assert row["run_id"] == run_id and row["status"] == "completed" and row["harness_version"] == 2
    assert row["config"] == "synthetic" and row["step"] == 20
    r = evo("log", run_id, "--type", "Promoted", "--type", "evo.Rejected", "--json", "--store", url)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["type"] for x in lines] == ["evo.Promoted", "evo.Rejected", "evo.Promoted", "evo.Rejected"]
    assert lines[0]["data"]["harness_version_after"] == 1 and len(lines[0]["hash"]) == 64
    r = evo("checkout", run_id, "--at", "1", "--json", "--store", url)
    s = json.loads(r.stdout)
    assert s["harness_version"] == 1 and len(s["interventions"]) == 1 and s["position"] == lines[0]["version"]
    r = evo("diff", run_id, "1", "2", "--json", "--store", url)
    d = json.loads(r.stdout)
    assert d["harness_version"] == [1, 2] and len(d["interventions"]["added"]) == 1
    r = evo("diff", run_id, "0", "2", "--store", url)
    assert r.returncode == 0 and "+ intervention" in r.stdout and "ledger: promoted" in r.stdout
    r = evo("checkout", run_id, "--at", "2", "--store", url)
    assert r.returncode == 0 and "harness v2" in r.stdout and "sim_exploit_penalty" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["runs", "--store", "sqlite:////nonexistent/dir/evo.sqlite"], "no store at '/nonexistent/dir/evo.sqlite'"),
    (["log", "ghost"], "no run 'ghost'"),
    (["log", "RUN", "--type", "Nope"], "unknown event type(s) evo.Nope"),
    (["checkout", "RUN", "--at", "77"], "never reached harness version 77 (latest: 2)"),
    (["checkout", "RUN", "--at", "banana"], "is not a harness version"),
    (["diff", "RUN", "0", "pos:999999"], "positions 1.."),
    (["runs", "--store", "postgresql://postgres@127.0.0.1:1/test?connect_timeout=1"], "cannot reach PostgreSQL at 127.0.0.1:1/test"),
    (["runs", "--store", "oracle://x"], "unsupported store URL 'oracle://x'"),
])
def test_errors_are_one_line_without_traceback(store_with_run, args, message):
    url, run_id = store_with_run
    args = [run_id if a == "RUN" else a for a in args]
    if "--store" not in args:
        args += ["--store", url]
    r = evo(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_debug_shows_the_traceback(store_with_run):
    url, _ = store_with_run
    r = evo("--debug", "runs", "--store", "oracle://x")
    assert r.returncode != 0 and "Traceback" in r.stderr and "unsupported store URL" in r.stderr


def test_default_store_url_is_used(tmp_path):
    url = f"sqlite:///{tmp_path}/default.sqlite"
    st = open_store(url)
    generate_run(st, steps=1, rollouts_per_step=2, run_id="via-env")
    st.close()
    r = evo("runs", "--json", env={"EVO_STORE": url})
    assert [x["run_id"] for x in json.loads(r.stdout)] == ["via-env"]


def test_non_utf8_response_file_reads_like_the_same_bytes_on_stdin(tmp_path):
    pytest.importorskip("evo_math.grading")
    import os
    import subprocess
    import sys

    raw = "The answer is \\boxed{42} ".encode() + b"\xff\xfe."
    (tmp_path / "r.bin").write_bytes(raw)
    from_file = evo("grade", "math", "--gold", "42", "--response", f"@{tmp_path / 'r.bin'}", env={"EVO_NO_PLUGIN_COMMANDS": "0"})
    assert from_file.returncode == 0, from_file.stderr
    from_stdin = subprocess.run([sys.executable, "-m", "evo_core.cli.app", "grade", "math", "--gold", "42", "--response", "-"],
                                input=raw, capture_output=True, timeout=120, env={**os.environ, "EVO_NO_PLUGIN_COMMANDS": "0"})
    assert from_stdin.returncode == 0, from_stdin.stderr
    a, b = json.loads(from_file.stdout), json.loads(from_stdin.stdout)
    assert (a["reward"], a["extracted"], a["answers"]) == (b["reward"], b["extracted"], b["answers"]) == (1.0, "42", ["42"])


@pytest.mark.parametrize("url", ["sqlite:////proc/no-such-dir/x.sqlite", "bogus://x"])
def test_run_store_errors_are_one_line_exit_2(tmp_path, url):
    r = evo("run", "configs/quickstart.toml", "--store", url, "--set", "run.steps=1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
