"""The generic features the core computes for every rollout (``RolloutView.features``,
``RolloutCompleted.features``): the response's (:func:`features_for_group`; which of them are
relative to the rollout's group rather than a property of the response itself), and an
episode's trajectory features (:func:`trajectory_features`, from ``Completion.turns``)."""

from evo_core.harness.features import GROUP_RELATIVE, features_for_group
from evo_core.harness.trajectory import TrajectoryFeaturizer, diff_lines_per_file, trajectory_features

__all__ = ["GROUP_RELATIVE", "features_for_group", "TrajectoryFeaturizer", "diff_lines_per_file", "trajectory_features"]
