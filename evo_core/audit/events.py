"""Event types of the audit tools (namespace ``evo_audit.``; ``evo.`` is the core's).

A replay writes one ``ReplayCompleted`` into its own stream ``replay-<run>-<id>``; it
records what produced the results (the SPEC, every plugin version, the replay settings
and the source stream's head hash) next to the results. Full per-pass findings go to a
blob the event references, so the event stays small on a long run.
"""

from __future__ import annotations

from typing import Any, Optional

import attrs

from evo_events import BlobRef, Emitter, Event, event_type

AUDIT_EMITTER = Emitter("evo_audit", "1")
REPLAY_PREFIX = "replay-"


def replay_stream(run_id: str, replay_id: str) -> str:
    return f"{REPLAY_PREFIX}{run_id}-{replay_id}"


@event_type("evo_audit.ReplayCompleted", version=1)
@attrs.frozen(kw_only=True)
class ReplayCompleted(Event):
    """``run_id`` is the *source* run; the event lives in the replay's own stream."""

    replay_id: str
    source_stream: str
    source_head_version: int
    source_head_hash: str
    spec: dict[str, Any]
    plugin_versions: dict[str, str]
    settings: dict[str, Any]  # window_steps, every, find_bad, evo_core version
    summary: dict[str, Any]  # counts of appeared/vanished/flips/bad promotions
    appeared: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=tuple)
    vanished: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=tuple)
    flips: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=tuple)
    bad_promotions: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=tuple)
    findings: Optional[BlobRef] = None
    completed_at: str = ""


EVENT_TYPES = (ReplayCompleted,)
