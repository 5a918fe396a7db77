"""Tagged JSON for plain Python values (stdlib only; also pasted into sandbox harnesses).

Only *exact* builtin types are accepted: a subclass of ``int`` or ``list`` (or any object
with its own ``__eq__``) cannot be encoded, so a candidate cannot smuggle an
always-equal object to the grader. Tuples, sets, dicts with non-string keys, bytes,
complex and non-finite floats survive the round trip.
"""

import base64
import math


class Unencodable(Exception):
    pass


_MAX_NODES = 2_000_000


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
        items = [encode_value(x, _budget, d) for x in v]
        return {"$s" if t is set else "$fs": items}
    if t is dict:
        return {"$d": [[encode_value(k, _budget, d), encode_value(x, _budget, d)] for k, x in v.items()]}
    if t is bytes:
        return {"$b": base64.b64encode(v).decode("ascii")}
    if t is complex:
        return {"$c": [encode_value(v.real, _budget, d), encode_value(v.imag, _budget, d)]}
    raise Unencodable("cannot return a %s (only plain builtin values are graded)" % t.__name__)


def decode_value(v):
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    if isinstance(v, dict):
        if len(v) != 1:
            raise ValueError("bad tagged value: %r" % (v,))
        (tag, x), = v.items()
        if tag == "$f":
            return float(x)
        if tag == "$t":
            return tuple(decode_value(i) for i in x)
        if tag == "$s":
            return set(decode_value(i) for i in x)
        if tag == "$fs":
            return frozenset(decode_value(i) for i in x)
        if tag == "$d":
            return {decode_value(k): decode_value(i) for k, i in x}
        if tag == "$b":
            return base64.b64decode(x)
        if tag == "$c":
            return complex(decode_value(x[0]), decode_value(x[1]))
        raise ValueError("unknown value tag %r" % tag)
    return v
