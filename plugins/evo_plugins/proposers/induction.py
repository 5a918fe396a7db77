"""Induction from evidence: what does the training reward get wrong, in either direction?

The strict oracle labels a small audited sample of rollouts. The reward can be wrong on two
sides, and induction contrasts within one side at a time (``Settings.side``):

- ``paid`` (overpayment): among the rollouts the reward *pays*, those the oracle rejects
  (positives) against those it accepts (negatives);
- ``unpaid`` (underpayment): among the rollouts the reward does *not* pay, those the oracle
  accepts (positives) against those it rejects (negatives).

The contrast runs over every signal the domain reports (whatever its name and type) and the
generic features the core computes (the response's, its task's, and its group's). A small beam search finds the predicate of at most two
conditions, with learned thresholds or categorical values, that best separates them on one
half of the sample (F-beta, precision weighted); its precision and recall on the other half
are the falsifiable prediction it is proposed with. Nothing here knows any domain.

Minimum sample: ``min_positive`` positives and ``min_negative`` negatives in all (half of
each to fit, half to test). At ``audit.rate = 0.05`` with 256 rollouts a step that is ~13
audited rollouts a step, so a loophole paid in ~8% of rollouts clears the default of 8
positives within about 10 steps.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from typing import Any, Iterable, Mapping, Optional, Sequence

import attrs

from evo_core.api.features import GROUP_RELATIVE
from evo_core.api.specs import compile_predicate
from evo_events import RolloutCompleted

MAX_CATEGORIES = 5
MAX_THRESHOLDS = 12


@attrs.frozen
class Condition:
    ref: tuple[str, str]  # ("feature" | "signal" | "field", name)
    op: str
    value: Any

    def to_dsl(self) -> dict[str, Any]:
        return {self.ref[0]: self.ref[1], "op": self.op, "value": self.value}

    def describe(self) -> str:
        return f"{self.ref[0]}.{self.ref[1]} {self.op} {self.value!r}"

    @property
    def group_relative(self) -> bool:
        return self.ref[0] == "feature" and self.ref[1] in GROUP_RELATIVE


@attrs.frozen
class Score:
    tp: int
    fp: int
    positives: int
    negatives: int

    @property
    def precision(self) -> Optional[float]:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> Optional[float]:
        return self.tp / self.positives if self.positives else None

    def f_beta(self, beta: float) -> float:
        p, r = self.precision or 0.0, self.recall or 0.0
        if p == 0 or r == 0:
            return 0.0
        b2 = beta * beta
        return (1 + b2) * p * r / (b2 * p + r)

    def to_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "fp": self.fp, "positives": self.positives, "negatives": self.negatives,
                "precision": self.precision, "recall": self.recall}


@attrs.frozen
class Induced:
    conditions: tuple[Condition, ...]
    fit: Score
    holdout: Score
    considered: tuple[str, ...]
    fitted_on: tuple[str, ...]
    tested_on: tuple[str, ...]
    positives: tuple[str, ...]  # all positive ids (paid-but-rejected, or unpaid-but-accepted): the evidence
    side: str = "paid"

    @property
    def predicate(self) -> dict[str, Any]:
        conds = [c.to_dsl() for c in self.conditions]
        return conds[0] if len(conds) == 1 else {"all": conds}

    def describe(self) -> str:
        return " and ".join(c.describe() for c in self.conditions)

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.predicate, sort_keys=True).encode()).hexdigest()[:10]


@attrs.frozen
class Sample:
    positives: list[Any]
    negatives: list[Any]
    other: list[Any]  # audited rollouts of the other side, set aside


@attrs.frozen
class Settings:
    pay_threshold: float = 0.0  # a rollout is "paid" when its training reward exceeds this
    min_positive: int = 8
    min_negative: int = 8
    beta: float = 0.5  # F-beta weights precision: a false positive penalises honest work
    beam: int = 10
    min_gain: float = 0.02  # a second condition must add at least this much F-beta
    # on a tie, a condition on the response itself before one on its group (see ``induce``)
    response_first: bool = True
    side: str = "paid"  # "paid": overpayment; "unpaid": underpayment


SIDES = ("paid", "unpaid")
# (positives, negatives) of each side, in words
SIDE_WORDS = {"paid": ("paid-but-rejected", "paid-and-accepted"), "unpaid": ("unpaid-but-accepted", "unpaid-and-rejected")}


def split_sample(audited: Iterable[Any], pay_threshold: float, side: str = "paid") -> Sample:
    """Positives and negatives of one side (see the module docstring)."""
    if side not in SIDES:
        raise ValueError(f"induction: side must be one of {', '.join(SIDES)}, got {side!r}")
    pos, neg, other = [], [], []
    for r in audited:
        if r.strict_correct is None or r.reward is None:
            continue
        if (r.reward > pay_threshold) != (side == "paid"):
            other.append(r)
        elif side == "paid":
            (neg if r.strict_correct else pos).append(r)
        else:
            (pos if r.strict_correct else neg).append(r)
    return Sample(pos, neg, other)


def _stable_halves(rows: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Alternate assignment in a hash order: deterministic, and both halves get half of each group."""
    ordered = sorted(rows, key=_hash_order)
    return ordered[0::2], ordered[1::2]


