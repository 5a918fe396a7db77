"""A convenience base for intervention classes (``evo_core.api.Intervention``).

It gives ``params`` (defaults overlaid) and a default ``prediction``; a subclass declares
what it changes by defining the effect methods it needs (``new_reward``, ``mask``,
``regrade``, ``hyperparameters``, ``prompt_hint``, ``task_weights``) and nothing else: the
core applies active interventions, in promotion order, at the matching stage of a step.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from evo_core.api import RolloutView  # noqa: F401  (re-exported for intervention authors)


class BaseIntervention:
    name: str = ""
    version: str = "1"
    kind: str = ""
    changes: str = ""
    targets: tuple[str, ...] = ()
    default_params: Mapping[str, Any] = {}
    guard_metric: str = "strict_accuracy"
    restore_main: bool = False  # promotion sends training back to the main line
    prior: bool = False  # flaw- or domain-specific knowledge (joins only with harness.priors)

    def params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.default_params, **dict(params or {})}

    def prediction(self, params: Mapping[str, Any], targets: Sequence[str] = ()) -> dict[str, Any]:
        return {"falls": list(targets or self.targets), "guard_metric": self.guard_metric, "guard": "does not regress"}

    def describe(self) -> dict[str, Any]:
        from evo_core.api import effects

        return {"name": self.name, "version": self.version, "kind": self.kind, "changes": self.changes,
                "targets": list(self.targets), "default_params": dict(self.default_params), "effects": list(effects(self))}
