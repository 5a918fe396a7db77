"""The run loop's write-behind blob store: a put is named at once, served from memory while
in flight, and a failed write surfaces at ``join`` (before anything is committed)."""

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from evo_core.store.blobs import BlobError, FileBlobStore, MemoryBlobStore, WriteBehindBlobs


class _GatedStore(MemoryBlobStore):
    """Holds every write until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def put(self, data, media_type="application/octet-stream"):
        self.release.wait(10)
        return super().put(data, media_type)


class _FailingStore(MemoryBlobStore):
    def put(self, data, media_type="application/octet-stream"):
        raise OSError("disk full")


def test_a_put_is_named_from_its_bytes_and_readable_while_in_flight():
    inner = _GatedStore()
    with ThreadPoolExecutor(1) as pool:
        blobs = WriteBehindBlobs(inner, pool)
        ref = blobs.put(b"weights", "application/x-test")
        assert ref.digest == hashlib.sha256(b"weights").hexdigest() and ref.size == 7
        assert not inner.exists(ref.digest)  # not written yet
        assert blobs.exists(ref.digest) and blobs.get(ref) == b"weights"
        inner.release.set()
        blobs.join()
        assert inner.get(ref) == b"weights" and blobs.get(ref.digest) == b"weights"


def test_a_failed_write_is_raised_by_join(tmp_path):
    with ThreadPoolExecutor(1) as pool:
        blobs = WriteBehindBlobs(_FailingStore(), pool)
        ref = blobs.put(b"x")
        with pytest.raises(OSError, match="disk full"):
            blobs.join()
        with pytest.raises(BlobError):  # nothing left in memory: the blob is really missing
            blobs.get(ref)
        blobs.join()  # joined once: not raised again


def test_store_attributes_pass_through(tmp_path):
    inner = FileBlobStore(tmp_path / "blobs")
    with ThreadPoolExecutor(1) as pool:
        blobs = WriteBehindBlobs(inner, pool)
        blobs.check_writable()
        assert blobs.root == inner.root
        refs = [blobs.put(bytes([i]) * 1000) for i in range(20)]
        blobs.join()
        assert all(inner.get(r) == bytes([i]) * 1000 for i, r in enumerate(refs))
