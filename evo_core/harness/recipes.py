"""Paper-scale recipes name local paths (model, data, repositories). Before anything is
loaded, every path a config names must exist; a missing one is a one-line error naming
the key and the path."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

PATH_OPTION_KEYS = ("repos_dir", "data_dir", "tests_dir")


class MissingPathError(FileNotFoundError):
    """A path the config names does not exist."""


def named_paths(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(config key, path) for every local path a resolved run config names."""
    out: list[tuple[str, str]] = []
    task = cfg.get("task") or {}
    for key in ("train", "validation", "test"):
        v = task.get(key)
        if isinstance(v, str) and v and "://" not in v:  # generate://… sources are not files
            out.append((f"task.{key}", v))
    for key in PATH_OPTION_KEYS:
        v = (task.get("options") or {}).get(key)
        if isinstance(v, str) and v:
            out.append((f"task.options.{key}", v))
    policy = cfg.get("policy") or {}
    if policy.get("kind") == "hf" and policy.get("path"):
        out.append(("policy.path", policy["path"]))
    return out


def check_paths(cfg: Mapping[str, Any]) -> None:
    """Raise ``MissingPathError`` for the first missing path (all of them listed)."""
    from evo_core.trainer.policy import hub_id_message

    missing = [(k, p) for k, p in named_paths(cfg) if not Path(p).exists()]
    for k, p in missing:  # a hub id is the likelier cause: say so first
        hint = hub_id_message(p, k) if k == "policy.path" else None
        if hint:
            raise MissingPathError(hint)
    if missing:
        k, p = missing[0]
        more = f" (and {len(missing) - 1} more: {', '.join(k2 for k2, _ in missing[1:])})" if len(missing) > 1 else ""
        raise MissingPathError(f"config key {k!r} names {p!r}, which does not exist{more}; "
                               f"edit the recipe or pass --set {k}=/your/path")
