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

import hashlib
import json
import math
from typing import Any, Iterable, Mapping, Optional, Sequence

import attrs

import numpy as np

from evo_core.api.columns import ABSENT, BOOL, FLOAT, INT, NONE, STR, AuditedIndex, ColumnView
from evo_core.api.features import GROUP_RELATIVE
from evo_core.api.specs import compile_predicate

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


def _stable_halves(rows: Sequence[Any], index: Optional[AuditedIndex] = None) -> tuple[list[Any], list[Any]]:
    """Alternate assignment in a hash order: deterministic, and both halves get half of each group."""
    keys = (index or _NO_INDEX).hash_orders(rows)
    order = sorted(range(len(rows)), key=keys.__getitem__)  # stable, as sorted(rows, key=hash order)
    ordered = [rows[i] for i in order]
    return ordered[0::2], ordered[1::2]


# a context without the engine's index: everything is computed on the spot (an empty index
# computes what it does not hold)
_NO_INDEX = AuditedIndex()


def _values(r: Any, index: Optional[AuditedIndex] = None) -> dict[tuple[str, str], Any]:
    """The row's columns for induction (``columns_of``), from the engine's audited index when
    it holds the row. Callers only read the dict."""
    return (index or _NO_INDEX).columns(r)


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


_SCALARS = (bool, int, float, str, type(None))


def _kind_of_column(vals: list[Any]) -> tuple[Optional[str], bool]:
    """``_kind(vals)`` and whether ``vals`` takes at least two distinct values (by class and
    value), over whole columns at once: the classes present decide the kind, and numbers are
    checked for finiteness and counted as one array. Columns of other classes take the
    scalar path."""
    classes = set(map(type, vals))
    if not classes <= set(_SCALARS):
        kind = _kind(vals)
        return kind, kind is not None and len({(v.__class__, v) for v in vals}) >= 2
    has_none = type(None) in classes
    classes.discard(type(None))
    if not classes:
        return None, False
    if classes == {bool}:
        kind = "bool"
    elif classes == {str}:
        kind = "category"
    elif classes <= {int, float}:
        try:
            arr = np.fromiter((v for v in vals if v is not None), dtype=np.float64)
        except OverflowError:  # an int beyond a float: the scalar check says what it is
            kind = _kind(vals)
            return kind, kind is not None and len({(v.__class__, v) for v in vals}) >= 2
        if not np.isfinite(arr).all():
            return None, False
        if len(classes) > 1 or has_none:
            return "number", True  # int and float, or a value and None: two classes at least
        return "number", np.unique(arr).size >= 2
    else:
        return None, False
    if len(classes) > 1 or has_none:
        return kind, True
    return kind, len(set(vals)) >= 2


def _thresholds_array(nums: np.ndarray) -> list[float]:
    """``_thresholds`` of an array of finite floats: the same midpoints, rounded the same way."""
    uniq = np.unique(nums)
    if uniq.size < 2:
        return []
    mids = ((uniq[:-1] + uniq[1:]) / 2).tolist()
    if len(mids) > MAX_THRESHOLDS:
        step = len(mids) / MAX_THRESHOLDS
        mids = [mids[int(i * step)] for i in range(MAX_THRESHOLDS)]
    return [round(m, 6) for m in mids]


def _kind_of_view(view: ColumnView, key: tuple[str, str]) -> tuple[Optional[str], bool, Optional[np.ndarray]]:
    """``_kind_of_column`` of an indexed column, from its class codes and float values alone;
    with the column's numbers (pos then neg) when its kind is "number"."""
    codes = view.codes(key)
    present = np.bincount(codes, minlength=7)
    has_none = bool(present[NONE] or present[ABSENT])  # an absent column reads as None
    classes = {c for c in (BOOL, INT, FLOAT, STR) if present[c]}
    if not classes:
        return None, False, None
    if classes == {BOOL}:
        kind = "bool"
    elif classes == {STR}:
        kind = "category"
    elif classes <= {INT, FLOAT}:
        nums = view.num(key)[(codes == INT) | (codes == FLOAT)]
        if not np.isfinite(nums).all():
            return None, False, None
        if len(classes) > 1 or has_none:
            return "number", True, nums
        return "number", np.unique(nums).size >= 2, nums
    else:
        return None, False, None
    if len(classes) > 1 or has_none:
        return kind, True, None
    return kind, np.unique(view.vid(key)).size >= 2, None


