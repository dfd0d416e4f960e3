"""The byte-stream contract of the TCP layer: what it hands to the protocol observers.

The TCP layer (:class:`~.tracker.TcpTracker`) reassembles the connections a protocol layer
asks for and feeds each one's in-order bytes to one :class:`StreamObserver` as
:class:`StreamChunk` objects, reports bytes never captured through :meth:`~StreamObserver.gap`
and the end of a direction through :meth:`~StreamObserver.close`. Every protocol observer
implements this contract in full (TLS, HTTP/1.x, HTTP/2, WebSocket, DNS over TCP, the
protocol detectors), so a layer that carries another (TLS -> HTTP/2, HTTP/1.1 Upgrade ->
WebSocket) calls its inner observer the same way the tracker calls it, and the inner
observer cannot tell whether TLS was there.

Everything an observer returns is a list of :class:`Event` objects: small frozen
dataclasses (nouns for wire units: ``TlsRecord``, ``Http2Frame``; past-tense verbs for state
changes: ``HandshakeCompleted``, ``StreamEnded``) that carry ``ts_ns`` and ``frame``; the
table builders turn them into rows.

An observer keeps one :class:`StreamCursor` per direction (the next offset it expects) to
line chunks up with what it has seen: a chunk beyond it means bytes it was never given, a
chunk before it overlaps bytes it already has.

This module sits below ``protocols/``: the TCP layer owns its output types. :class:`StreamChunk`
and :class:`Direction` are defined in modules of their own (:mod:`.chunk`, which the compiled
build makes an extension type, and :mod:`.direction`) and exported here.
"""

from __future__ import annotations

from typing import Protocol

from .chunk import StreamChunk, new_chunk
from .direction import Direction

__all__ = ["Direction", "Event", "StreamChunk", "StreamCursor", "StreamObserver", "new_chunk"]


class Event:
    """Base class of every event a protocol observer returns.

    Subclasses are frozen, slotted dataclasses; every one has ``ts_ns`` (capture time, integer
    ns since the epoch) and ``frame`` (Wireshark's frame.number of the packet it was seen in).
    The base adds no fields and no per-instance cost (``__slots__ = ()``)."""

    __slots__ = ()

    ts_ns: int
    frame: int


class StreamObserver(Protocol):
    """What the TCP layer feeds a connection's in-order bytes to, and what every protocol
    observer is.

    One instance per TCP connection (and protocol), watching both directions. It is a
    *watcher*, not a participant: it never raises on wire data, copes with captures that
    start mid-connection, and records what it could not parse through the Diagnostics sink
    it was built with (code, detail, frame, tcp_stream, direction), then resynchronises or
    marks that direction desynchronised (bytes still counted, no longer parsed). The tracker
    wraps it in a guard that turns an exception (a bug) into a ``tcp.observer_error`` row.

    Optional: a ``done`` property (read with a default of False, so an observer without it
    is simply never let go early). True once everything the observer will say about the
    bytes it was given has been said: ``finish`` would return nothing and report nothing,
    and a ``gap`` or ``close`` would add no event and no warning (a connection's observers
    are done once both directions closed and they emitted their last events). The tracker
    lets a done observer go once both directions of its connection ended (a FIN reached, or
    an RST) with nothing held back for it, so that the connection can be frozen
    (:mod:`~.frozen`); payload that arrives after that end is reported
    (``tcp.payload_after_release``), not parsed.

    Optional too: packing while idle (:mod:`~.packing`). An observer whose connection went
    idle is packed with :mod:`pickle` and made again at the connection's next segment, if
    every object it holds is of a class of pcaptools (or ``hpack``, or Python's containers),
    or of a class that says ``_packing_ = "packable"``; objects it shares with other
    connections (a sink, a table of its own) must say ``_packing_ = "shared"`` on their class,
    so that they are referred to, not copied. An observer holding anything else is never
    packed, and keeps its live state to the end, as before.
    """

    @property
    def wants_bytes(self) -> bool:
        """False once this observer will parse no more of the connection's bytes: the TCP
        layer then stops reassembling it (gaps and closes are still reported)."""
        ...

    def feed(self, chunk: StreamChunk) -> list[object]:
        """In-order bytes of one direction."""
        ...

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        """``nbytes`` bytes at ``offset`` of ``direction`` were never captured."""
        ...

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        """``direction`` ended: FIN or RST seen (``at_eof`` False), or the capture ended with
        the direction still open (``at_eof`` True: an unfinished message is no anomaly)."""
        ...

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        """End of the capture: the last events of whatever is still open (called once,
        after every close)."""
        ...


