from __future__ import annotations

import os

import pytest

from evo_core.sandbox import LocalSandbox


@pytest.fixture(scope="session")
def local_sandbox():
    sb = LocalSandbox(2)
    yield sb
    sb.close()


def uid_processes(uid: int) -> list[int]:
    """Live (non-zombie) host processes running as ``uid``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(int(name))
    return out