_HASH_ORDER: dict[str, str] = {}


def _hash_order(r: Any) -> str:
    key = _HASH_ORDER.get(r.event_id)
    if key is None:
        if len(_HASH_ORDER) > 100_000:
            _HASH_ORDER.clear()
        key = _HASH_ORDER[r.event_id] = hashlib.sha1(r.event_id.encode()).hexdigest()
    return key


_VALUES_MEMO: dict[int, tuple[Any, dict[tuple[str, str], Any]]] = {}


def _values(r: Any) -> dict[tuple[str, str], Any]:
    """The row's columns for induction; memoised per logged rollout (each pass re-reads the
    history it read last pass). Callers only read the dict."""
    if r.__class__ is not RolloutCompleted:  # views and stand-ins are built afresh: not worth keeping
        return _columns(r)
    hit = _VALUES_MEMO.get(id(r))
    if hit is not None and hit[0] is r:
        return hit[1]
    out = _columns(r)
    if len(_VALUES_MEMO) > 40_000:  # a few histories' worth; the oldest are dropped with the rest
        _VALUES_MEMO.clear()
    _VALUES_MEMO[id(r)] = (r, out)  # holding r keeps its id from being reused
    return out


def _columns(r: Any) -> dict[tuple[str, str], Any]:
    out: dict[tuple[str, str], Any] = {}
    for k, v in (getattr(r, "features", None) or {}).items():
        out[("feature", k)] = v
    for k, v in (r.signals or {}).items():
        out[("signal", k)] = v
    out[("field", "truncated")] = r.truncated
    out[("field", "length")] = r.length
    return out


def _kind(values: list[Any]) -> Optional[str]:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if all(isinstance(v, bool) for v in vals):
        return "bool"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in vals):
        return "number"
    if all(isinstance(v, str) for v in vals):
        return "category"
    return None


def _thresholds(values: Sequence[float]) -> list[float]:
    uniq = sorted(set(values))
    if len(uniq) < 2:
        return []
    mids = [(a + b) / 2 for a, b in zip(uniq, uniq[1:])]
    if len(mids) > MAX_THRESHOLDS:
        step = len(mids) / MAX_THRESHOLDS
        mids = [mids[int(i * step)] for i in range(MAX_THRESHOLDS)]
    return [round(m, 6) for m in mids]


