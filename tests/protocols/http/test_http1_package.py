"""pcaptools.protocols.http1 as a package: the pure parse functions, the StreamObserver
contract of Http1Observer (wants_bytes, close(at_eof) passed to the Upgrade's observer), the
Event base, and the import paths kept by re-export."""

from __future__ import annotations

from typing import Any

import pytest

import pcaptools.protocols.http1 as http1
from pcaptools.diagnostics import Diagnostics
from pcaptools.limits import LIMITS
from pcaptools.protocols.http1 import Http1Observer, HttpExchange, ProtocolSwitched
from pcaptools.protocols.http1.observer import _TUNNEL
from pcaptools.protocols.http1.parse import (
    body_framing,
    chunk_size,
    header_value,
    is_start_line,
    parse_header_fields,
    parse_request_line,
    parse_status_line,
    quote_line,
    upgrade_token,
)
from pcaptools.tcp.stream import Direction, Event, StreamChunk
from tests.protocols.http.helpers import C2S, S2C, feed_conversation


def test_request_line() -> None:
    assert parse_request_line(b"GET /a?b=1 HTTP/1.1\r") == ("GET", "/a?b=1", "1.1")
    assert parse_request_line(b"M-SEARCH *  HTTP/1.0") == ("M-SEARCH", "*", "1.0")
    assert parse_request_line(b"GET /a") is None  # HTTP/0.9: not a request line
    assert parse_request_line(b"HTTP/1.1 200 OK") is None
    assert is_start_line(b"GET / HTTP/1.1", True) and not is_start_line(b"GET / HTTP/1.1", False)


def test_status_line() -> None:
    assert parse_status_line(b"HTTP/1.1 404 Not Found\r") == ("1.1", 404, "Not Found")
    assert parse_status_line(b"HTTP/1.0 200") == ("1.0", 200, "")
    assert parse_status_line(b"HTTP/1.1 2000 x") is None
    assert is_start_line(b"HTTP/1.1 101 Switching Protocols", False)


def test_header_fields_fold_lowercase_and_skip_junk() -> None:
    fields = parse_header_fields(
        [b"Host: h\r", b"X-Long: a\r", b"\t b\r", b"no colon here\r", b": empty name", b"", b"A:1"]
    )
    assert fields == (("host", "h"), ("x-long", "a b"), ("a", "1"))
    assert header_value(fields, "x-long") == "a b"
    assert header_value(fields, "missing") is None


@pytest.mark.parametrize(
    ("headers", "framing"),
    [
        ((("transfer-encoding", "gzip, chunked"),), "chunked"),
        ((("transfer-encoding", "chunked"), ("transfer-encoding", "gzip")), "close"),
        ((("transfer-encoding", "chunked"), ("content-length", "5")), "chunked"),
        ((("content-length", "12"),), 12),
        ((("content-length", "7, 7"),), 7),
        ((("content-length", "7"), ("content-length", "8")), "bad Content-Length '7, 8'"),
        ((("content-length", "-1"),), "bad Content-Length '-1'"),
        ((), None),
    ],
)
def test_body_framing(headers: tuple[tuple[str, str], ...], framing: object) -> None:
    assert body_framing(headers) == framing


def test_chunk_size_and_upgrade_token() -> None:
    line = b"1a;ext=1\r\n"
    assert chunk_size(line, 0, line.index(b"\n")) == 26
    assert chunk_size(b"zz\r", 0, 3) is None
    assert upgrade_token(" WebSocket, h2c") == "websocket"


def test_quote_line_redacts_credentials() -> None:
    quoted = quote_line(b"GET /x?access_token=secret123 HTTP/1.1")
    assert "secret123" not in quoted and quoted.startswith("b'GET /x?access_token=")


class _Recorder:
    """A StreamObserver that records how it is called."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.wants = True

    @property
    def wants_bytes(self) -> bool:
        return self.wants

    def feed(self, chunk: StreamChunk) -> list[object]:
        self.calls.append(("feed", chunk.direction, chunk.data, chunk.offset))
        return []

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        self.calls.append(("gap", direction, offset, nbytes))
        return []

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        self.calls.append(("close", direction, at_eof))
        return []

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        self.calls.append(("finish",))
        return []


UPGRADE = [
    (C2S, b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"),
    (S2C, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nsrv"),
    (C2S, b"cli"),
]


@pytest.mark.parametrize("at_eof", [False, True])
def test_the_upgrade_observer_is_called_through_the_stream_contract(at_eof: bool) -> None:
    inner = _Recorder()
    obs = Http1Observer(tcp_stream=2, diag=Diagnostics(), websocket_factory=lambda q, r: inner)
    ev = feed_conversation(obs, UPGRADE, close=False)
    assert obs.inner is inner and obs.wants_bytes
    inner.wants = False
    assert not obs.wants_bytes  # both directions were handed over: the inner observer decides
    inner.wants = True
    if at_eof:
        ev += obs.close(S2C, 10, 9, at_eof=True)
        closes = [("close", S2C, True), ("close", C2S, True)]
    else:
        ev += obs.close(C2S, 10, 9) + obs.close(S2C, 11, 10)
        closes = [("close", C2S, False), ("close", S2C, False)]
    assert inner.calls == [("feed", S2C, b"srv", 0), ("feed", C2S, b"cli", 0), *closes]
    switched = [e for e in ev if isinstance(e, ProtocolSwitched)]
    assert [(e.protocol, e.parsed, e.request_index) for e in switched] == [("websocket", True, 1)]
    assert not obs.wants_bytes and obs.finished


def test_wants_bytes_ends_with_a_tunnel() -> None:
    obs = Http1Observer(tcp_stream=0, diag=Diagnostics())
    connect = (C2S, b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n")
    assert obs.wants_bytes
    feed_conversation(obs, [connect, (S2C, b"HTTP/1.1 200 OK\r\n\r\n")], close=False)
    assert [s.mode for s in obs._sides] == [_TUNNEL, _TUNNEL]
    assert not obs.wants_bytes  # both directions only count their bytes now
    declined = Http1Observer(tcp_stream=0, diag=Diagnostics())
    feed_conversation(declined, [connect, (S2C, b"HTTP/1.1 403 No\r\n\r\n")], close=False)
    assert declined.wants_bytes  # the tunnel was refused: still HTTP/1.x


def test_events_derive_from_the_event_base() -> None:
    assert issubclass(HttpExchange, Event) and issubclass(ProtocolSwitched, Event)
    obs = Http1Observer(tcp_stream=0, diag=Diagnostics())
    ev = feed_conversation(
        obs, [(C2S, b"GET / HTTP/1.1\r\n\r\n"), (S2C, b"HTTP/1.1 204 No Content\r\n\r\n")]
    )
    (ex,) = ev
    assert isinstance(ex, Event) and (ex.frame, ex.end_reason) == (2, "complete")


def test_the_old_import_paths_still_resolve() -> None:
    for name in http1.__all__:
        assert getattr(http1, name) is not None, name
    assert http1.parse_retry_after("120") == 120.0
    # pcaptools.limits reads its defaults through the package (module:NAME homes)
    homes = {lim.home: lim.default for lim in LIMITS if ".http1:" in lim.home}
    assert homes == {
        "pcaptools.protocols.http1:Http1Observer(max_head_bytes)": 256 << 10,
        "pcaptools.protocols.http1:_MAX_CHUNK_LINE": 4096,
        "pcaptools.protocols.http1:_MAX_AWAITING": 10_000,
    }
