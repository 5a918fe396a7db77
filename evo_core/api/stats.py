"""Statistics plugins decide with: paired bootstraps, t-intervals over replicates, trends,
exact one-sided tests, and the validity test of a diagnosis (``evo_core.harness.validity``).
The same functions the engine's summaries and the suite report use."""

from evo_core.harness.stats import (
    PairedBootstrap,
    TInterval,
    binomial_greater,
    fisher_greater,
    mean,
    paired_bootstrap,
    slope,
    t_interval,
)
from evo_core.harness.paycheck import PayCheck, lifted, pay_check
from evo_core.harness.validity import ALPHA, Validity, audited, diagnosis_validity, paid_reward, side_of

__all__ = ["ALPHA", "PairedBootstrap", "PayCheck", "TInterval", "Validity", "audited", "binomial_greater", "diagnosis_validity",
           "fisher_greater", "lifted", "mean", "paid_reward", "paired_bootstrap", "pay_check", "side_of", "slope", "t_interval"]
