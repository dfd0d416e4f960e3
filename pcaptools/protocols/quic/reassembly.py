"""The QUIC side of :mod:`.streams`: STREAM frames of one connection reassembled per stream
and direction and handed, in order and once, to the application observer that
``REGISTRY.quic_app(alpn)`` returns for the connection's negotiated ALPN.

- Out of order: a frame ahead of the delivered point waits (at most
  :data:`MAX_QUIC_STREAM_BUFFER` bytes per stream and direction); when that is exceeded the
  missing range is reported as a gap (``stream_gap``) and the waiting bytes are delivered.
- Duplicates (retransmitted frames) are dropped: the observer gets each byte once.
- ``fin``: delivered with the last byte (or alone, with empty data) once every byte before
  the final size arrived.
- RESET_STREAM: ``stream_reset``; what was not delivered then is not delivered.
- The end (CONNECTION_CLOSE, or the end of the capture): the bytes still waiting behind a hole
  are delivered after a gap, a stream whose FIN was seen but not all its bytes gets a last gap,
  then ``finish``.
- The boundary: an exception in the observer becomes a ``quic.app_observer_error`` row and the
  observer gets nothing more; QUIC goes on.

Without an entry for the ALPN (or with no ALPN), the streams are counted only: no data is held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...diagnostics import Diagnostics
from ...tcp.stream import Direction
from .ranges import RangeSet
from .streams import QuicAppContext, QuicStreamObserver

__all__ = ["MAX_QUIC_STREAMS", "MAX_QUIC_STREAM_BUFFER", "QuicStreamAssembler"]

MAX_QUIC_STREAM_BUFFER = 1 << 20
"""bytes of one stream and direction held ahead of a hole before it is reported as a gap"""
MAX_QUIC_STREAMS = 100_000
"""streams (per direction) tracked per QUIC connection; frames of more are counted only"""

_DIRS = (Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT)


class _Half:
    """One stream in one direction."""

    __slots__ = (
        "bytes",
        "counted",
        "delivered",
        "dup_bytes",
        "ended",
        "fin_at",
        "gaps",
        "pending",
        "pending_bytes",
        "reset",
    )

    def __init__(self) -> None:
        self.delivered = 0
        """stream offset of the first byte not yet delivered"""
        self.pending: dict[int, bytes] = {}
        """offset -> data waiting behind a hole"""
        self.pending_bytes = 0
        self.fin_at: int | None = None
        """final size, once a FIN (or RESET_STREAM) said it"""
        self.bytes = 0
        """distinct bytes seen (delivered or waiting)"""
        self.dup_bytes = 0
        """bytes of frames that repeated bytes already seen"""
        self.gaps = 0
        self.reset = False
        self.ended = False
        """fin delivered, or reset"""
        self.counted: RangeSet | None = None
        """offsets seen, when the stream is counted only (no observer)"""


class QuicStreamAssembler:
    """The streams of one QUIC connection. ``factory``: the application observer factory
    (None: count only), created lazily on the first byte ready to deliver."""

    __slots__ = ("_halves", "_obs", "ctx", "diag", "factory", "failed", "max_buffer",
                 "resets", "stream_counts", "streams_capped")

    def __init__(self, ctx: QuicAppContext, factory: Callable[[Any], Any] | None, *,
                 max_buffer: int = MAX_QUIC_STREAM_BUFFER) -> None:
        self.ctx = ctx
        self.diag: Diagnostics = ctx.diag
        self.factory = factory
        self.max_buffer = max_buffer
        self._obs: QuicStreamObserver | None = None
        self.failed = False
        self._halves: tuple[dict[int, _Half], dict[int, _Half]] = ({}, {})
        self.resets = 0
        self.stream_counts = [0, 0]
        self.streams_capped = False

    @property
    def observer(self) -> QuicStreamObserver | None:
        """the application observer once created (None: not yet, or no entry for the ALPN);
        after ``failed`` it holds what it saw before the error"""
        return self._obs

    # ------------------------------------------------------------------ the boundary

    def _observer(self, ts_ns: int, frame: int) -> QuicStreamObserver | None:
        if self.failed or self.factory is None:
            return None
        if self._obs is None:
            try:
                self._obs = self.factory(self.ctx)
            except Exception as exc:
                self._fail("creating the observer", exc, ts_ns, frame)
                return None
        return self._obs

    def _fail(self, what: str, exc: Exception, ts_ns: int, frame: int) -> None:
        self.failed = True
        self.diag.add("quic.app_observer_error",
                      f"connection {self.ctx.connection} ({self.ctx.alpn}): "
                      f"{type(exc).__name__} {what}: {str(exc)[:200]}; its streams are "
                      "counted from here, not parsed", ts_ns=ts_ns, frame=frame)

    def _deliver(self, sid: int, d: int, offset: int, data: bytes, fin: bool, ts_ns: int,
                 frame: int) -> None:
        obs = self._observer(ts_ns, frame)
        if obs is None:
            return
        try:
            obs.stream_data(sid, _DIRS[d], offset, data, fin, ts_ns, frame)
        except Exception as exc:
            self._fail("in stream_data", exc, ts_ns, frame)

    def _gap(self, sid: int, d: int, offset: int, nbytes: int, ts_ns: int, frame: int) -> None:
        obs = self._observer(ts_ns, frame)
        if obs is None:
            return
        try:
            obs.stream_gap(sid, _DIRS[d], offset, nbytes, ts_ns, frame)
        except Exception as exc:
            self._fail("in stream_gap", exc, ts_ns, frame)

    # ------------------------------------------------------------------ frames

    def _half(self, sid: int, d: int) -> _Half | None:
        halves = self._halves[d]
        h = halves.get(sid)
        if h is None:
            if len(halves) >= MAX_QUIC_STREAMS:
                if not self.streams_capped:
                    self.streams_capped = True
                    self.diag.add("quic.too_many_streams",
                                  f"connection {self.ctx.connection}: more than "
                                  f"{MAX_QUIC_STREAMS} streams in one direction; frames of "
                                  "later streams are not counted or delivered")
                return None
            h = halves[sid] = _Half()
            self.stream_counts[d] += 1
        return h

    @property
    def streams(self) -> int:
        """distinct stream ids seen (either direction)"""
        return len(self._halves[0].keys() | self._halves[1].keys())

    def stream_bytes(self, d: int) -> int:
        return sum(h.bytes for h in self._halves[d].values())

    def dup_bytes(self, d: int) -> int:
        return sum(h.dup_bytes for h in self._halves[d].values())

    def gaps(self) -> int:
        return sum(h.gaps for hs in self._halves for h in hs.values())

    def stream(self, d: int, sid: int, offset: int, data: bytes, fin: bool, ts_ns: int,
               frame: int) -> None:
        """One STREAM frame sent in direction ``d``."""
        h = self._half(sid, d)
        if h is None or h.ended:
            if h is not None:
                h.dup_bytes += len(data)
            return
        end = offset + len(data)
        if fin and h.fin_at is None:
            h.fin_at = end
        if self.factory is None or self.failed:  # counted only: the offsets seen
            if data:
                rs = h.counted
                if rs is None:
                    rs = h.counted = RangeSet()
                    if h.delivered:
                        rs.add(0, h.delivered - 1)
                before = rs.count()
                rs.add(offset, end - 1)
                new = rs.count() - before
                h.bytes += new
                h.dup_bytes += len(data) - new
            return
        if end <= h.delivered:
            h.dup_bytes += len(data)
            if fin and h.delivered == end:
                self._end(sid, d, h, ts_ns, frame)
            return
        if offset < h.delivered:
            h.dup_bytes += h.delivered - offset
            data = data[h.delivered - offset:]
            offset = h.delivered
        if offset > h.delivered:
            old = h.pending.get(offset)
            if old is not None and len(old) >= len(data):
                h.dup_bytes += len(data)
                return
            h.pending[offset] = data
            h.pending_bytes += len(data) - (len(old) if old is not None else 0)
            if h.pending_bytes > self.max_buffer:
                self._skip_hole(sid, d, h, ts_ns, frame)
            return
        h.bytes += len(data)
        h.delivered = end
        self._emit(sid, d, h, offset, data, ts_ns, frame)
        self._drain(sid, d, h, ts_ns, frame)

    def _emit(self, sid: int, d: int, h: _Half, offset: int, data: bytes, ts_ns: int,
              frame: int) -> None:
        fin = h.fin_at is not None and h.delivered >= h.fin_at
        if data or fin:
            self._deliver(sid, d, offset, data, fin, ts_ns, frame)
        if fin:
            h.ended = True
            h.pending.clear()
            h.pending_bytes = 0

    def _end(self, sid: int, d: int, h: _Half, ts_ns: int, frame: int) -> None:
        if not h.ended:
            h.ended = True
            self._deliver(sid, d, h.delivered, b"", True, ts_ns, frame)

    def _drain(self, sid: int, d: int, h: _Half, ts_ns: int, frame: int) -> None:
        """Deliver the waiting pieces that are now contiguous."""
        pending = h.pending
        while pending and not h.ended:
            best = None
            for off in pending:
                if off <= h.delivered and (best is None or off + len(pending[off]) >
                                           best + len(pending[best])):
                    best = off
            if best is None:
                return
            piece = pending.pop(best)
            h.pending_bytes -= len(piece)
            skip = h.delivered - best
            if skip >= len(piece):
                h.dup_bytes += len(piece)
                continue
            h.dup_bytes += skip
            data = piece[skip:]
            start = h.delivered
            h.bytes += len(data)
            h.delivered = start + len(data)
            self._emit(sid, d, h, start, data, ts_ns, frame)

    def _skip_hole(self, sid: int, d: int, h: _Half, ts_ns: int, frame: int) -> None:
        """The hole before the first waiting piece is reported as a gap, then the pieces."""
        first = min(h.pending)
        nbytes = first - h.delivered
        h.gaps += 1
        self._gap(sid, d, h.delivered, nbytes, ts_ns, frame)
        h.delivered = first
        self._drain(sid, d, h, ts_ns, frame)

    def reset(self, d: int, sid: int, error_code: int, final_size: int, ts_ns: int,
              frame: int) -> None:
        """RESET_STREAM sent in direction ``d``."""
        self.resets += 1
        h = self._half(sid, d)
        if h is None or h.ended:
            return
        h.ended = h.reset = True
        h.fin_at = final_size
        h.pending.clear()
        h.pending_bytes = 0
        obs = self._observer(ts_ns, frame)
        if obs is None:
            return
        try:
            obs.stream_reset(sid, _DIRS[d], error_code, final_size, ts_ns, frame)
        except Exception as exc:
            self._fail("in stream_reset", exc, ts_ns, frame)

    def finish(self, ts_ns: int, frame: int) -> None:
        """The connection ended: flush what waits behind holes, then ``finish``."""
        for d in (0, 1):
            for sid, h in self._halves[d].items():
                if h.ended:
                    continue
                while h.pending and not h.ended:
                    self._skip_hole(sid, d, h, ts_ns, frame)
                if not h.ended and h.fin_at is not None and h.delivered < h.fin_at:
                    h.gaps += 1
                    self._gap(sid, d, h.delivered, h.fin_at - h.delivered, ts_ns, frame)
                    h.delivered = h.fin_at
                    self._end(sid, d, h, ts_ns, frame)
        if self._obs is not None and not self.failed:
            try:
                self._obs.finish(ts_ns, frame)
            except Exception as exc:
                self._fail("in finish", exc, ts_ns, frame)
        self.failed = True  # nothing more after finish
