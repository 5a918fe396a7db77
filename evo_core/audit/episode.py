"""Evidence rollouts that are episodes, as turns: read from the step's trajectory blob, kept
compact in the audit chain, and rendered one line per turn (``evo audit``: at most
``MAX_LINES`` lines per episode; ``--verbose``: ``VERBOSE_LINES``, observations over several
lines).

Turns were written by the policy and the environment: every value is clipped, never
evaluated, and a turn of an unexpected shape is shown as what it is, not an error.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

MAX_LINES = 40  # per evidence episode, its header included (the default view)
VERBOSE_LINES = 400
MAX_TURNS = 400  # kept in the chain per episode
MAX_TEXT = 2000  # characters kept of a turn's content / observation
_KEYS = ("role", "content", "tool", "args", "path", "output", "error", "call_error", "stop_reason", "exit_code")


def _clip(v: Any, n: int = MAX_TEXT) -> Any:
    if isinstance(v, str):
        return v if len(v) <= n else v[:n] + f"… [{len(v) - n} more characters]"
    if v is None or isinstance(v, (bool, int, float)):
        return v
    try:
        text = json.dumps(v, sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(v).__name__
    return _clip(text, min(n, 300))


def compact_turns(turns: Any) -> Optional[list[dict[str, Any]]]:
    """The turns worth showing (known keys, values clipped), or None when ``turns`` is no list."""
    if not isinstance(turns, list):
        return None
    out = []
    for t in turns[:MAX_TURNS]:
        if isinstance(t, Mapping):
            row = {k: _clip(t[k]) for k in _KEYS if k in t and k != "args"}
            args = t.get("args")
            if isinstance(args, Mapping):  # one level kept (shown as k=v); deeper values as clipped JSON
                row["args"] = {str(k)[:50]: _clip(v, 300) for k, v in list(args.items())[:16]}
            elif "args" in t:
                row["args"] = _clip(args, 300)
            out.append(row)
        else:
            out.append({"role": "?", "content": _clip(t)})
    if len(turns) > MAX_TURNS:
        out.append({"role": "…", "content": f"{len(turns) - MAX_TURNS} more turns not kept"})
    return out


def episode_turns(blob: Any, index: Any) -> Optional[list[dict[str, Any]]]:
    """The compact turns of rollout ``index`` of a step's trajectory blob (``trajectory_payload``),
    or None when it is no episode (or the blob has another shape)."""
    rollouts = blob.get("rollouts") if isinstance(blob, Mapping) else None
    if not isinstance(rollouts, list) or not isinstance(index, int) or not 0 <= index < len(rollouts):
        return None
    r = rollouts[index]
    return compact_turns(r.get("turns")) if isinstance(r, Mapping) and "turns" in r else None


def _one_line(v: Any) -> str:
    return " ".join(str(v).split())


def _args(args: Any, width: int) -> str:
    if isinstance(args, Mapping):
        text = " ".join(f"{k}={_one_line(v)}" for k, v in args.items())
    else:
        text = _one_line(args if isinstance(args, str) else _clip(args, 300))
    return text if len(text) <= width else text[: width - 1] + "…"


def _turn_lines(no: int, t: Mapping[str, Any], width: int, obs_lines: int) -> list[str]:
    role = str(t.get("role", "?"))[:12]
    flags = " CALL ERROR" if t.get("call_error") is True else (" ERROR" if t.get("error") is True else "")
    if t.get("stop_reason") is not None:
        flags += f" [stop {_one_line(t['stop_reason'])[:30]}]"
    head = f"  {no:>3} {role}"
    if isinstance(t.get("tool"), str):
        head += f" {t['tool'][:30]}"
        shown = _args(t.get("args") or "", max(10, width // 2))
        if isinstance(t.get("path"), str) and t["path"] not in shown:
            shown = _fit(f"path={_one_line(t['path'])} {shown}".rstrip(), max(10, width // 2))
        if shown:
            head += " " + shown
        body = t.get("output")
    else:
        body = t.get("content")
    head += flags
    text = "" if body is None else str(body)
    rows = [r for r in text.splitlines() if r.strip()] or ([""] if not text else [])
    if obs_lines <= 1 or len(rows) <= 1:
        line = f"{head} → {_one_line(text)}" if isinstance(t.get("tool"), str) and text else \
            (f"{head}  {_one_line(text)}" if text else head)
        return [_fit(line, width)]
    out = [_fit(head, width)]
    for r in rows[:obs_lines]:
        out.append(_fit("        " + r.rstrip(), width))
    if len(rows) > obs_lines:
        out.append(_fit(f"        … {len(rows) - obs_lines} more lines", width))
    return out


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def episode_lines(turns: Sequence[Mapping[str, Any]], *, max_lines: int = MAX_LINES, width: int = 100,
                  obs_lines: int = 1, header: str = "", more: str = "--verbose shows more") -> list[str]:
    """An episode as at most ``max_lines`` lines of at most ``width`` characters: ``header``
    (when given), then one line per turn (``obs_lines`` > 1: a turn's text over up to that many
    lines). When the turns do not fit, the first and the last are shown around one line
    saying how many were left out: the end of an episode (its last edits, its submit) matters
    as much as the start."""
    out = [_fit(header, width)] if header else []
    room = max_lines - len(out)
    blocks = [_turn_lines(i, t if isinstance(t, Mapping) else {"role": "?", "content": t}, width, obs_lines)
              for i, t in enumerate(turns, 1)]
    if sum(len(b) for b in blocks) <= room:
        return out + [x for b in blocks for x in b]
    room -= 1  # the line that says what was left out
    head: list[list[str]] = []
    tail: list[list[str]] = []
    used = 0
    lo, hi = 0, len(blocks) - 1
    take_head = True
    while lo <= hi:  # alternate: a turn from the start, then one from the end, while they fit
        b = blocks[lo] if take_head else blocks[hi]
        if used + len(b) > room:
            break
        used += len(b)
        if take_head:
            head.append(b)
            lo += 1
        else:
            tail.append(b)
            hi -= 1
        take_head = not take_head
    skipped = hi - lo + 1
    return (out + [x for b in head for x in b]
            + [_fit(f"  … {skipped} turns not shown ({more})", width)]
            + [x for b in reversed(tail) for x in b])
