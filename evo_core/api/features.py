"""The generic response features the core computes for every rollout (``RolloutView.features``,
``RolloutCompleted.features``): their computation, and which of them are relative to the
rollout's group rather than a property of the response itself."""

from evo_core.harness.features import GROUP_RELATIVE, features_for_group

__all__ = ["GROUP_RELATIVE", "features_for_group"]
