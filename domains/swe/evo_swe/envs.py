"""One virtual environment per (repo, version), built once, cached, offline once built.

Building never touches the network:
- the venv is created without pip (``python -m venv --without-pip``);
- the test runner (``pytest`` and its dependency closure) is *copied* from the host's own
  installed distributions, dist-info included, so pip and importlib see a normal install;
- a task's ``requirements`` are installed with the host's pip (``pip --python <venv>``)
  from its ``wheelhouse`` with ``--no-index``; no wheelhouse, no requirements;
- a task's ``setup`` commands run once, in a scratch copy of the base tree, with the venv
  first on ``PATH`` and ``PIP_NO_INDEX=1``.

A build happens under a file lock, and the environment is only used after its marker file
(with a manifest hash of every file) is written. Before each use the manifest is checked:
an agent that ``pip install``-ed into the cached env (poisoning later grades) is caught,
and the env is rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Optional

import attrs

from evo_swe._log import get_logger

log = get_logger("evo_swe.envs")
MARKER = ".evo-env.json"
SEED = ("pytest",)


class EnvBuildError(RuntimeError):
    """The environment could not be built (bad requirements, missing wheelhouse, setup failed)."""


def default_cache_dir() -> Path:
    # Not under ~ : the sandbox runs commands as an unprivileged uid, which must be able to
    # read (never write) the environments; /root is usually 0700.
    return Path(os.environ.get("EVO_SWE_CACHE") or f"/var/tmp/evo-swe-{os.getuid()}")


@attrs.frozen(kw_only=True)
class EnvSpec:
    repo: str
    version: str = ""
    requirements: tuple[str, ...] = ()
    wheelhouse: Optional[str] = None
    setup: tuple[str, ...] = ()
    seed: tuple[str, ...] = SEED
    python: str = attrs.field(factory=lambda: getattr(sys, "_base_executable", sys.executable))

    def key(self) -> str:
        blob = json.dumps(
            {"repo": self.repo, "version": self.version, "requirements": sorted(self.requirements), "wheelhouse": self.wheelhouse,
             "setup": list(self.setup), "seed": list(self.seed), "python": self.python, "pyver": sys.version_info[:2]},
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


@attrs.frozen(kw_only=True)
class PythonEnv:
    path: Path
    key: str

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def env_vars(self) -> dict[str, str]:
        """Variables for a command that should use this environment."""
        return {
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "VIRTUAL_ENV": str(self.path),
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "PIP_NO_INDEX": "1",
            "LC_ALL": "C.UTF-8",
        }


def _manifest(path: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in sorted(filenames):
            if name == MARKER or name.endswith(".pyc"):
                continue
            p = Path(dirpath) / name
            st = p.lstat()
            h.update(f"{p.relative_to(path)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_mode}\n".encode())
    return h.hexdigest()


def _closure(names: Iterable[str]) -> list[md.Distribution]:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    env = default_environment()
    todo, seen, out = list(names), set(), []
    while todo:
        name = todo.pop()
        norm = name.lower().replace("_", "-")
        if norm in seen:
            continue
        seen.add(norm)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise EnvBuildError(f"seed package {name!r} is not installed on the host; cannot copy it offline") from None
        out.append(dist)
        for r in dist.requires or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                todo.append(req.name)
    return out


def _copy_dist(dist: md.Distribution, site: Path) -> int:
    base = Path(str(dist.locate_file(""))).resolve()
    n = 0
    for f in dist.files or []:
        src = Path(str(dist.locate_file(f))).resolve()
        if base not in src.parents or "__pycache__" in src.parts or not src.is_file():
            continue  # console scripts live outside site-packages; we run ``python -m``
        dst = site / src.relative_to(base)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        n += 1
    return n


def _site_packages(env_dir: Path) -> Path:
    return env_dir / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def _make_readable(path: Path) -> None:
    # The sandbox may run commands as an unprivileged user: the env must be readable by it.
    for dirpath, dirnames, filenames in os.walk(path):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o444 | (0o111 if os.stat(p).st_mode & 0o100 else 0))


@attrs.define
class EnvCache:
    root: Path = attrs.field(factory=default_cache_dir, converter=Path)
    setup_timeout: float = 1800.0

    def __attrs_post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)

    def path_for(self, spec: EnvSpec) -> Path:
        return self.root / "envs" / spec.key()

    def is_ready(self, spec: EnvSpec) -> bool:
        return self._check(self.path_for(spec)) is None

    def _check(self, path: Path) -> Optional[str]:
        marker = path / MARKER
        if not marker.is_file():
            return "not built"
        try:
            meta = json.loads(marker.read_text())
        except (OSError, json.JSONDecodeError):
            return "unreadable marker"
        if meta.get("manifest") != _manifest(path):
            return "modified since it was built"
        return None

    def get(self, spec: EnvSpec, source_tree: Optional[Path] = None) -> tuple[PythonEnv, bool]:
        """The ready environment for ``spec`` and whether a tampered copy had to be rebuilt.

        ``source_tree`` (the base commit's files) is needed only for ``setup`` commands."""
        path = self.path_for(spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o755)
        lock = self.root / "envs" / f"{spec.key()}.lock"
        with open(lock, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                problem = self._check(path)
                rebuilt_tampered = problem == "modified since it was built"
                if problem is not None:
                    if rebuilt_tampered:
                        log.warning("swe_env_tampered_rebuilding", key=spec.key(), repo=spec.repo)
                    self._build(spec, path, source_tree)
                return PythonEnv(path=path, key=spec.key()), rebuilt_tampered
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _build(self, spec: EnvSpec, path: Path, source_tree: Optional[Path]) -> None:
        if path.exists():
            shutil.rmtree(path)
        log.info("swe_env_build", key=spec.key(), repo=spec.repo, version=spec.version)
        proc = subprocess.run([spec.python, "-m", "venv", "--without-pip", str(path)], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise EnvBuildError(f"python -m venv failed: {proc.stderr.strip()[-300:]}")
        site = _site_packages(path)
        for dist in _closure(spec.seed):
            _copy_dist(dist, site)
        if spec.requirements:
            if not spec.wheelhouse or not Path(spec.wheelhouse).is_dir():
                raise EnvBuildError(
                    f"requirements {list(spec.requirements)} need a local 'wheelhouse' folder (environments are built offline)"
                )
            cmd = [sys.executable, "-m", "pip", "--python", str(path / "bin" / "python"), "install", "--no-index", "--find-links",
                   spec.wheelhouse, "--disable-pip-version-check", "-q", *spec.requirements]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.setup_timeout, env={**os.environ, "PIP_NO_INDEX": "1"})
            if proc.returncode != 0:
                raise EnvBuildError(f"offline install of {list(spec.requirements)} failed: {proc.stderr.strip()[-400:]}")
        if spec.setup:
            if source_tree is None:
                raise EnvBuildError("setup commands need the base source tree")
            env = PythonEnv(path=path, key=spec.key())
            with tempfile.TemporaryDirectory(prefix="evo-swe-setup-") as tmp:
                work = Path(tmp) / "src"
                shutil.copytree(source_tree, work, symlinks=True, ignore=shutil.ignore_patterns(".git"))
                for cmd in spec.setup:
                    proc = subprocess.run(
                        cmd, shell=True, cwd=work, capture_output=True, text=True, timeout=self.setup_timeout,
                        env={**env.env_vars(), "HOME": tmp, "TMPDIR": tmp},
                    )
                    if proc.returncode != 0:
                        raise EnvBuildError(f"setup command {cmd!r} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-400:]}")
        _make_readable(path)
        (path / MARKER).write_text(json.dumps({"spec": attrs.asdict(spec), "key": spec.key(), "manifest": _manifest(path)}, sort_keys=True))


def spec_for(task: "object") -> EnvSpec:
    """The environment spec of an :class:`evo_swe.tasks.SWETask`."""
    return EnvSpec(
        repo=getattr(task, "repo"),
        version=getattr(task, "version"),
        requirements=tuple(getattr(task, "requirements")),
        wheelhouse=getattr(task, "wheelhouse"),
        setup=tuple(getattr(task, "setup")),
    )
