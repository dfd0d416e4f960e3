"""Which HTTP observer a byte stream needs: from its first bytes, or from the TLS ALPN.

- :func:`detect` looks at the first bytes of one direction: the HTTP/2 connection preface
  (client) or a SETTINGS frame (server) -> ``"http2"``; an HTTP/1.x request line (client)
  or status line (server) -> ``"http1"``; a prefix of one of those -> ``"need_more"``;
  anything else -> ``"unknown"``. With ``midstream=True`` (capture started inside the
  connection) it also accepts an HTTP/1.x start line at any line start, and two chained
  plausible HTTP/2 frame headers at offset 0.
- :func:`observer_for` builds the observer for a detected kind or an ALPN protocol id (the
  registry's entries: :mod:`.registry`, :mod:`.builtin`).
- :class:`HttpDetector` is an observer that holds the first bytes of both directions until
  :func:`detect` decides, then creates the right observer, replays what it held and passes
  everything on: wire it to every TCP connection that might carry cleartext HTTP (and to
  TLS connections without ALPN). Undecided after ``max_probe_bytes`` (or at close), it
  gives up quietly: the connection is not HTTP.
- :func:`tls_inner_factory` is the ``inner_factory`` the TLS observer takes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Final, Literal

from ..diagnostics import Diagnostics
from . import builtin  # noqa: F401  (fills REGISTRY with the built-in protocols)
from ._base import Direction, Observer, StreamChunk
from ._hold import Held
from .http1 import UpgradeFactory
from .http2 import PREFACE, plausible_frame_header
from .registry import REGISTRY

__all__ = ["ALPN_KINDS", "Detection", "HttpDetector", "detect", "observer_for", "tls_inner_factory"]

Detection = Literal["http1", "http2", "need_more", "unknown"]

#: ALPN protocol id -> observer kind (RFC 7301 registry names): the registry's table
#: (:class:`~.registry.AlpnEntry` rows of :mod:`.builtin`)
ALPN_KINDS: Final = REGISTRY.alpn_kinds

_REQ = re.compile(rb"[A-Z][A-Z_-]{0,31} [^\s]{1,8192} HTTP/1\.[0-9]\r?\n")
#: an HTTP/0.9 simple request (``GET /path``, no version), which tshark counts as a request
_REQ09 = re.compile(rb"GET [^\s]{1,8192}[ \t]*\r?\n")
_REQ_PREFIX = re.compile(
    rb"[A-Z][A-Z_-]{0,31}(?: (?:[^\s]{1,8192}"
    rb"(?: (?:H(?:T(?:T(?:P(?:/(?:1(?:\.(?:[0-9]\r?)?)?)?)?)?)?)?)?)?)?)?"
)
_RESP = re.compile(rb"HTTP/1\.[0-9] [0-9]{3}[ \r\n]")
_RESP_PREFIX = re.compile(
    rb"H(?:T(?:T(?:P(?:/(?:1(?:\.(?:[0-9](?: (?:[0-9](?:[0-9](?:[0-9])?)?)?)?)?)?)?)?)?)?)?"
)
_RESP_LINE_ANYWHERE = re.compile(rb"(?:^|(?<=\n))HTTP/1\.[0-9] [0-9]{3}[ \r\n]")
_REQ_LINE_ANYWHERE = re.compile(rb"(?:^|(?<=\n))[A-Z][A-Z_-]{1,19} [^\s]+ HTTP/1\.[0-9]\r?\n")
_MAX_FRAME: Final = 16384


def _frames_at_start(data: bytes) -> Detection:
    """Two chained plausible HTTP/2 frame headers at offset 0 -> http2."""
    if len(data) < 9:
        return "need_more"
    length = int.from_bytes(data[0:3], "big")
    sid = int.from_bytes(data[5:9], "big")
    if data[3] > 9 or not plausible_frame_header(length, data[3], data[4], sid, _MAX_FRAME):
        return "unknown"
    j = 9 + length
    if len(data) < j + 9:
        return "need_more"
    length2 = int.from_bytes(data[j : j + 3], "big")
    sid2 = int.from_bytes(data[j + 5 : j + 9], "big")
    if data[j + 3] <= 9 and plausible_frame_header(
        length2, data[j + 3], data[j + 4], sid2, _MAX_FRAME
    ):
        return "http2"
    return "unknown"


def detect(
    data: bytes, direction: Direction = Direction.CLIENT_TO_SERVER, *, midstream: bool = False
) -> Detection:
    """Classify the first bytes of one direction of a stream (see the module docstring).

    With ``midstream`` nothing is ever ``unknown``: the answer stays ``need_more`` until a
    start line or frame alignment turns up (the caller bounds how long it looks)."""
    if not data:
        return "need_more"
    if direction == Direction.CLIENT_TO_SERVER:
        if PREFACE.startswith(data[:24]):
            return "http2" if len(data) >= 24 else "need_more"
        if _REQ.match(data) or _REQ09.match(data):
            return "http1"
        if midstream:
            if _REQ_LINE_ANYWHERE.search(data):
                return "http1"
            return "http2" if _frames_at_start(data) == "http2" else "need_more"
        return "need_more" if _REQ_PREFIX.fullmatch(data) is not None else "unknown"
    if _RESP.match(data):
        return "http1"
    if midstream:
        if _RESP_LINE_ANYWHERE.search(data):
            return "http1"
        return "http2" if _frames_at_start(data) == "http2" else "need_more"
    if _RESP_PREFIX.fullmatch(data) is not None:
        return "need_more"
    # a server's first frame is its SETTINGS (the server connection preface)
    if len(data) < 9:
        return "need_more" if data[0] == 0 else "unknown"
    length = int.from_bytes(data[0:3], "big")
    if (
        data[3] == 4
        and data[4] == 0
        and data[5:9] == b"\0\0\0\0"
        and length % 6 == 0
        and length <= _MAX_FRAME
    ):
        return "http2"
    return "unknown"


def observer_for(
    kind: str,
    *,
    tcp_stream: int,
    diag: Diagnostics,
    websocket_factory: UpgradeFactory | None = None,
    midstream: bool = False,
) -> Observer | None:
    """The observer for ``kind`` (``http1``/``http2``, or an ALPN id such as ``h2``), else None:
    the :class:`~.registry.StreamEntry` of :data:`~.registry.REGISTRY` for it."""
    make = REGISTRY.stream_factory(kind)
    if make is None:
        return None
    obs: Observer = make(
        tcp_stream=tcp_stream, diag=diag, websocket_factory=websocket_factory, midstream=midstream
    )
    return obs


class HttpDetector:
    """Holds the first bytes of a connection until their protocol is known, then hands
    everything to the right HTTP observer. Never raises on wire data.

    ``inner`` is the chosen observer (None while undecided or when the connection is not
    HTTP); ``kind`` is ``http1``, ``http2``, ``None`` (undecided) or ``"none"`` (gave up).
    """

    def __init__(
        self,
        *,
        tcp_stream: int,
        diag: Diagnostics,
        websocket_factory: UpgradeFactory | None = None,
        midstream: bool = False,
        max_probe_bytes: int = 64 << 10,
    ) -> None:
        self.tcp_stream = tcp_stream
        self._diag = diag
        self._ws = websocket_factory
        self._midstream = midstream
        self._max = max_probe_bytes
        self._held = Held()
        """chunks and gaps in arrival order, while undecided"""
        self._bytes = [b"", b""]
        """the first bytes of each direction (at most ``max_probe_bytes``), while undecided"""
        self._started = [False, False]
        self._verdict: list[Detection] = ["need_more", "need_more"]
        self.inner: Observer | None = None
        self.kind: str | None = None

    @property
    def wants_bytes(self) -> bool:
        """False once it gave up (the connection is not HTTP). While undecided, and after the
        choice, True: the chosen observer's own ``wants_bytes`` is not consulted (yet)."""
        return self.kind != "none"

    @property
    def done(self) -> bool:
        """the chosen observer is done, or none was chosen (``finish`` then returns nothing:
        the stream contract's ``done``)"""
        inner = self.inner
        return inner is None or bool(getattr(inner, "done", False))

    def feed(self, chunk: StreamChunk) -> list[object]:
        if self.inner is not None:
            return self.inner.feed(chunk)
        if self.kind is not None:
            return []
        d = chunk.direction
        if not self._started[d]:
            self._started[d] = True
            if chunk.offset > 0:
                self._midstream = True
        buf = self._bytes[d]
        if len(buf) < self._max:  # (b"" + data is data itself: no copy of a first chunk)
            buf = self._bytes[d] = buf + chunk.data[: self._max - len(buf)]
        self._verdict[d] = detect(buf, d, midstream=self._midstream)
        return self._decide(chunk)

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        if self.inner is not None:
            return self.inner.gap(direction, offset, nbytes, ts_ns, frame)
        if self.kind is None:
            self._held.gap(direction, offset, nbytes, ts_ns, frame)
            if not self._bytes[direction]:
                self._midstream = True
        return []

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        inner = self.inner
        if inner is not None:
            return inner.close(direction, ts_ns, frame, at_eof=at_eof)
        if self.kind is None:
            self._give_up()
        return []

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        inner = self.inner
        if inner is not None:
            return inner.finish(ts_ns, frame)
        if self.kind is None:
            self._give_up()
        return []

    def _give_up(self) -> None:
        self.kind = "none"
        self._held.clear()
        self._bytes = [b"", b""]

    def _decide(self, chunk: StreamChunk) -> list[object]:
        """After ``chunk`` was looked at: hold it while undecided, else make the observer and
        give it what was held, then ``chunk``."""
        c, s = self._verdict
        if "http2" in (c, s):
            kind = "http2"
        elif "http1" in (c, s):
            kind = "http1"
        else:
            # the client's first bytes are not HTTP, or too much was looked at: not HTTP
            if c == "unknown" or max(len(b) for b in self._bytes) >= self._max:
                self._give_up()
            else:
                self._held.chunk(chunk)
            return []
        inner = observer_for(
            kind,
            tcp_stream=self.tcp_stream,
            diag=self._diag,
            websocket_factory=self._ws,
            midstream=self._midstream,
        )
        self.inner = inner
        self.kind = kind
        self._bytes = [b"", b""]
        if inner is None:
            self._held.clear()
            return []
        out = self._held.replay(inner) if self._held else []
        out += inner.feed(chunk)
        return out


def tls_inner_factory(
    *,
    tcp_stream: int,
    diag: Diagnostics,
    websocket_factory: UpgradeFactory | None = None,
) -> Callable[[str | None], Observer | None]:
    """``inner_factory`` for the TLS observer: ALPN ``h2`` -> HTTP/2, ``http/1.x`` -> HTTP/1.x,
    no ALPN -> an :class:`HttpDetector`, any other ALPN -> None (not HTTP). (A partial of a
    module function, not a closure: a closure cannot be packed, :mod:`pcaptools.tcp.packing`.)"""
    return partial(_inner_for, tcp_stream=tcp_stream, diag=diag,
                   websocket_factory=websocket_factory)


def _inner_for(alpn: str | None, *, tcp_stream: int, diag: Diagnostics,
               websocket_factory: UpgradeFactory | None) -> Observer | None:
    if alpn is None:
        return HttpDetector(tcp_stream=tcp_stream, diag=diag, websocket_factory=websocket_factory)
    return observer_for(alpn, tcp_stream=tcp_stream, diag=diag,
                        websocket_factory=websocket_factory)
