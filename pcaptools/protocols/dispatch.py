"""Which protocol observer watches a TCP connection, chosen from its first bytes.

:class:`ConnectionObserver` is the one observer the TCP layer feeds for every connection.
It holds the first bytes (of either direction) until they say TLS (a record header or an
SSLv2 ClientHello) or not; TLS goes to :class:`~.tls.TlsObserver`, whose plaintext goes to
the HTTP observer its ALPN names; anything else goes to :class:`~.detect.HttpDetector`,
which recognises HTTP/1.x and HTTP/2 (prior knowledge, or mid-connection) or gives up.
Once nothing will parse a connection (:attr:`ConnectionObserver.wants_bytes` is False),
the TCP layer stops reassembling it, so connections no parser wants cost no payload work.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MethodType
from weakref import proxy

from ..diagnostics import Diagnostics
from ._base import Direction, StreamChunk
from ._hold import Held
from .detect import HttpDetector, tls_inner_factory
from .tls import KeyLog, TlsObserver, looks_like_tls
from .websocket import websocket_factory


class ConnectionObserver:
    """Protocol sniffing and hand-off for one TCP connection. Never raises on wire data.

    ``feed`` and ``wants_bytes`` are attributes, not a method and a property: once the protocol
    is known, ``feed`` *is* the inner observer's ``feed`` (TLS: no extra call per chunk;
    cleartext HTTP: the chosen HTTP observer's, past the detector, once it has chosen) and
    ``wants_bytes`` a plain bool kept up to date.

    No reference cycle: while ``feed`` must still come back here (sniffing, or the detector
    undecided), it is bound to a weak proxy of the observer, never to the observer itself.
    So a connection's observers are freed by reference counting as soon as the TCP layer
    lets them go, not left for the cycle collector (a cycle per connection kept ~22 objects
    a connection alive until the end of the read, where one collection freed them all: 1.2 s
    at 30,000 HTTP connections)."""

    __slots__ = (
        "__weakref__", "_diag", "_held", "_keylog", "_midstream", "_probe", "feed", "inner",
        "kind", "tcp_stream", "wants_bytes",
    )

    feed: Callable[[StreamChunk], list[object]]
    """In-order bytes of one direction -> events (see :class:`~._base.Observer`)."""
    wants_bytes: bool
    """False once no observer will parse this connection's bytes."""

    def __init__(
        self, *, tcp_stream: int, diag: Diagnostics, keylog: KeyLog | None, midstream: bool = False
    ) -> None:
        """``midstream``: the capture started inside this connection (no SYN seen), so its first
        bytes need not be the start of a message."""
        self.tcp_stream = tcp_stream
        self._midstream = midstream
        self._diag = diag
        self._keylog = keylog
        self._held = Held(max_gaps=64)
        """chunks and gaps while undecided (a gap is dropped once 64 items are held)"""
        self._probe = [b"", b""]
        self.inner: TlsObserver | HttpDetector | None = None
        self.kind: str | None = None
        """None while undecided, then "tls" or "cleartext\""""
        self.wants_bytes = True
        self.feed = MethodType(ConnectionObserver._sniff, proxy(self))

    def _sniff(self, chunk: StreamChunk) -> list[object]:
        """``feed`` while the protocol is unknown (bound to a weak proxy: see the class)."""
        inner = self.inner
        if inner is not None:  # pragma: no cover - feed is rebound once inner is set
            return inner.feed(chunk)
        d = chunk.direction
        probe = self._probe[d]
        if len(probe) < 8:
            probe = self._probe[d] = probe + chunk.data[: 8 - len(probe)]
        verdict = looks_like_tls(probe)
        if verdict is None:
            self._held.chunk(chunk)
            return []
        return self._choose(verdict, chunk)

    def _cleartext_feed(self, chunk: StreamChunk) -> list[object]:
        """``feed`` of a cleartext connection while the detector is undecided: the detector's,
        then ``wants_bytes`` updated (bound to a weak proxy: see the class)."""
        inner = self.inner
        assert isinstance(inner, HttpDetector)
        out = inner.feed(chunk)
        self._update()
        return out

    def _update(self) -> None:
        """``wants_bytes`` from the inner observer, and ``feed`` bound past this observer (and
        past the detector) once nothing more is decided here: from then on the detector's
        ``wants_bytes`` changes only in ``gap``/``close``/``finish``, which update it, and its
        ``feed`` only passes each chunk to its chosen observer (or drops it)."""
        inner = self.inner
        if inner is None:
            return
        if isinstance(inner, HttpDetector):
            self.wants_bytes = inner.wants_bytes
            if inner.kind is not None:
                chosen = inner.inner
                self.feed = chosen.feed if chosen is not None else inner.feed
        else:
            self.wants_bytes = inner.wants_bytes

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        if self.inner is not None:
            out = self.inner.gap(direction, offset, nbytes, ts_ns, frame)
            self._update()
            return out
        self._held.gap(direction, offset, nbytes, ts_ns, frame)
        return []

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        inner = self.inner
        if inner is None and self._held:
            # fewer than 3 bytes seen in every direction: let the cleartext detector decide
            out = self._choose(False)
            inner = self.inner
        else:
            out = []
        if inner is not None:
            out += inner.close(direction, ts_ns, frame, at_eof=at_eof)
            self._update()
        return out

    @property
    def done(self) -> bool:
        """the chosen observer is done, or none was chosen and nothing is held (the stream
        contract's ``done``)"""
        inner = self.inner
        if inner is None:
            return not self._held
        return bool(getattr(inner, "done", False))

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        """End of capture: the last events of whatever is still open."""
        inner = self.inner
        if inner is None:
            return []
        out = inner.finish(ts_ns, frame)
        self._update()
        return out

    def _choose(self, tls: bool, chunk: StreamChunk | None = None) -> list[object]:
        """Make the inner observer and give it what was held, then ``chunk`` (the one that
        decided, never held)."""
        tcp_stream, diag = self.tcp_stream, self._diag
        if tls:
            self.kind = "tls"
            inner: TlsObserver | HttpDetector = TlsObserver(
                tcp_stream=tcp_stream, diag=diag, keylog=self._keylog,
                inner_factory=tls_inner_factory(
                    tcp_stream=tcp_stream, diag=diag,
                    websocket_factory=websocket_factory(tcp_stream=tcp_stream, diag=diag),
                ),
            )
            self.feed = inner.feed
        else:
            self.kind = "cleartext"
            inner = HttpDetector(
                tcp_stream=tcp_stream, diag=diag, midstream=self._midstream,
                websocket_factory=websocket_factory(tcp_stream=tcp_stream, diag=diag),
            )
            self.feed = MethodType(ConnectionObserver._cleartext_feed, proxy(self))
        self.inner = inner
        out = self._held.replay(inner) if self._held else []
        if chunk is not None:
            out += inner.feed(chunk)
        self._update()
        return out
