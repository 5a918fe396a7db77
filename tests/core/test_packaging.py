"""Every distribution's metadata: the Apache-2.0 text ships in each wheel, one Python floor,
classifiers and URLs, a README, and domains pinned to the evotrainer minor they were built against."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
# sha256 of the canonical Apache License 2.0 text (apache.org/licenses/LICENSE-2.0.txt, 202 lines)
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
DISTS = ["domains/math", "domains/code", "domains/swe", "examples/evo-plugin-example"]
# tarfile.extractall(filter="data") (evo_swe.repo, evo_core.export): PEP 706, in 3.10.12 and 3.11.4
FLOOR = ">=3.10.12,!=3.11.0,!=3.11.1,!=3.11.2,!=3.11.3"


def project(d: str) -> dict:
    with open(ROOT / d / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


def test_the_distributions_are_the_ones_checked_here():
    # A new domain or example distribution must join DISTS (and so these checks).
    found = sorted(str(p.parent.relative_to(ROOT)) for pat in ("domains/*/pyproject.toml", "examples/*/pyproject.toml")
                   for p in ROOT.glob(pat))
    assert found == sorted(DISTS)


def test_the_root_license_is_the_apache_2_text():
    text = (ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_SHA256
    assert project(".")["project"]["license"] == "Apache-2.0"


@pytest.mark.parametrize("d", [".", *DISTS])
def test_each_wheel_carries_the_license_and_the_metadata(d):
    meta = project(d)
    p = meta["project"]
    assert meta["build-system"]["requires"][0] == "setuptools>=77"  # the SPDX `license = "..."` form needs 77
    assert p["license"] == "Apache-2.0" and p["license-files"] == ["LICENSE"]
    assert (ROOT / d / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    assert p["requires-python"] == FLOOR
    assert p["readme"] == "README.md" and (ROOT / d / "README.md").stat().st_size > 200
    cls = p["classifiers"]
    assert "Programming Language :: Python :: 3" in cls and not any(c.startswith("License ::") for c in cls)
    urls = p["urls"]
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(urls)
    assert urls["Homepage"] == project(".")["project"]["urls"]["Homepage"]  # one repository everywhere
    if d != ".":
        assert urls["Source"].endswith(f"/tree/main/{d}")
        doc = re.search(r"/blob/main/(.+)$", urls["Documentation"]).group(1)
        assert (ROOT / doc).is_file()


@pytest.mark.parametrize("d", DISTS)
def test_each_domain_pins_the_evotrainer_minor_it_was_built_against(d):
    root = Version(project(".")["project"]["version"])
    [req] = [r for r in project(d)["project"]["dependencies"] if re.match(r"evotrainer\b", r)]
    spec = SpecifierSet(req.removeprefix("evotrainer"))
    assert spec.contains(root)
    assert not spec.contains(Version(f"{root.major}.{root.minor + 1}.0"))  # 0.x minors may change the API
    assert not spec.contains(Version("0.0.1"))  # bounded below too


def test_the_python_floor_is_what_the_code_needs():
    uses = [p for p in [*ROOT.glob("evo_core/**/*.py"), *ROOT.glob("domains/*/evo_*/**/*.py")]
            if 'filter="data"' in p.read_text(encoding="utf-8")]
    assert uses, "nothing needs the extraction filters any more: the floor can come down"
    spec = SpecifierSet(project(".")["project"]["requires-python"])
    have = ["3.10.12", "3.11.4", "3.12.0", "3.13.1"]
    lack = ["3.10.11", "3.11.0", "3.11.3", "3.9.20"]
    assert all(v in spec for v in have) and not any(v in spec for v in lack)


def test_the_arithmetic_domain_ships_inside_evotrainer():
    # `pip install evotrainer && evo run quickstart` needs the quickstart's domain.
    p = project(".")
    assert not (ROOT / "domains/arithmetic/pyproject.toml").exists()
    assert p["project"]["entry-points"]["evo"]["evo_arithmetic"] == "evo_arithmetic.plugin"
    find = p["tool"]["setuptools"]["packages"]["find"]
    assert "domains/arithmetic" in find["where"] and "evo_arithmetic*" in find["include"]


def test_a_scaffolded_plugin_pins_the_installed_evotrainer_series(tmp_path, monkeypatch):
    from importlib import metadata

    from evo_core import scaffold

    made = scaffold.scaffold("lenspike", "diagnostic", tmp_path)
    p = tomllib.loads((made.root / "pyproject.toml").read_text())["project"]
    assert p["requires-python"] == FLOOR and p["readme"] == "README.md" and (made.root / "README.md").is_file()
    [req] = p["dependencies"]
    assert SpecifierSet(req.removeprefix("evotrainer")).contains(Version(metadata.version("evotrainer")))
    for installed, want in [("0.3.2", "evotrainer>=0.3,<0.4"), ("1.4.0", "evotrainer>=1.4,<2")]:
        monkeypatch.setattr(metadata, "version", lambda _name, v=installed: v)
        assert scaffold.evotrainer_requirement() == want
