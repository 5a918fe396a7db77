"""Renaming a domain's signals so that nothing downstream can key on a name.

A domain reports the signals its verifier computed under its own names. With
``signal_names = "hashed"`` (and a ``signal_seed``) every name becomes an opaque token, so a
harness that only works when it knows a flaw's signal by name is caught out.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

MODES = ("plain", "hashed")
# the task options that rename signals: they change no prompt, target or grade
OPTIONS = ("signal_names", "signal_seed")


def opaque_name(name: str, seed: int) -> str:
    return "s_" + hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()[:8]


def rename(signals: Mapping[str, Any], mode: str, seed: int = 0) -> dict[str, Any]:
    if mode == "plain":
        return dict(signals)
    if mode != "hashed":
        raise ValueError(f"signal_names must be one of {', '.join(MODES)}, got {mode!r}")
    return {opaque_name(k, seed): v for k, v in signals.items()}
