"""``evo runs | log | checkout | diff | verify``: read a store and travel through a run's history."""

from __future__ import annotations

import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from evo_core.cli.tables import print_table
from evo_core.store import StoreError, default_url, open_store, run_stream

out = Console(highlight=False, soft_wrap=True)

STORE_HELP = "Store URL: sqlite:///PATH, postgresql://… or memory:// (default: $EVO_STORE or sqlite:///.evo/evo.sqlite)."


def _fail(message: str, code: int = 2) -> typer.Exit:
    from evo_core.cli.app import fail

    return fail(message, code)


def _error(exc: BaseException) -> typer.Exit:
    """One line for the user; with ``--debug`` the original exception and its traceback."""
    from evo_core.cli import app as _app

    if _app._DEBUG:
        raise exc
    from evo_core.store import CorruptRecord

    return _fail(exc.user_line() if isinstance(exc, CorruptRecord) else str(exc))


def open_existing(url: Optional[str]):
    """Open a store read-only, for the reading commands: nothing is created or written, so
    a store in a read-only directory (or behind a read-only role) can be read; a SQLite URL
    whose file does not exist is an error, not a new store."""
    url = url or default_url()
    if url.startswith("sqlite:///"):
        from evo_core.store.sqlite import sqlite_path

        path, _ = sqlite_path(url)
        if not Path(path).exists():
            raise StoreError(f"no store at {path!r} ({url}); pass --store URL or set EVO_STORE")
    return open_store(url, read_only=True)


RUN_HELP = "Run id, a unique prefix of one, @last (the newest run) or PREFIX@last."


def _check_run(store, run_id: str) -> str:
    """The run ``run_id`` names (a full id, a unique prefix, @last, PREFIX@last)."""
    from evo_core.store.runs import resolve_run

    return resolve_run(store, run_id)


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if ts else ""


def _type_names(spec: Optional[list[str]]) -> Optional[set[str]]:
    if not spec:
        return None
    names: set[str] = set()
    for part in spec:
        for t in part.split(","):
            t = t.strip()
            if t:
                names.add(t if "." in t else f"evo.{t}")
    from evo_events import registered_types

    unknown = sorted(n for n in names if n not in registered_types())
    if unknown:
        raise StoreError(f"unknown event type(s) {', '.join(unknown)} (e.g. evo.Promoted, RolloutCompleted)")
    return names


def live_status(status: str, lease) -> str:
    """A run the log calls ``running`` whose writer is gone (no lease, or a holder whose
    process is gone or that stopped renewing) is ``interrupted``: `evo run --resume` continues it."""
    from evo_core.store.lease import holder_gone

    if status == "running" and (lease is None or holder_gone(lease) is not None):
        return "interrupted"
    return status


def run_rows(store) -> list[dict[str, Any]]:
    from evo_core.checkout import fold_run
    from evo_core.store.lease import all_leases
    from evo_events import RunStarted

    leases = all_leases(store)
    rows = []
    for run_id in store.runs():
        stream = run_stream(run_id)
        first = next(iter(store.read_stream(stream, to_version=1)), None)
        started = first.decode() if first is not None and first.type == RunStarted.TYPE else None
        st = fold_run(store, run_id)
        cfg = started.config if started is not None else {}
        name = ((cfg.get("run") or {}).get("name") if isinstance(cfg, dict) else None) or ""
        rows.append({
            "run_id": run_id, "config": name, "config_hash": started.config_hash if started else None,
            "mode": st.mode, "status": live_status(st.status, leases.get(run_id)), "harness_version": st.harness_version, "step": st.step,
            "policy_version": st.policy_version, "events": st.position,
            "started_at": started.started_at if started else _iso(first.recorded_at if first else 0),
        })
    return rows


def _summary(ev) -> str:
    from evo_events import encode

    data = encode(ev)["data"]
    skip = {"run_id", "event_id", "caused_by", "emitted_by", "config", "item_scores", "bundle", "provenance"}
    parts = []
    for k, v in data.items():
        if k in skip or v in (None, "", [], {}):
            continue
        s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v
        parts.append(f"{k}={s[:60]}")
    return " ".join(parts)[:200]


