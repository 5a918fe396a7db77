"""SWE-smith style generation from the fixture project (a folder and an sdist), with QA."""

import ast
import tarfile

import pytest

from evo_swe.generator import TaskGenerator, find_mutations, qa_task
from evo_swe.tasks import load_tasks

from conftest import MINILIB


def test_find_mutations_kinds_and_validity():
    muts = find_mutations(MINILIB)
    kinds = {m.kind for m in muts}
    assert {"flip_compare", "swap_arith", "off_by_one", "swap_operands", "bool_op"} - kinds <= {"bool_op"}
    assert all(not m.path.startswith("tests/") for m in muts)
    for m in muts:
        src = (MINILIB / m.path).read_bytes()
        mutated = m.apply(src)
        assert mutated != src
        ast.parse(mutated)  # every mutant is valid Python
        assert src[m.start:m.end].decode() == m.before
    # Docstrings are never mutated and every mutation lies inside a function.
    assert all(m.function for m in muts)


@pytest.fixture(scope="module")
def generated(grader, swe_root):
    out = swe_root / "generated"
    tasks = TaskGenerator(grader).generate(MINILIB, out, max_tasks=1, hide_tests=True, seed=3)
    return out, tasks


def test_generated_tasks_pass_qa(generated, grader):
    out, tasks = generated
    assert len(tasks) == 1
    assert load_tasks(out / "tasks.jsonl") == tasks
    for t in tasks:
        assert t.FAIL_TO_PASS and not set(t.FAIL_TO_PASS) & set(t.PASS_TO_PASS)
        assert t.test_patch.startswith("diff --git") and t.extra["mutation"]["after"] in t.patch.replace("\n-", "\n")
        qa = qa_task(t, grader)
        assert qa["ok"], qa
        # Hidden tests: the F2P files are not in the workspace.
        pristine = grader.pristine(t)
        for tid in t.FAIL_TO_PASS:
            assert not (pristine / tid.split("::")[0]).exists()


@pytest.mark.slow
def test_generate_from_sdist_visible_tests(grader, swe_root, tmp_path):
    sdist = swe_root / "minilib-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(MINILIB, arcname="minilib-1.0", filter=lambda ti: None if "__pycache__" in ti.name else ti)
    tasks = TaskGenerator(grader).generate(sdist, swe_root / "gen-sdist", max_tasks=1, seed=5)
    assert len(tasks) == 1
    t = tasks[0]
    assert t.test_patch == "" and t.instance_id.startswith("minilib-1.0__")
    for tid in t.FAIL_TO_PASS:  # visible tests: they are in the workspace
        assert (grader.pristine(t) / tid.split("::")[0]).exists()
    assert qa_task(t, grader)["ok"]
