"""``evo grade NAME``: what a domain's own grade command is built with (see
``evo_core.cli.grade_cmds`` for the exit-status conventions)."""

from evo_core.cli.grade_cmds import INFRA_EXIT, grade_command, run_grader, text_arg

__all__ = ["INFRA_EXIT", "grade_command", "run_grader", "text_arg"]
