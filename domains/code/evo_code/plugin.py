"""Entry point (group ``evo``): registers the code domain."""

from evo_core.api import hookimpl


@hookimpl
def evo_register_domains():
    from evo_code.domain import CodeDomain

    return [CodeDomain()]


@hookimpl
def evo_register_commands(app):
    from evo_code.cli import add_grade_command  # lazy: the CLI imports plugins only to build commands

    add_grade_command()
