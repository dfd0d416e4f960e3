"""HTTP/1.x over TCP: requests and responses paired per connection, hand-offs on Upgrade.

    from pcaptools.protocols.http1 import Http1Observer
    obs = Http1Observer(tcp_stream=0, diag=diag, websocket_factory=make_ws)
    events = obs.feed(chunk)            # HttpExchange, ProtocolSwitched, SseEvent, ...

Modules: :mod:`.parse` (start lines, header sections, body framing, chunk sizes: pure
functions of bytes), :mod:`.observer` (the state machine: one parse step per framing mode,
request/response pairing, the Upgrade hand-off), :mod:`.events` (what it emits).
"""

from __future__ import annotations

from .events import HttpExchange, HttpRequest, HttpResponse, ProtocolSwitched
from .observer import _MAX_AWAITING as _MAX_AWAITING  # (pcaptools.limits names this home)
from .observer import _MAX_CHUNK_LINE as _MAX_CHUNK_LINE
from .observer import Http1Observer, UpgradeFactory
from .parse import parse_retry_after

__all__ = [
    "Http1Observer",
    "HttpExchange",
    "HttpRequest",
    "HttpResponse",
    "ProtocolSwitched",
    "UpgradeFactory",
    "parse_retry_after",
]
