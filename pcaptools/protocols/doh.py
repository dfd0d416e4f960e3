"""DNS over HTTPS (RFC 8484) from the HTTP events: one ``dns`` row per exchange.

:class:`DohCollector` watches the events of the HTTP observers (HTTP/1.x and HTTP/2, over
TLS when decrypted, or in clear): the :class:`~.body.HttpBody` events of
``application/dns-message`` bodies (content-decoded, see :mod:`.body`) and the events that
end an exchange (:class:`~.http1.HttpExchange`, :class:`~.http2.Http2StreamEnded`). An
exchange is DNS over HTTPS when its request body (POST) or its response body is
``application/dns-message``, or when it is a GET whose ``dns`` query parameter decodes
(base64url without padding) as a DNS query. The query is the POST body or the decoded
parameter; the response is the response body. Both go to
:meth:`~.dns.DnsTracker.doh_exchange`.

Frames, as tshark shows the ``dns`` rows: a POST query at the packet that completed the
request body; a GET query at the packet that completed the request header section (HTTP/1.x
``http.request``, the HTTP/2 HEADERS); the response at the packet that completed the response
body. Bounded: bodies are held per open exchange only, each up to
``body.MAX_COLLECTED_BODY_BYTES`` decoded bytes.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from urllib.parse import parse_qs, urlsplit

from ..diagnostics import Diagnostics
from .body import HttpBody
from .dns import DnsTracker, _Addrs, looks_like_query
from .http1 import HttpExchange
from .http2 import Http2StreamEnded

__all__ = ["DohCollector", "dns_param"]

_Key = tuple[int, int, int]
"""(tcp_stream, 1 for HTTP/1.x request_index | 2 for HTTP/2 stream id, that number)"""


def dns_param(target: str | None) -> bytes | str | None:
    """The ``dns`` query parameter of a request target, base64url-decoded (RFC 8484 §4.1:
    no padding); None when there is none; the text itself when it is not base64url."""
    if not target or "dns=" not in target:
        return None
    try:
        values = parse_qs(urlsplit(target).query).get("dns")
    except ValueError:
        return None
    if not values:
        return None
    text = values[0]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return text


class DohCollector:
    """Turns DNS over HTTPS exchanges into ``dns`` rows (see the module docstring)."""

    __slots__ = ("_addrs", "_bodies", "_diag", "_handlers", "_tracker")

    def __init__(
        self, tracker: DnsTracker, diag: Diagnostics, addrs: Callable[[int], _Addrs | None]
    ) -> None:
        """``addrs(tcp_stream)``: the connection's addresses and ports (client first)."""
        self._tracker = tracker
        self._diag = diag
        self._addrs = addrs
        self._bodies: dict[_Key, list[HttpBody | None]] = {}
        self._handlers: dict[type, Callable[[object], None]] = {
            HttpBody: self._body,  # type: ignore[dict-item]
            HttpExchange: self._exchange,  # type: ignore[dict-item]
            Http2StreamEnded: self._stream_ended,  # type: ignore[dict-item]
        }

    def add_all(self, events: Iterable[object]) -> None:
        handlers = self._handlers
        for e in events:
            h = handlers.get(type(e))
            if h is not None:
                h(e)

    def _body(self, b: HttpBody) -> None:
        key = (b.tcp_stream, 1, b.request_index) if b.stream_id is None else (
            b.tcp_stream, 2, b.stream_id)
        slot = self._bodies.get(key)  # type: ignore[arg-type]
        if slot is None:
            slot = self._bodies[key] = [None, None]  # type: ignore[index]
        slot[b.direction] = b

    def _exchange(self, ex: HttpExchange) -> None:
        bodies = self._bodies.pop((ex.tcp_stream, 1, ex.request_index), None)
        if bodies is None and (ex.request is None or ex.request.method.upper() != "GET"):
            return
        req = ex.request
        self._emit(
            bodies, tcp_stream=ex.tcp_stream,
            method=None if req is None else req.method.upper(),
            target=None if req is None else req.target,
            request=None if req is None else (req.end_frame, req.end_ts_ns),
            http_request_index=ex.request_index, http_stream_id=None,
        )

    def _stream_ended(self, s: Http2StreamEnded) -> None:
        bodies = self._bodies.pop((s.tcp_stream, 2, s.stream_id), None)
        method = None if s.method is None else s.method.upper()
        if bodies is None and method != "GET":
            return
        self._emit(
            bodies, tcp_stream=s.tcp_stream, method=method, target=s.path,
            request=(s.request_frame, s.request_ts_ns),
            http_request_index=None, http_stream_id=s.stream_id,
        )

    def _emit(
        self, bodies: list[HttpBody | None] | None, *, tcp_stream: int, method: str | None,
        target: str | None, request: tuple[int | None, int | None] | None,
        http_request_index: int | None, http_stream_id: int | None,
    ) -> None:
        qb, rb = bodies if bodies is not None else (None, None)
        query: bytes | None = None
        q_frame = q_ts = None
        if qb is not None:
            query, q_frame, q_ts = (qb.data if qb.complete else None), qb.frame, qb.ts_ns
        elif method == "GET":
            param = dns_param(target)
            if isinstance(param, bytes) and (rb is not None or looks_like_query(param)):
                query = param
            elif param is not None and rb is not None:
                self._diag.add(
                    "dns.doh_bad_query",
                    f"DNS over HTTPS GET on tcp.stream {tcp_stream}: the dns parameter is not "
                    "base64url",
                    tcp_stream=tcp_stream,
                )
            if query is None and rb is None:
                return  # a GET with no DNS in it: not DoH
            if request is not None:
                q_frame, q_ts = request
        if qb is None and rb is None and query is None:
            return
        response = None
        r_frame = r_ts = None
        if rb is not None:
            response, r_frame, r_ts = (rb.data if rb.complete else None), rb.frame, rb.ts_ns
        self._tracker.doh_exchange(
            query, response, tcp_stream=tcp_stream, query_frame=q_frame, query_ts=q_ts,
            response_frame=r_frame, response_ts=r_ts, addrs=self._addrs(tcp_stream),
            method=method, http_stream_id=http_stream_id, http_request_index=http_request_index,
        )
