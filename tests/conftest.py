"""Fixtures shared by the serve and scale tests: a saved tiny policy, and ``evo serve`` on it as a real subprocess."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> str:
    from evo_core.trainer.policy import HFPolicy

    path = str(tmp_path_factory.mktemp("tiny") / "policy")
    HFPolicy.tiny(seed=3, name="tiny").save(path)
    return path


@pytest.fixture(scope="module")
def served(tiny_dir):
    """``python -m evo_core.cli.app serve DIR`` on 127.0.0.1; yields its base URL."""
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", EVO_NO_PLUGIN_COMMANDS="1")
    proc = subprocess.Popen([sys.executable, "-m", "evo_core.cli.app", "serve", tiny_dir, "--port", str(port),
                             "--served-model-name", "tiny"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"evo serve exited with {proc.returncode}:\n{proc.stdout.read()}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("evo serve did not become healthy in 120 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
