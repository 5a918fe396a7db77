"""Named fault points, for tests that kill a run at every boundary of a step.

``EVO_FAULT=<point>[:<n>]`` makes the ``n``-th time (default 1st) the process reaches
``point`` fatal: ``os._exit(137)``, as a SIGKILL would, with no cleanup, no flush and no
``finally``. Unset (always, outside tests), a fault point costs one dict lookup.
"""

from __future__ import annotations

import os

ENV = "EVO_FAULT"
_hits: dict[str, int] = {}


def point(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    want, _, nth = spec.partition(":")
    if want != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= int(nth or 1):
        os._exit(137)
