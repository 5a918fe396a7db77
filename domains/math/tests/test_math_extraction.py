"""Final-answer extraction: pure string work, no math-verify."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo_math.extraction import (
    MAX_CANDIDATES,
    answer_key,
    clean_answer,
    extract,
    find_boxes,
    last_number,
    split_alternatives,
    split_commas,
)


def test_last_box_is_the_final_answer():
    ext = extract("first \\boxed{1}, then \\boxed{\\frac{2}{3}} done")
    assert ext.final == "\\frac{2}{3}"
    assert ext.answers == ("1", "\\frac{2}{3}")
    assert ext.boxed_count == 2 and ext.path == "boxed"


def test_balanced_and_escaped_braces():
    [b] = find_boxes("x \\boxed{\\{1, \\frac{a}{b}\\}} y")
    assert b.content == "\\{1, \\frac{a}{b}\\}" and b.closed


def test_unclosed_box_is_recorded_not_answered():
    ext = extract("so \\boxed{\\frac{1}{2")
    assert ext.unclosed_box and ext.final is None and ext.answers == ()
    # lenient falls back to the last number of the text
    assert ext.path == "last_number" and ext.candidates == ("2",)


def test_box_variants():
    assert extract("\\fbox{7}").final == "7"
    assert extract("$\\boxed 5$.").final == "5"
    assert extract("\\boxed {12}").final == "12"
    assert extract("\\boxed{\\boxed{3}}").final == "3"
    assert find_boxes("\\boxedsymbol{3}") == []  # another macro, not a box


def test_clean_answer():
    assert clean_answer(" $\\frac12$ . ") == "\\frac12"
    assert clean_answer("1.5e-8") == "1.5\\times 10^{-8}"
    assert clean_answer("-2E+3") == "-2\\times 10^{+3}"
    assert clean_answer("e-8") == "e-8"  # not a number in scientific notation


def test_answer_key_merges_spelling_only():
    assert answer_key("\\dfrac{1}{2}") == answer_key("\\frac{1}{2}") == answer_key("\\frac {1} {2}")
    assert answer_key("\\left( 1, 2 \\right)") == answer_key("(1,2)")
    assert answer_key("0.5") != answer_key("\\frac12")  # equal values are math-verify's job


@pytest.mark.parametrize(
    "text,parts",
    [
        ("3 \\text{ or } 4", ["3", "4"]),
        ("x=3 or x=4", ["x=3", "x=4"]),
        ("3\\quad\\textrm{or}\\quad 4", ["3\\quad", "\\quad 4"]),
        ("\\text{for all } x", ["\\text{for all } x"]),
        ("\\text{neither 3 or 4}", ["\\text{neither 3 or 4}"]),  # inside text: left alone
        ("\\operatorname{floor}(x)", ["\\operatorname{floor}(x)"]),
    ],
)
def test_split_alternatives(text, parts):
    assert split_alternatives(text) == parts


@pytest.mark.parametrize(
    "text,pieces",
    [
        ("3, 4", ["3", "4"]),
        ("(1, 2]", ["(1, 2]"]),
        ("\\{1, 2\\}", ["\\{1, 2\\}"]),
        ("1,000", ["1,000"]),
        ("f(1, 2), 3", ["f(1, 2)", "3"]),
        ("7", ["7"]),
    ],
)
def test_split_commas(text, pieces):
    assert split_commas(text) == pieces


def test_list_answer_is_a_hedge_only_for_scalar_gold():
    assert extract("\\boxed{3, 4}", gold="3").answers == ("3", "4")
    assert extract("\\boxed{3, 4}", gold="3").list_answer
    assert extract("\\boxed{3, 4}", gold="3, 4").answers == ("3, 4",)
    assert extract("\\boxed{-2, 2}", gold="\\pm 2").answers == ("-2, 2",)


def test_last_number():
    assert last_number("first 12, then -3.5 and finally 7/8.") == "7/8"
    assert last_number("total 1,234,567 apples") == "1,234,567"
    assert last_number("version v2") is None or last_number("version v2") == "2"
    assert last_number("no digits here") is None


def test_candidates_are_capped():
    text = " ".join(f"\\boxed{{{i}}}" for i in range(100))
    ext = extract(text)
    assert len(ext.candidates) == MAX_CANDIDATES
    assert ext.candidates[-1] == "99"
    assert len(ext.answers) == 100  # every distinct answer still counts toward the hedge


def test_rejects_non_text():
    with pytest.raises(TypeError, match="must be a string"):
        extract(None)  # type: ignore[arg-type]


# -- properties ------------------------------------------------------------------------------

_atom = st.sampled_from(["1", "x", "+", "-", "\\frac", "\\sqrt", "^", "2", " ", ",", "\\pi", "a"])


@st.composite
def balanced(draw, depth=0):
    parts = draw(st.lists(_atom, max_size=5))
    if depth < 3 and draw(st.booleans()):
        parts.append("{" + draw(balanced(depth + 1)) + "}")
    parts.extend(draw(st.lists(_atom, max_size=3)))
    return "".join(parts)


noise = st.text(alphabet=st.characters(blacklist_characters="\\{}", blacklist_categories=("Cs",)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(noise, balanced(), noise)
def test_any_balanced_content_is_extracted_whole(before, content, after):
    ext = extract(f"{before}\\boxed{{{content}}}{after}")
    assert ext.boxed_count == 1
    assert ext.final == clean_answer(content)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_extraction_never_raises_and_is_consistent(text):
    ext = extract(text)
    assert ext.final is None or ext.boxed_count >= 1
    assert ext.path in ("boxed", "last_number", "none")
    assert (ext.path == "boxed") == bool(ext.answers)
    assert len(ext.candidates) <= MAX_CANDIDATES
    for b in ext.boxes:
        assert 0 <= b.start < b.end <= len(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789-., /xab", max_size=80))
def test_last_number_is_a_number_from_the_text(text):
    num = last_number(text)
    if num is not None:
        assert re.fullmatch(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?", num)
        assert num.replace("/", "") in re.sub(r"\s+", "", text).replace("/", "")


@pytest.mark.timeout(30)  # a hang guard, not a speed assertion: these are linear-time scans
@pytest.mark.parametrize(
    "text,answers,path",
    [
        ("\\boxed{" + "x or " * 20000 + "}", 1, "boxed"),  # too long to be an answer list
        ("\\boxed{" + "1, " * 50000 + "}", 1, "boxed"),
        ("3 " * 200000, 0, "last_number"),
        ("\\boxed{" * 50000, 0, "none"),
        ("{" * 100000 + "\\boxed{3}", 1, "boxed"),
    ],
    ids=["many-ors", "huge-list", "many-numbers", "many-open-boxes", "unbalanced-noise"],
)
def test_adversarial_sizes_stay_linear(text, answers, path):
    ext = extract(text, gold="3")
    assert (len(ext.answers), ext.path) == (answers, path)
