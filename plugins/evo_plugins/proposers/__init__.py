"""The standard proposers (entry point ``evo_proposers``): rules (the deterministic
default), skill retrieval, and an LLM over any OpenAI-compatible endpoint."""

from __future__ import annotations

from evo_core.hookspecs import hookimpl

from .llm import LLMProposer, parse_answer
from .rules import TEMPLATES, RuleProposer
from .skills import SkillProposer

__all__ = ["RuleProposer", "SkillProposer", "LLMProposer", "TEMPLATES", "parse_answer"]


@hookimpl
def evo_register_proposers():
    return [SkillProposer(), RuleProposer(), LLMProposer()]
