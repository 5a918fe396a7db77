"""``evo config list`` and ``evo config show NAME``: the configs shipped with evotrainer."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

out = Console(highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    config_app = typer.Typer(help="Configs shipped with evotrainer: list them, print one (evo run NAME runs it).",
                             no_args_is_help=True)

    @config_app.command("list")
    def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Shipped configs by name, with what each is."""
        from evo_core.shipped_configs import describe, shipped_names

        rows = [{"name": n, "about": describe(n)} for n in shipped_names()]
        if as_json:
            print(json.dumps(rows, indent=2))
            return
        t = Table(title="shipped configs (evo run NAME, evo config show NAME)")
        t.add_column("name", no_wrap=True)
        t.add_column("about", overflow="fold")
        for r in rows:
            t.add_row(r["name"], r["about"])
        from evo_core.cli.tables import print_table

        print_table(t, out)  # boxed on a terminal, TSV in a pipe, like every table command

    @config_app.command("show")
    def show_cmd(name: str = typer.Argument(..., help="A shipped config's name, e.g. quickstart or recipes/math.")) -> None:
        """Print a shipped config's TOML, to read or to copy and edit."""
        from evo_core.cli.app import fail
        from evo_core.shipped_configs import shipped_names, shipped_path

        path = shipped_path(name.removesuffix(".toml"))
        if path is None:
            raise fail(f"no shipped config named {name!r}; shipped configs: {', '.join(shipped_names())}")
        # Raw text, not rich: the output must be the file byte for byte (evo config show X > my.toml).
        typer.echo(path.read_text(encoding="utf-8"), nl=False)

    app.add_typer(config_app, name="config")
