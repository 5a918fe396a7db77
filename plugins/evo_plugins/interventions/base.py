"""The base for intervention classes (``evo_core.api.Intervention``); it lives in the public
API now (``evo_core.api.BaseIntervention``) and is re-exported here.

It gives ``params`` (defaults overlaid) and a default ``prediction``; a subclass declares
what it changes by defining the effect methods it needs (``new_reward``, ``mask``,
``regrade``, ``hyperparameters``, ``prompt_hint``, ``task_weights``) and nothing else: the
core applies active interventions, in promotion order, at the matching stage of a step.
"""

from __future__ import annotations

from evo_core.api import BaseIntervention, RolloutView  # noqa: F401  (re-exported for intervention authors)

__all__ = ["BaseIntervention", "RolloutView"]
