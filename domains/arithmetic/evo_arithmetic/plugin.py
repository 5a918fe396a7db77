"""Entry point (group ``evo``): registers the arithmetic domain."""

from evo_core.api import hookimpl


@hookimpl
def evo_register_domains():
    from evo_arithmetic.domain import ArithmeticDomain

    return [ArithmeticDomain()]
