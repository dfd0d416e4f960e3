"""HTTP/1.x over TCP: requests and responses paired per connection, hand-offs on Upgrade.

    from pcaptools.protocols.http1 import Http1Observer
    obs = Http1Observer(tcp_stream=0, diag=diag, websocket_factory=make_ws)
    events = obs.feed(chunk)            # HttpExchange, ProtocolSwitched, SseEvent, ...

Modules: :mod:`.observer` (the state machine: framing modes, pairing, Upgrade hand-off).
"""

from __future__ import annotations

from .observer import (
    _MAX_AWAITING,
    _MAX_CHUNK_LINE,
    Http1Observer,
    HttpExchange,
    HttpRequest,
    HttpResponse,
    ProtocolSwitched,
    UpgradeFactory,
    parse_retry_after,
)

__all__ = [
    "Http1Observer",
    "HttpExchange",
    "HttpRequest",
    "HttpResponse",
    "ProtocolSwitched",
    "UpgradeFactory",
    "parse_retry_after",
]
