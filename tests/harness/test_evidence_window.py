"""The evidence window's running reward index agrees with a scan of its history."""

from hypothesis import given, settings
from hypothesis import strategies as st

from evo_core.harness.window import EvidenceWindow
from evo_core.testing import rollout

rewards = st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0, 0.1, 0.3]))
steps_batches = st.lists(st.tuples(st.integers(0, 40), st.lists(st.tuples(rewards, st.sampled_from(["train", "validation"])),
                                                                 max_size=5)), max_size=25)


def scanned(w: EvidenceWindow, after: int):
    vals = [r.reward for r in w.history() if r.reward is not None and r.split == "train" and r.step > after]
    return sum(vals) / len(vals) if vals else None


@settings(max_examples=200, deadline=None)
@given(steps_batches, st.booleans(), st.integers(1, 6))
def test_mean_reward_equals_history_scan(batches, ascending, keep):
    if ascending:
        batches = sorted(batches, key=lambda b: b[0])
    w = EvidenceWindow("r", window_steps=2, history_steps=keep)
    n = 0
    for step, rows in batches:
        w.add_step(step, [rollout(n + i, step=step, reward=rw, split=sp) for i, (rw, sp) in enumerate(rows)], None)
        n += len(rows)
        for after in range(step - keep - 2, step + 2):
            assert w.mean_reward(after) == scanned(w, after)


strict = st.sampled_from([None, True, False])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.lists(st.tuples(rewards, st.sampled_from(["train", "validation"]), strict),
                                                        max_size=5)), max_size=25), st.integers(1, 6))
def test_audited_index_equals_filtering_the_history(batches, keep):
    from evo_core.api.stats import audited

    w = EvidenceWindow("r", window_steps=2, history_steps=keep)
    n = 0
    for step, rows in batches:
        w.add_step(step, [rollout(n + i, step=step, reward=rw, split=sp, strict=sc)
                          for i, (rw, sp, sc) in enumerate(rows)], None)
        n += len(rows)
        assert list(w.audited()) == audited(w.history())


def test_the_audited_index_follows_the_window_history():
    """The window's audited index holds exactly the audited rollouts of its history, with
    their columns and hash order, as steps arrive and leave."""
    from evo_core.api.columns import columns_of, hash_order_of
    from evo_core.harness.window import EvidenceWindow
    from evo_core.testing import rollout

    win = EvidenceWindow("r", window_steps=2, history_steps=3)
    for step in range(1, 8):
        rows = [rollout(step * 10 + i, step=step, reward=1.0, strict=i % 2 == 0 if i < 3 else None,
                        features={"x": float(i)}) for i in range(5)]
        win.add_step(step, rows, None)
        audited = win.audited()
        index = win.audited_index()
        assert len(index) == len(audited) == min(step, 3) * 3
        assert all(index.columns(r) == columns_of(r) and index.hash_order(r) == hash_order_of(r) for r in audited)
        view = index.view(audited)
        assert view is not None and view.values(("feature", "x")) == [columns_of(r)[("feature", "x")] for r in audited]


def test_diagnostics_filter_a_window_once_and_hand_out_their_own_lists():
    from evo_core.api import Window
    from evo_core.testing import rollout
    from evo_plugins.diagnostics.base import train_rollouts

    rows = tuple(rollout(i, split="train" if i % 2 else "validation") for i in range(10))
    w = Window(run_id="r", step=1, rollouts=rows)
    a, b = train_rollouts(w), train_rollouts(w)
    assert a == b == [r for r in rows if r.split == "train"] and a is not b
    a.clear()
    assert train_rollouts(w) == b
    listed = Window(run_id="r", step=1, rollouts=list(rows))  # not a tuple: filtered each time
    assert train_rollouts(listed) == b
