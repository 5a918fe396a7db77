"""What every config module shares: the error type, the TOML reader and the suite-file test.

Kept apart from ``config.py`` so that the modules ``config.py`` calls (arms, checks, shipped
configs) can raise ``ConfigError`` without importing ``config.py`` back.
"""
from __future__ import annotations

import sys
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["ConfigError", "is_suite_definition", "tomllib"]


class ConfigError(ValueError):
    """The run config is invalid; the message names the offending key."""


def is_suite_definition(data: Mapping[str, Any]) -> bool:
    """A flaw-suite file (``[defaults]`` plus ``[flaws."domain/flaw"]`` tables) rather than a run config."""
    return isinstance(data.get("flaws"), dict) and "run" not in data and "task" not in data