def register(app: typer.Typer) -> None:
    @app.command("runs")
    def runs_cmd(
        store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print a JSON list."),
    ) -> None:
        """List the runs in a store: id, config, status and harness version."""
        try:
            st = open_existing(store)
            rows = run_rows(st)
        except StoreError as exc:
            raise _error(exc)
        if as_json:
            print(json.dumps(rows, indent=2))
            return
        if not rows:
            out.print(f"no runs in {st.url}")
            return
        t = Table(title=f"runs in {st.url}")
        # a run id is what one copies into the next command: never cut it, even in a narrow terminal
        t.add_column("run", no_wrap=True, min_width=max(len(r["run_id"]) for r in rows))
        for col in ("config", "mode", "status", "harness v", "step", "events", "started"):
            t.add_column(col)
        for r in rows:
            t.add_row(r["run_id"], r["config"], r["mode"], r["status"], str(r["harness_version"]), str(r["step"]),
                      str(r["events"]), r["started_at"])
        print_table(t, out)

    @app.command("log")
    def log_cmd(
        run: str = typer.Argument(..., help=RUN_HELP),
        type_: Optional[list[str]] = typer.Option(None, "--type", "-t", help="Only these event types (repeat or comma-separate)."),
        limit: Optional[int] = typer.Option(None, "--limit", "-n", help="At most this many events."),
        store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line (JSON Lines)."),
    ) -> None:
        """Print a run's events (decoded through upcasters)."""
        from evo_events import encode

        try:
            st = open_existing(store)
            run = _check_run(st, run)
            types = _type_names(type_)
            n = 0
            table = None if as_json else Table(title=f"run {run}")
            if table is not None:
                for col in ("#", "pos", "type", "step", "summary"):
                    table.add_column(col, overflow="fold")
            for rec in st.read_stream(run_stream(run), types=types):
                if limit is not None and n >= limit:
                    break
                n += 1
                ev = rec.decode()
                if as_json:
                    sys.stdout.write(json.dumps({
                        "version": rec.version, "position": rec.position, "type": rec.type,
                        "schema_version": rec.schema_version, "event_id": rec.event_id, "hash": rec.hash,
                        "recorded_at": _iso(rec.recorded_at), "data": encode(ev)["data"],
                    }, ensure_ascii=False) + "\n")
                else:
                    table.add_row(str(rec.version), str(rec.position), rec.type.removeprefix("evo."),
                                  str(getattr(ev, "step", "")), _summary(ev))
        except (StoreError, LookupError, ValueError) as exc:
            raise _error(exc)
        if table is not None:
            print_table(table, out)

    @app.command("checkout")
    def checkout_cmd(
        run: str = typer.Argument(..., help=RUN_HELP),
        at: str = typer.Option("head", "--at", help="Harness version H, pos:N, head, an ISO time, or a promotion event id."),
        store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print the state as JSON."),
        no_snapshots: bool = typer.Option(False, "--no-snapshots", help="Fold from the start; ignore cached snapshots."),
    ) -> None:
        """The harness state of a run at a harness version (or position, time, event)."""
        from evo_core.checkout import checkout, state_summary

        try:
            st = open_existing(store)
            run = _check_run(st, run)
            state = checkout(st, run, at, use_snapshots=not no_snapshots)
        except StoreError as exc:
            raise _error(exc)
        s = state_summary(state)
        if as_json:
            print(json.dumps(s, indent=2, ensure_ascii=False))
            return
        out.print(f"[bold]run {s['run_id']}[/] at {at}: harness v{s['harness_version']}, policy v{s['policy_version']} "
                  f"(main v{s['main_policy_version']}), step {s['step']}, {s['status']}, position {s['position']}")
        t = Table(title="diagnostics")
        for col in ("name", "version", "params", "source"):
            t.add_column(col)
        for name, d in s["diagnostics"].items():
            t.add_row(name, d["version"], json.dumps(d["params"] if d["spec"] is None else {**d["params"], "spec": d["spec"]}),
                      d["source"])
        print_table(t, out, title=True)
        t = Table(title="active interventions")
        for col in ("proposal", "kind", "name", "params", "since"):
            t.add_column(col)
        for pid, i in s["interventions"].items():
            t.add_row(pid[:12], i["kind"], i["name"], json.dumps(i["params"]), f"v{i['since_harness_version']}")
        print_table(t, out, title=True)
        out.print(f"gates: {json.dumps(s['gate_config'])}")
        active = [v["name"] for v in s["skills"].values() if not v["retired"]]
        out.print(f"skills: {len(active)} active ({', '.join(sorted(set(active))) or 'none'}), "
                  f"{len(s['skills']) - len(active)} retired")
        prom = sum(1 for e in s["ledger"] if e["decision"] == "promoted")
        out.print(f"ledger: {prom} promoted, {len(s['ledger']) - prom} rejected")

    @app.command("diff")
    def diff_cmd(
        run: str = typer.Argument(..., help=RUN_HELP),
        h1: str = typer.Argument(..., help="From: harness version (or pos:N, time, event id)."),
        h2: str = typer.Argument(..., help="To: harness version (or pos:N, time, event id)."),
        store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print the structured diff as JSON."),
    ) -> None:
        """What changed in the harness between two versions."""
        from evo_core.checkout import checkout, diff_states

        try:
            st = open_existing(store)
            run = _check_run(st, run)
            d = diff_states(checkout(st, run, h1), checkout(st, run, h2))
        except StoreError as exc:
            raise _error(exc)
        if as_json:
            print(json.dumps(d, indent=2, ensure_ascii=False))
            return
        out.print(f"[bold]run {run}: {h1} → {h2}[/] (positions {d['from_position']} → {d['to_position']})")
        for f in ("harness_version", "policy_version", "main_policy_version", "step", "status"):
            if f in d:
                out.print(f"  {f}: {d[f][0]} → {d[f][1]}")
        for key in ("diagnostics", "interventions"):
            for kind, sign in (("added", "+"), ("removed", "-")):
                for name, v in d.get(key, {}).get(kind, {}).items():
                    out.print(f"  {sign} {key[:-1]} {name}: {json.dumps(v, ensure_ascii=False)}")
            for name, fields in d.get(key, {}).get("changed", {}).items():
                for f, (a, b) in fields.items():
                    out.print(f"  ~ {key[:-1]} {name}.{f}: {json.dumps(a)} → {json.dumps(b)}")
        for kind, sign in (("added", "+"), ("removed", "-")):
            for k, v in d.get("gate_config", {}).get(kind, {}).items():
                out.print(f"  {sign} gate {k}: {json.dumps(v)}")
        for k, (a, b) in d.get("gate_config", {}).get("changed", {}).items():
            out.print(f"  ~ gate {k}: {json.dumps(a)} → {json.dumps(b)}")
        for k, v in d.get("skills", {}).get("added", {}).items():
            out.print(f"  + skill {k} ({v['name']})")
        for k in d.get("skills", {}).get("retired", []):
            out.print(f"  - skill {k} retired")
        for e in d.get("ledger", []):
            out.print(f"  ledger: {e['decision']} {e['subject']} {e['subject_id'][:12]} at step {e['step']} "
                      f"by {e['gate']} ({'; '.join(e['reasons'])})")
        if len(d) == 3:
            out.print("  no change")

    @app.command("verify")
    def verify_cmd(
        run: Optional[str] = typer.Argument(None, help="Only this run (default: every stream): " + RUN_HELP),
        store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
        expect: Optional[str] = typer.Option(None, "--expect", metavar="HEAD",
                                             help="The run's head as recorded elsewhere (VERSION:HASH or HASH, as "
                                                  "verify prints it): exit 1 unless the run still ends there."),
        no_blobs: bool = typer.Option(False, "--no-blobs", help="Skip re-hashing referenced blobs."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Check every hash chain, seal, recorded head and blob digest; print each stream's
        length and head; exit 1 naming the first problem."""
        from evo_core.store import ExpectedHead

        try:
            expected = ExpectedHead.parse(expect) if expect is not None else None
            if expected is not None and run is None:
                raise StoreError("--expect needs a RUN: evo verify RUN --expect HEAD")
            st = open_existing(store)
            if run is not None:
                run = _check_run(st, run)
            rep = st.verify([run_stream(run)] if run else None, check_blobs=not no_blobs, expect=expected)
        except StoreError as exc:
            raise _error(exc)
        if as_json:
            import attrs

            print(json.dumps(attrs.asdict(rep), indent=2))
        elif rep.ok:
            out.print(f"ok: {rep.streams_checked} stream(s), {rep.events_checked} events, "
                      f"{rep.blobs_checked} blob references verified in {st.url}")
            width = max((len(s.stream) for s in rep.streams), default=0)
            for s in rep.streams:
                out.print(f"  {s.stream:<{width}}  {s.events:>8} events  head {s.head}  {_seal_note(s)}".rstrip())
            if expected is not None:
                out.print(f"  the head matches the expected {expected}")
        if not rep.ok:
            if not as_json:
                from evo_core.cli.app import err

                err.print(f"[bold red]verify failed:[/] {rep.first_bad}", highlight=False, soft_wrap=True)
            raise typer.Exit(1)


def _seal_note(s) -> str:
    """What a stream's end says about the run (see docs/store.md, "What the chain proves")."""
    from evo_core.store import RUN_PREFIX

    if not s.stream.startswith(RUN_PREFIX):
        return ""
    if s.sealed:
        note = f"sealed ({s.finished})"
    elif s.finished is not None:
        note = f"finished ({s.finished}), not sealed"
    else:
        note = "open: no RunFinished at its end (running, interrupted, or cut)"
    if s.recorded_head is None:
        note += "; no head recorded by the store"
    return note
