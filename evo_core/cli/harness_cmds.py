"""``evo skills``: list the skills a store holds (with use counts), export and import them."""

from __future__ import annotations

import json
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from evo_core.cli.tables import print_table

out = Console(highlight=False, soft_wrap=True)
STORE_HELP = "Store URL: sqlite:///PATH, postgresql://… or memory:// (default: $EVO_STORE or sqlite:///.evo/evo.sqlite)."


def _fail(message: str) -> typer.Exit:
    from evo_core.cli.app import fail

    return fail(message)


def _open(url: Optional[str], *, create: bool = False):
    from evo_core.store import StoreError, open_store

    if create:
        return open_store(url) if url else open_store()
    try:
        from evo_core.cli.store_cmds import open_existing
    except ImportError:  # pragma: no cover - store commands not built
        return open_store(url) if url else open_store()
    try:
        return open_existing(url)
    except StoreError as exc:
        raise _fail(str(exc)) from None


def _rows(skills):
    for s in sorted(skills, key=lambda s: (s.get("retired", False), -int(s.get("uses", 0)), s["skill_id"])):
        iv = s["bundle"].get("intervention") or {}
        pre = (s["bundle"].get("preconditions") or {}).get("diagnoses") or []
        yield s, iv, pre


def register(app: typer.Typer) -> None:
    skills_app = typer.Typer(help="Promoted skills: list (with use counts), export, import.", no_args_is_help=False)

    @skills_app.callback(invoke_without_command=True)
    def skills_list(
        ctx: typer.Context,
        store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
        include_retired: bool = typer.Option(True, "--retired/--no-retired", help="Include retired skills."),
    ) -> None:
        """List the skills in a store."""
        if ctx.invoked_subcommand is not None:
            return
        from evo_core.harness.skills import skills_in_store

        st = _open(store)
        try:
            skills = [s for s in skills_in_store(st) if include_retired or not s["retired"]]
        finally:
            st.close()
        if as_json:
            print(json.dumps(skills, indent=2, sort_keys=True, default=str))
            return
        if not skills:
            out.print("no skills in this store (a promotion by an evolving harness registers one)")
            return
        t = Table(title=f"{len(skills)} skill(s)")
        t.add_column("skill", no_wrap=True)
        for col in ("intervention", "params", "when", "uses", "status", "from run"):
            t.add_column(col)
        for s, iv, pre in _rows(skills):
            t.add_row(s["skill_id"], f"{iv.get('kind', '?')}/{iv.get('name', '?')}",
                      json.dumps(iv.get("params") or {}, sort_keys=True)[:60], ", ".join(pre), str(s["uses"]),
                      "retired" if s["retired"] else "active", str(s.get("source_run") or ""))
        print_table(t, out)

    @skills_app.command("export")
    def skills_export(
        file: str = typer.Argument(..., help="Where to write the skill file (JSON)."),
        store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
        run: Optional[list[str]] = typer.Option(None, "--run", help="Only skills from these runs (id, unique prefix, @last, PREFIX@last)."),
        include_retired: bool = typer.Option(False, "--retired/--no-retired", help="Also export retired skills."),
    ) -> None:
        """Write a store's skills to a plain JSON file."""
        from evo_core.harness.skills import export_skills, skills_in_store

        st = _open(store)
        try:
            if run:
                from evo_core.cli.runnames import run_args

                run = run_args(st, run)
            skills = [s for s in skills_in_store(st, run or None) if include_retired or not s["retired"]]
        finally:
            st.close()
        n = export_skills(skills, file)
        out.print(f"exported {n} skill(s) to {file}")

    @skills_app.command("import")
    def skills_import(
        file: str = typer.Argument(..., help="A skill file written by `evo skills export`."),
        store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    ) -> None:
        """Add a skill file's skills to a store's library (a run can then use skills_from = [STORE])."""
        from evo_core.harness.skills import SkillSourceError, import_skills, read_skill_file

        try:
            skills = read_skill_file(file)
        except SkillSourceError as exc:
            raise _fail(str(exc)) from None
        st = _open(store, create=True)
        try:
            n = import_skills(st, skills)
        finally:
            st.close()
        out.print(f"imported {n} new skill(s) ({len(skills) - n} already known)")

    app.add_typer(skills_app, name="skills")
