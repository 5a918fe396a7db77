from __future__ import annotations

import math

from hypothesis import given
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
    lambda c: st.lists(c, max_size=3) | st.tuples(c, c) | st.frozensets(st.integers(), max_size=3) | st.dictionaries(st.integers() | st.text(max_size=3), c, max_size=3),
    max_leaves=12,
)


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
