"""A faster, byte-identical path to the canonical event codec (``encode_many`` for runs of events).

``evo_events.encode_payload`` goes cattrs-unstructure → walk for non-finite floats →
``json.dumps(sort_keys=True)``. On a 1,000-event append that is most of the cost. Two
generated encoders per event class sit in front of it, each falling back to the next:

1. orjson (when installed): the fields go into one dict, in sorted order, and orjson
   writes it. orjson writes the canonical bytes for exactly the plain JSON values, so
   every value is first checked to be one: exact ``str``/``int``/``float``/``bool``/
   ``None``, lists, tuples and dicts with exact ``str`` keys of those, and attrs values
   (converted to dicts). orjson would also write UUIDs, enums and subclasses, which the
   canonical codec does not accept as they are; those fail the check. The one place its
   formatting differs is floats below 1e-4 in magnitude (``1e-05`` vs ``0.00001``), so
   those go to the next path too. Ints beyond 64 bits make orjson raise: a fallback.
2. the stdlib path: the (already sorted) fields written directly, the plain JSON value
   types inline, nested dicts/lists through one pre-built C JSON encoder.
3. the canonical codec itself, for anything else (custom objects, non-finite floats
   inside containers, non-str dict keys).

So the bytes are always the canonical ones; property tests
(``tests/core/test_codec_props.py``) check equality against ``encode_payload``.
"""

from __future__ import annotations

import json
import math
import re
from itertools import groupby
from typing import Any, Callable, Sequence

import attrs

from evo_events import Event, encode_payload
from evo_core.store.records import StoreError

try:  # the C string encoder; json falls back to the Python one if it is missing
    from _json import encode_basestring as _enc_str  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    from json.encoder import encode_basestring as _enc_str  # type: ignore[assignment]

try:
    from _json import make_encoder as _c_make_encoder  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    _c_make_encoder = None

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - a declared dependency; the stdlib path still works
    _orjson = None


class _Fallback(Exception):
    """A value this fast path does not handle; use the canonical codec."""


_float_repr = float.__repr__


