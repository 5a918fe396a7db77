"""Shared helpers for the core tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


_MAIN = "import sys; from evo_core.cli.app import main; main(sys.argv[1:])"  # what the `evo` script does


def evo(*args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run the ``evo`` CLI in a fresh process (what a user sees)."""
    e = dict(os.environ)
    e.setdefault("EVO_NO_PLUGIN_COMMANDS", "1")
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", _MAIN, *args], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=ROOT)


def flip_byte(data: bytes, index: int) -> bytes:
    b = bytearray(data)
    b[index] ^= 0x01
    return bytes(b)
