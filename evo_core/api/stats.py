"""Statistics plugins decide with: paired bootstraps, t-intervals over replicates, trends.
The same functions the engine's summaries and the suite report use."""

from evo_core.harness.stats import PairedBootstrap, TInterval, mean, paired_bootstrap, slope, t_interval

__all__ = ["PairedBootstrap", "TInterval", "mean", "paired_bootstrap", "slope", "t_interval"]
