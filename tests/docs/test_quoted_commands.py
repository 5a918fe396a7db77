"""Every ``evo …`` command the README and docs quote in a code block parses against the CLI.

Parsing only: each line is split like a shell would, placeholders stay strings, and click
resolves the command path and its options without running anything. A renamed flag or a
removed command in the docs fails here.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main

from evo_core.cli import app as cli

cli._register_all()
app = cli.app
USAGE_ERRORS = cli._click_classes("UsageError")  # typer runs on its own vendored click
EXITS = cli._click_classes("Exit")

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.S)


def quoted_commands(path: Path) -> list[tuple[int, str]]:
    """``(line number, command)`` of every line in a fenced block that runs ``evo``."""
    text = path.read_text(encoding="utf-8")
    out = []
    for block in FENCE.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        for i, line in enumerate(block.group(1).splitlines()):
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:]
            if not line.startswith("evo ") or "…" in line or "[" in line.split("#")[0]:
                continue  # usage synopses with optional parts are not commands
            out.append((first + i, line))
    return out


def parse(argv: list[str]) -> None:
    """Resolve ``argv`` down the command tree and parse the leaf's options; raise on a usage error."""
    cmd = typer.main.get_command(app)
    ctx = cmd.make_context("evo", list(argv), resilient_parsing=False)
    while hasattr(cmd, "resolve_command"):  # a group
        rest = [*ctx._protected_args, *ctx.args] if hasattr(ctx, "_protected_args") else [*ctx.protected_args, *ctx.args]
        if not rest:
            return
        name, sub, sub_args = cmd.resolve_command(ctx, rest)
        if sub is None:
            raise USAGE_ERRORS[0](f"no command {name!r}")
        cmd, ctx = sub, sub.make_context(name, sub_args, parent=ctx)


def _cases():
    for path in DOCS:
        for lineno, line in quoted_commands(path):
            words = shlex.split(line.split(" #")[0], posix=True)
            if "|" in words or ">" in words:  # a pipeline or redirect: check the evo part
                words = words[:min(words.index(t) for t in ("|", ">") if t in words)]
            yield pytest.param(words[1:], id=f"{path.name}:{lineno}")


CASES = list(_cases())


def test_the_readme_quotes_commands():
    assert sum(1 for c in CASES if c.id.startswith("README.md")) >= 3


@pytest.mark.parametrize("argv", CASES)
def test_quoted_command_parses(argv):
    try:
        parse(argv)
    except EXITS:
        pass  # --help, --version
    except USAGE_ERRORS as exc:
        pytest.fail(f"evo {' '.join(argv)}: {exc.format_message()}")


def test_a_wrong_flag_is_caught():
    with pytest.raises(USAGE_ERRORS):
        parse(["audit", "RUN", "--no-such-flag"])
    with pytest.raises(USAGE_ERRORS):
        parse(["no-such-command"])
