"""``evo plugins``: what the ``evo`` entry-point group brought in, and what failed to load."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from evo_core.cli.tables import print_table

out = Console(highlight=False, soft_wrap=True)


def plugin_report(pm: Any = None) -> dict:
    from evo_core.plugin_contents import registrations
    from evo_core.plugins import PluginManager, disabled_names

    pm = pm or PluginManager()
    return {
        "plugins": [
            {"name": p.name, "distribution": p.distribution, "version": p.version, "module": p.module,
             "hooks": list(p.hooks), "registers": registrations(pm, p.name)}
            for p in pm.info()
        ],
        "load_errors": list(pm.load_errors),
        "unknown_hooks": pm.unknown_hooks(),
        "contract": pm.contract_problems(),
        "disabled": sorted(disabled_names()),
    }


def _registers(p: dict) -> str:
    """``diagnostics: a, b; sinks: c``; a plugin that only hooks the trainer lists its hooks."""
    parts = [f"{kind}: {', '.join(names)}" for kind, names in p["registers"].items()]
    if not parts:
        parts = ["hooks: " + ", ".join(h.removeprefix("evo_") for h in p["hooks"])]
    return "; ".join(parts)


def register(app: typer.Typer) -> None:
    @app.command("plugins")
    def plugins_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Installed plugins: name, distribution, version, and what each registers (by kind and name)."""
        rep = plugin_report()
        if as_json:
            print(json.dumps(rep, indent=2))
        else:
            t = Table(title="evo plugins")
            for col in ("name", "distribution", "version", "registers"):
                t.add_column(col, overflow="fold")
            for p in rep["plugins"]:
                t.add_row(p["name"], p["distribution"] or "(registered in-process)", p["version"] or "", _registers(p))
            print_table(t, out)
            if rep["disabled"]:
                out.print(f"disabled by EVO_DISABLE_PLUGINS: {', '.join(rep['disabled'])}")
            for e in rep["load_errors"]:
                out.print(f"[bold red]load error:[/] {e}")
            for h in rep["unknown_hooks"]:
                out.print(f"[bold red]unknown hook:[/] {h} is implemented but no evo hook has that name")
            for c in rep["contract"]:
                out.print(f"[bold yellow]contract:[/] {c}")
