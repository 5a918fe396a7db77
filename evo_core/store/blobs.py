"""Content-addressed blob store: sha256, write-once, verified on every read."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional, Protocol

from evo_events import BlobRef


class BlobError(RuntimeError):
    """A blob is missing or its bytes no longer match their digest."""


class BlobStore(Protocol):
    def put(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef: ...

    def get(self, ref: BlobRef | str) -> bytes: ...

    def exists(self, digest: str) -> bool: ...

    def check(self, digest: str) -> Optional[str]:
        """None if the blob is present and intact, else what is wrong (every ``get``
        verifies the digest, so reading it is the check)."""
        try:
            self.get(digest)
        except BlobError as exc:
            return str(exc)
        return None

    def check_writable(self) -> None:
        """Raise ``BlobError`` (one line) unless ``put`` could write now."""
        return None


def _digest(ref: BlobRef | str) -> str:
    return ref.digest if isinstance(ref, BlobRef) else ref


def put_json(blobs: BlobStore, obj: Any) -> BlobRef:
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return blobs.put(data, "application/json")


def get_json(blobs: BlobStore, ref: BlobRef | str) -> Any:
    return json.loads(blobs.get(ref))


class MemoryBlobStore(BlobStore):
    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        d = hashlib.sha256(data).hexdigest()
        self._data.setdefault(d, bytes(data))
        return BlobRef(d, len(data), media_type)

    def get(self, ref: BlobRef | str) -> bytes:
        d = _digest(ref)
        if d not in self._data:
            raise BlobError(f"blob {d[:12]}… is missing")
        data = self._data[d]
        if hashlib.sha256(data).hexdigest() != d:
            raise BlobError(f"blob {d[:12]}… is corrupted: its bytes do not match its digest")
        return data

    def exists(self, digest: str) -> bool:
        return digest in self._data


class FileBlobStore(BlobStore):
    """Blobs as files ``root/ab/cdef…``; written to a temp file then renamed, so a
    crash never leaves a half-written blob under its final name. ``read_only`` creates
    nothing (not even ``root``) and refuses ``put``."""

    def __init__(self, root: str | os.PathLike, *, read_only: bool = False) -> None:
        self.root = Path(root)
        self.read_only = read_only
        if not read_only:
            self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, digest: str) -> Path:
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise BlobError(f"{digest!r} is not a sha256 digest")
        return self.root / digest[:2] / digest[2:]

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        if self.read_only:
            raise BlobError(f"blob directory {self.root} was opened read-only")
        d = hashlib.sha256(data).hexdigest()
        path = self._path(d)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, 0o444)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        return BlobRef(d, len(data), media_type)

    def get(self, ref: BlobRef | str) -> bytes:
        d = _digest(ref)
        path = self._path(d)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobError(f"blob {d[:12]}… is missing from {self.root}") from None
        if hashlib.sha256(data).hexdigest() != d:
            raise BlobError(f"blob {d[:12]}… is corrupted: its bytes do not match its digest")
        return data

    def exists(self, digest: str) -> bool:
        return self._path(digest).exists()

    def check_writable(self) -> None:
        if self.read_only:
            raise BlobError(f"blob directory {self.root} was opened read-only")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-probe-")
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            raise BlobError(f"cannot write blobs under {self.root}: {exc.strerror or exc}") from None


class WriteBehindBlobs:
    """A blob store whose ``put`` returns at once and writes in the background.

    The reference is known from the bytes (content addressing), so events can name a blob
    while its write and fsync overlap with other work. ``get`` serves a blob still in flight
    from memory. ``join`` waits for every write and re-raises a failed one: the run loop
    calls it before each commit, so no committed event names a blob that is not on disk."""

    def __init__(self, inner: BlobStore, pool: Any) -> None:
        import threading

        self.inner = inner
        self._pool = pool
        self._lock = threading.Lock()
        self._in_flight: dict[str, bytes] = {}
        self._futures: list[Any] = []

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        ref = BlobRef(hashlib.sha256(data).hexdigest(), len(data), media_type)
        with self._lock:
            self._in_flight[ref.digest] = data
        self._futures.append(self._pool.submit(self._write, ref, data))
        return ref

    def _write(self, ref: BlobRef, data: bytes) -> None:
        try:
            got = self.inner.put(data, ref.media_type)
            if got.digest != ref.digest:  # content addressing makes this impossible; fail loudly if not
                raise BlobError(f"blob store returned digest {got.digest} for {ref.digest}")
        finally:
            with self._lock:
                self._in_flight.pop(ref.digest, None)

    def get(self, ref: BlobRef | str) -> bytes:
        with self._lock:
            data = self._in_flight.get(_digest(ref))
        return data if data is not None else self.inner.get(ref)

    def exists(self, digest: str) -> bool:
        with self._lock:
            if digest in self._in_flight:
                return True
        return self.inner.exists(digest)

    def take(self) -> list[Any]:
        """The writes started since the last ``take`` or ``join`` (for another thread to await)."""
        futures, self._futures = self._futures, []
        return futures

    def join(self) -> None:
        for fut in self.take():
            fut.result()

    def __getattr__(self, name: str) -> Any:  # check, check_writable, root, …: the store's own
        return getattr(self.inner, name)
