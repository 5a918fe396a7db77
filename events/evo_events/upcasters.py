"""Upcasters: pure ``dict -> dict`` functions that lift an old payload one schema version.

The log is never rewritten; old events are read through these. Each upcaster is
checked against golden fixtures in ``tests/fixtures/events``.
"""

from __future__ import annotations

import copy
from typing import Callable

Upcaster = Callable[[dict], dict]


class UpcastError(ValueError):
    """No path of upcasters leads from a stored schema version to the current one."""


_UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register_upcaster(type_name: str, from_version: int):
    """Decorator: ``fn(data_at_v) -> data_at_v_plus_1`` for ``type_name``."""

    def wrap(fn: Upcaster) -> Upcaster:
        key = (type_name, from_version)
        if key in _UPCASTERS and _UPCASTERS[key] is not fn:
            raise UpcastError(f"an upcaster for {type_name} v{from_version} is already registered")
        _UPCASTERS[key] = fn
        return fn

    return wrap


def upcast(type_name: str, from_version: int, to_version: int, data: dict) -> dict:
    """Apply the upcasters in sequence. The input is never mutated."""
    out = copy.deepcopy(data)
    for v in range(from_version, to_version):
        fn = _UPCASTERS.get((type_name, v))
        if fn is None:
            raise UpcastError(f"{type_name}: no upcaster from schema v{v} to v{v + 1}")
        out = fn(out)
        if not isinstance(out, dict):
            raise UpcastError(f"{type_name}: upcaster from v{v} did not return a dict")
    return out
