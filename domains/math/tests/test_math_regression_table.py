"""The regression table: tricky gold/response pairs through the real pipeline
(extraction + math-verify in the worker pool), graded in one batch for speed.

Each row: (id, gold, response, strict reward, lenient reward, hedged).
"""

from __future__ import annotations

import pytest

from evo_math.grading import grade_many, to_verdict
from evo_math.pool import VerifierPool

B = "\\boxed"

TABLE = [
    # fractions vs decimals
    ("frac-vs-decimal", "\\frac{1}{2}", f"{B}{{0.5}}", 1, 1, False),
    ("decimal-vs-frac", "0.5", f"{B}{{\\frac{{1}}{{2}}}}", 1, 1, False),
    ("dfrac", "\\frac{3}{4}", f"{B}{{\\dfrac{{3}}{{4}}}}", 1, 1, False),
    ("tfrac-short", "\\frac{3}{4}", f"{B}{{\\tfrac34}}", 1, 1, False),
    ("slash-frac", "\\frac{3}{4}", f"{B}{{3/4}}", 1, 1, False),
    ("inverted-frac", "\\frac{3}{4}", f"{B}{{\\frac{{4}}{{3}}}}", 0, 0, False),
    ("rounded-decimal-too-coarse", "\\frac{1}{3}", f"{B}{{0.33}}", 0, 0, False),
    ("frac-vs-float-int", "3", f"{B}{{3.0}}", 1, 1, False),
    ("leading-zero-aime", "42", f"{B}{{042}}", 1, 1, False),
    # intervals
    ("interval-same", "(1,2]", f"{B}{{(1,2]}}", 1, 1, False),
    ("interval-open-vs-half", "(1,2]", f"{B}{{(1,2)}}", 0, 0, False),
    ("interval-infinity", "[0,\\infty)", f"{B}{{[0, \\infty)}}", 1, 1, False),
    ("interval-left-right", "(-\\infty,3)", f"{B}{{\\left(-\\infty, 3\\right)}}", 1, 1, False),
    # sets
    ("set-order", "\\{1,2\\}", f"{B}{{\\{{2,1\\}}}}", 1, 1, False),
    ("set-superset", "\\{1,2\\}", f"{B}{{\\{{1,2,3\\}}}}", 0, 0, False),
    ("list-gold-list-answer", "1, 2", f"{B}{{2, 1}}", 1, 1, False),
    # plus-minus
    ("pm-same", "\\pm 2", f"{B}{{\\pm 2}}", 1, 1, False),
    ("pm-vs-list", "\\pm 2", f"{B}{{-2, 2}}", 1, 1, False),
    ("pm-vs-one-root", "\\pm 2", f"{B}{{2}}", 0, 0, False),
    ("one-root-vs-pm", "2", f"{B}{{\\pm 2}}", 0, 0, False),
    # degrees
    ("degrees-response", "30", f"{B}{{30^\\circ}}", 1, 1, False),
    ("degrees-braced", "30", f"{B}{{30^{{\\circ}}}}", 1, 1, False),
    ("degrees-gold", "30^\\circ", f"{B}{{30}}", 1, 1, False),
    ("degrees-wrong", "30^\\circ", f"{B}{{60^\\circ}}", 0, 0, False),
    # percent
    ("percent-both", "50\\%", f"{B}{{50\\%}}", 1, 1, False),
    ("percent-vs-fraction", "50\\%", f"{B}{{0.5}}", 1, 1, False),
    ("percent-wrong", "50\\%", f"{B}{{40\\%}}", 0, 0, False),
    # units
    ("unit-in-response", "5", f"{B}{{5\\text{{ cm}}}}", 1, 1, False),
    ("unit-in-gold", "5\\text{ cm}", f"{B}{{5}}", 1, 1, False),
    ("unit-mbox", "12", f"{B}{{12\\mbox{{ dollars}}}}", 1, 1, False),
    ("unit-wrong-number", "5", f"{B}{{6\\text{{ cm}}}}", 0, 0, False),
    # tiny values
    ("tiny-vs-zero", "10^{-9}", f"{B}{{0}}", 0, 0, False),
    ("tiny-decimal", "10^{-9}", f"{B}{{0.000000001}}", 1, 1, False),
    ("tiny-sci-notation", "1.5\\times 10^{-8}", f"{B}{{1.5e-8}}", 1, 1, False),
    ("tiny-off-by-10x", "10^{-7}", f"{B}{{10^{{-6}}}}", 0, 0, False),
    # hedges: several distinct final answers
    ("hedge-two-boxes", "3", f"{B}{{3}} or maybe {B}{{4}}", 0, 1, True),
    ("hedge-or-in-box", "3", f"{B}{{3 \\text{{ or }} 4}}", 0, 1, True),
    ("hedge-bare-or", "3", f"{B}{{x=3 or x=4}}", 0, 1, True),
    ("hedge-comma-list", "3", f"{B}{{3, 4}}", 0, 1, True),
    ("hedge-wrong-last", "3", f"{B}{{3}}. Wait, no: {B}{{5}}", 0, 1, True),
    ("restated-same", "3", f"{B}{{3}} ... so again {B}{{3}}", 1, 1, False),
    ("restated-equivalent", "\\frac12", f"{B}{{0.5}}, i.e. {B}{{\\frac{{1}}{{2}}}}", 1, 1, False),
    ("hedge-both-wrong", "3", f"{B}{{4}} or {B}{{5}}", 0, 0, True),
    # no answer / truncation
    ("no-box-last-number", "3", "So the answer is 3.", 0, 1, False),
    ("no-box-wrong-last-number", "3", "It is 3, no, 7", 0, 0, False),
    ("no-answer", "3", "I do not know.", 0, 0, False),
    ("empty", "3", "", 0, 0, False),
    ("unclosed-box", "3", f"the answer is {B}{{3", 0, 1, False),
    # nested braces and box variants
    ("nested-frac", "\\frac{1}{2}", f"{B}{{\\frac{{1}}{{2}}}}", 1, 1, False),
    ("nested-sqrt", "\\frac{\\sqrt{3}}{2}", f"{B}{{\\frac{{\\sqrt{{3}}}}{{2}}}}", 1, 1, False),
    ("escaped-braces", "\\{1,2\\}", f"{B}{{\\{{1, 2\\}}}}", 1, 1, False),
    ("box-in-box", "3", f"{B}{{{B}{{3}}}}", 1, 1, False),
    ("fbox", "3", "\\fbox{3}", 1, 1, False),
    ("boxed-space-variant", "5", "The answer is $\\boxed 5$.", 1, 1, False),
    ("boxed-space-brace", "\\frac{1}{2}", "\\boxed {\\frac12}", 1, 1, False),
    ("dollar-box", "3", "$\\boxed{3}$.", 1, 1, False),
    # algebra and odds and ends
    ("radical-simplified", "2\\sqrt{3}", f"{B}{{\\sqrt{{12}}}}", 1, 1, False),
    ("polynomial-factored", "x^2+2x+1", f"{B}{{(x+1)^2}}", 1, 1, False),
    ("multiple-choice", "A", f"{B}{{\\text{{(A)}}}}", 1, 1, False),
    ("thousands-separator", "1000", f"{B}{{1,000}}", 1, 1, False),
    ("thousands-not-a-list", "1", f"{B}{{1,000}}", 0, 0, False),
    ("negative-sign", "-3", f"{B}{{3}}", 0, 0, False),
    ("equation-answer", "2", f"{B}{{x=2}}", 1, 1, False),
]

IDS = [row[0] for row in TABLE]


@pytest.fixture(scope="module")
def graded():
    with VerifierPool(2, timeout_s=10.0) as pool:
        results = grade_many([(gold, resp) for _, gold, resp, *_ in TABLE], pool)
    return dict(zip(IDS, results))


def test_table_ids_unique():
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("case_id,gold,response,strict,lenient,hedged", TABLE, ids=IDS)
def test_regression_row(graded, case_id, gold, response, strict, lenient, hedged):
    g = graded[case_id]
    assert g.infra_error is None, g.infra_error
    sv = to_verdict(g, "strict", response=response)
    lv = to_verdict(g, "lenient", response=response)
    assert (sv.reward, lv.reward, sv.signals["hedged"]) == (float(strict), float(lenient), hedged), (
        f"answers={g.extraction.answers} candidates={g.extraction.candidates}"
    )
    # the hedge flag and answer count agree, whichever mode graded it
    assert sv.signals["hedged"] == lv.signals["hedged"] == (sv.signals["answer_count"] > 1)
    assert sv.signals["mode"] == "strict" and lv.signals["mode"] == "lenient"
    # strict never pays where lenient does not
    assert strict <= lenient