def candidate_conditions(pos: Sequence[Any], neg: Sequence[Any], *,
                         values: Optional[Sequence[Mapping[tuple[str, str], Any]]] = None,
                         view: Optional[ColumnView] = None) -> tuple[list[Condition], list[str]]:
    """The conditions worth trying on the columns that vary across ``pos`` and ``neg``, and
    the columns considered. ``values``: the rows' ``_values`` (pos then neg), when the caller
    has them already; ``view``: the same rows' columns as the audited index's arrays, which
    spares reading the rows at all. Each column is classified and thresholded as one array."""
    if view is not None:
        return _candidate_conditions_of_view(view, len(pos))
    rows = list(values) if values is not None else [_values(r) for r in list(pos) + list(neg)]
    pos_rows = rows[:len(pos)]
    keys = sorted({k for row in rows for k in row})
    out: list[Condition] = []
    considered: list[str] = []
    for key in keys:
        vals = [row.get(key) for row in rows]
        kind, varies = _kind_of_column(vals)
        if kind is None or not varies:
            continue  # constant, missing or unusable: it separates nothing
        considered.append(f"{key[0]}.{key[1]}")
        nums = np.fromiter((v for v in vals if v is not None), dtype=np.float64) if kind == "number" else None
        out += _conditions_of_column(key, kind, nums, (row.get(key) for row in pos_rows))
    return out, considered


def _conditions_of_column(key: Any, kind: str, nums: Any, pos_values: Any) -> list[Condition]:
    """A varying column's candidate conditions: both truth values, both sides of each
    threshold, or (in)equality to the positives' most frequent categories."""
    if kind == "bool":
        return [Condition(key, "==", True), Condition(key, "==", False)]
    out: list[Condition] = []
    if kind == "number":
        assert nums is not None
        for t in _thresholds_array(nums):
            out += [Condition(key, ">", t), Condition(key, "<=", t)]
        return out
    counts: dict[str, int] = {}
    for v in pos_values:
        if isinstance(v, str):
            counts[v] = counts.get(v, 0) + 1
    for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_CATEGORIES]:
        out += [Condition(key, "==", v), Condition(key, "!=", v)]
    return out


def _candidate_conditions_of_view(view: ColumnView, npos: int) -> tuple[list[Condition], list[str]]:
    out: list[Condition] = []
    considered: list[str] = []
    for key in view.keys:
        nums = None
        if view.exotic(key):  # a value the arrays cannot stand for: the column as a list
            vals = view.values(key)
            kind, varies = _kind_of_column(vals)
            if kind == "number":
                nums = np.fromiter((v for v in vals if v is not None), dtype=np.float64)
        else:
            kind, varies, nums = _kind_of_view(view, key)
        if kind is None or not varies:
            continue  # constant, missing or unusable: it separates nothing
        considered.append(f"{key[0]}.{key[1]}")
        pos_values = view.obj(key)[:npos].tolist() if kind not in ("bool", "number") else ()
        out += _conditions_of_column(key, kind, nums, pos_values)
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
_INDEXED_FIELDS = ("truncated", "length")  # the fields ``_values`` holds
_MISS = object()


def _indexed(ref: tuple[str, str]) -> bool:
    return ref[0] != "field" or ref[1] in _INDEXED_FIELDS


