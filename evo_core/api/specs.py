"""Data-only diagnostic specs: validating them, and evaluating a spec or one of its
predicates over rollouts, exactly as the engine does (no ``eval`` of generated code)."""

from evo_core.harness.specs import (
    SpecError,
    SpecResult,
    compile_predicate,
    evaluate_spec,
    flagged_ids,
    matches,
    validate_predicate,
    validate_spec,
)

__all__ = ["SpecError", "SpecResult", "compile_predicate", "evaluate_spec", "flagged_ids", "matches",
           "validate_predicate", "validate_spec"]
