"""The :class:`StreamChunk`: in-order bytes of one direction, what every observer is fed.

Part of the byte-stream contract of :mod:`pcaptools.tcp.stream` (which exports it), in a
module of its own so that the compiled build (``chunk.pxd``) can make it an extension type
without compiling the rest of the contract. One is made for every delivered piece of a
stream (the reassembler's in-order segments, TLS plaintext, the bytes an HTTP/1.1 upgrade
hands on), so what it costs to make one counts: :func:`new_chunk` makes it with one call
(compiled, one C allocation and five field stores; in Python, five slot stores), where the
keyword ``__init__`` of a frozen dataclass made one Python call per field.

It behaves as the frozen dataclass it was: keyword-only construction, ``==`` and ``hash`` on
the five fields, the dataclass ``repr``, and assigning a field raises
:class:`dataclasses.FrozenInstanceError`. It pickles (an idle connection's held chunks are
packed, :mod:`pcaptools.tcp.packing`) through :func:`new_chunk`.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any

try:  # (True in the compiled build only: see StreamChunk.__init__)
    import cython

    _COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is not installed: pure Python
    _COMPILED = False

from .direction import Direction

__all__ = ["StreamChunk", "new_chunk"]

class StreamChunk:
    """In-order bytes of one direction of a TCP connection.

    Retransmitted and overlapping bytes are delivered once; bytes never captured
    arrive through a gap notification, never as silent zeros.
    """

    __slots__ = ("direction", "data", "ts_ns", "frame", "offset")

    direction: Direction
    data: bytes
    ts_ns: int
    """capture time of the segment that delivered the last byte"""
    frame: int
    """Wireshark frame.number of that segment"""
    offset: int
    """stream offset (relative sequence number - 1) of the first byte of ``data``"""

    def __init__(self, *, direction: Direction, data: bytes, ts_ns: int, frame: int,
                 offset: int) -> None:
        if _COMPILED:  # (C struct fields: read-only to Python, set here in C)
            self.direction = direction
            self.data = data
            self.ts_ns = ts_ns
            self.frame = frame
            self.offset = offset
        else:
            _set_direction(self, direction)
            _set_data(self, data)
            _set_ts_ns(self, ts_ns)
            _set_frame(self, frame)
            _set_offset(self, offset)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def _key(self) -> tuple[Any, ...]:
        return (self.direction, self.data, self.ts_ns, self.frame, self.offset)

    def __eq__(self, other: object) -> bool:
        if type(other) is not StreamChunk:
            return NotImplemented
        return self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        if type(other) is not StreamChunk:
            return NotImplemented
        return self._key() != other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"StreamChunk(direction={self.direction!r}, data={self.data!r}, "
                f"ts_ns={self.ts_ns!r}, frame={self.frame!r}, offset={self.offset!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return new_chunk, self._key()


if not _COMPILED:
    # the slot descriptors: the Python build sets the fields through them, past __setattr__
    _slots: dict[str, Any] = dict(vars(StreamChunk))
    _set_direction = _slots["direction"].__set__
    _set_data = _slots["data"].__set__
    _set_ts_ns = _slots["ts_ns"].__set__
    _set_frame = _slots["frame"].__set__
    _set_offset = _slots["offset"].__set__
    _new_object = object.__new__


def new_chunk(direction: Direction, data: bytes, ts_ns: int, frame: int,
              offset: int) -> StreamChunk:
    """``StreamChunk(direction=direction, data=data, ts_ns=ts_ns, frame=frame,
    offset=offset)`` with positional arguments and no keyword parsing: the same object."""
    if _COMPILED:
        c: StreamChunk = StreamChunk.__new__(StreamChunk)
        c.direction = direction
        c.data = data
        c.ts_ns = ts_ns
        c.frame = frame
        c.offset = offset
        return c
    c = _new_object(StreamChunk)
    _set_direction(c, direction)
    _set_data(c, data)
    _set_ts_ns(c, ts_ns)
    _set_frame(c, frame)
    _set_offset(c, offset)
    return c
