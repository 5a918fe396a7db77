"""evo-plugin-swe: repo-level software engineering for EvoTrainer.

SWE-bench-style tasks from local files, a per-(repo, version) offline environment cache,
a one-commit workspace with ``bash`` (sandboxed) and ``str_replace_editor`` tools, a
multi-turn episode driver, pristine re-grading with tampering signals, and a SWE-smith
style task generator. See ``docs/swe.md``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
