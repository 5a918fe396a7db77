"""``evo completion SHELL``: print the shell completion script (bash, zsh, fish, powershell).

``eval "$(evo completion bash)"`` in ``~/.bashrc`` enables it; ``evo --install-completion``
writes it for the current shell instead.
"""

from __future__ import annotations

import typer

SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


def register(app: typer.Typer) -> None:
    @app.command("completion")
    def completion_cmd(shell: str = typer.Argument(..., help=f"One of {', '.join(SHELLS)}.")) -> None:
        """Print the completion script for SHELL (e.g. eval "$(evo completion bash)")."""
        from typer.completion import get_completion_script

        from evo_core.cli.app import fail

        if shell not in SHELLS:
            raise fail(f"shell must be one of {', '.join(SHELLS)}, got {shell!r}")
        typer.echo(get_completion_script(prog_name="evo", complete_var="_EVO_COMPLETE", shell=shell))
