"""The standard diagnostics (entry point ``evo_diagnostics``). Each is versioned and
parametrised; a revision (new params or a spec) is a new version recorded in the log."""

from __future__ import annotations

from evo_core.hookspecs import hookimpl

from .agentic import CodeSpecialCasing, SweGitMining, SweTestTampering
from .base import BaseDiagnostic, Measurement
from .core import (
    AnswerHedging,
    EntropyCollapse,
    FormatViolations,
    LengthInflation,
    RepetitionLoops,
    RewardHeldoutDivergence,
    RewardOracleGap,
    ToolErrors,
    TruncationRate,
    ZeroVarianceGroups,
)

ALL = (ZeroVarianceGroups, TruncationRate, LengthInflation, EntropyCollapse, RepetitionLoops, FormatViolations,
       AnswerHedging, RewardOracleGap, RewardHeldoutDivergence, ToolErrors, SweTestTampering, SweGitMining,
       CodeSpecialCasing)

__all__ = ["ALL", "BaseDiagnostic", "Measurement", *[c.__name__ for c in ALL]]


@hookimpl
def evo_register_diagnostics():
    return [cls() for cls in ALL]
