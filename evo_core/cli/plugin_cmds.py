"""``evo plugins``: what the ``evo`` entry-point group brought in, and what failed to load."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

out = Console(highlight=False, soft_wrap=True)


def plugin_report() -> dict:
    from evo_core.plugins import PluginManager, disabled_names

    pm = PluginManager()
    return {
        "plugins": [
            {"name": p.name, "distribution": p.distribution, "version": p.version, "module": p.module,
             "hooks": list(p.hooks)}
            for p in pm.info()
        ],
        "load_errors": list(pm.load_errors),
        "disabled": sorted(disabled_names()),
    }


def register(app: typer.Typer) -> None:
    @app.command("plugins")
    def plugins_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Installed plugins: name, distribution, version and the hooks they implement."""
        rep = plugin_report()
        if as_json:
            print(json.dumps(rep, indent=2))
        else:
            t = Table(title="evo plugins")
            for col in ("name", "distribution", "version", "hooks"):
                t.add_column(col, overflow="fold")
            for p in rep["plugins"]:
                hooks = ", ".join(h.removeprefix("evo_") for h in p["hooks"])
                t.add_row(p["name"], p["distribution"] or "(registered in-process)", p["version"] or "", hooks)
            out.print(t)
            if rep["disabled"]:
                out.print(f"disabled by EVO_DISABLE_PLUGINS: {', '.join(rep['disabled'])}")
            for e in rep["load_errors"]:
                out.print(f"[bold red]load error:[/] {e}")
