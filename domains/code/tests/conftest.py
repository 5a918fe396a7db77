from __future__ import annotations

from pathlib import Path

import pytest

from evo_code import CodeGrader, GradeConfig, load_problems
from evo_core.sandbox import LocalSandbox

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def sandbox():
    sb = LocalSandbox(2)
    yield sb
    sb.close()


@pytest.fixture(scope="session")
def grader(sandbox):
    return CodeGrader(sandbox, GradeConfig(default_time_limit_s=2.0, min_time_limit_s=1.0))


@pytest.fixture(scope="session")
def problems():
    out = {}
    for name in ("taco", "livecodebench", "humaneval", "mbpp"):
        for p in load_problems(FIXTURES / f"{name}.jsonl"):
            out[p.problem_id] = p
    return out
