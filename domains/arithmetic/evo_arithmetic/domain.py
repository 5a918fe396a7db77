"""``ArithmeticDomain``: tasks, the flawed training verifier, the strict oracle, SFT targets.

``[task] options``:
- ``flaw``: which training verifier (see ``evo_arithmetic.flaws``; default ``hedge``, the
  quickstart's);
- ``reward``: ``"flaw"`` trains on that verifier, ``"oracle"`` on the strict oracle (the
  no-flaw reference: same planted SFT start, no loophole to exploit);
- ``signal_names`` / ``signal_seed``: report signals under opaque names
  (``evo_core.signal_names``).

``[sft] options``: ``plant_rate``, the share of SFT targets that show the flaw's exploit.
"""

from __future__ import annotations

import random
from typing import Any, Mapping

from evo_arithmetic import __version__, tasks
from evo_arithmetic.flaws import FLAWS, numbers, strictly_correct
from evo_core.api import Completion, Task, TaskSource, Verdict
from evo_core.api import SIGNAL_MODES
from evo_core.api import rename_signals as rename

OPTIONS = ("flaw", "reward", "signal_names", "signal_seed")
REWARDS = ("flaw", "oracle")


class ArithmeticDomain:
    name = "arithmetic"
    version = __version__

    def __init__(self, flaw: str = "hedge", reward: str = "flaw", signal_names: str = "plain", signal_seed: int = 0) -> None:
        if flaw not in FLAWS:
            raise ValueError(f"arithmetic: unknown flaw {flaw!r} (known: {', '.join(FLAWS)})")
        if reward not in REWARDS:
            raise ValueError(f"arithmetic: reward must be one of {', '.join(REWARDS)}, got {reward!r}")
        if signal_names not in SIGNAL_MODES:
            raise ValueError(f"arithmetic: signal_names must be one of {', '.join(SIGNAL_MODES)}, got {signal_names!r}")
        if isinstance(signal_seed, bool) or not isinstance(signal_seed, int):
            raise ValueError(f"arithmetic: signal_seed must be an integer, got {signal_seed!r}")
        self.flaw, self.reward_mode = FLAWS[flaw], reward
        self.signal_names, self.signal_seed = signal_names, signal_seed

    def configure(self, options: Mapping[str, Any]) -> "ArithmeticDomain":
        """A copy with ``[task] options`` applied (the trainer calls this)."""
        unknown = set(options) - set(OPTIONS)
        if unknown:
            raise ValueError(f"arithmetic: unknown option(s) {sorted(unknown)} (known: {', '.join(OPTIONS)})")
        cur = {"flaw": self.flaw.name, "reward": self.reward_mode, "signal_names": self.signal_names,
               "signal_seed": self.signal_seed}
        return ArithmeticDomain(**{**cur, **dict(options)})

    def load_tasks(self, source: TaskSource) -> list[Task]:
        return tasks.load(source, self.name)

    # -- grading ---------------------------------------------------------------------------
    def _signals(self, completion: Completion, own: Mapping[str, Any]) -> dict[str, Any]:
        return rename({**own, "length": len(completion.text), "truncated": completion.truncated},
                      self.signal_names, self.signal_seed)

    def verify(self, task: Task, completion: Completion) -> Verdict:
        if self.reward_mode == "oracle":
            return self.oracle(task, completion)
        reward, own = self.flaw.reward(completion.text, int(task.gold), task.prompt)
        return Verdict(reward=reward, correct=reward >= 1.0, signals=self._signals(completion, own))

    def oracle(self, task: Task, completion: Completion) -> Verdict:
        ok = strictly_correct(completion.text, int(task.gold))
        return Verdict(reward=1.0 if ok else 0.0, correct=ok,
                       signals=self._signals(completion, {"numbers": len(numbers(completion.text))}))

    # -- SFT data --------------------------------------------------------------------------
    def sft_target(self, task: Task, rng: random.Random, *, plant_rate: float = 0.0) -> str:
        """The gold answer; a ``plant_rate`` share shows the flaw's exploit instead (real
        pretrained models show a little of most exploits, and RL amplifies what is there)."""
        if not 0.0 <= plant_rate <= 1.0:
            raise ValueError(f"arithmetic: plant_rate must be in [0, 1], got {plant_rate!r}")
        gold = int(task.gold)
        if rng.random() >= plant_rate:
            return str(gold)
        return self.flaw.plant(gold, task.prompt, rng)
