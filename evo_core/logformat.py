"""How every ``evo`` command writes structlog lines: to stderr, as key=value text or JSON.

``EVO_LOG_FORMAT=json`` (or ``evo --log-format json``) gives one JSON object per line
(structlog's ``JSONRenderer``), for log shippers; the default is ``console`` (key=value,
coloured only when stderr is a terminal). ``EVO_LOG_LEVEL`` sets the level. stdout is
never written: it carries a command's own output (``--json``).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Optional

import structlog

FORMAT_ENV = "EVO_LOG_FORMAT"
LEVEL_ENV = "EVO_LOG_LEVEL"
FORMATS = ("console", "json")


class LogFormatError(ValueError):
    """An unknown log format (the message lists the known ones)."""


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is now (test runners swap and close it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def log_format(fmt: Optional[str] = None) -> str:
    name = (fmt or os.environ.get(FORMAT_ENV) or "console").strip().lower()
    if name not in FORMATS:
        raise LogFormatError(f"log format must be one of {', '.join(FORMATS)}, got {name!r} (from --log-format or ${FORMAT_ENV})")
    return name


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def configure(level: Optional[str] = None, fmt: Optional[str] = None, default_level: str = "INFO") -> None:
    name = (level or os.environ.get(LEVEL_ENV) or default_level).upper()
    if log_format(fmt) == "json":
        # ISO timestamps and no colour: each line must parse on its own
        tail: list = [structlog.processors.TimeStamper(fmt="iso", utc=True), structlog.processors.format_exc_info,
                      structlog.processors.JSONRenderer(default=str)]
    else:
        tail = [structlog.processors.TimeStamper(fmt="%H:%M:%S"), structlog.dev.ConsoleRenderer(colors=stderr_is_terminal())]
    structlog.configure(
        processors=[structlog.processors.add_log_level, *tail],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, name, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