def candidate_conditions(pos: Sequence[Any], neg: Sequence[Any], *,
                         values: Optional[Sequence[Mapping[tuple[str, str], Any]]] = None
                         ) -> tuple[list[Condition], list[str]]:
    """``values``: the rows' ``_values`` (pos then neg), when the caller has them already."""
    rows = list(values) if values is not None else [_values(r) for r in list(pos) + list(neg)]
    pos_rows = rows[:len(pos)]
    keys = sorted({k for row in rows for k in row})
    out: list[Condition] = []
    considered: list[str] = []
    for key in keys:
        vals = [row.get(key) for row in rows]
        kind = _kind(vals)
        if kind is None or len({(v.__class__, v) for v in vals}) < 2:
            continue  # constant, missing or unusable: it separates nothing
        considered.append(f"{key[0]}.{key[1]}")
        if kind == "bool":
            out += [Condition(key, "==", True), Condition(key, "==", False)]
        elif kind == "number":
            nums = [float(v) for v in vals if v is not None]
            for t in _thresholds(nums):
                out += [Condition(key, ">", t), Condition(key, "<=", t)]
        else:
            counts: dict[str, int] = {}
            for row in pos_rows:
                v = row.get(key)
                if isinstance(v, str):
                    counts[v] = counts.get(v, 0) + 1
            for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_CATEGORIES]:
                out += [Condition(key, "==", v), Condition(key, "!=", v)]
    return out, considered


def score(conds: Sequence[Condition], pos: Sequence[Any], neg: Sequence[Any]) -> Score:
    pred = compile_predicate({"all": [c.to_dsl() for c in conds]})
    tp = sum(1 for r in pos if pred(r))
    fp = sum(1 for r in neg if pred(r))
    return Score(tp, fp, len(pos), len(neg))


def _bits(cond: Condition, rows: Sequence[Any]) -> int:
    pred = compile_predicate(cond.to_dsl())
    out = 0
    for i, r in enumerate(rows):
        if pred(r):
            out |= 1 << i
    return out


_ORDERING = ("<", "<=", ">", ">=")


def condition_bits(conds: Sequence[Condition], rows: Sequence[Any], *,
                   values: Optional[Sequence[Mapping[tuple[str, str], Any]]] = None) -> list[int]:
    """``[_bits(c, rows) for c in conds]``, the same bitsets, computed per feature rather than
    per condition: a feature's ordering thresholds all come from one sort of its values
    (induction tries up to 2 × MAX_THRESHOLDS of them per feature). ``values``: the rows'
    ``_values``, when the caller has them already."""
    out: list[Optional[int]] = [None] * len(conds)
    by_ref: dict[tuple[str, str], list[int]] = {}
    for k, c in enumerate(conds):
        if c.op in _ORDERING and isinstance(c.value, (int, float)) and not math.isnan(c.value) \
                and (c.ref[0] != "field" or c.ref[1] in ("truncated", "length")):  # what _values holds
            by_ref.setdefault(c.ref, []).append(k)
        else:
            out[k] = _bits(c, rows)
    if by_ref:
        columns = values if values is not None else [_values(r) for r in rows]
        for ref, ks in by_ref.items():
            pts = []  # (value, row) for the rows the compiled predicate can order: numbers, bools as 0/1
            for i, row in enumerate(columns):
                v = row.get(ref)
                if isinstance(v, (int, float)) and not math.isnan(v):
                    pts.append((float(v), i))
            pts.sort()
            xs = [v for v, _ in pts]
            prefix = [0]  # prefix[j]: the rows of the j smallest values
            for _, i in pts:
                prefix.append(prefix[-1] | (1 << i))
            whole = prefix[-1]
            for k in ks:
                op, t = conds[k].op, float(conds[k].value)
                if op in ("<=", ">"):
                    below = prefix[bisect.bisect_right(xs, t)]  # values <= t
                    out[k] = below if op == "<=" else whole ^ below
                else:
                    below = prefix[bisect.bisect_left(xs, t)]  # values < t
                    out[k] = below if op == "<" else whole ^ below
    return [b for b in out if b is not None]


