"""Tables that survive a pipe: rich boxes in a terminal, TSV everywhere else.

A rich table fitted to an 80-column pipe cuts cells (``quickst…``), which makes run ids
unusable in scripts. When stdout is not a terminal a table prints as tab-separated
values instead: a header row, then one row per line, every cell in full (markup
stripped, tabs and newlines in a cell turned into spaces).
"""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Console
from rich.errors import MarkupError
from rich.table import Table
from rich.text import Text


def _plain(cell: Any) -> str:
    if isinstance(cell, Text):
        text = cell.plain
    elif isinstance(cell, str):
        try:  # what the terminal would show, minus the styles
            text = Text.from_markup(cell).plain
        except MarkupError:
            text = cell
    else:
        text = str(cell)
    return " ".join(text.replace("\t", " ").splitlines())


def to_tsv(table: Table, *, title: bool = False) -> str:
    """``title``: a ``# title`` line first (where one command prints several tables)."""
    cols = table.columns
    lines = [f"# {_plain(table.title)}"] if title and table.title else []
    lines.append("\t".join(_plain(c.header) for c in cols))
    for i in range(table.row_count):
        lines.append("\t".join(_plain(c._cells[i]) if i < len(c._cells) else "" for c in cols))
    return "\n".join(lines) + "\n"


def print_table(table: Table, console: Optional[Console] = None, *, title: bool = False) -> None:
    """Print ``table`` on ``console`` (stdout by default): boxed for a terminal, TSV otherwise."""
    con = console or Console(highlight=False, soft_wrap=True)
    if con.is_terminal:
        con.print(table)
    else:
        con.file.write(to_tsv(table, title=title))
        con.file.flush()