def _build_container_encoder() -> Callable[[Any], str]:
    """One reusable C encoder with the canonical settings (json.dumps builds a new one per call)."""
    if _c_make_encoder is None:  # pragma: no cover
        return lambda o: json.dumps(o, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    def _default(o: Any) -> Any:
        raise _Fallback()

    enc = _c_make_encoder(None, _default, _enc_str, None, ":", ",", True, False, False)
    # make_encoder(markers, default, encoder, indent, key_sep, item_sep, sort_keys, skipkeys, allow_nan);
    # allow_nan=False makes it raise ValueError on nan/inf (the canonical codec writes null there
    # after a walk), which we turn into a fallback.

    def encode(o: Any) -> str:
        try:
            return "".join(enc(o, 0))
        except ValueError:
            raise _Fallback() from None

    return encode


_enc_container = _build_container_encoder()


def _value(v: Any) -> str:
    t = type(v)
    if t is str:
        return _enc_str(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return int.__repr__(v)
    if t is float:
        if v != v or v in (math.inf, -math.inf):
            return "null"
        return _float_repr(v)
    if t is tuple or t is list:
        if not v:
            return "[]"
        return "[" + ",".join([_value(x) for x in v]) + "]"
    if t is dict:
        if not v:
            return "{}"
        # The canonical codec stringifies keys first (``str(True)`` is "True"; the C
        # encoder would write "true"), at every depth: only all-str keys, all the way
        # down, go to the C encoder.
        _check_dict(v)
        return _enc_container(v)
    if attrs.has(t):
        m = _MEMO.get(id(v))
        if m is not None and m[0] is v:
            return m[1]
        out = _encoder_for(t)(v)
        if t in _MEMO_TYPES:
            if len(_MEMO) > 512:
                _MEMO.clear()
            _MEMO[id(v)] = (v, out)  # holding v keeps its id from being reused
        return out
    raise _Fallback()


# Frozen attrs classes whose fields are all immutable scalars can be memoised by identity.
_MEMO: dict[int, tuple[Any, str]] = {}
_MEMO_TYPES: set[type] = set()


def _memoisable(cls: type) -> bool:
    params = getattr(cls, "__attrs_attrs__", None)
    frozen = getattr(getattr(cls, "__setattr__", None), "__name__", "") == "_frozen_setattrs"
    return bool(params) and frozen and all(_annotation_text(a.type) in ("str", "int", "float", "bool")
                                           for a in attrs.fields(cls))


_ENCODERS: dict[type, Callable[[Any], str]] = {}


def _encoder_for(cls: type) -> Callable[[Any], str]:
    fn = _ENCODERS.get(cls)
    if fn is None:
        fn = _ENCODERS[cls] = _generate(cls)
        if _memoisable(cls):
            _MEMO_TYPES.add(cls)
    return fn


# Inline expressions per annotation; each guards the exact runtime type and otherwise defers
# to ``_value`` (which handles anything, or falls back to the canonical codec).
_STR = "(_enc_str({v}) if {v}.__class__ is str else _value({v}))"
_INT = "(_int_repr({v}) if {v}.__class__ is int else _value({v}))"
_FLOAT = "(_float_repr({v}) if {v}.__class__ is float and {v} - {v} == 0.0 else _value({v}))"  # finite only
_BOOL = "('true' if {v} is True else 'false' if {v} is False else _value({v}))"
_INLINE = {
    "str": _STR, "int": _INT, "float": _FLOAT, "bool": _BOOL,
    "Optional[str]": "('null' if {v} is None else " + _STR + ")",
    "Optional[int]": "('null' if {v} is None else " + _INT + ")",
    "Optional[float]": "('null' if {v} is None else " + _FLOAT + ")",
    "Optional[bool]": "('null' if {v} is None else " + _BOOL + ")",
}


def _annotation_text(annotation: Any) -> str:
    """An annotation as the one text the generators key on, whether the class was written
    with ``from __future__ import annotations`` (attrs then holds the source text) or not
    (it holds ``int``, ``typing.Optional[float]``, ``dict[str, typing.Any]``, ``float | None``).
    Without this, a class without string annotations missed every inline fast path:
    ``Optional[float]`` has ``__name__`` "Optional" and was taken for an attrs class.
    The text only picks which exact-type checks are generated, never what is written."""
    if isinstance(annotation, str):
        text = annotation
    elif isinstance(annotation, type) and "[" not in repr(annotation):
        text = annotation.__name__  # int, str, an attrs class
    else:
        text = repr(annotation)
    text = re.sub(r"\bNoneType\b", "None", re.sub(r"\s+", "", text).replace("typing.", ""))
    if text.startswith("Union[") and text.endswith("]"):
        text = text[6:-1].replace(",", "|") if _depth0(text[6:-1], ",") else text
    if "|" in text and _depth0(text, "|"):
        alts = [a for a in text.split("|") if a != "None"]
        if len(alts) == 1 and text.count("|") == 1:
            text = f"Optional[{alts[0]}]"
    return text


def _depth0(text: str, sep: str) -> bool:
    """Whether every ``sep`` in ``text`` is outside brackets (and there is one)."""
    depth, seen = 0, False
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == sep:
            if depth:
                return False
            seen = True
    return seen


def _inline(annotation: Any, v: str) -> str:
    annotation = _annotation_text(annotation)
    template = _INLINE.get(annotation)
    if template is None:
        if annotation.startswith(("tuple[", "list[")):
            template = "('[]' if not {v} and {v}.__class__ in (tuple, list) else _value({v}))"
        elif annotation.startswith("dict["):
            template = "('{{}}' if not {v} and {v}.__class__ is dict else _value({v}))"
        elif annotation.startswith("Optional["):
            template = "('null' if {v} is None else _value({v}))"
    return (template or "_value({v})").format(v=v)


def _generate(cls: type) -> Callable[[Any], str]:
    # cattrs unstructures an attrs instance to {field name: value} for every field, and
    # sort_keys orders them; we bake that order in, as one string expression. Fields
    # annotated str/int get an inline fast path guarded by an exact runtime type check
    # (attrs does not validate types); everything else goes through ``_value``.
    fields = sorted(attrs.fields(cls), key=lambda a: a.name)
    if not fields:
        return lambda obj: "{}"
    parts = []
    for i, a in enumerate(fields):
        key = repr(("{" if i == 0 else ",") + json.dumps(a.name) + ":")
        parts.append(f"{key} + {_inline(a.type, f'obj.{a.name}')}")
    src = "def _enc(obj):\n    return " + " + ".join(parts) + " + '}'\n"
    ns: dict[str, Any] = {"_value": _value, "_enc_str": _enc_str, "_int_repr": int.__repr__,
                          "_float_repr": float.__repr__}
    exec(compile(src, f"<fastcodec {cls.__qualname__}>", "exec"), ns)  # built from field names only
    return ns["_enc"]


# --- 1. the orjson path ----------------------------------------------------------------

_EXACT = frozenset({str, int, bool, type(None)})  # the scalars orjson always writes canonically
_STR_ONLY = frozenset({str})


def _check_values(vals: Any) -> None:
    """Raise ``_Fallback`` unless every value (recursively) is a plain JSON value orjson
    writes canonically: exact scalars (no float with 0 < |x| < 1e-4, the one range where
    its formatting differs from ``repr``: ``0.00001`` vs ``1e-05``), lists, tuples, and
    dicts with exact ``str`` keys."""
    for x in vals:
        t = x.__class__
        if t is float:
            if -1e-4 < x < 1e-4 and x != 0.0:
                raise _Fallback()
        elif t not in _EXACT:
            if t is dict:
                _check_dict(x)
            elif t is list or t is tuple:
                _check_values(x)
            else:
                raise _Fallback()


def _check_dict(d: dict) -> None:
    if not _STR_ONLY.issuperset(map(type, d)):
        raise _Fallback()
    _check_values(d.values())


def _json_value(v: Any) -> Any:
    """``v`` as orjson should see it (attrs instances as dicts), or ``_Fallback``."""
    t = v.__class__
    if attrs.has(t):
        d = {a.name: _json_value(getattr(v, a.name)) for a in attrs.fields(t)}
        if t not in _ENCODERS:
            _encoder_for(t)  # decides whether ``t`` is memoisable
        if t in _MEMO_TYPES:
            if len(_DICT_MEMO) > 512:
                _DICT_MEMO.clear()
            _DICT_MEMO[id(v)] = (v, d)  # holding v keeps its id from being reused
        return d
    _check_values((v,))
    return v


_DICT_MEMO: dict[int, tuple[Any, dict]] = {}


# Per annotation: a guard that the value has the exact expected scalar type (inline and
# cheap: most fields are these).
_GUARDS = {"str": "{v}.__class__ is str", "int": "{v}.__class__ is int", "bool": "{v}.__class__ is bool",
           "float": "({v}.__class__ is float and ({v} == 0.0 or not -1e-4 < {v} < 1e-4))"}
for _k in list(_GUARDS):
    _GUARDS[f"Optional[{_k}]"] = "({v} is None or " + _GUARDS[_k] + ")"

_ORJSON: dict[type, Callable[[Any], bytes]] = {}


def _orjson_field(annotation: Any, v: str) -> tuple[str, list[str], str]:
    """For one field read into local ``v``: (guard expression or "", statements that
    check or convert it, value expression)."""
    ann = _annotation_text(annotation)
    guard = _GUARDS.get(ann)
    if guard is not None:
        return guard.format(v=v), [], v
    if ann.startswith("dict["):
        return (f"{v}.__class__ is dict", [f"if {v}:", f"    if not _STR_ONLY.issuperset(map(type, {v})):",
                                             "        raise _Fallback()", f"    _check_values({v}.values())"], v)
    if ann.startswith(("tuple[str,", "list[str]")):  # (whitespace is gone from ``ann``)
        return f"({v}.__class__ is tuple or {v}.__class__ is list) and _STR_ONLY.issuperset(map(type, {v}))", [], v
    attrs_class = ann[:1].isupper() and "[" not in ann
    optional_attrs = ann.startswith("Optional[") and ann[9:10].isupper() and "[" not in ann[9:]
    if attrs_class or optional_attrs:  # an attrs value, usually the same object again (an Emitter): memo first
        memo = [f"m = _memo_get(id({v}))", f"{v} = m[1] if m is not None and m[0] is {v} else _json_value({v})"]
        return "", ([f"if {v} is not None:"] + ["    " + line for line in memo]) if optional_attrs else memo, v
    return "", [f"{v} = _json_value({v})"], v


def _generate_orjson(cls: type) -> Callable[[Any], bytes]:
    # Fields in sorted order into one dict (sort_keys sorts nested dicts); every value
    # checked to be plain JSON that orjson writes canonically first.
    fields = sorted(attrs.fields(cls), key=lambda a: a.name)
    lines, guards, checks, items = ["def _enc(obj):"], [], [], []
    for i, a in enumerate(fields):
        v = f"v{i}"
        lines.append(f"    {v} = obj.{a.name}")
        guard, stmts, value = _orjson_field(a.type, v)
        if guard:
            guards.append(guard)
        checks += ["    " + line for line in stmts]
        items.append(f"{json.dumps(a.name)}: {value}")
    if guards:
        lines.append("    if not (" + " and ".join(f"({g})" for g in guards) + "):")
        lines.append("        raise _Fallback()")
    lines += checks
    lines.append("    return _dumps({" + ", ".join(items) + "}, option=_SORT)")
    ns: dict[str, Any] = {"_json_value": _json_value, "_check_values": _check_values, "_memo_get": _DICT_MEMO.get,
                          "_STR_ONLY": _STR_ONLY, "_Fallback": _Fallback,
                          "_dumps": _orjson.dumps, "_SORT": _orjson.OPT_SORT_KEYS}
    exec(compile("\n".join(lines) + "\n", f"<fastcodec orjson {cls.__qualname__}>", "exec"), ns)  # field names only
    return ns["_enc"]


def _stdlib_path(event: Event, cls: type) -> bytes:
    fn = _ENCODERS.get(cls) or _encoder_for(cls)
    try:
        return fn(event).encode("utf-8")
    except _Fallback:
        return encode_payload(event)
    except (TypeError, ValueError, RecursionError):
        return encode_payload(event)  # raises the codec's own clear CodecError


def first_path(cls: type) -> Callable[[Any], bytes]:
    """The fastest encoder for ``cls``; it raises ``FALLBACK_ERRORS`` where
    ``fast_encode_payload`` (which always answers) must take over. For hot loops that
    look it up once per class."""
    fn = _ORJSON.get(cls)
    if fn is None:
        if not attrs.has(cls):
            return encode_payload
        if _orjson is None:
            return lambda event: _stdlib_path(event, cls)
        fn = _ORJSON[cls] = _generate_orjson(cls)
        _encoder_for(cls)  # registers memoisable attrs types
    return fn


FALLBACK_ERRORS = (_Fallback, TypeError, ValueError, RecursionError)  # orjson's errors are TypeErrors


def fast_encode_payload(event: Event) -> bytes:
    """Exactly ``encode_payload(event)``, usually 3-5x faster."""
    cls = type(event)
    fn = _ORJSON.get(cls) or first_path(cls)
    try:
        return fn(event)
    except FALLBACK_ERRORS:
        return _stdlib_path(event, cls)


CHUNK = 1024  # events per executemany on the append path


# --- many events of one class at once --------------------------------------------------
#
# Per event, most of the first path's cost is not orjson's: it is the call, the locals and
# the checks. A run of consecutive events of one class is encoded by one generated loop
# that builds every event's sorted dict, checks all dict keys and nested values in one go,
# and hands the list to ONE orjson call. The list's bytes are ``[`` + the events' bytes
# joined by ``,`` + ``]``; each event's bytes start with ``{"<first field>":``, so splitting
# at ``},{"<first field>":`` gives them back. That separator cannot overlap itself (a
# field name holds no ``}`` or ``:``), so it occurs at the n-1 joins plus wherever a nested
# value happens to hold it; the split is used only when it yields exactly n pieces.
# Anything else -- a value the checks refuse, an orjson error, a nested occurrence -- and
# the run is encoded event by event, so the bytes are exactly ``fast_encode_payload``'s.

_NOT_SEEN = object()  # an identity cache that never matches before its first value


def _run_field(annotation: Any, v: str, i: int) -> tuple[str, list[str], list[str]]:
    """For one field read into local ``v`` inside the loop: (guard expression or "",
    statements in the loop, statements before it)."""
    ann = _annotation_text(annotation)
    guard = _GUARDS.get(ann)
    if guard is not None:
        return guard.format(v=v), [], []
    if ann.startswith("dict["):  # keys must be exact str, values plain JSON: checked once after the loop
        return f"{v}.__class__ is dict", [f"if {v}:", f"    kext({v})", f"    vext({v}.values())"], []
    if ann.startswith(("tuple[str,", "list[str]")):  # the items are checked with the dict keys
        return f"({v}.__class__ is tuple or {v}.__class__ is list)", [f"if {v}:", f"    kext({v})"], []
    attrs_class = ann[:1].isupper() and "[" not in ann
    optional_attrs = ann.startswith("Optional[") and ann[9:10].isupper() and "[" not in ann[9:]
    if attrs_class or optional_attrs:  # usually the same object in every event (an Emitter, None)
        return "", [f"if {v} is not c{i}:",
                    f"    c{i} = {v}",
                    f"    m = _memo_get(id({v}))",
                    f"    d{i} = m[1] if m is not None and m[0] is {v} else _json_value({v})",
                    f"{v} = d{i}"], [f"c{i} = d{i} = _NOT_SEEN"]
    return "", [f"{v} = _json_value({v})"], []


def _generate_run(cls: type) -> Callable[[Sequence[Any]], bytes]:
    fields = sorted(attrs.fields(cls), key=lambda a: a.name)
    head = ["def _run(events):", "    ds = []", "    add = ds.append", "    ks = []", "    kext = ks.extend",
            "    vs = []", "    vext = vs.extend"]
    body, guards, checks, items = ["    for obj in events:"], [], [], []
    for i, a in enumerate(fields):
        v = f"v{i}"
        body.append(f"        {v} = obj.{a.name}")
        guard, stmts, before = _run_field(a.type, v, i)
        if guard:
            guards.append(guard)
        checks += ["        " + line for line in stmts]
        head += ["    " + line for line in before]
        items.append(f"{json.dumps(a.name)}: {v}")
    if guards:
        body.append("        if not (" + " and ".join(f"({g})" for g in guards) + "):")
        body.append("            raise _Fallback()")
    body += checks
    body.append("        add({" + ", ".join(items) + "})")
    body += ["    if ks and not _STR_ONLY.issuperset(map(type, ks)):", "        raise _Fallback()",
             "    if vs:", "        _check_values(vs)",
             "    return _dumps(ds, option=_SORT)"]
    ns: dict[str, Any] = {"_json_value": _json_value, "_check_values": _check_values, "_memo_get": _DICT_MEMO.get,
                          "_STR_ONLY": _STR_ONLY, "_Fallback": _Fallback, "_NOT_SEEN": _NOT_SEEN,
                          "_dumps": _orjson.dumps, "_SORT": _orjson.OPT_SORT_KEYS}
    exec(compile("\n".join(head + body) + "\n", f"<fastcodec run {cls.__qualname__}>", "exec"), ns)  # field names only
    return ns["_run"]


# class -> (run encoder, the bytes each event starts with, the separator between events);
# None where the run path does not apply (no orjson, not attrs, no fields)
_RUNS: dict[type, tuple | None] = {}


def _run_path(cls: type) -> tuple | None:
    if cls in _RUNS:
        return _RUNS[cls]
    known = None
    if _orjson is not None and attrs.has(cls) and attrs.fields(cls):
        first_path(cls)  # registers memoisable attrs types
        start = b"{" + json.dumps(min(a.name for a in attrs.fields(cls))).encode("utf-8") + b":"
        known = (_generate_run(cls), start, b"}," + start)
    _RUNS[cls] = known
    return known


RUN_BATCH = 256  # events per orjson call: their dicts stay below the collector's threshold


def encode_run(cls: type, events: Sequence[Any]) -> list[bytes]:
    """``[fast_encode_payload(e) for e in events]`` for events all of exactly class ``cls``,
    with one orjson call per ``RUN_BATCH`` events where it can.

    Why not one call for the whole run: a call holds one new dict per event until it
    returns, and more than ~700 live new containers start a garbage collection (the first
    generation's threshold), which then walks all of them and promotes them; a 1,000-event
    call measured 0.4 us per event of collection, 256 at a time none."""
    n = len(events)
    known = _RUNS.get(cls) or _run_path(cls)
    if known is None or n < 2:
        return _one_by_one(cls, events)
    run, start, sep = known
    out: list[bytes] = []
    for i in range(0, n, RUN_BATCH):
        batch = events[i:i + RUN_BATCH]
        try:
            parts = run(batch)[1:-1].split(sep)
        except FALLBACK_ERRORS:
            parts = None
        if parts is None or len(parts) != len(batch):
            out += _one_by_one(cls, batch)
            continue
        parts[-1] = parts[-1][:-1]  # its closing "}"; every piece now lacks its "{<first field>": and "}"
        parts[0] = parts[0][len(start):]
        out += [b"%s%s}" % (start, p) for p in parts]
    return out


def _one_by_one(cls: type, events: Sequence[Any]) -> list[bytes]:
    encode = _ORJSON.get(cls) or first_path(cls)
    out = []
    for ev in events:
        try:
            out.append(encode(ev))
        except FALLBACK_ERRORS:
            out.append(_stdlib_path(ev, cls))
    return out


def class_runs(events: Sequence[Any]) -> list[tuple[type, int, int]]:
    """``(class, start, end)`` of each run of consecutive events of one class."""
    runs, i = [], 0
    for cls, group in groupby(map(type, events)):
        j = i + len(list(group))
        runs.append((cls, i, j))
        i = j
    return runs


def encode_many(events: Sequence[Any]) -> list[bytes]:
    """``[fast_encode_payload(e) for e in events]``, byte for byte, with one orjson call per
    run of consecutive events of one class."""
    if len(events) == 1:
        return [fast_encode_payload(events[0])]
    out: list[bytes] = []
    for cls, i, j in class_runs(events):
        out += encode_run(cls, events[i:j])
    return out


def chain_type_part(cls: type) -> bytes:
    """What the chain hash covers of an event's class: its type name and schema version
    (``type.encode() + b"\\x1f" + str(schema_version).encode()``)."""
    if not getattr(cls, "TYPE", None):
        raise StoreError(f"{cls.__qualname__} is not a registered event type (use @event_type)")
    return b"%s\x1f%d" % (cls.TYPE.encode("utf-8"), cls.VERSION)
