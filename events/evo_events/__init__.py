"""The log's contract: typed events, the canonical codec, upcasters and the hash chain.

This package imports attrs/cattrs only. It is installed as ``evo_events`` so
that it never collides with other top-level ``events`` packages.
"""

from evo_events.base import (
    Emitter,
    Event,
    EventTypeError,
    UnknownEventType,
    event_type,
    event_class,
    new_id,
    registered_types,
)
from evo_events.chain import GENESIS, ChainBreak, chain_hash, verify_chain
from evo_events.codec import CodecError, decode, decode_payload, encode, encode_payload
from evo_events.upcasters import UpcastError, register_upcaster, upcast
from evo_events.types import *  # noqa: F401,F403  (the standard event types register on import)
from evo_events.types import __all__ as _type_names

__all__ = [
    "Emitter",
    "Event",
    "EventTypeError",
    "UnknownEventType",
    "event_type",
    "event_class",
    "new_id",
    "registered_types",
    "GENESIS",
    "ChainBreak",
    "chain_hash",
    "verify_chain",
    "CodecError",
    "decode",
    "decode_payload",
    "encode",
    "encode_payload",
    "UpcastError",
    "register_upcaster",
    "upcast",
    *_type_names,
]
