"""Source trees on the host: export a base commit, snapshot it as a one-commit repository,
diff a workspace against its pristine snapshot, apply patches, extract archives safely.

Only trusted inputs (task repositories, the host's own snapshots) are handled with plain
``git``; anything the agent produced is treated as data (diffs are computed with the
pristine repository's own object store, archives are extracted with tarfile's ``data``
filter), so a tampered ``.git`` in the workspace cannot hide or forge changes.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

# Deterministic commits: the same tree always gives the same commit id.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "evo",
    "GIT_AUTHOR_EMAIL": "evo@localhost",
    "GIT_COMMITTER_NAME": "evo",
    "GIT_COMMITTER_EMAIL": "evo@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}
_GIT_OPTS = ("-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c", "core.hooksPath=/dev/null", "-c", "init.defaultBranch=main")
# Build noise never belongs in an episode's diff.
_NOISE = "__pycache__/\n*.pyc\n*.pyo\n.pytest_cache/\n*.egg-info/\n.hypothesis/\n"


class RepoError(RuntimeError):
    """A repository or archive could not be read, or a patch could not be handled."""


def git(args: Sequence[str], cwd: Optional[str | os.PathLike[str]] = None, *, env: Optional[Mapping[str, str]] = None,
        input: Optional[bytes] = None, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **_GIT_ENV, "HOME": os.environ.get("HOME", "/tmp"), **(env or {})}
    proc = subprocess.run(["git", *_GIT_OPTS, *args], cwd=cwd, env=full_env, input=input, capture_output=True, timeout=300)
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RepoError(f"git {args[0]} failed: {msg[-1] if msg else proc.returncode}")
    return proc


def _safe_extract_tar(data: bytes | Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    fileobj = io.BytesIO(data) if isinstance(data, bytes) else None
    with tarfile.open(fileobj=fileobj, name=None if fileobj else str(data), mode="r:*") as tf:
        try:
            tf.extractall(dest, filter="data")  # rejects absolute paths, '..', links out, devices
        except tarfile.TarError as exc:
            raise RepoError(f"unsafe or corrupt archive: {exc}") from None


def _safe_extract_zip(path: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            target = (dest / info.filename).resolve()
            if not str(target).startswith(str(root) + os.sep) and target != root:
                raise RepoError(f"unsafe archive member {info.filename!r} escapes the destination")
        zf.extractall(dest)


def _strip_single_top(dest: Path) -> None:
    """sdists and GitHub archives wrap everything in one ``name-version/`` folder."""
    entries = [p for p in dest.iterdir()]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        top = entries[0]
        tmp = dest.parent / (dest.name + ".strip")
        top.rename(tmp)
        dest.rmdir()
        tmp.rename(dest)


def export_tree(repo: str, base_commit: str, dest: Path) -> None:
    """Write the files of ``base_commit`` (git) or of the archive into ``dest`` — no history."""
    dest = Path(dest)
    if repo.endswith((".zip",)):
        _safe_extract_zip(Path(repo), dest)
        _strip_single_top(dest)
        return
    if os.path.isfile(repo):
        _safe_extract_tar(Path(repo), dest)
        _strip_single_top(dest)
        return
    rev = git(["rev-parse", "--verify", "--quiet", f"{base_commit}^{{commit}}"], cwd=repo, check=False)
    if rev.returncode != 0:
        raise RepoError(f"base_commit {base_commit!r} is not a commit of {repo}")
    data = git(["archive", "--format=tar", rev.stdout.decode().strip()], cwd=repo).stdout
    _safe_extract_tar(data, dest)


def snapshot_repo(tree: Path) -> str:
    """Turn ``tree`` into a fresh one-commit git repository; returns the commit id."""
    git(["init", "-q", str(tree)])
    (tree / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (tree / ".git" / "info" / "exclude").write_text(_NOISE)
    git(["add", "-A", "-f", "."], cwd=tree)
    git(["commit", "-q", "--allow-empty", "--no-verify", "-m", "base"], cwd=tree)
    return git(["rev-parse", "HEAD"], cwd=tree).stdout.decode().strip()


def copy_tree(src: Path, dest: Path, *, include_git: bool = True) -> None:
    ignore = None if include_git else shutil.ignore_patterns(".git")
    shutil.copytree(src, dest, symlinks=True, ignore=ignore)


def diff_against(pristine: Path, worktree: Path) -> str:
    """The full binary diff from the pristine snapshot's commit to ``worktree``'s files.

    Uses the pristine repository's object store with a throw-away index, so nothing in the
    worktree's own ``.git`` (which the agent controls) is consulted."""
    scratch = Path(tempfile.mkdtemp(prefix="evo-swe-diff-"))
    excl, idx, objs = scratch / "exclude", scratch / "index", scratch / "objects"
    try:
        excl.write_text(_NOISE)
        objs.mkdir()
        # New blobs go to a scratch object store; the pristine one is only read.
        env = {"GIT_INDEX_FILE": str(idx), "GIT_DIR": str(pristine / ".git"), "GIT_WORK_TREE": str(worktree),
               "GIT_OBJECT_DIRECTORY": str(objs), "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(pristine / ".git" / "objects")}
        opts = ["-c", f"core.excludesFile={excl}"]
        git([*opts, "read-tree", "HEAD"], cwd=worktree, env=env)
        git([*opts, "add", "-A", "."], cwd=worktree, env=env)
        out = git([*opts, "diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-renames", "HEAD"], cwd=worktree, env=env)
        return out.stdout.decode("utf-8", "surrogateescape")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def patch_paths(patch: str) -> list[str]:
    """Every path a unified git diff touches (both sides), in order, without ``a/``/``b/``."""
    out: list[str] = []
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ")):
            p = line[4:].split("\t", 1)[0].strip()
            if p == "/dev/null":
                continue
            if p.startswith('"'):
                p = p.strip('"')
            if p[:2] in ("a/", "b/"):
                p = p[2:]
            out.append(p)
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            out.append(line.split(" ", 2)[2])
        elif line.startswith("diff --git ") and " b/" in line:
            out.append(line.rsplit(" b/", 1)[1])
    return list(dict.fromkeys(out))


def apply_patch(tree: Path, patch: str, *, what: str = "patch") -> None:
    """Apply a git diff inside ``tree``. Raises :class:`RepoError` when it does not apply.

    ``git apply`` refuses paths outside the tree and changes behind symbolic links."""
    if not patch.strip():
        return
    data = patch.encode("utf-8", "surrogateescape")
    if not data.endswith(b"\n"):
        data += b"\n"
    env = {"GIT_DIR": str(tree / ".evo-no-git")}  # plain-directory mode, never the tree's .git
    proc = git(["apply", "--binary", "--whitespace=nowarn", "-p1", "-"], cwd=tree, input=data, env=env, check=False)
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RepoError(f"{what} does not apply: {msg[0] if msg else 'git apply failed'}")


def escaping_symlinks(tree: Path) -> list[str]:
    """Relative paths of symbolic links in ``tree`` that resolve outside it."""
    root = tree.resolve()
    bad: list[str] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                target = (p.parent / os.readlink(p)).resolve()
                if target != root and root not in target.parents:
                    bad.append(str(p.relative_to(tree)))
        dirnames[:] = [d for d in dirnames if d != ".git" and not (Path(dirpath) / d).is_symlink()]
    return sorted(bad)


def read_tree_files(tree: Path, *, skip: Iterable[str] = (".git",)) -> dict[str, bytes]:
    """All regular files under ``tree`` as ``{relative path: bytes}`` (symlinks skipped)."""
    skip = set(skip)
    files: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d not in skip and not (Path(dirpath) / d).is_symlink()]
        for name in filenames:
            p = Path(dirpath) / name
            if p.is_symlink() or not p.is_file():
                continue
            files[str(p.relative_to(tree))] = p.read_bytes()
    return files
