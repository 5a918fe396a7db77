"""EvoTrainer's math domain (distribution ``evo-plugin-math``).

Kept import-light on purpose: ``python -m evo_math.worker`` imports this package first,
and a verifier worker must load math-verify only (never torch or the engine).
"""

from __future__ import annotations

from typing import Any

from evo_math._version import __version__

__all__ = ["MathDomain", "grade_cli", "extract", "VerifierPool", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "MathDomain":
        from evo_math.domain import MathDomain

        return MathDomain
    if name == "grade_cli":
        from evo_math.grading import grade_cli

        return grade_cli
    if name == "extract":
        from evo_math.extraction import extract

        return extract
    if name == "VerifierPool":
        from evo_math.pool import VerifierPool

        return VerifierPool
    raise AttributeError(f"module 'evo_math' has no attribute {name!r}")
