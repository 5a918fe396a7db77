"""Event base class and the registry of stable type names."""

from __future__ import annotations

import uuid
from typing import ClassVar, TypeVar

import attrs


class EventTypeError(ValueError):
    """An event class was declared or registered incorrectly."""


class UnknownEventType(LookupError):
    """A stored event names a type that no installed code registered."""

    def __init__(self, name: str, version: int | None = None) -> None:
        self.name, self.version = name, version
        where = f" (schema v{version})" if version is not None else ""
        super().__init__(
            f"unknown event type {name!r}{where}: install the plugin that defines it, "
            "or check that the log was written by EvoTrainer"
        )


def new_id() -> str:
    """A fresh event id: 32 lowercase hex characters."""
    return uuid.uuid4().hex


@attrs.frozen
class Emitter:
    """Who emitted an event: a plugin (or ``evo_core``) name and its version."""

    name: str
    version: str


CORE = Emitter("evo_core", "0")


@attrs.frozen(kw_only=True)
class Event:
    """Base of every event.

    Subclasses are ``@event_type("evo.Name", version=N)`` + ``@attrs.frozen(kw_only=True)``.
    ``caused_by`` holds the ids of the evidence events this one rests on.
    """

    TYPE: ClassVar[str] = ""
    VERSION: ClassVar[int] = 0

    run_id: str
    event_id: str = attrs.field(factory=new_id)
    caused_by: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    emitted_by: Emitter = CORE


_REGISTRY: dict[str, type[Event]] = {}

E = TypeVar("E", bound=type[Event])


def event_type(name: str, version: int = 1):
    """Class decorator: give an event class its stable name and schema version.

    A name may be registered once; registering the same class again is a no-op,
    so re-imports are harmless, but two classes cannot share a name.
    """
    if not name or "." not in name:
        raise EventTypeError(f"event type name {name!r} must be namespaced, e.g. 'evo.Thing'")
    if not isinstance(version, int) or version < 1:
        raise EventTypeError(f"event type {name!r}: schema version must be a positive int")

    def wrap(cls: E) -> E:
        if not (isinstance(cls, type) and issubclass(cls, Event)):
            raise EventTypeError(f"{cls!r} is not an Event subclass")
        cls.TYPE = name
        cls.VERSION = version
        register(cls)
        return cls

    return wrap


def register(cls: type[Event]) -> None:
    """Register an event class under its ``TYPE`` (plugins call this through the hook)."""
    if not cls.TYPE:
        raise EventTypeError(f"{cls.__qualname__} has no type name; use @event_type")
    known = _REGISTRY.get(cls.TYPE)
    if known is not None and known is not cls and known.__qualname__ != cls.__qualname__:
        raise EventTypeError(
            f"event type {cls.TYPE!r} is already registered by {known.__module__}.{known.__qualname__}"
        )
    _REGISTRY[cls.TYPE] = cls


def event_class(name: str) -> type[Event]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownEventType(name) from None


def registered_types() -> dict[str, type[Event]]:
    return dict(_REGISTRY)