def _pack(mask: np.ndarray) -> list[int]:
    """Each row of a 2-D boolean mask as an int bitset (bit i: column i)."""
    packed = np.packbits(mask, axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


def condition_bits(conds: Sequence[Condition], rows: Sequence[Any], *,
                   values: Optional[Sequence[Mapping[tuple[str, str], Any]]] = None,
                   view: Optional[ColumnView] = None) -> list[int]:
    """``[_bits(c, rows) for c in conds]``, the same bitsets, computed per column rather than
    per condition. A column's ordering conditions (induction tries up to 2 × MAX_THRESHOLDS
    of them per feature) are compared against its values as one array; its equality
    conditions are decided once per distinct value (rows of one class and value answer a
    predicate on that column alike) on a representative row. ``values``: the rows'
    ``_values``, when the caller has them already; ``view``: their columns as the audited
    index's arrays (then the rows themselves are read only as representatives)."""
    out: list[Optional[int]] = [None] * len(conds)
    ordered: dict[tuple[str, str], list[int]] = {}
    equal: dict[tuple[str, str], list[int]] = {}
    for k, c in enumerate(conds):
        if not _indexed(c.ref):
            out[k] = _bits(c, rows)
        elif c.op in _ORDERING and isinstance(c.value, (int, float)) and not math.isnan(c.value):
            ordered.setdefault(c.ref, []).append(k)
        elif c.op in ("==", "!="):
            equal.setdefault(c.ref, []).append(k)
        else:
            out[k] = _bits(c, rows)
    if view is not None:
        for ref in list(ordered) + list(equal):
            if ref not in view.keys or view.exotic(ref):  # absent everywhere, or not as arrays
                for k in ordered.pop(ref, []) + equal.pop(ref, []):
                    out[k] = _bits(conds[k], rows)
        _view_bits(conds, rows, view, ordered, equal, out)
    elif ordered or equal:
        columns = values if values is not None else [_values(r) for r in rows]
        n = len(columns)
        for ref, ks in ordered.items():
            # the rows the compiled predicate can order: numbers, bools as 0/1; the rest NaN
            # (NaN orders against nothing, as the predicate's comparison)
            xs = np.fromiter((v if isinstance(v, (int, float)) else math.nan
                              for v in (row.get(ref) for row in columns)), dtype=np.float64, count=n)
            ts = np.array([float(conds[k].value) for k in ks], dtype=np.float64)[:, None]
            ops = [conds[k].op for k in ks]
            mask = np.empty((len(ks), n), dtype=bool)
            for op in set(ops):
                sel = [i for i, o in enumerate(ops) if o == op]
                cmp = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[op]
                mask[sel] = cmp(xs[None, :], ts[sel])
            for k, b in zip(ks, _pack(mask)):
                out[k] = b
        for ref, ks in equal.items():
            groups: dict[tuple[type, Any], list[int]] = {}  # (class, value) -> [representative row, bitset]
            try:
                for i, row in enumerate(columns):
                    v = row.get(ref, _MISS)
                    g = groups.get((v.__class__, v))
                    if g is None:
                        groups[(v.__class__, v)] = [i, 1 << i]
                    else:
                        g[1] |= 1 << i
            except TypeError:  # an unhashable value: one predicate at a time
                for k in ks:
                    out[k] = _bits(conds[k], rows)
                continue
            for k in ks:
                pred = compile_predicate(conds[k].to_dsl())
                b = 0
                for rep, bits in groups.values():
                    if pred(rows[rep]):
                        b |= bits
                out[k] = b
    return [b for b in out if b is not None]


_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


def _ordered_bits(xs: np.ndarray, conds: Sequence[Condition], ks: list[int], out: list[Optional[int]]) -> None:
    ts = np.array([float(conds[k].value) for k in ks], dtype=np.float64)[:, None]
    ops = [conds[k].op for k in ks]
    mask = np.empty((len(ks), len(xs)), dtype=bool)
    for op in set(ops):
        sel = [i for i, o in enumerate(ops) if o == op]
        mask[sel] = _CMP[op](xs[None, :], ts[sel])
    for k, b in zip(ks, _pack(mask)):
        out[k] = b


def _view_bits(conds: Sequence[Condition], rows: Sequence[Any], view: ColumnView, ordered: dict[tuple[str, str], list[int]],
               equal: dict[tuple[str, str], list[int]], out: list[Optional[int]]) -> None:
    for ref, ks in ordered.items():
        _ordered_bits(view.num(ref), conds, ks, out)  # NaN where the predicate cannot order
    for ref, ks in equal.items():
        uniq, first, inverse = np.unique(view.vid(ref), return_index=True, return_inverse=True)
        members = _pack(inverse[None, :] == np.arange(len(uniq))[:, None])
        for k in ks:
            pred = compile_predicate(conds[k].to_dsl())
            b = 0
            for rep, bits in zip(first.tolist(), members):
                if pred(rows[rep]):
                    b |= bits
            out[k] = b


def induce(audited: Iterable[Any], settings: Settings = Settings(), *,
           exclude: Optional[Mapping[str, Any]] = None,
           index: Optional[AuditedIndex] = None) -> tuple[Optional[Induced], dict[str, Any]]:
    """The best separating predicate, or None with the reason in the report. ``exclude`` is
    a predicate: rollouts it matches are already explained (an active repair covers them).
    ``index``: the engine's audited index (``ProposalContext.audited_index``), which holds
    each audited rollout's columns and hash order; without it they are computed here."""
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
    fit_pos, test_pos = _stable_halves(pos, index)
    fit_neg, test_neg = _stable_halves(neg, index)
    view = index.view(fit_pos + fit_neg) if index is not None else None
    if view is not None:  # the fitting rows' columns as the index's arrays
        vals_pos = vals_neg = None
        cands, considered = candidate_conditions(fit_pos, fit_neg, view=view)
    else:
        vals_pos, vals_neg = [_values(r, index) for r in fit_pos], [_values(r, index) for r in fit_neg]
        cands, considered = candidate_conditions(fit_pos, fit_neg, values=vals_pos + vals_neg)
    report["considered"] = considered
    if not cands:
        report["reason"] = "no feature or signal varies across the audited sample"
        return None, report
    # each condition as bitsets over the fitting half: a pair is an AND, scored by popcount
    if view is not None:
        npos = len(fit_pos)
        bits = list(zip(condition_bits(cands, fit_pos, view=view.take(0, npos)),
                        condition_bits(cands, fit_neg, view=view.take(npos, view.n))))
    else:
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
