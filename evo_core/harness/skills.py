"""Skills as portable data: load them from another store or a skill file, export them.

A skill file is JSON: ``{"format": "evo-skills", "version": 1, "skills": [...]}`` where
each skill is ``{skill_id, name, bundle, provenance, source_run, uses, retired}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Optional

from evo_core.state import HarnessState, fold

SKILL_FILE_FORMAT = "evo-skills"
SKILL_FILE_VERSION = 1


class SkillSourceError(ValueError):
    """A ``skills_from`` entry or a skill file cannot be read."""


LIBRARY_STREAM = "skills-library"  # skills imported into a store outside any run
LIBRARY_RUN = "skills-library"


def skills_in_store(store: Any, runs: Optional[Iterable[str]] = None) -> list[dict[str, Any]]:
    """Every skill in ``store``: registered by a run or imported into its library.

    ``uses`` sums promotions of the skill across runs; ``retired`` is true when any run
    retired it; ``run`` is where it was first registered."""
    from evo_core.store import run_stream
    from evo_events import SkillRegistered

    out: dict[str, dict[str, Any]] = {}
    streams = [(LIBRARY_RUN, LIBRARY_STREAM)] if runs is None else []
    streams += [(r, run_stream(r)) for r in (list(runs) if runs is not None else store.runs())]
    for run, stream in streams:
        events = list(store.events(stream))
        if not events:
            continue
        state: HarnessState = fold(events)
        provenance = {e.skill_id: dict(e.provenance) for e in events if isinstance(e, SkillRegistered)}
        for sk in state.skills.values():
            row = out.get(sk.skill_id)
            if row is None:
                out[sk.skill_id] = {"skill_id": sk.skill_id, "name": sk.name, "bundle": sk.bundle, "uses": sk.uses,
                                    "retired": sk.retired, "source_run": sk.source_run or run, "run": run,
                                    "provenance": provenance.get(sk.skill_id, {})}
            else:
                row["uses"] += sk.uses
                row["retired"] = row["retired"] or sk.retired
    return list(out.values())


def import_skills(store: Any, skills: list[dict[str, Any]]) -> int:
    """Register skills (from a skill file) in the store's library stream; known ids are skipped."""
    from evo_events import SkillRegistered

    have = {s["skill_id"] for s in skills_in_store(store)}
    new = [SkillRegistered(run_id=LIBRARY_RUN, skill_id=s["skill_id"], name=s["name"], bundle=dict(s["bundle"]),
                           provenance=dict(s.get("provenance") or {}), source_run=s.get("source_run"))
           for s in skills if s["skill_id"] not in have]
    if new:
        store.append(LIBRARY_STREAM, new, expected_version=store.stream_version(LIBRARY_STREAM))
    return len(new)


def export_skills(skills: list[dict[str, Any]], path: str | Path) -> int:
    data = {"format": SKILL_FILE_FORMAT, "version": SKILL_FILE_VERSION, "skills": skills}
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    return len(skills)


def read_skill_file(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise SkillSourceError(f"skill file {str(p)!r} does not exist")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise SkillSourceError(f"skill file {str(p)!r} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != SKILL_FILE_FORMAT:
        raise SkillSourceError(f"skill file {str(p)!r} is not an evo-skills file (missing format='{SKILL_FILE_FORMAT}')")
    skills = data.get("skills")
    if not isinstance(skills, list):
        raise SkillSourceError(f"skill file {str(p)!r}: 'skills' must be a list")
    for i, sk in enumerate(skills):
        for key in ("skill_id", "name", "bundle"):
            if not isinstance(sk, dict) or key not in sk:
                raise SkillSourceError(f"skill file {str(p)!r}: skill #{i} lacks {key!r}")
        if not isinstance(sk["bundle"].get("intervention"), dict):
            raise SkillSourceError(f"skill file {str(p)!r}: skill {sk['skill_id']!r} has no intervention in its bundle")
    return skills


def load_skill_sources(sources: Iterable[str]) -> list[dict[str, Any]]:
    """Live (non-retired) skills from each source: a store URL, or a skill file path."""
    from evo_core.store import open_store

    out: list[dict[str, Any]] = []
    for src in sources:
        if "://" in src:
            store = open_store(src)
            try:
                found = skills_in_store(store)
            finally:
                store.close()
        else:
            found = read_skill_file(src)
        for sk in found:
            if not sk.get("retired"):
                out.append({**sk, "origin": src})
    return out
