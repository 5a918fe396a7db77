"""The configs that ship with evotrainer, by name: ``evo run quickstart`` from a wheel as from a clone.

The files live in the repository's ``configs/``, where scripts, docs and benchmarks name
them by path; ``setup.py`` copies them into the wheel as ``evo_core/_configs``. A name is a
file's path under that folder without ``.toml``: ``quickstart``, ``recipes/math``,
``baselines/fixed``. Relative paths inside a config (``checkpoint_dir``, ``cache_dir``, data
files) resolve against the working directory, as they do from a clone, never against the
installed package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from evo_core.config_base import ConfigError, is_suite_definition, tomllib

_PACKAGE = Path(__file__).resolve().parent


class UnknownConfigError(ConfigError):
    """Neither a config file nor a shipped config's name; the message lists the names."""


def configs_root() -> Path:
    """The wheel's copy when installed from one, else the checkout's ``configs/`` (editable)."""
    packaged = _PACKAGE / "_configs"
    return packaged if packaged.is_dir() else _PACKAGE.parent / "configs"


def shipped_names() -> list[str]:
    """Run configs only: the flaw-suite definition ships too but is read by the benchmark."""
    root = configs_root()
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.toml") if _is_run_config(p))


def _is_run_config(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return not is_suite_definition(tomllib.load(fh))
    except (OSError, tomllib.TOMLDecodeError):
        return True  # listed, so that loading it reports what is wrong


def shipped_path(name: str) -> Optional[Path]:
    """The file of shipped config ``name``, or None. Names never climb out of the folder."""
    if not name or name.startswith("/") or ".." in name.split("/"):
        return None
    path = configs_root() / f"{name}.toml"
    return path if path.is_file() and _is_run_config(path) else None


def describe(name: str) -> str:
    """The first sentence of a shipped config's leading comment: what it is, for ``evo config list``."""
    path = shipped_path(name)
    lines = path.read_text(encoding="utf-8").splitlines() if path else []
    head = []
    for line in lines:
        if not line.startswith("#"):
            break
        head.append(line.lstrip("#").strip())
    text = " ".join(head)
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]


def resolve_config(arg: str) -> str:
    """The path ``evo run ARG`` loads: an existing file as given, else the shipped config ``ARG``.

    An argument ending in ``.toml`` is always a path, so a typo in a path is never read as a name.
    """
    if Path(arg).is_file():
        return arg
    names = ", ".join(shipped_names())
    if arg.endswith(".toml"):
        raise UnknownConfigError(f"config file {arg!r} does not exist; shipped configs, run by name: {names}")
    path = shipped_path(arg)
    if path is None:
        raise UnknownConfigError(f"no config file or shipped config named {arg!r}; shipped configs: {names}")
    return str(path)
