"""The wheelhouse that carries the project to a machine with its own torch stack and no network.

Such a site (the lent H200: Python 3.12, torch 2.11 + CUDA 13, transformers 5.17, DeepSpeed)
keeps its torch, transformers and CUDA; the project and the pure-Python (or cp312) packages
that machine lacks come from a folder of wheels, installed with ``--no-deps --no-index``, so
nothing is resolved or downloaded there.

    python -m benchmarks.gpu_wheelhouse build .gpu/wheels      # here, with the package index
    python -m benchmarks.gpu_wheelhouse install .gpu/wheels /tmp/site   # there; then PYTHONPATH=/tmp/site

``build`` pins each dependency to the version installed in this environment (what the tests
ran with), downloads cp312 manylinux/any wheels, builds the project's own wheels and a
DeepSpeed wheel (PyPI has only its sdist), and writes MANIFEST.json (name, sha256).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the H200 lacked (../shared/notes/gpu-device.md): pure Python, or cp312 binaries.
DEPENDENCIES = ("cattrs", "attrs", "typing_extensions", "orjson", "eventsourcing", "structlog", "fastapi",
                "starlette", "uvicorn", "opentelemetry-api", "pydantic", "pydantic-core", "annotated-types",
                "typing-inspection", "hjson", "py-cpuinfo", "math-verify", "latex2sympy2_extended",
                "antlr4-python3-runtime")
PLATFORM = ("--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi", "none",
            "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
            "--platform", "manylinux_2_28_x86_64", "--platform", "any")


class WheelhouseError(RuntimeError):
    """The wheelhouse could not be built or installed (one line)."""


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        raise WheelhouseError(f"pip {args[0]} failed: {tail[0]}")


def pinned(names: tuple[str, ...] = DEPENDENCIES) -> list[str]:
    """``name==version`` as installed here (a name not installed here is left unpinned)."""
    out = []
    for n in names:
        try:
            out.append(f"{n}=={metadata.version(n)}")
        except metadata.PackageNotFoundError:
            out.append(n)
    return out


def build(dest: Path, *, deepspeed: bool = True) -> dict:
    dest.mkdir(parents=True, exist_ok=True)
    print(f"wheelhouse: the project's wheels into {dest}", flush=True)
    _pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dest), str(ROOT), str(ROOT / "domains/math"))
    reqs = pinned()
    print(f"wheelhouse: downloading {len(reqs)} cp312 wheels", flush=True)
    _pip("download", "-q", "--no-deps", "--only-binary=:all:", *PLATFORM, "-d", str(dest), *reqs)
    if deepspeed:
        try:
            spec = f"deepspeed=={metadata.version('deepspeed')}"
        except metadata.PackageNotFoundError:
            spec = "deepspeed"
        print(f"wheelhouse: building {spec} (PyPI has only its sdist)", flush=True)
        _pip("wheel", "-q", "--no-deps", "-w", str(dest), spec)
    wheels = sorted(dest.glob("*.whl"))
    manifest = {"python": "cp312", "wheels": [{"file": w.name, "sha256": hashlib.sha256(w.read_bytes()).hexdigest(),
                                               "bytes": w.stat().st_size} for w in wheels]}
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=1))
    size = sum(w["bytes"] for w in manifest["wheels"])
    print(f"wheelhouse: {len(wheels)} wheels, {size / 2**20:.1f} MiB in {dest}", flush=True)
    return manifest


def install(wheelhouse: Path, target: Path) -> int:
    """Install every wheel of ``wheelhouse`` into ``target`` with no index and no dependency
    resolution (the machine's own torch stack stays as it is); put ``target`` on PYTHONPATH."""
    wheels = sorted(str(w) for w in wheelhouse.glob("*.whl"))
    if not wheels:
        raise WheelhouseError(f"no wheels in {wheelhouse} (build them first: python -m benchmarks.gpu_wheelhouse build DIR)")
    target.mkdir(parents=True, exist_ok=True)
    _pip("install", "-q", "--no-index", "--no-deps", "--no-compile", "--disable-pip-version-check",
         "--target", str(target), "--upgrade", *wheels)
    return len(wheels)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dir")
    b.add_argument("--no-deepspeed", action="store_true")
    i = sub.add_parser("install")
    i.add_argument("dir")
    i.add_argument("target")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "build":
            build(Path(a.dir), deepspeed=not a.no_deepspeed)
        else:
            n = install(Path(a.dir), Path(a.target))
            print(f"installed {n} wheels into {a.target}: export PYTHONPATH={a.target}")
    except WheelhouseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
