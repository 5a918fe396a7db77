"""Competitive-programming domain for EvoTrainer (distribution ``evo-plugin-code``)."""

__version__ = "0.1.0"

from evo_code.grader import CodeGrader, GradeConfig  # noqa: E402
from evo_code.loaders import CodeFormatError, load_problems, parse_row  # noqa: E402
from evo_code.problem import CodeProblem, TestCase  # noqa: E402

__all__ = ["CodeGrader", "GradeConfig", "CodeFormatError", "load_problems", "parse_row", "CodeProblem", "TestCase", "__version__"]
