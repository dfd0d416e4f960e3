"""``repr`` and ``==`` for the per-frame record classes written with ``__slots__`` instead of
``@dataclass(slots=True)`` (:class:`~pcaptools.io.frame.RawFrame`,
:class:`~pcaptools.net.packet.TcpSegment`, :class:`~pcaptools.tcp.analysis.SegmentAnalysis`):
the compiled build makes them extension types (their ``.pxd``), which Cython cannot make from a
``slots=True`` dataclass. Both behave as the dataclass's did."""

from __future__ import annotations

from typing import Any


def slots_repr(obj: Any) -> str:
    """``Name(field=value, ...)`` in ``__slots__`` order, as a dataclass's repr."""
    fields = ", ".join(f"{n}={getattr(obj, n)!r}" for n in obj.__slots__)
    return f"{type(obj).__qualname__}({fields})"


def slots_eq(obj: Any, other: Any) -> Any:
    """The fields equal, in ``__slots__`` order, for an object of the same class (a dataclass's
    ``==``); NotImplemented otherwise."""
    if other.__class__ is not obj.__class__:
        return NotImplemented
    return all(getattr(obj, n) == getattr(other, n) for n in obj.__slots__)