class StreamCursor:
    """The next stream offset one direction of an observer expects, and how a chunk lines up
    with it: the offset/gap/overlap bookkeeping every observer needs once, written once.

    The TCP layer delivers each direction in order, so a chunk normally starts exactly at
    :attr:`next_offset`; the hot path compares and advances inline, and calls :meth:`align`
    only when it does not::

        cur = self._cursor[chunk.direction]  # (or a per-direction state that subclasses it)
        data, off = chunk.data, chunk.offset
        if off != cur.next_offset:
            hole, data = cur.align(off, data)
            if hole:  # gap() calls skip(): the cursor moves to off
                out += self.gap(chunk.direction, off - hole, hole, chunk.ts_ns, chunk.frame)
        cur.next_offset += len(data)
        # ... parse data ...

    and ``gap()`` calls :meth:`skip`, whose result is the number of bytes it should treat
    as lost. The semantics, for a chunk or gap at ``offset`` with the cursor at ``next``:

    * ``offset == next``: in step; a chunk is parsed whole, a gap of ``n`` bytes loses ``n``.
    * ``offset > next``: a chunk is first a gap of ``offset - next`` bytes at ``next``; a gap
      loses its ``n`` bytes (the cursor jumps to ``offset + n``).
    * ``offset < next``: the bytes before ``next`` were seen already: a chunk is trimmed to
      the bytes after them (nothing left: nothing to parse), a gap loses only the bytes
      after them (none, if it ends at or before ``next``; the cursor never moves back).
    * ``next == -1`` (nothing seen yet: a capture may start inside a connection): whatever
      comes first is accepted, a chunk whole, a gap of ``n`` bytes losing ``n``.

    Subclass it (it has ``__slots__``) to keep the cursor in the per-direction state an
    observer already has, at the cost of one attribute. An observer whose hot path inlines
    this logic must still move :attr:`next_offset` exactly as these methods do (the tests of
    each observer check it against a StreamCursor)."""

    __slots__ = ("next_offset",)

    def __init__(self, next_offset: int = -1) -> None:
        self.next_offset = next_offset
        """stream offset of the next byte expected; -1 until the first chunk or gap sets it
        (a capture may start inside a connection: whatever comes first is accepted)"""

    def align(self, offset: int, data: bytes) -> tuple[int, bytes]:
        """Line up a chunk whose first byte is at stream ``offset``.

        Returns ``(hole, data)``: ``hole`` > 0 bytes between the cursor and ``offset`` never
        arrived: the cursor stays at the first of them, and the caller reports them as a gap
        of ``hole`` bytes at ``offset - hole`` (``next_offset``) before parsing, whose
        :meth:`skip` moves the cursor to ``offset`` and returns ``hole``. Otherwise the cursor
        is at the first byte of the ``data`` returned: the chunk without the bytes before the
        cursor, already seen (``b""`` when all of it was). Either way the caller then parses
        ``data`` and adds its length. Never raises."""
        nxt = self.next_offset
        if nxt < 0 or offset == nxt:
            self.next_offset = offset
            return 0, data
        if offset > nxt:
            return offset - nxt, data
        overlap = nxt - offset
        if overlap >= len(data):
            return 0, b""
        return 0, data[overlap:]

    def skip(self, offset: int, nbytes: int) -> int:
        """``nbytes`` at ``offset`` were never captured: the cursor moves past them (never
        back). Returns how many of them lie beyond the cursor, the bytes the caller loses
        (``nbytes`` when ``offset`` is at or past the cursor, or nothing was seen yet)."""
        end = offset + nbytes
        nxt = self.next_offset
        if end <= nxt:
            return 0
        self.next_offset = end
        return end - (offset if offset > nxt else nxt)
