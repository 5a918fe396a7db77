"""Canonical JSON codec.

Canonical form: keys sorted, no whitespace, UTF-8, no NaN/Infinity (non-finite
floats are written as null). Tuples are written as lists. The same event always
encodes to the same bytes, which is what the hash chain is computed over.
"""

from __future__ import annotations

import json
import math
from typing import Any

import cattrs

from evo_events.base import Event, UnknownEventType, event_class


class CodecError(ValueError):
    """Bytes that are not a valid encoded event, or an event that cannot be encoded."""


_converter = cattrs.Converter()


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def encode_payload(event: Event) -> bytes:
    """The canonical bytes of an event's data (its fields, without type name)."""
    try:
        data = _finite(_converter.unstructure(event))
        return json.dumps(
            data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise CodecError(f"cannot encode {type(event).__name__}: {exc}") from exc


def decode_payload(type_name: str, payload: bytes | str | dict, schema_version: int | None = None) -> Event:
    """Rebuild an event from stored bytes, upcasting old schema versions first."""
    from evo_events.upcasters import upcast

    cls = event_class(type_name)
    if isinstance(payload, dict):
        data = payload
    else:
        try:
            data = json.loads(payload)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CodecError(f"{type_name}: stored payload is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise CodecError(f"{type_name}: stored payload is not a JSON object")
    version = cls.VERSION if schema_version is None else schema_version
    if version > cls.VERSION:
        raise UnknownEventType(type_name, version)
    if version < cls.VERSION:
        data = upcast(type_name, version, cls.VERSION, data)
    try:
        return _converter.structure(data, cls)
    except Exception as exc:  # cattrs raises a group of field errors
        raise CodecError(f"{type_name} v{version}: payload does not match the schema ({_describe(exc)})") from exc


def _describe(exc: BaseException) -> str:
    if hasattr(cattrs, "transform_error"):
        try:
            return "; ".join(cattrs.transform_error(exc))
        except Exception:
            pass
    return str(exc)


def encode(event: Event) -> dict[str, Any]:
    """Envelope used by exports: ``{"type", "v", "data"}``."""
    return {"type": event.TYPE, "v": event.VERSION, "data": json.loads(encode_payload(event))}


def decode(envelope: dict[str, Any]) -> Event:
    try:
        return decode_payload(envelope["type"], envelope["data"], envelope.get("v"))
    except KeyError as exc:
        raise CodecError(f"event envelope lacks {exc}") from None
