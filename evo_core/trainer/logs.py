"""structlog setup for ``evo run`` (``evo_core.logformat``), with transformers kept quiet."""

from __future__ import annotations

from typing import Optional

from evo_core.logformat import configure


def configure_logging(level: Optional[str] = None, fmt: Optional[str] = None) -> None:
    configure(level, fmt)
    try:  # transformers' own progress bars would interleave with ours
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except Exception:
        pass
