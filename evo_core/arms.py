"""Harness arms: the baselines and ablations a run can be, by name.

Each arm is a config overlay shipped in ``configs/baselines/<slug>.toml`` and deep-merged
into the run's config, so a comparison changes exactly what the arm says and nothing else:

| arm | what it is |
|---|---|
| fixed | the static recipe: trusts the training reward |
| fixed+early-stop | the competent practitioner: same training, keeps the best validation checkpoint |
| reference | the same recipe trained on the strict oracle (no loophole): the ceiling |
| evolving | the co-evolving harness |
| evolving/gate-only | ablation: no proposer acts |
| evolving/no-policy-gate | ablation: interventions only |
| evolving/no-revision | ablation: no diagnostic is added or revised |
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

ARMS = ("fixed", "fixed+early-stop", "reference", "evolving", "evolving/gate-only", "evolving/no-policy-gate",
        "evolving/no-revision")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ArmError(ValueError):
    """An unknown arm, or its overlay cannot be read."""


def slug(arm: str) -> str:
    return arm.replace("+", "-").replace("/", "-")


def overlay_path(arm: str) -> Path:
    """Shipped with the package when installed from a wheel, else the repository's configs/."""
    from evo_core.shipped_configs import configs_root

    return configs_root() / "baselines" / f"{slug(arm)}.toml"


def overlay(arm: str) -> dict[str, Any]:
    if arm not in ARMS:
        raise ArmError(f"unknown harness arm {arm!r}; known arms: {', '.join(ARMS)}")
    path = overlay_path(arm)
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ArmError(f"arm {arm!r}: cannot read its overlay {str(path)!r}: {exc.strerror}") from None


def mode_of(arm: str) -> str:
    """The ``[harness] mode`` arm ``arm`` runs ("" if its overlay does not say)."""
    return str((overlay(arm).get("harness") or {}).get("mode") or "")


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out
