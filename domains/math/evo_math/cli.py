"""``evo grade math``: the math domain's grade command, added through ``evo_register_commands``."""

from __future__ import annotations

import typer

from evo_core.api.grading import grade_command, run_grader, text_arg


def add_grade_command() -> None:
    @grade_command("math")
    def grade_math(
        gold: str = typer.Option(..., "--gold", help="Gold answer (literal, @file or -)."),
        response: str = typer.Option(..., "--response", help="Model response (literal, @file or -)."),
        mode: str = typer.Option("strict", "--mode", help="strict | lenient"),
    ) -> None:
        """Math: extracted answers, equivalence with the gold answer, hedging."""
        from evo_math.grading import grade_cli

        run_grader(grade_cli, gold=text_arg(gold, "--gold"), response=text_arg(response, "--response"), mode=mode)
