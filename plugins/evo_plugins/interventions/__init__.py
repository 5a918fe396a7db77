"""The standard interventions (entry point ``evo_interventions``): generic single-factor
changes, and repairs that act on any predicate. The core applies whichever are active;
nothing here implements a trainer hook."""

from __future__ import annotations

from evo_core.api import hookimpl

from . import library, predicate
from .base import BaseIntervention, RolloutView

ALL = library.ALL + predicate.ALL

__all__ = ["ALL", "BaseIntervention", "RolloutView", "catalogue"]


def catalogue() -> dict[str, BaseIntervention]:
    return {cls.name: cls() for cls in ALL}


@hookimpl
def evo_register_interventions():
    return list(catalogue().values())
