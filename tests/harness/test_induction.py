"""Induction on synthetic windows with a planted feature: it finds what the reward pays and the
oracle rejects, under names it has never seen; a decoy that only correlates on the fitting half
is caught by the held-out half; the spec it emits round-trips through the DSL."""

import json
import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from evo_plugins.proposers.induction import Settings, _stable_halves, induce, split_sample
from evo_core.api.specs import evaluate_spec, matches, validate_spec
from evo_core.testing import rollout
from evo_plugins.proposers.contrast import induced_spec


def fresh_name(rng: random.Random) -> str:
    return "sig_" + uuid.UUID(int=rng.getrandbits(128)).hex[:10]


def planted(n: int, *, seed: int, signal: str, hack_rate: float = 0.2, kind: str = "number", decoy: str = ""):
    """Audited rollouts: a hack carries ``signal`` (a number above 3, or the category "odd"), is paid
    and rejected; honest rollouts are paid when right. ``decoy`` correlates with the hack only on
    the rollouts the induction will fit on (it is random on the others)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        hack = rng.random() < hack_rate
        right = rng.random() < 0.65
        sig = ((rng.randint(4, 9) if hack else rng.randint(0, 3)) if kind == "number"
               else ("odd" if hack else rng.choice(["even", "none"])))
        r = rollout(i, step=1 + i // 32, text=str(40 + i % 30), reward=1.0 if hack or right else 0.0,
                    strict=(not hack) and right, **{signal: sig})
        rows.append((r, hack))
    if decoy:
        sample = split_sample([r for r, _ in rows], 0.0)
        fit_ids = {r.event_id for r in _stable_halves(sample.positives)[0] + _stable_halves(sample.negatives)[0]}
        out = []
        for r, hack in rows:
            value = hack if r.event_id in fit_ids else rng.random() < 0.5
            out.append(rollout(int(r.event_id[4:]), step=r.step, text=r.response_preview, reward=r.reward,
                               strict=r.strict_correct, **{**r.signals, decoy: value}))
        return out
    return [r for r, _ in rows]


def test_finds_a_planted_numeric_signal_under_a_fresh_name():
    rng = random.Random(1)
    name = fresh_name(rng)
    ind, report = induce(planted(400, seed=1, signal=name))
    assert ind is not None, report
    assert ind.conditions[0].ref == ("signal", name) and ind.conditions[0].op in (">", "<=")
    assert ind.holdout.precision >= 0.95 and ind.holdout.recall >= 0.95
    assert f"signal.{name}" in ind.considered and "feature.last_char" in ind.considered


def test_finds_a_planted_category():
    name = fresh_name(random.Random(2))
    ind, _ = induce(planted(400, seed=2, signal=name, kind="category"))
    assert ind is not None and ind.conditions[0].ref == ("signal", name)
    assert (ind.conditions[0].op, ind.conditions[0].value) in (("==", "odd"), ("!=", "even"), ("!=", "none"))


def test_a_decoy_that_fits_only_the_fitting_half_is_exposed_by_the_held_out_half():
    rng = random.Random(3)
    decoy = fresh_name(rng)
    rows = planted(400, seed=3, signal="unrelated", hack_rate=0.2, decoy=decoy)
    # "unrelated" is random noise here: the only separator on the fitting half is the decoy
    rows = [rollout(int(r.event_id[4:]), step=r.step, text=r.response_preview, reward=r.reward, strict=r.strict_correct,
                    **{decoy: r.signals[decoy]}) for r in rows]
    ind, _ = induce(rows)
    assert ind is not None and ind.conditions[0].ref == ("signal", decoy)
    assert ind.fit.precision == 1.0 and ind.fit.recall == 1.0
    assert ind.holdout.precision < 0.6  # the falsifiable prediction fails: the proposer will not propose it


def test_the_minimum_sample():
    name = fresh_name(random.Random(4))
    rows = planted(400, seed=4, signal=name)
    sample = split_sample(rows, 0.0)
    few = sample.positives[:7] + sample.negatives
    ind, report = induce(few)
    assert ind is None and "too little audited evidence" in report["reason"]
    ind, _ = induce(sample.positives[:8] + sample.negatives)
    assert ind is not None  # 8 positives (4 to fit, 4 to test) is enough for a clean signal


def test_unaudited_and_unpaid_rollouts_are_not_evidence_of_a_loophole():
    rows = [rollout(i, reward=1.0, strict=None, answers=i % 2) for i in range(200)]  # nothing audited
    assert induce(rows)[0] is None
    rows = [rollout(i, reward=0.0, strict=False, answers=2) for i in range(100)]  # rejected, but never paid
    assert induce(rows)[0] is None


def test_two_conditions_when_one_is_not_enough():
    rng = random.Random(5)
    rows = []
    for i in range(600):
        a, b = rng.random() < 0.5, rng.random() < 0.5
        hack = a and b
        right = rng.random() < 0.6
        rows.append(rollout(i, step=1 + i // 40, text="7", reward=1.0 if hack or right else 0.0,
                            strict=(not hack) and right, s_a=a, s_b=b))
    ind, _ = induce(rows, Settings(min_gain=0.02))
    assert ind is not None and {c.ref[1] for c in ind.conditions} == {"s_a", "s_b"}
    assert ind.holdout.precision >= 0.9


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["number", "category"]), st.floats(0.1, 0.4))
def test_an_emitted_spec_round_trips_through_the_dsl_and_replays_identically(seed, kind, hack_rate):
    name = fresh_name(random.Random(seed))
    rows = planted(300, seed=seed, signal=name, kind=kind, hack_rate=hack_rate)
    ind, _ = induce(rows)
    if ind is None:
        return
    spec = induced_spec(ind, 0.0, 0.05)
    validate_spec(spec)
    back = json.loads(json.dumps(spec))
    assert back == spec
    assert evaluate_spec(back, rows) == evaluate_spec(spec, rows)
    assert [matches(back["where"], r) for r in rows] == [matches(spec["where"], r) for r in rows]


def test_on_a_tie_a_condition_on_the_response_goes_before_one_on_its_group():
    """With a small audited sample several conditions separate the fitting half perfectly. The
    group-relative one (the response against its group's other samples) drifts as training
    moves the group, so the response's own feature wins the tie, whatever the names' order."""
    rows = []
    for i in range(240):
        hack, right = i % 5 == 0, i % 3 != 0
        feats = {"group_duplicates": 0.0 if hack else 0.857, "symbols": 3 if hack else 0, "chars": 2}
        rows.append(rollout(i, step=1 + i // 24, reward=1.0 if hack or right else 0.0, strict=(not hack) and right,
                            features=feats))
    ind, _ = induce(rows)
    assert ind is not None and len(ind.conditions) == 1
    assert ind.conditions[0].ref == ("feature", "symbols") and ind.fit.precision == 1.0 and ind.fit.recall == 1.0
    # the group-relative condition still wins where it alone separates
    rows = [rollout(i, step=r.step, reward=r.reward, strict=r.strict_correct,
                    features={**r.features, "symbols": i % 4}) for i, r in enumerate(rows)]
    ind, _ = induce(rows)
    assert ind is not None and ind.conditions[0].ref == ("feature", "group_duplicates")


_feature_value = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, 1.0, 2.5, float("nan"),
                                                                                        float("inf"), -float("inf")]),
                           st.sampled_from(["a", "b"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["x", "y"]), _feature_value, max_size=2), min_size=0, max_size=24),
       st.lists(st.tuples(st.sampled_from([("feature", "x"), ("feature", "y"), ("field", "length"), ("field", "step")]),
                          st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
                          st.one_of(st.integers(-3, 5), st.sampled_from([0.5, 1.5, float("nan"), True]))),
                max_size=12))
def test_condition_bits_equal_one_predicate_at_a_time(feats, conds):
    """The per-feature bitsets induction scores with are exactly the compiled predicates'."""
    from evo_plugins.proposers.induction import Condition, _bits, condition_bits

    rows = [rollout(i, features=f, length=i % 5) for i, f in enumerate(feats)]
    cs = [Condition(ref, op, v) for ref, op, v in conds]
    assert condition_bits(cs, rows) == [_bits(c, rows) for c in cs]


# --- the vectorised paths against the scalar definitions -------------------------------------------

def _scalar_candidate_conditions(pos, neg):
    """``candidate_conditions`` as it was written one value at a time (the reference)."""
    from evo_plugins.proposers.induction import MAX_CATEGORIES, Condition, _kind, _thresholds, _values

    rows = [_values(r) for r in list(pos) + list(neg)]
    pos_rows = rows[:len(pos)]
    out, considered = [], []
    for key in sorted({k for row in rows for k in row}):
        vals = [row.get(key) for row in rows]
        kind = _kind(vals)
        if kind is None or len({(v.__class__, v) for v in vals}) < 2:
            continue
        considered.append(f"{key[0]}.{key[1]}")
        if kind == "bool":
            out += [Condition(key, "==", True), Condition(key, "==", False)]
        elif kind == "number":
            for t in _thresholds([float(v) for v in vals if v is not None]):
                out += [Condition(key, ">", t), Condition(key, "<=", t)]
        else:
            counts = {}
            for row in pos_rows:
                v = row.get(key)
                if isinstance(v, str):
                    counts[v] = counts.get(v, 0) + 1
            for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_CATEGORIES]:
                out += [Condition(key, "==", v), Condition(key, "!=", v)]
    return out, considered


