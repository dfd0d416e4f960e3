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

from ..diagnostics import Diagnostics
from ._base import Direction, StreamChunk
from ._hold import Held
from .detect import HttpDetector, tls_inner_factory
from .tls import KeyLog, TlsObserver, looks_like_tls
from .websocket import websocket_factory


class ConnectionObserver:
    """Protocol sniffing and hand-off for one TCP connection. Never raises on wire data.

    ``wants_bytes`` is an attribute, not a property: a plain bool kept up to date. It keeps no
    bound method of itself (that would be a reference cycle, freed only by the cycle
    collector): once the tracker lets a finished connection go, reference counting frees the
    observer and everything it holds at once."""

    __slots__ = (
        "_diag", "_held", "_inner_feed", "_keylog", "_midstream", "_probe", "inner", "kind",
        "tcp_stream", "wants_bytes",
    )

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
        self._inner_feed: Callable[[StreamChunk], list[object]] | None = None
        """the TLS observer's ``feed``, once the connection is TLS; the chosen HTTP observer's
        (or the detector's, when it gave up), once the cleartext detector has decided"""

    def feed(self, chunk: StreamChunk) -> list[object]:
        """In-order bytes of one direction -> events (see :class:`~._base.Observer`): the TLS
        observer's once the connection is TLS, the detector's once it is not, held until the
        first bytes say which."""
        f = self._inner_feed
        if f is not None:
            return f(chunk)
        if self.inner is not None:
            return self._cleartext_feed(chunk)
        return self._sniff(chunk)

    def _sniff(self, chunk: StreamChunk) -> list[object]:
        """``feed`` while the protocol is unknown."""
        self._held.chunk(chunk)
        d = chunk.direction
        probe = self._probe[d]
        if len(probe) < 8:
            probe = self._probe[d] = probe + chunk.data[: 8 - len(probe)]
        verdict = looks_like_tls(probe)
        if verdict is None:
            return []
        return self._choose(verdict)

    def _cleartext_feed(self, chunk: StreamChunk) -> list[object]:
        """``feed`` of a cleartext connection: the detector's, then ``wants_bytes`` updated."""
        inner = self.inner
        assert isinstance(inner, HttpDetector)
        out = inner.feed(chunk)
        self._update()
        return out

    def _update(self) -> None:
        """``wants_bytes`` from the inner observer; once the cleartext detector has decided,
        ``feed`` goes straight to the observer it chose (its ``feed`` would only pass each
        chunk on, or drop it, and its ``wants_bytes`` changes only in ``gap``/``close``/
        ``finish``, which update it)."""
        inner = self.inner
        self.wants_bytes = inner is None or inner.wants_bytes
        if self._inner_feed is None and isinstance(inner, HttpDetector) \
                and inner.kind is not None:
            chosen = inner.inner
            self._inner_feed = chosen.feed if chosen is not None else inner.feed

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

    def _choose(self, tls: bool) -> list[object]:
        if tls:
            self.kind = "tls"
            inner: TlsObserver | HttpDetector = TlsObserver(
                tcp_stream=self.tcp_stream, diag=self._diag, keylog=self._keylog,
                inner_factory=tls_inner_factory(
                    tcp_stream=self.tcp_stream, diag=self._diag,
                    websocket_factory=websocket_factory(
                        tcp_stream=self.tcp_stream, diag=self._diag),
                ),
            )
        else:
            self.kind = "cleartext"
            inner = HttpDetector(
                tcp_stream=self.tcp_stream, diag=self._diag, midstream=self._midstream,
                websocket_factory=websocket_factory(tcp_stream=self.tcp_stream, diag=self._diag),
            )
        self.inner = inner
        if tls:
            self._inner_feed = inner.feed
        out = self._held.replay(inner)
        self._update()
        return out
