"""Tagged JSON for plain Python values (stdlib only; also pasted into sandbox harnesses).

Only *exact* builtin types are accepted: a subclass of ``int`` or ``list`` (or any object
with its own ``__eq__``) cannot be encoded, so a candidate cannot smuggle an
always-equal object to the grader. Tuples, sets, dicts with non-string keys, bytes,
complex and non-finite floats survive the round trip, and so do the standard library's
``Counter``, ``OrderedDict``, ``defaultdict``, ``deque`` and ``re.Match`` (MBPP's reference
solutions return them; a match arrives as a :class:`MatchResult`), and the builtin types
themselves (``int`` as an argument, MBPP 533): their exact types are captured here,
before any candidate code runs, and their contents are read through the C base types,
never through methods a candidate could override.

Sets are encoded in a canonical order, so the same set gives the same text in every
process (string hashing is randomised per interpreter); the assert driver keys its memo
on that text.
"""

import base64
import json as _json
import math
import re as _re
from collections import Counter as _Counter, OrderedDict as _OrderedDict, defaultdict as _defaultdict, deque as _deque

_Match = _re.Match
_BUILTIN_TYPES = {t: t.__name__ for t in (int, float, str, bool, bytes, complex, list, tuple, dict, set, frozenset, object, type(None))}
_TYPES_BY_NAME = {name: t for t, name in _BUILTIN_TYPES.items()}


class MatchResult:
    """What a candidate's ``re.Match`` carries across: its groups and spans. Truthy, as a
    match is; equal only to itself, as a match is."""

    def __init__(self, groups, spans, named):
        self._groups, self._spans, self._named = list(groups), [tuple(s) for s in spans], dict(named)

    def group(self, *which):
        if not which:
            which = (0,)
        got = [self._groups[self._index(w)] for w in which]
        return got[0] if len(got) == 1 else tuple(got)

    def __getitem__(self, which):
        return self.group(which)

    def groups(self, default=None):
        return tuple(default if g is None else g for g in self._groups[1:])

    def groupdict(self, default=None):
        return {k: default if self._groups[i] is None else self._groups[i] for k, i in self._named.items()}

    def span(self, which=0):
        return self._spans[self._index(which)]

    def start(self, which=0):
        return self.span(which)[0]

    def end(self, which=0):
        return self.span(which)[1]

    def _index(self, which):
        return self._named[which] if isinstance(which, str) else which

    def __repr__(self):
        return "<match span=%r match=%r>" % (self._spans[0], self._groups[0])


class Unencodable(Exception):
    pass


_MAX_NODES = 2_000_000
# Set by the assert driver to its stand-in type for objects that only the candidate's
# process can build (from the solution's own classes): each carries its ``expr``,
# {"$ref": name} for a test fixture's object or {"$new": [class name, args, kwargs]} for a
# construction in the test. None everywhere else.
_REF_TYPE = None


def _canonical(items):
    return sorted(items, key=lambda e: _json.dumps(e, sort_keys=True))


def _pairs(items, budget, d):
    return [[encode_value(k, budget, d), encode_value(x, budget, d)] for k, x in items]


def encode_value(v, _budget=None, _depth=0):
    if _budget is None:
        _budget = [_MAX_NODES]
    _budget[0] -= 1
    if _budget[0] < 0:
        raise Unencodable("value too large")
    if _depth > 200:
        raise Unencodable("value nested too deeply")
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if math.isfinite(v) else {"$f": repr(v)}
    d = _depth + 1
    if t is list:
        return [encode_value(x, _budget, d) for x in v]
    if t is tuple:
        return {"$t": [encode_value(x, _budget, d) for x in v]}
    if t is set or t is frozenset:
        items = _canonical([encode_value(x, _budget, d) for x in v])
        return {"$s" if t is set else "$fs": items}
    if t is dict:
        return {"$d": _pairs(v.items(), _budget, d)}
    if t is bytes:
        return {"$b": base64.b64encode(v).decode("ascii")}
    if t is complex:
        return {"$c": [encode_value(v.real, _budget, d), encode_value(v.imag, _budget, d)]}
    if t is _Counter:  # a Python class: read the storage through dict's own C method
        return {"$ctr": _pairs(dict.items(v), _budget, d)}
    if t is _OrderedDict:  # C type: its own items() keeps the OrderedDict's order
        return {"$od": _pairs(_OrderedDict.items(v), _budget, d)}
    if t is _defaultdict:
        return {"$dd": _pairs(dict.items(v), _budget, d)}
    if t is _deque:
        return {"$dq": [encode_value(x, _budget, d) for x in _deque.__iter__(v)]}
    if t is _Match:
        n = v.re.groups
        return {"$m": [[encode_value(_Match.group(v, i), _budget, d) for i in range(n + 1)],
                       [list(_Match.span(v, i)) for i in range(n + 1)],
                       sorted(v.re.groupindex.items())]}
    if t is type and v in _BUILTIN_TYPES:  # exactly `type`: no metaclass with its own __eq__
        return {"$type": _BUILTIN_TYPES[v]}
    if _REF_TYPE is not None and t is _REF_TYPE:
        return v.expr
    raise Unencodable("cannot return a %s (only plain builtin values are graded)" % t.__name__)


def decode_value(v, refs=None):
    """``refs``: the namespace ``$ref`` names resolve in (the candidate's test fixture);
    without it a ``$ref`` is refused."""
    if isinstance(v, list):
        return [decode_value(x, refs) for x in v]
    if isinstance(v, dict):
        if len(v) != 1:
            raise ValueError("bad tagged value: %r" % (v,))
        (tag, x), = v.items()
        if tag == "$f":
            return float(x)
        if tag == "$t":
            return tuple(decode_value(i, refs) for i in x)
        if tag == "$s":
            return set(decode_value(i, refs) for i in x)
        if tag == "$fs":
            return frozenset(decode_value(i, refs) for i in x)
        if tag in ("$d", "$ctr", "$od", "$dd"):
            pairs = [(decode_value(k, refs), decode_value(i, refs)) for k, i in x]
            if tag == "$ctr":
                return _Counter(dict(pairs))
            if tag == "$od":
                return _OrderedDict(pairs)
            if tag == "$dd":
                return _defaultdict(None, pairs)
            return dict(pairs)
        if tag == "$dq":
            return _deque(decode_value(i, refs) for i in x)
        if tag == "$b":
            return base64.b64decode(x)
        if tag == "$c":
            return complex(decode_value(x[0], refs), decode_value(x[1], refs))
        if tag == "$m":
            return MatchResult(decode_value(x[0]), x[1], x[2])
        if tag == "$type":
            if x not in _TYPES_BY_NAME:
                raise ValueError("unknown type %r" % (x,))
            return _TYPES_BY_NAME[x]
        if tag in ("$ref", "$new"):  # the candidate's own objects: resolved in its namespace only
            name = x if tag == "$ref" else x[0] if isinstance(x, list) and x else None
            if refs is None or not isinstance(name, str) or name not in refs:
                raise ValueError("unresolvable reference %r" % (name,))
            if tag == "$ref":
                return refs[name]
            return refs[name](*decode_value(x[1], refs), **decode_value(x[2], refs))
        raise ValueError("unknown value tag %r" % tag)
    return v
