"""The tie-break study's replay of a 5% audit (benchmarks/induction_ties.py), on a synthetic
fully audited log: a loophole that a response feature and a group-relative feature both
separate on the audited sample, while only the response feature holds on the next steps."""

from pathlib import Path

from evo_core.testing import rollout

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    import benchmarks.induction_ties

    return benchmarks.induction_ties


def _log(steps=30, per_step=200):
    by_step = {}
    for step in range(1, steps + 1):
        rows = []
        for i in range(per_step):
            hack, right = i % 4 == 0, i % 3 != 0
            # late on, honest answers that are alone in their group look like hacks to the group feature
            lonely = not hack and step > 12 and i % 7 == 0
            feats = {"symbols": 2 if hack else 0, "group_duplicates": 0.0 if hack or lonely else 0.857}
            rows.append(rollout(i, step=step, reward=1.0 if hack or right else 0.0, strict=(not hack) and right,
                                features=feats))
        by_step[step] = rows
    return by_step


def test_the_audit_draw_labels_the_rate_of_each_step_and_depends_on_the_draw():
    bench = _bench()
    log = _log(steps=5)
    a, b = bench.audit_draw(log, 4, 0.05, 0), bench.audit_draw(log, 4, 0.05, 1)
    assert len(a) == len(b) == 4 * 10 and {r.step for r in a} == {1, 2, 3, 4}
    assert {r.event_id for r in a} != {r.event_id for r in b}


def test_the_study_scores_each_rule_on_the_steps_after_the_cutoff():
    bench = _bench()
    rows = bench.study(_log(), [10], draws=3, horizon=15, rate=0.05)
    summary = bench.summarise(rows)
    first, text = summary["response_first"], summary["text_order"]
    assert first["induced"] == text["induced"] == 3
    assert first["group_relative"] == 0 and first["precision_min"] == 1.0
    # by name alone feature.group_duplicates sorts first, and it flags lonely honest answers later
    assert text["group_relative"] == 3 and text["precision_mean"] < 1.0 and text["changed_by_rule"] == 3
