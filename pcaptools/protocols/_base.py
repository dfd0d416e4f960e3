"""Shared vocabulary of the protocol observers, owned by the TCP layer
(:mod:`pcaptools.tcp.stream`) and re-exported here under its historical import path, and
:func:`slot_builder`, the fast way to build the events an observer emits once per record."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, TypeVar

from ..tcp.stream import Direction, Event, StreamChunk, StreamObserver

Observer = StreamObserver
"""the one observer contract (:class:`~pcaptools.tcp.stream.StreamObserver`), old name"""

__all__ = ["Direction", "Event", "Observer", "StreamChunk", "StreamObserver", "slot_builder"]

_T = TypeVar("_T")


def slot_builder(cls: type[_T], names: tuple[str, ...]) -> Callable[[Sequence[Any]], _T]:
    """A function that builds a ``cls`` (a frozen, slotted dataclass) from the values of its
    fields, given in ``names`` order, by setting its slots: the object
    ``cls(**dict(zip(names, values)))`` would be, about three times faster (a frozen
    dataclass's ``__init__`` goes through ``object.__setattr__`` once per field), for events
    built once per frame or message.

    Raises TypeError at import time, not later, when ``names`` are not exactly the fields of
    ``cls`` in order, or ``cls`` has a ``__post_init__`` (which this would skip)."""
    if tuple(f.name for f in fields(cls)) != names:  # type: ignore[arg-type]
        raise TypeError(f"{cls.__name__} fields are not {names}")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__")
    setters = tuple(vars(cls)[name].__set__ for name in names)
    new = object.__new__
    n = len(names)

    def build(values: Sequence[Any]) -> _T:
        if len(values) != n:
            raise TypeError(f"{cls.__name__} takes {n} values, got {len(values)}")
        obj: _T = new(cls)
        for setter, value in zip(setters, values, strict=False):  # (length checked above)
            setter(obj, value)
        return obj

    build.__qualname__ = build.__name__ = f"new_{cls.__name__}"
    return build