_column_value = st.one_of(st.none(), st.booleans(), st.integers(-40, 40), st.integers(),
                          st.floats(allow_nan=True, allow_infinity=True), st.floats(-5, 5, width=16),
                          st.sampled_from([0.0, -0.0, 1.0, 1, True, "a", "b", "c", "", "d" * 3]),
                          st.lists(st.integers(0, 2), max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["x", "y", "z"]), _column_value, max_size=3), min_size=0, max_size=40),
       st.integers(0, 40))
def test_candidate_conditions_equal_the_scalar_definition(feats, n_pos):
    """Columns classified, counted and thresholded as arrays give the same conditions, in the
    same order, and the same columns considered, as value by value."""
    from evo_plugins.proposers.induction import candidate_conditions

    rows = [rollout(i, features=f, length=i % 7, **({"s": f.get("z")} if i % 2 else {})) for i, f in enumerate(feats)]
    pos, neg = rows[:min(n_pos, len(rows))], rows[min(n_pos, len(rows)):]
    try:
        want = _scalar_candidate_conditions(pos, neg)
    except OverflowError:  # an int beyond a float: both refuse it
        return
    assert candidate_conditions(pos, neg) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["x", "y"]), _column_value, max_size=2), min_size=0, max_size=30),
       st.lists(st.tuples(st.sampled_from([("feature", "x"), ("feature", "y"), ("field", "length"), ("signal", "s"),
                                           ("field", "truncated")]),
                          st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
                          st.one_of(st.integers(-3, 5), st.floats(allow_nan=True), st.booleans(),
                                    st.sampled_from(["a", "b", "", 0.0, -0.0]))),
                max_size=16))
