"""structlog loggers that never write to stdout unless the application configured structlog.

structlog's default configuration prints to stdout, which would corrupt the JSON that
``evo grade swe`` prints. Until someone calls ``structlog.configure``, this package's
log lines go to stderr."""

from __future__ import annotations

import sys
from typing import Any

import structlog


class _Logger:
    def __init__(self, name: str) -> None:
        self.name = name

    def _target(self) -> Any:
        if structlog.is_configured():
            return structlog.get_logger(self.name)
        return structlog.wrap_logger(structlog.PrintLogger(sys.stderr), processors=structlog.get_config()["processors"])

    def __getattr__(self, level: str) -> Any:
        return getattr(self._target(), level)


def get_logger(name: str) -> _Logger:
    return _Logger(name)
