"""The standard proposers (entry point ``evo_proposers``): evidence-driven induction
(``contrast``), skill retrieval, generic rules, and an LLM over any OpenAI-compatible
endpoint (off unless configured)."""

from __future__ import annotations

from evo_core.api import hookimpl

from .contrast import ContrastProposer
from .llm import LLMProposer, parse_answer
from .rules import TEMPLATES, RuleProposer
from .skills import SkillProposer

__all__ = ["ContrastProposer", "RuleProposer", "SkillProposer", "LLMProposer", "TEMPLATES", "parse_answer"]


@hookimpl
def evo_register_proposers():
    return [SkillProposer(), ContrastProposer(), RuleProposer(), LLMProposer()]
