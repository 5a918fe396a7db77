"""The generic standard diagnostics (entry point ``evo_diagnostics``). Each is versioned and
parametrised; a revision (new params or a spec) is a new version recorded in the log. None
names a domain's signal: flaw- and domain-specific diagnostics live with the priors."""

from __future__ import annotations

from evo_core.api import hookimpl

from .base import BaseDiagnostic, Measurement
from .core import (
    EntropyCollapse,
    LengthInflation,
    RepetitionLoops,
    RewardHeldoutDivergence,
    RewardOracleGap,
    RewardOracleUnderpay,
    TruncationRate,
    ZeroVarianceGroups,
)

ALL = (ZeroVarianceGroups, TruncationRate, LengthInflation, EntropyCollapse, RepetitionLoops, RewardOracleGap,
       RewardOracleUnderpay, RewardHeldoutDivergence)

__all__ = ["ALL", "BaseDiagnostic", "Measurement", *[c.__name__ for c in ALL]]


@hookimpl
def evo_register_diagnostics():
    return [cls() for cls in ALL]
