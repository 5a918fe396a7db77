"""pytest junit XML (``junit_family=xunit1``) → per-test outcomes keyed by pytest node id.

xunit1 records ``file`` (rootdir-relative path) on every ``testcase``; the node id is
``file::Class::...::name``, with the class path taken from ``classname`` minus the module's
dotted path. Parsing uses ``xml.etree`` with entity expansion refused (the file is written by
a process that ran the agent's code)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Mapping

PASSED, FAILED, ERROR, SKIPPED, MISSING = "passed", "failed", "error", "skipped", "missing"


class JunitError(ValueError):
    """The junit XML is missing, malformed or suspicious."""


def _nodeid(case: ET.Element) -> str:
    name = case.get("name", "")
    file = (case.get("file") or "").replace("\\", "/")
    classname = case.get("classname", "")
    if not file:
        # Fall back to the dotted classname (xunit2): module path → file.
        parts = classname.split(".")
        return "/".join(parts) + ".py::" + name if parts and parts[0] else name
    module = file[:-3].replace("/", ".") if file.endswith(".py") else file
    rest = classname[len(module):].lstrip(".") if classname.startswith(module) else ""
    return "::".join([file, *([p for p in rest.split(".") if p]), name])


def parse_junit(data: bytes) -> dict[str, str]:
    """``{node id: outcome}``. A test reported twice keeps its worst outcome (a test that
    passed its call but errored in teardown is an error)."""
    if b"<!ENTITY" in data or b"<!DOCTYPE" in data:
        raise JunitError("junit XML declares a DTD/entities; refusing to parse")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise JunitError(f"junit XML does not parse: {exc}") from None
    rank = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 3}
    out: dict[str, str] = {}
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        outcome = ERROR if "error" in tags else FAILED if "failure" in tags else SKIPPED if "skipped" in tags else PASSED
        nid = _nodeid(case)
        if nid not in out or rank[outcome] > rank[out[nid]]:
            out[nid] = outcome
    return out


def totals(outcomes: Mapping[str, str]) -> dict[str, int]:
    t = {PASSED: 0, FAILED: 0, ERROR: 0, SKIPPED: 0}
    for o in outcomes.values():
        t[o] = t.get(o, 0) + 1
    return t
