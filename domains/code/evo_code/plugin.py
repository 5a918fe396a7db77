"""Entry point (group ``evo``): registers the code domain."""

from evo_core.hookspecs import hookimpl


@hookimpl
def evo_register_domains():
    from evo_code.domain import CodeDomain

    return [CodeDomain()]