def test_condition_bits_equal_the_predicates_on_any_column(feats, conds):
    """Ordering conditions as one array comparison and equality conditions decided once per
    distinct value give each predicate's own bitset (strings, None, lists, NaN, ±0 included)."""
    from evo_plugins.proposers.induction import Condition, _bits, condition_bits

    rows = [rollout(i, features=f, length=i % 5, **({"s": f.get("y")} if i % 3 else {})) for i, f in enumerate(feats)]
    cs = [Condition(ref, op, v) for ref, op, v in conds]
    try:
        want = [_bits(c, rows) for c in cs]
    except OverflowError:
        return
    assert condition_bits(cs, rows) == want


def test_induce_reads_the_engine_index_with_the_same_result():
    """``induce`` with the evidence window's audited index finds what it finds without one."""
    from evo_core.harness.window import EvidenceWindow

    rnd = random.Random(3)
    win = EvidenceWindow("r", window_steps=5)
    for step in range(1, 13):
        rows = []
        for i in range(24):
            hack = rnd.random() < 0.2
            rows.append(rollout(step * 100 + i, step=step, reward=1.0 if hack or rnd.random() < 0.6 else 0.0,
                                strict=(not hack) and rnd.random() < 0.8,
                                features={"symbols": 3 if hack else rnd.randint(0, 1), "chars": rnd.random()}))
        win.add_step(step, rows, None)
    audited = win.audited()
    index = win.audited_index()
    assert len(index) == len(audited) > 0
    with_index, rep1 = induce(audited, index=index)
    without, rep2 = induce(audited)
    assert with_index == without and rep1 == rep2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["x", "y", "z"]), _column_value, max_size=3), min_size=0, max_size=40),
       st.integers(0, 40), st.integers(0, 6),
       st.lists(st.tuples(st.sampled_from([("feature", "x"), ("feature", "y"), ("feature", "z"), ("field", "length"),
                                           ("signal", "s"), ("signal", "d"), ("field", "truncated"), ("field", "step")]),
                          st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
                          st.one_of(st.integers(-3, 5), st.floats(allow_nan=True), st.booleans(),
                                    st.sampled_from(["a", "b", "", 0.0, -0.0]))),
                max_size=16))
