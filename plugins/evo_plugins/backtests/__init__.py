"""The standard backtesters (entry point ``evo_backtests``): offline replay and the online A/B."""

from __future__ import annotations

from evo_core.api import hookimpl

from .offline import OfflineReplay, labels
from .online import OnlineAB

__all__ = ["OfflineReplay", "OnlineAB", "labels"]


@hookimpl
def evo_register_backtesters():
    return [OfflineReplay(), OnlineAB()]
