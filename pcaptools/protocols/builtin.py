"""The protocols pcaptools ships, registered in :data:`~.registry.REGISTRY`: one table, read top
to bottom, of every choice of the next protocol (the mitmproxy ``next_layer`` idea).

A new protocol is one more entry here, next to the factory of its observer (see
``docs/adding-a-protocol.md``). The choices made from a connection's first bytes (TLS or not:
:mod:`.dispatch`; HTTP/1.x or HTTP/2: :mod:`.detect`) are not entries: they come before any
id, token, media type or port is known.

The pipeline imports this module (so does :mod:`.detect`), which fills the registry once, the
first time pcaptools is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..diagnostics import Diagnostics
from ..tcp.stream import Direction
from .body import DNS_MESSAGE, BodyCollector
from .dns import DNS_PORT, DnsTcpObserver, DnsTracker
from .http1 import Http1Observer, HttpRequest
from .http2 import H2cUpgrade, Http2Observer
from .quic import QUIC_PORT, QuicTracker, looks_like_quic_datagram
from .quic.streams import QuicAppContext
from .registry import (
    REGISTRY,
    AlpnEntry,
    DatagramEntry,
    DatagramObserver,
    MediaTypeEntry,
    QuicAppEntry,
    StreamEntry,
    TcpPortEntry,
    UpgradeContext,
    UpgradeEntry,
)
from .sse import SseParser

if TYPE_CHECKING:
    from .http3.observer import Http3Observer

__all__ = ["BUILTIN"]


# --------------------------------------------------------------------------- factories


def _http1(*, tcp_stream: int, diag: Diagnostics, websocket_factory: Any, midstream: bool) -> Any:
    return Http1Observer(
        tcp_stream=tcp_stream, diag=diag, websocket_factory=websocket_factory, midstream=midstream
    )


def _http2(*, tcp_stream: int, diag: Diagnostics, websocket_factory: Any, midstream: bool) -> Any:
    return Http2Observer(tcp_stream=tcp_stream, diag=diag, midstream=midstream)


def h2c_upgrade(request: HttpRequest | None) -> H2cUpgrade:
    """The HTTP/1.1 request that asked for ``Upgrade: h2c`` as HTTP/2 stream 1 (RFC 7540
    §3.2); an empty one when the capture started after the request."""
    if request is None:
        return H2cUpgrade(
            method="",
            path="",
            authority=None,
            headers=(),
            settings=(),
            request_frame=0,
            request_ts_ns=0,
            request_end_frame=0,
            request_end_ts_ns=0,
            header_bytes=0,
            body_bytes=0,
        )
    settings_hdr = request.header("http2-settings")
    return H2cUpgrade(
        method=request.method,
        path=request.target,
        authority=request.header("host"),
        headers=request.headers,
        settings=H2cUpgrade.decode_settings_header(settings_hdr) if settings_hdr else (),
        request_frame=request.head_frame,
        request_ts_ns=request.head_ts_ns,
        request_end_frame=(
            request.end_frame if request.end_frame is not None else request.head_frame
        ),
        request_end_ts_ns=(
            request.end_ts_ns if request.end_ts_ns is not None else request.head_ts_ns
        ),
        header_bytes=request.header_bytes,
        body_bytes=request.body_bytes,
    )


def _upgrade_h2c(ctx: UpgradeContext) -> Any:
    return Http2Observer(
        tcp_stream=ctx.tcp_stream,
        diag=ctx.diag,
        upgrade=h2c_upgrade(ctx.request),
        sse_max_line_bytes=ctx.sse_max_line_bytes,
        max_decoded_body_bytes=ctx.max_decoded_body_bytes,
    )


def _upgrade_websocket(ctx: UpgradeContext) -> Any:
    # the HTTP/1 observer's websocket_factory carries the WebSocket options (None: not followed)
    if ctx.websocket_factory is None or ctx.response is None:
        return None
    return ctx.websocket_factory(ctx.request, ctx.response)


def _sse(
    mtype: str,
    *,
    tcp_stream: int | None,
    stream_id: int | None,
    request_index: int | None,
    direction: Direction,
    diag: Diagnostics,
    sse_max_line_bytes: int,
) -> SseParser:
    return SseParser(
        tcp_stream=tcp_stream,
        stream_id=stream_id,
        request_index=request_index,
        direction=direction,
        diag=diag,
        max_line_bytes=sse_max_line_bytes,
    )


def _collect(
    mtype: str,
    *,
    tcp_stream: int | None,
    stream_id: int | None,
    request_index: int | None,
    direction: Direction,
    diag: Diagnostics,
    sse_max_line_bytes: int,
) -> BodyCollector:
    return BodyCollector(
        mtype,
        tcp_stream=tcp_stream,
        stream_id=stream_id,
        request_index=request_index,
        direction=direction,
    )


def _h3(ctx: QuicAppContext) -> Http3Observer:
    # imported by the first QUIC connection that negotiated h3 (it brings pylsqpack)
    from .http3.observer import Http3Observer

    return Http3Observer(connection=ctx.connection, diag=ctx.diag, midstream=ctx.midstream)


def _dns_tcp(
    *,
    tcp_stream: int,
    diag: Diagnostics,
    addrs: tuple[int, bytes, int, bytes, int],
    midstream: bool,
    observers: Mapping[str, DatagramObserver],
) -> DnsTcpObserver:
    tracker = observers["dns"]
    assert isinstance(tracker, DnsTracker)
    return DnsTcpObserver(
        tcp_stream=tcp_stream, tracker=tracker, diag=diag, addrs=addrs, midstream=midstream
    )


# --------------------------------------------------------------------------- the table

BUILTIN = (
    # byte-stream protocols, by kind (HttpDetector's verdicts and the ALPN ids below)
    StreamEntry(kind="http1", factory=_http1),
    StreamEntry(kind="http2", factory=_http2),
    # TLS ALPN protocol ids (RFC 7301 registry names) -> kind of the decrypted bytes
    AlpnEntry(alpn="h2", kind="http2"),
    AlpnEntry(alpn="h2c", kind="http2"),
    AlpnEntry(alpn="http/1.1", kind="http1"),
    AlpnEntry(alpn="http/1.0", kind="http1"),
    AlpnEntry(alpn="http/0.9", kind="http1"),
    # HTTP/1.1 Upgrade tokens -> the observer after the 101
    UpgradeEntry(token="h2c", factory=_upgrade_h2c),
    UpgradeEntry(token="websocket", factory=_upgrade_websocket),
    # body media types -> body parsers (after content decoding)
    MediaTypeEntry(media_type=DNS_MESSAGE, factory=_collect),  # DNS over HTTPS (doh.py)
    MediaTypeEntry(media_type="text/event-stream", factory=_sse,
                   directions=(Direction.SERVER_TO_CLIENT,)),
    # UDP ports (and probes) -> datagram observers; DNS over TCP and HTTPS share the DNS one
    DatagramEntry(name="dns", factory=DnsTracker, ports=(DNS_PORT,)),
    DatagramEntry(name="quic", factory=QuicTracker, ports=(QUIC_PORT,),
                  probe=looks_like_quic_datagram, wants_keylog=True),
    # ALPN ids negotiated on QUIC connections -> the observer of their streams
    QuicAppEntry(alpn="h3", factory=_h3),
    # TCP ports -> an observer instead of the TLS/HTTP sniffing
    TcpPortEntry(name="dns", ports=(DNS_PORT,), factory=_dns_tcp),  # DNS over TCP
)
"""every built-in entry, in the order they are registered"""

REGISTRY.add(*BUILTIN)
