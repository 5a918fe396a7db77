"""``HarnessState.copy`` is structural (a pass copies the state every step, so the copy
must not cost the whole ledger): whatever is folded into a copy leaves the original as it
was, and folding into the copy gives what folding the original would."""

from __future__ import annotations

from hypothesis import given, strategies as st

from evo_events import EvalCompleted, PolicyUpdated, Promoted, SkillRegistered, SkillRetired
from evo_core.state import HarnessState, apply, fold
from tests.core.test_fold_props import run_logs


@given(log=run_logs(), data=st.data())
def test_folding_into_a_copy_leaves_the_original(log, data):
    evs, _ = log
    cut = data.draw(st.integers(0, len(evs)))
    original = fold(evs[:cut])
    before = original.to_dict()
    c = original.copy()
    assert c == original
    fold(evs[cut:], c, start_position=cut)
    assert original.to_dict() == before
    assert c == fold(evs)


def test_the_main_line_and_skills_are_not_shared():
    st = HarnessState()
    apply(st, PolicyUpdated(run_id="r", step=0, policy_version=0, digest="d0"))
    apply(st, SkillRegistered(run_id="r", skill_id="s", name="k", bundle={"x": 1}))
    c = st.copy()
    apply(c, SkillRetired(run_id="r", skill_id="s", reason="r"))
    apply(c, EvalCompleted(run_id="r", step=0, policy_version=0, split="validation", n=1, metrics={}))
    apply(c, Promoted(run_id="r", subject="policy", subject_id="3", step=3, gate="policy",
                      harness_version_before=0, harness_version_after=0, figures={"main_train_reward": 0.5}))
    assert st.main.eval_id is None and st.main.train_reward is None and st.main_policy_version == 0
    assert st.ledger == [] and st.gated_evals == [] and not st.skills["s"].retired and c.skills["s"].retired