def test_the_index_arrays_give_the_scalar_answers(feats, n_pos, dropped, conds):
    """Through the audited index's column arrays (after steps were dropped and slots
    compacted), candidate conditions and bitsets are the scalar definitions' own."""
    from evo_core.api.columns import AuditedIndex
    from evo_plugins.proposers.induction import Condition, _bits, candidate_conditions, condition_bits

    index = AuditedIndex()
    old = [rollout(1000 + i, features={"x": i, "w": "old"}) for i in range(30)]
    for s in range(dropped):
        index.add(s, old[s * 5:(s + 1) * 5])
    index.drop_through(dropped)
    # signal "s" varies like feature z; signal "d" holds a dict now and then (no array stands for it)
    rows = [rollout(i, features=f, length=i % 7, **({"s": f.get("z")} if i % 2 else {}), **({"d": {"k": i}} if i % 5 == 1 else {}))
            for i, f in enumerate(feats)]
    for s in range(0, len(rows), 7):
        index.add(100 + s, rows[s:s + 7])
    view = index.view(rows)
    assert view is not None
    pos, neg = rows[:min(n_pos, len(rows))], rows[min(n_pos, len(rows)):]
    cs = [Condition(ref, op, v) for ref, op, v in conds]
    try:
        want = _scalar_candidate_conditions(pos, neg)
        want_bits = [_bits(c, pos) for c in cs], [_bits(c, neg) for c in cs]
    except OverflowError:
        return
    assert candidate_conditions(pos, neg, view=view) == want
    got_bits = (condition_bits(cs, pos, view=view.take(0, len(pos))), condition_bits(cs, neg, view=view.take(len(pos), view.n)))
    assert got_bits == want_bits


def test_index_drops_steps_and_compacts():
    from evo_core.api.columns import AuditedIndex

    index = AuditedIndex()
    rows = [rollout(i, step=i // 10, features={"x": float(i)}) for i in range(300)]
    for s in range(30):
        index.add(s, rows[s * 10:(s + 1) * 10])
        index.drop_through(s - 5)
    assert len(index) == 50
    live = rows[-50:]
    view = index.view(live)
    assert view is not None and view.values(("feature", "x")) == [float(i) for i in range(250, 300)]
    assert index.view(rows[:1]) is None  # dropped: not in the index any more
    assert index.columns(rows[0]) == {("feature", "x"): 0.0, ("field", "truncated"): False, ("field", "length"): rows[0].length}
