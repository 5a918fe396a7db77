"""How every ``evo`` command writes structlog lines: to stderr, as key=value text or JSON.

``EVO_LOG_FORMAT=json`` (or ``evo --log-format json``) gives one JSON object per line
(structlog's ``JSONRenderer``), for log shippers; the default is ``console`` (key=value,
coloured only when stderr is a terminal). ``EVO_LOG_LEVEL`` sets the level. stdout is
never written: it carries a command's own output (``--json``).

In JSON mode the standard library's ``logging`` (and ``warnings``) go through the same JSON
renderer: libraries such as DeepSpeed and transformers give their loggers console handlers
of their own (DeepSpeed's writes ``[WARNING] ...`` to stdout) and turn propagation off, so
in JSON mode loggers always propagate to the root, whose one handler renders JSON on stderr,
and console handlers added to any other logger are dropped (``_RoutedLogger``).
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


class _RoutedLogger(logging.Logger):
    """A stdlib logger in JSON mode: it always propagates to the root's JSON handler, and a
    console handler a library gives it is dropped (a file handler is kept)."""

    @property  # type: ignore[override]
    def propagate(self) -> bool:
        return True

    @propagate.setter
    def propagate(self, value: bool) -> None:
        pass

    def addHandler(self, hdlr: logging.Handler) -> None:  # noqa: N802 (the stdlib's name)
        if not _is_console(hdlr):
            super().addHandler(hdlr)


def _is_console(h: logging.Handler) -> bool:
    return type(h) is logging.StreamHandler or (isinstance(h, logging.StreamHandler)
                                                 and not isinstance(h, logging.FileHandler)
                                                 and getattr(h, "stream", None) in (sys.stdout, sys.stderr,
                                                                                     sys.__stdout__, sys.__stderr__))


def _route_stdlib(json_mode: bool, level: int) -> None:
    """JSON mode: every stdlib record becomes one JSON line on stderr; console mode: undo it."""
    root = logging.getLogger()
    for h in [h for h in root.handlers if getattr(h, "_evo_json", False)]:
        root.removeHandler(h)
    if not json_mode:
        logging.setLoggerClass(logging.Logger)
        logging.captureWarnings(False)
        for existing in list(logging.Logger.manager.loggerDict.values()):
            if isinstance(existing, _RoutedLogger):
                existing.__class__ = logging.Logger
        return
    handler = logging.StreamHandler(_CurrentStderr())  # type: ignore[arg-type]
    handler._evo_json = True  # type: ignore[attr-defined]
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, structlog.processors.JSONRenderer(default=str)],
        foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name,
                           structlog.processors.TimeStamper(fmt="iso", utc=True), structlog.processors.format_exc_info]))
    root.addHandler(handler)
    root.setLevel(level)
    logging.setLoggerClass(_RoutedLogger)
    logging.captureWarnings(True)
    for existing in list(logging.Logger.manager.loggerDict.values()):  # loggers made before this call
        if isinstance(existing, logging.Logger) and not isinstance(existing, _RoutedLogger):
            for h in [h for h in existing.handlers if _is_console(h)]:
                existing.removeHandler(h)
            existing.propagate = True
            existing.__class__ = _RoutedLogger


def configure(level: Optional[str] = None, fmt: Optional[str] = None, default_level: str = "INFO") -> None:
    name = (level or os.environ.get(LEVEL_ENV) or default_level).upper()
    _route_stdlib(log_format(fmt) == "json", getattr(logging, name, logging.INFO))
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
