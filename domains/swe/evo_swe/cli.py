"""``evo grade swe``: the SWE domain's grade command, added through ``evo_register_commands``."""

from __future__ import annotations

from pathlib import Path

import typer

from evo_core.api.grading import grade_command, run_grader


def add_grade_command() -> None:
    @grade_command("swe")
    def grade_swe(
        task: Path = typer.Option(..., "--task", help="SWE-bench style task row (JSON)."),
        patch: Path = typer.Option(..., "--patch", help="The candidate's diff."),
    ) -> None:
        """SWE: apply the patch to a pristine copy, run FAIL_TO_PASS / PASS_TO_PASS."""
        from evo_swe.grading import grade_cli

        run_grader(grade_cli, task_path=str(task), patch_path=str(patch))
