"""Everything declarative is in pyproject.toml. This file adds one build step: the
repository's ``configs/`` (which scripts, docs and benchmarks name by path) is copied into
the wheel as ``evo_core/_configs``, so ``evo run quickstart`` works after ``pip install``.
An editable install needs no copy: ``evo_core.shipped_configs`` reads ``configs/`` in place."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithConfigs(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        src, dst = HERE / "configs", Path(self.build_lib) / "evo_core" / "_configs"
        if not src.is_dir():  # an sdist without configs/ would build a wheel that cannot run a name
            raise RuntimeError(f"{src} is missing: the wheel must ship the configs")
        shutil.rmtree(dst, ignore_errors=True)
        for f in sorted(src.rglob("*.toml")):
            out = dst / f.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, out)


setup(cmdclass={"build_py": BuildPyWithConfigs})
