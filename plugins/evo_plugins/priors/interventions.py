"""Repairs that know the SWE domain's signals (written by hand: priors)."""

from __future__ import annotations

from typing import Any, Mapping

from evo_plugins.interventions.base import BaseIntervention


class ResetTestsBeforeGrading(BaseIntervention):
    """Tighten the verifier: grade against pristine tests (the domain's ``reward_pristine``
    signal); without one, an episode that touched tests or runner config gets 0."""

    name, kind = "reset_tests_before_grading", "verifier"
    changes = "verifier: tests and runner config are reset to pristine before grading"
    targets = ("test_tampering", "runner_config_edit")
    default_params: Mapping[str, Any] = {}
    prior = True

    def new_reward(self, view, params):
        tampered = bool(view.signals.get("tests_modified") or view.signals.get("test_files_modified")
                        or view.signals.get("runner_config_modified") or view.signals.get("runner_config_touched"))
        if not tampered:
            return None
        pristine = view.signals.get("reward_pristine")
        return float(pristine) if isinstance(pristine, (int, float)) and not isinstance(pristine, bool) else 0.0
