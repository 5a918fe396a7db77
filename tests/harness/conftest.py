from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from evo_core.api import Window  # noqa: E402
from evo_events import RolloutCompleted  # noqa: E402


def mk(i: int = 0, *, step: int = 1, reward=1.0, correct=None, strict=None, answers: int = 1, group: str = "g0",
       truncated: bool = False, length: int = 4, preview: str = "42", split: str = "train", **signals) -> RolloutCompleted:
    sig = {"answer_count": answers, **signals}
    return RolloutCompleted(run_id="r", event_id=f"{step:04d}{i:028d}", step=step, task_id=f"t{i % 7}", group_id=group,
                            policy_version=step, reward=reward, correct=(reward or 0) > 0 if correct is None else correct,
                            strict_correct=strict, split=split, truncated=truncated, length=length,
                            response_preview=preview, signals=sig)


def win(rollouts, **kw) -> Window:
    return Window(run_id="r", step=max((r.step for r in rollouts), default=0), rollouts=tuple(rollouts), **kw)


@pytest.fixture
def pm():
    from evo_core.plugins import PluginManager

    return PluginManager()
