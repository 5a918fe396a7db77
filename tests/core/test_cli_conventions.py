"""CLI conventions: usage errors exit 2 with a hint, ``--version``, completion scripts,
full-width TSV tables when stdout is a pipe, and ``evo tail --json``."""

from __future__ import annotations

import importlib.metadata as md
import json

import pytest

from evo_core.store import open_store
from evo_core.synthetic import generate_run
from tests.core.helpers import evo

LONG_ID = "quickstart-evolving-0123456789abcdef0123456789"


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('conv')}/evo.sqlite"
    st = open_store(url)
    generate_run(st, run_id=LONG_ID, steps=10, rollouts_per_step=4)
    st.close()
    return url


@pytest.mark.parametrize("args, usage, hint, error", [
    (["runs", "--bogus"], "Usage: evo runs [OPTIONS]", "Try 'evo runs --help' for help.", "No such option: --bogus"),
    (["run"], "Usage: evo run [OPTIONS] ", "Try 'evo run --help' for help.", "Missing argument 'config'"),
    (["nosuchcmd"], "Usage: evo [OPTIONS] COMMAND [ARGS]...", "Try 'evo --help' for help.", "No such command 'nosuchcmd'"),
])
def test_usage_errors_exit_2_with_usage_and_hint(args, usage, hint, error):
    r = evo(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    # typer spells a required argument CONFIG or {config} depending on its version
    assert usage in r.stderr and hint in r.stderr and error.lower() in r.stderr.lower(), r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_version_prints_the_distribution_version():
    r = evo("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"evo (evotrainer) {md.version('evotrainer')}"


@pytest.mark.parametrize("shell, needle", [("bash", "complete "), ("zsh", "compdef"), ("fish", "complete --command evo")])
def test_completion_prints_a_script(shell, needle):
    r = evo("completion", shell)
    assert r.returncode == 0, r.stderr
    assert "_EVO_COMPLETE" in r.stdout and needle in r.stdout


def test_completion_rejects_an_unknown_shell():
    r = evo("completion", "tcsh")
    assert r.returncode == 2 and "shell must be one of bash" in r.stderr


def _tsv(stdout: str) -> list[list[str]]:
    return [line.split("\t") for line in stdout.splitlines() if line and not line.startswith("# ")]


def test_tables_are_full_width_tsv_on_a_pipe(store_url):
    r = evo("runs", "--store", store_url)
    assert r.returncode == 0, r.stderr
    head, row = _tsv(r.stdout)
    assert head == ["run", "config", "mode", "status", "harness v", "step", "events", "started"]
    assert row[0] == LONG_ID and row[3] == "completed"
    assert "…" not in r.stdout and "─" not in r.stdout and "\x1b[" not in r.stdout

    r = evo("log", LONG_ID, "-n", "3", "--store", store_url)
    rows = _tsv(r.stdout)
    assert rows[0] == ["#", "pos", "type", "step", "summary"] and len(rows) == 4 and rows[1][2] == "RunStarted"
    assert all(len(x) == 5 for x in rows)

    r = evo("checkout", LONG_ID, "--store", store_url)
    assert "# diagnostics\nname\tversion\tparams\tsource\n" in r.stdout and "…" not in r.stdout

    r = evo("plugins")
    rows = _tsv(r.stdout)
    assert rows[0] == ["name", "distribution", "version", "registers"]
    assert any(x[0] == "evo_sinks" and "sinks: mlflow, tensorboard, wandb" in x[3] for x in rows[1:])


def test_json_stays_everywhere(store_url):
    for args in (["runs"], ["log", LONG_ID, "-n", "2"], ["checkout", LONG_ID], ["skills"]):
        r = evo(*args, "--json", "--store", store_url)
        assert r.returncode == 0, (args, r.stderr)
        text = r.stdout.strip()
        try:
            json.loads(text)
        except json.JSONDecodeError:
            [json.loads(line) for line in text.splitlines()]  # JSON lines
    assert "plugins" in json.loads(evo("plugins", "--json").stdout)


def test_tail_json_writes_one_event_per_line(store_url):
    r = evo("tail", LONG_ID, "--json", "--no-follow", "-n", "12", "--store", store_url)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 12  # every event, rollouts not collapsed
    assert lines[-1]["type"] == "evo.RunFinished" and lines[-1]["data"]["status"] == "completed"
    assert [x["version"] for x in lines] == sorted(x["version"] for x in lines)
    assert all(len(x["hash"]) == 64 and "step" in x["data"] or x["type"] != "evo.RolloutCompleted" for x in lines)


def test_a_bad_log_format_env_var_is_one_line():
    r = evo("runs", "--store", "memory://", env={"EVO_LOG_FORMAT": "xml"})
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: log format must be one of console, json, got 'xml' (from --log-format or $EVO_LOG_FORMAT)")
