from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from evo_code._values import Unencodable, decode_value, encode_value
from evo_code.compare import stdout_matches, value_matches


def test_stdout_whitespace_and_lines():
    assert stdout_matches("3\n", "3")
    assert stdout_matches("  1 2 \n3\n\n", "1 2\n3")
    assert stdout_matches("1 2\r\n3\r\n", "1 2\n3")
    assert stdout_matches("1  2", "1 2")  # numeric tokens compare as decimals
    assert not stdout_matches("a  b", "a b")  # text must match after stripping the line
    assert not stdout_matches("3\n4", "3")
    assert not stdout_matches("YES", "NO")


def test_stdout_decimals_exact_and_tolerance():
    assert stdout_matches("1.50", "1.5")  # Decimal equality, as LiveCodeBench
    assert not stdout_matches("2.3333333", "2.3333333333")
    assert stdout_matches("2.3333333", "2.3333333333", float_tol=1e-6)
    assert not stdout_matches("2.34", "2.3333333333", float_tol=1e-6)
    assert not stdout_matches("nan", "1.0", float_tol=1e-6)


def test_values():
    assert value_matches([0, 1], [0, 1]) and value_matches((0, 1), [0, 1])
    assert value_matches(6, [6])  # APPS wraps call outputs
    assert not value_matches(True, 1) and not value_matches(1, True)
    assert value_matches(0.1 + 0.2, 0.3, float_tol=1e-9) and not value_matches(0.1 + 0.2, 0.3)
    assert not value_matches([1, 2], [1, 2, 3])


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5) | st.binary(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.tuples(c, c) | st.frozensets(st.integers(), max_size=3)
    | st.sets(st.text(max_size=3), max_size=4) | st.dictionaries(st.integers() | st.text(max_size=3), c, max_size=3),
    max_leaves=12,
)


@settings(deadline=None)  # no timing in unit tests: the shared machine may be busy
@given(plain)
def test_tagged_roundtrip(v):
    import json

    assert decode_value(json.loads(json.dumps(encode_value(v)))) == v


def test_non_plain_values_refused():
    class Always:
        def __eq__(self, other):
            return True

    class MyInt(int):
        def __eq__(self, other):
            return True

    for bad in (Always(), MyInt(3), [1, Always()], {"k": MyInt(1)}, object()):
        try:
            encode_value(bad)
        except Unencodable:
            continue
        raise AssertionError(f"{bad!r} was encoded")
    assert math.isinf(decode_value(encode_value(float("inf"))))


def test_stdlib_containers_cross_but_their_subclasses_do_not():
    """MBPP's reference solutions return Counter / defaultdict / OrderedDict / deque and
    re.Match, and pass builtin types as arguments; an override of any of them is refused."""
    import collections
    import json
    import re

    def trip(v):
        return decode_value(json.loads(json.dumps(encode_value(v))))

    c = trip(collections.Counter("abca"))
    assert type(c) is collections.Counter and c == {"a": 2, "b": 1, "c": 1}
    assert list(trip(collections.OrderedDict([(2, "x"), (1, "y")]))) == [2, 1]
    assert trip(collections.defaultdict(list, {1: [2]})) == {1: [2]}
    assert trip(collections.deque([1, (2, 3)])) == collections.deque([1, (2, 3)])
    assert trip(int) is int and trip(type(None)) is type(None)
    m = trip(re.search(r"(?P<w>b+)(x)?", "abbc"))
    assert m and m.group() == "bb" and m.groups() == ("bb", None) and m.span() == (1, 3) and m["w"] == "bb"
    assert m != "bb" and m != trip(re.search("b+", "abbc"))  # equal only to itself, like a match

    class EvilCounter(collections.Counter):
        def __eq__(self, other):
            return True

    class Meta(type):
        def __eq__(cls, other):
            return True

        __hash__ = type.__hash__

    for bad in (EvilCounter(), Meta("T", (), {}), collections.OrderedDict([(1, object())])):
        try:
            encode_value(bad)
        except Unencodable:
            continue
        raise AssertionError(f"{bad!r} was encoded")
    # names and constructions are resolved only in the candidate's own process
    for ref in ({"$ref": "root"}, {"$new": ["Pair", [], {"$d": []}]}):
        try:
            decode_value(ref)
        except ValueError:
            continue
        raise AssertionError(f"{ref} decoded without a namespace")


def test_sets_encode_the_same_in_every_process():
    import subprocess
    import sys

    code = "from evo_code._values import encode_value; import json; print(json.dumps(encode_value({'alpha', 'beta', 'gamma', 'delta', 'eps'})))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"}, check=True).stdout
            for seed in (1, 2, 3, 4)}
    assert len(outs) == 1
