"""The warm priors (entry point ``evo_priors``): hand-written, flaw- and domain-specific
diagnostics, repairs and templates. Every piece is marked ``prior = True``; a run uses them
only with ``harness.priors = true``. The cold harness (the default) learns without them."""

from __future__ import annotations

from evo_core.api import hookimpl

from .agentic import CodeSpecialCasing, SweGitMining, SweTestTampering
from .arithmetic import AnswerHedging, MultiAnswerPenalty, StrictExtraction
from .conventions import FormatViolations, ToolErrors
from .interventions import ResetTestsBeforeGrading
from .proposer import PriorsProposer

DIAGNOSTICS = (AnswerHedging, FormatViolations, ToolErrors, SweTestTampering, SweGitMining, CodeSpecialCasing)
INTERVENTIONS = (MultiAnswerPenalty, StrictExtraction, ResetTestsBeforeGrading)


@hookimpl
def evo_register_diagnostics():
    return [cls() for cls in DIAGNOSTICS]


@hookimpl
def evo_register_interventions():
    return [cls() for cls in INTERVENTIONS]


@hookimpl
def evo_register_proposers():
    return [PriorsProposer()]
