"""The wall-clock budget for grading one solution on one problem.

Every sandbox run the grader starts is capped by what is left of the budget, so a solution
that loops (or a problem with thousands of tests) cannot hold a training step for hours.
Running out is the solution's verdict (tests it cut or never started fail as
``budget_exhausted``); a sandbox that *fails* still gives no verdict at all. The budget
never trusts the candidate's word that it ran out: only this clock decides.
"""

from __future__ import annotations

import math
import time
from typing import Optional

import attrs

# A harness may report a call cut by the budget only this close to the end of it.
CLAIM_SLACK_S = 1.0


@attrs.define
class GradingBudget:
    limit_s: Optional[float]  # None: no budget
    started: float = attrs.field(factory=time.monotonic)
    ran_out: bool = False

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float:
        if self.limit_s is None:
            return math.inf
        return self.limit_s - self.elapsed()

    def spent(self) -> bool:
        """True (and remembered) once nothing is left."""
        if self.remaining() <= 0:
            self.ran_out = True
        return self.ran_out

    def cap(self, wall_s: float) -> tuple[float, bool]:
        """(a run's wall limit, whether the budget rather than the test's own limit set it)."""
        left = self.remaining()
        if left < wall_s:
            return max(0.05, left), True
        return wall_s, False

    def confirms(self) -> bool:
        """Whether a report that the budget cut a run agrees with this clock; if so the
        budget counts as spent from now on."""
        if self.limit_s is not None and self.remaining() <= CLAIM_SLACK_S:
            self.ran_out = True
        return self.ran_out