def induce(audited: Iterable[Any], settings: Settings = Settings(), *,
           exclude: Optional[Mapping[str, Any]] = None) -> tuple[Optional[Induced], dict[str, Any]]:
    """The best separating predicate, or None with the reason in the report. ``exclude`` is
    a predicate: rollouts it matches are already explained (an active repair covers them)."""
    sample = split_sample(audited, settings.pay_threshold, settings.side)
    explained = compile_predicate(exclude) if exclude else None
    pos = [r for r in sample.positives if not (explained and explained(r))]
    neg = list(sample.negatives)
    words = SIDE_WORDS[settings.side]
    report: dict[str, Any] = {"side": settings.side, "positives": len(pos), "negatives": len(neg),
                              "other_side": len(sample.other),
                              "min_positive": settings.min_positive, "min_negative": settings.min_negative}
    if len(pos) < settings.min_positive or len(neg) < settings.min_negative:
        report["reason"] = (f"too little audited evidence: {len(pos)} {words[0]} and {len(neg)} {words[1]} "
                            f"(need {settings.min_positive} and {settings.min_negative})")
        return None, report
    fit_pos, test_pos = _stable_halves(pos)
    fit_neg, test_neg = _stable_halves(neg)
    vals_pos, vals_neg = [_values(r) for r in fit_pos], [_values(r) for r in fit_neg]
    cands, considered = candidate_conditions(fit_pos, fit_neg, values=vals_pos + vals_neg)
    report["considered"] = considered
    if not cands:
        report["reason"] = "no feature or signal varies across the audited sample"
        return None, report
    # each condition as bitsets over the fitting half: a pair is an AND, scored by popcount
    bits = list(zip(condition_bits(cands, fit_pos, values=vals_pos), condition_bits(cands, fit_neg, values=vals_neg)))
    npos, nneg = len(fit_pos), len(fit_neg)

    b2 = settings.beta * settings.beta

    def fb(tp: int, fp: int) -> float:  # Score(tp, fp, npos, nneg).f_beta(beta), without building the Score
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / npos if npos else 0.0
        if p == 0 or r == 0:
            return 0.0
        return (1 + b2) * p * r / (b2 * p + r)

    counts = [(bp.bit_count(), bn.bit_count()) for bp, bn in bits]
    # Ties on the fitting half are common with a small audited sample. A condition on the
    # response itself goes before one on its group: the group is the policy's other samples,
    # which training moves (as a loophole spreads, honest answers become the odd ones out), so
    # a group-relative condition that separates today flags honest work tomorrow.
    singles = sorted(range(len(cands)), key=lambda i: (-fb(*counts[i]), settings.response_first and cands[i].group_relative,
                                                       cands[i].describe()))
    best_f = fb(*counts[singles[0]])
    best = Score(*counts[singles[0]], npos, nneg)
    best_conds: tuple[Condition, ...] = (cands[singles[0]],)
    refs = [c.ref for c in cands]
    for i in singles[:settings.beam]:
        bp1, bn1 = bits[i]
        for j, (bpj, bnj) in enumerate(bits):
            if refs[j] == refs[i]:
                continue
            tp = (bp1 & bpj).bit_count()
            fj = fb(tp, (bn1 & bnj).bit_count())
            if fj >= best_f + settings.min_gain and tp >= 2:
                best_f, best, best_conds = fj, Score(tp, (bn1 & bnj).bit_count(), npos, nneg), (cands[i], cands[j])
    if best.tp < 2:
        report["reason"] = f"no predicate flags at least two {words[0]} rollouts"
        return None, report
    held = score(best_conds, test_pos, test_neg)
    induced = Induced(best_conds, best, held, tuple(considered), tuple(r.event_id for r in fit_pos + fit_neg),
                      tuple(r.event_id for r in test_pos + test_neg), tuple(r.event_id for r in pos), settings.side)
    report.update(predicate=induced.describe(), fit=best.to_dict(), holdout=held.to_dict())
    return induced, report
