"""``evo audit``, ``evo replay``, ``evo report``, ``evo tail`` and ``evo plugin new``.

``evo plugins`` (plural, listing what is installed) lives in ``plugin_cmds``; the
``plugin`` group here only scaffolds new plugins.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from evo_core.cli.app import fail
from evo_core.cli.runnames import run_arg, run_args

RUN_HELP = "Run id, a unique prefix of one, @last (the newest run) or PREFIX@last."

STORE_OPT = typer.Option(None, "--store", envvar="EVO_STORE", help="Store URL (default: sqlite:///.evo/evo.sqlite).")


def _logs_to_stderr() -> None:
    """Structured logs go to stderr (stdout carries the command's output, e.g. --json)."""
    from evo_core.logformat import configure

    configure(default_level="WARNING")


def _open(url: Optional[str], *, read_only: bool = True, wait: float = 0.0, poll: float = 0.2):
    """The store, opened read-only unless the command writes (so a read-only store can be audited).
    With ``wait``, a place that holds no event log yet (a run about to start creates it, on
    SQLite or PostgreSQL alike) is retried every ``poll`` seconds until the wait is over."""
    from evo_core.store import NoEventLog, StoreError, open_store

    _logs_to_stderr()
    deadline = time.monotonic() + wait
    while True:
        try:
            return open_store(url, read_only=read_only)
        except NoEventLog as exc:
            if time.monotonic() >= deadline:
                raise fail(f"cannot open store {url or '(default)'}: {exc}") from None
        except (StoreError, OSError) as exc:
            raise fail(f"cannot open store {url or '(default)'}: {exc}") from None
        time.sleep(poll)


def _bad(exc: Exception) -> "typer.Exit":
    return fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def audit_cmd(
    run: str = typer.Argument(..., help=RUN_HELP),
    promotion: Optional[str] = typer.Option(None, "--promotion", "-p", help="Audit only this promotion (or rejection) id or unique prefix."),
    as_json: bool = typer.Option(False, "--json", help="Print the chains as JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Everything on each chain (default: one screen per promotion)."),
    evidence: int = typer.Option(20, "--evidence", help="Evidence rollouts per chain (--verbose, --json; a screen shows at most 5)."),
    window: int = typer.Option(10, "--window", help="Steps before/after used to judge whether the prediction held."),
    store_url: Optional[str] = STORE_OPT,
) -> None:
    """The evidence chain behind every promotion, with the hash chain verified: one screen per
    promotion (what, predicate, diagnosis, evidence, gates, whether the prediction held)."""
    from evo_core.audit.chain import audit_run
    from evo_core.audit.errors import AuditError
    from evo_core.audit.render import render_report
    from evo_core.audit.screen import EVIDENCE, render_screens
    from evo_core.store import CorruptRecord

    store = _open(store_url)
    run = run_arg(store, run)
    try:
        report = audit_run(store, run, promotion, max_evidence=evidence, window=window)
    except AuditError as exc:
        raise _bad(exc) from None
    except CorruptRecord as exc:  # a tampered payload that no longer decodes
        raise fail(exc.user_line()) from None
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    elif verbose:
        render_report(report, Console(highlight=False, soft_wrap=True))
    else:
        render_screens(report, Console(highlight=False, soft_wrap=True), evidence=min(EVIDENCE, evidence))
    bad = [c for c in report.chains if not c.verification.verified]
    if bad:
        raise fail(f"{len(bad)} of {len(report.chains)} chains cannot be vouched for; first: {bad[0].verification.problem}", code=1)


def replay_cmd(
    run: str = typer.Argument(..., help=RUN_HELP + " The run is only read."),
    with_: List[str] = typer.Option([], "--with", help="SPEC: NAME, NAME@VERSION:k=v,…, gate:NAME, -NAME, or a .json/.toml/skill file. Repeatable. Without one: the run's own harness (does it reproduce the run?)."),
    find_bad: bool = typer.Option(False, "--find-bad", help="List promotions the strict oracle calls harmful that the later harness (plus SPEC) would have blocked."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    window: Optional[int] = typer.Option(None, "--window", help="Evidence window in steps (default: the run's harness.window_steps)."),
    every: Optional[int] = typer.Option(None, "--every", help="Diagnostic pass every N steps (default: the run's harness.diagnose_every)."),
    no_write: bool = typer.Option(False, "--no-write", help="Do not record the replay in its own stream."),
    store_url: Optional[str] = STORE_OPT,
) -> None:
    """Counterfactual replay: the harness engine again over the recorded evidence, with other diagnostics/gates."""
    from evo_core.audit.errors import AuditError
    from evo_core.audit.render_replay import render_replay
    from evo_core.audit.replay import replay
    from evo_core.audit.spec import parse_spec
    from evo_core.plugins import get_plugin_manager

    store = _open(store_url, read_only=no_write)
    run = run_arg(store, run)
    err = Console(stderr=True)
    try:
        spec = parse_spec(with_)
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(TextColumn("replaying"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} events"),
                      TimeRemainingColumn(), console=err, transient=True, disable=as_json or not err.is_terminal) as bar:
            task = bar.add_task("replay", total=1)
            result = replay(store, run, spec, get_plugin_manager(), find_bad=find_bad, write=not no_write,
                            window_steps=window, every=every,
                            progress=lambda i, n: bar.update(task, completed=i, total=n))
    except AuditError as exc:
        raise _bad(exc) from None
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    else:
        render_replay(result, Console(highlight=False, soft_wrap=True))


def report_cmd(
    runs: List[str] = typer.Argument(..., help="Run (id, unique prefix, @last, PREFIX@last); several runs make a comparison (the first is the baseline)."),
    out: Path = typer.Option(..., "-o", "--out", help="Directory to write index.html into."),
    benchmark: Optional[Path] = typer.Option(None, "--benchmark", help="An evolution benchmark JSON for the fixed-vs-evolving comparison."),
    points: int = typer.Option(400, "--points", help="Most points per curve (curves are downsampled)."),
    store_url: Optional[str] = STORE_OPT,
) -> None:
    """A self-contained HTML page of a run, or comparing several runs (works offline)."""
    from evo_core.audit.errors import AuditError
    from evo_core.report import build_report

    store = _open(store_url)
    runs = run_args(store, runs)
    try:
        path = build_report(store, runs, out, benchmark=benchmark, max_points=points)
    except AuditError as exc:
        raise _bad(exc) from None
    Console(highlight=False, soft_wrap=True).print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


def tail_cmd(
    run: str = typer.Argument(..., help=RUN_HELP),
    last: int = typer.Option(10, "-n", "--last", help="Show this many past events first."),
    follow: bool = typer.Option(True, "--follow/--no-follow", help="Keep following new events."),
    until_finished: bool = typer.Option(True, "--until-finished/--forever", help="Stop once the run logs RunFinished."),
    rollouts: bool = typer.Option(False, "--rollouts", help="One line per rollout (default: one summary line per step)."),
    wait: float = typer.Option(0.0, "--wait", help="Seconds to wait for the run to appear (a run about to start)."),
    poll: float = typer.Option(0.2, "--poll", help="Polling interval in seconds."),
    store_url: Optional[str] = STORE_OPT,
    as_json: bool = typer.Option(False, "--json", help="One JSON object per event (JSON Lines, rollouts included)."),
) -> None:
    """Follow a live run's events as compact, colourised lines (or JSON lines)."""
    from evo_core.audit.errors import AuditError
    from evo_core.audit.tail import tail

    deadline = time.monotonic() + wait  # one wait: for the store, then for the run's first event
    store = _open(store_url, wait=wait, poll=poll)
    run = _tail_run(store, run, wait)
    try:
        tail(store, run, Console(highlight=False, soft_wrap=True), last=last, follow=follow, until_finished=until_finished,
             per_rollout=rollouts, wait=max(0.0, deadline - time.monotonic()), poll=poll, as_json=as_json)
    except AuditError as exc:
        raise _bad(exc) from None
    except KeyboardInterrupt:
        pass


def _tail_run(store, text: str, wait: float) -> str:
    """The run to follow; with ``--wait`` a full id not in the store yet is kept as it is
    (the run is about to start), while a prefix or @last must name a run now."""
    from evo_core.store.runs import LAST, RunNameError, resolve_run

    try:
        return resolve_run(store, text)
    except RunNameError as exc:
        if wait > 0 and text not in LAST and not text.endswith("@last") and not exc.candidates:
            return text
        raise fail(str(exc)) from None


plugin_app = typer.Typer(help="Write plugins: scaffold a new plugin distribution.", no_args_is_help=True)


@plugin_app.command("new")
def plugin_new_cmd(
    name: str = typer.Argument(..., help="Plugin name, e.g. multi-number-reward."),
    kind: str = typer.Option(..., "--kind", help="diagnostic | gate | domain | intervention | proposer | sink"),
    out: Path = typer.Option(Path("."), "-o", "--out", help="Directory to create the distribution in."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing directory."),
) -> None:
    """Scaffold a plugin distribution: pyproject with the entry point, one module, tests."""
    from evo_core.scaffold import ScaffoldError, scaffold

    try:
        made = scaffold(name, kind, out, force=force)
    except ScaffoldError as exc:
        raise _bad(exc) from None
    con = Console(highlight=False, soft_wrap=True)
    con.print(f"created {made.root}")
    for f in made.files:
        con.print(f"  {f.relative_to(made.root)}")
    con.print(f"next: pip install -e {made.root} && pytest {made.root / 'tests'}")


def register(app: typer.Typer) -> None:
    app.command("audit")(audit_cmd)
    app.command("replay")(replay_cmd)
    app.command("report")(report_cmd)
    app.command("tail")(tail_cmd)
    app.add_typer(plugin_app, name="plugin")
