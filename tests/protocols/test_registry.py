"""The protocol registry (pcaptools.protocols.registry, filled by protocols.builtin): every
choice of the next protocol is a lookup in it, and a registered UDP port reaches its datagram
observer through load() (the toy entry is added to the default REGISTRY for the test: load()
takes no registry argument)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

import pcaptools
from pcaptools.diagnostics import Diagnostics
from pcaptools.net.packet import UdpDatagram
from pcaptools.protocols import builtin, detect
from pcaptools.protocols.body import BodyCollector, body_consumer
from pcaptools.protocols.dns import DnsTcpObserver, DnsTracker
from pcaptools.protocols.http1 import HttpRequest, HttpResponse
from pcaptools.protocols.http2 import Http2Observer
from pcaptools.protocols.quic import QuicTracker, looks_like_quic_datagram
from pcaptools.protocols.registry import (
    REGISTRY,
    AlpnEntry,
    DatagramEntry,
    MediaTypeEntry,
    ProtocolRegistry,
    UpgradeContext,
    UpgradeEntry,
)
from pcaptools.protocols.sse import SseParser
from pcaptools.tcp.stream import Direction
from tests.helpers import ethernet, ipv4, pcap_file, udp

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


# --------------------------------------------------------------------------- lookups


def test_alpn_ids_name_kinds_and_unknown_ids_give_none() -> None:
    assert REGISTRY.alpn_kind("h2") == "http2"
    assert REGISTRY.alpn_kind("h2c") == "http2"
    assert [REGISTRY.alpn_kind(a) for a in ("http/1.1", "http/1.0", "http/0.9")] == ["http1"] * 3
    assert REGISTRY.alpn_kind("imap") is None
    assert REGISTRY.alpn_kind("h3") is None  # QUIC's, not registered yet (issue #15)
    # detect.ALPN_KINDS is the registry's table, same contents as before the registry
    assert detect.ALPN_KINDS is REGISTRY.alpn_kinds
    assert detect.ALPN_KINDS == {"h2": "http2", "h2c": "http2", "http/1.1": "http1",
                                 "http/1.0": "http1", "http/0.9": "http1"}


def test_stream_factories_by_kind_and_by_alpn_id() -> None:
    diag = Diagnostics()
    make = REGISTRY.stream_factory("h2")
    assert make is not None and make is REGISTRY.stream_factory("http2")
    obs = make(tcp_stream=4, diag=diag, websocket_factory=None, midstream=False)
    assert isinstance(obs, Http2Observer) and obs.tcp_stream == 4
    assert REGISTRY.stream_factory("imap") is None
    assert detect.observer_for("smtp", tcp_stream=1, diag=diag) is None


def _request(headers: tuple[tuple[str, str], ...]) -> HttpRequest:
    return HttpRequest(
        method="GET", target="/chat", version="1.1", headers=headers, header_bytes=120,
        body_bytes=0, wire_bytes=120, chunked=False, start_frame=4, start_ts_ns=1_000,
        head_frame=4, head_ts_ns=1_000, end_frame=4, end_ts_ns=1_000, complete=True,
    )


def test_upgrade_tokens() -> None:
    assert REGISTRY.upgrade("connect") is None
    assert REGISTRY.upgrade("tls/1.0") is None
    make = REGISTRY.upgrade("h2c")
    assert make is not None
    req = _request((("host", "example.com"), ("upgrade", "h2c"),
                    ("http2-settings", "AAMAAABkAARAAAAAAAIAAAAA")))
    ctx = UpgradeContext(token="h2c", tcp_stream=9, diag=Diagnostics(), request=req,
                         response=None, websocket_factory=None, sse_max_line_bytes=1024,
                         max_decoded_body_bytes=1 << 20)
    assert isinstance(make(ctx), Http2Observer)
    up = builtin.h2c_upgrade(req)
    assert (up.method, up.path, up.authority) == ("GET", "/chat", "example.com")
    assert (up.request_frame, up.request_end_frame, up.header_bytes) == (4, 4, 120)
    assert up.settings == ((3, 100), (4, 1 << 30), (2, 0))
    assert builtin.h2c_upgrade(None).request_frame == 0
    # websocket: the HTTP/1 observer's websocket_factory, if it was given one
    ws = REGISTRY.upgrade("websocket")
    assert ws is not None and ws(ctx) is None
    seen: list[tuple[object, object]] = []

    def factory(request: HttpRequest | None, response: HttpResponse) -> str:
        seen.append((request, response))
        return "ws-observer"

    resp = object()
    ws_ctx = UpgradeContext(token="websocket", tcp_stream=9, diag=Diagnostics(), request=req,
                            response=resp, websocket_factory=factory, sse_max_line_bytes=1024,
                            max_decoded_body_bytes=1 << 20)
    assert ws(ws_ctx) == "ws-observer" and seen == [(req, resp)]


def test_media_types_by_direction() -> None:
    diag = Diagnostics()
    kw = {"tcp_stream": 2, "stream_id": 1, "request_index": None, "diag": diag}
    assert isinstance(body_consumer("text/event-stream", direction=S2C, **kw), SseParser)
    assert body_consumer("text/event-stream", direction=C2S, **kw) is None  # responses only
    for d in (C2S, S2C):
        c = body_consumer("application/dns-message", direction=d, **kw)
        assert isinstance(c, BodyCollector) and c.content_type == "application/dns-message"
    assert body_consumer("application/json", direction=S2C, **kw) is None
    assert body_consumer(None, direction=S2C, **kw) is None
    assert REGISTRY.body_parser("application/grpc", S2C) is None  # gRPC: a later entry


def test_udp_ports() -> None:
    dns = REGISTRY.udp_port(53)
    assert dns is not None and dns.name == "dns" and dns.ports == (53,)
    quic = REGISTRY.udp_port(443)
    assert quic is not None and quic.name == "quic" and quic.factory is QuicTracker
    assert quic.probe is looks_like_quic_datagram
    assert REGISTRY.udp_port(4433) is None  # other ports: the probe
    assert [e.name for e in REGISTRY.datagram_entries] == ["dns", "quic"]
    route = REGISTRY.udp_route(Diagnostics())
    assert isinstance(route.observer("dns", DnsTracker), DnsTracker)
    assert isinstance(route.observer("quic", QuicTracker), QuicTracker)
    with pytest.raises(TypeError):
        route.observer("dns", SseParser)


def test_tcp_ports() -> None:
    dns = REGISTRY.tcp_port(53, 40000)
    assert dns is not None and dns.name == "dns" and dns.ports == (53,)
    assert REGISTRY.tcp_port(40000, 53) is dns  # the client's port, when the server's is not
    assert REGISTRY.tcp_port(443, 40000) is None  # sniffed for TLS and HTTP
    route = REGISTRY.udp_route(Diagnostics())
    obs = dns.factory(tcp_stream=3, diag=Diagnostics(), addrs=(4, b"\1" * 4, 40000, b"\2" * 4, 53),
                      midstream=False, observers=route.observers)
    assert isinstance(obs, DnsTcpObserver) and obs.tcp_stream == 3
    assert obs._tracker is route.observer("dns", DnsTracker)  # one tracker for UDP and TCP


def test_a_choice_is_made_in_one_place() -> None:
    reg = ProtocolRegistry((AlpnEntry(alpn="x", kind="k"),))
    with pytest.raises(ValueError, match="ALPN id 'x' is registered twice"):
        reg.add(AlpnEntry(alpn="x", kind="other"))
    with pytest.raises(ValueError, match="UDP port 53"):
        REGISTRY.add(DatagramEntry(name="other-dns", factory=DnsTracker, ports=(53,)))
    dns = REGISTRY.udp_port(53)
    assert dns is not None and dns.name == "dns"
    # the refused one left nothing
    assert [e.name for e in REGISTRY.datagram_entries] == ["dns", "quic"]
    with pytest.raises(ValueError, match="Upgrade token 'h2c'"):
        REGISTRY.add(UpgradeEntry(token="h2c", factory=lambda ctx: None))
    entry = MediaTypeEntry(media_type="text/event-stream", factory=builtin._sse,
                           directions=(C2S,))
    reg.add(entry)
    assert reg.body_parser("text/event-stream", C2S) is builtin._sse
    reg.remove(entry)
    assert reg.body_parser("text/event-stream", C2S) is None
    with pytest.raises(KeyError):
        reg.remove(entry)


# --------------------------------------------------------------------------- the UDP route


class Toy:
    """A datagram observer that keeps what it was given."""

    instances: ClassVar[list[Toy]] = []

    def __init__(self, diag: Diagnostics) -> None:
        self.got: list[tuple[int, int, int, bytes]] = []
        Toy.instances.append(self)

    def datagram(self, d: UdpDatagram) -> None:
        if d.payload == b"boom":
            raise RuntimeError("toy bug")
        self.got.append((d.frame, d.sport, d.dport, d.payload))


@pytest.fixture
def toy() -> Iterator[DatagramEntry]:
    Toy.instances.clear()
    entry = DatagramEntry(name="toy", factory=Toy, ports=(9999,),
                          probe=lambda d: d.payload.startswith(b"TOY"))
    REGISTRY.add(entry)
    try:
        yield entry
    finally:
        REGISTRY.remove(entry)


def _udp_capture(path: Path, datagrams: list[tuple[int, int, bytes]]) -> Path:
    frames = [
        (1_700_000_000_000_000_000 + i * 1_000_000,
         ethernet(ipv4(udp(sport, dport, payload), "10.0.0.1", "10.0.0.2", proto=17)))
        for i, (sport, dport, payload) in enumerate(datagrams)
    ]
    path.write_bytes(pcap_file(frames))
    return path


def test_a_registered_port_reaches_its_observer_through_load(
    tmp_path: Path, toy: DatagramEntry
) -> None:
    cap = pcaptools.load(_udp_capture(tmp_path / "toy.pcap", [
        (40000, 9999, b"hello"),   # 1: dport registered
        (9999, 40000, b"world"),   # 2: sport registered
        (40001, 40002, b"TOY?"),   # 3: no port: the probe accepts it
        (40001, 40002, b"nope"),   # 4: no port, the probe says no: nobody's
        (53, 9999, b"\x00"),       # 5: both registered: the lower port (DNS) has it
        (40000, 9999, b"boom"),    # 6: the observer raises: a row, and the load goes on
        (9999, 40000, b"after"),   # 7
    ]))
    assert len(Toy.instances) == 1  # one observer per load
    assert Toy.instances[0].got == [
        (1, 40000, 9999, b"hello"), (2, 9999, 40000, b"world"), (3, 40001, 40002, b"TOY?"),
        (7, 9999, 40000, b"after"),
    ]
    w = cap.warnings
    assert list(w.loc[w["code"] == "dns.malformed", "frame"]) == [5]
    err = w[w["code"] == "udp.observer_error"]
    assert list(err["frame"]) == [6]
    assert err["detail"].iloc[0] == (
        "RuntimeError in Toy.datagram on UDP port 40000 -> 9999: toy bug"
    )
    assert cap.summary.udp_frames == 7


def test_no_route_without_payloads_and_not_on_other_shards(
    tmp_path: Path, toy: DatagramEntry
) -> None:
    path = _udp_capture(tmp_path / "toy.pcap", [(40000, 9999, b"hello")])
    pcaptools.load(path, payloads=False)
    assert Toy.instances == []
    pcaptools.load(path, shard=(1, 2))  # UDP is worker 0's
    assert [t.got for t in Toy.instances] == [[]]
    pcaptools.load(path, shard=(0, 2))
    assert Toy.instances[-1].got == [(1, 40000, 9999, b"hello")]


# --------------------------------------------------------------------------- the docs


def test_adding_a_protocol_quotes_the_registrations_as_they_are() -> None:
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "adding-a-protocol.md").read_text(encoding="utf-8")
    table = (root / "pcaptools" / "protocols" / "builtin.py").read_text(encoding="utf-8")
    tables = (root / "pcaptools" / "tables" / "registry.py").read_text(encoding="utf-8")
    quoted = [
        '    DatagramEntry(name="dns", factory=DnsTracker, ports=(DNS_PORT,)),\n',
        '    TcpPortEntry(name="dns", ports=(DNS_PORT,), factory=_dns_tcp),  # DNS over TCP\n',
        '    StreamEntry(kind="http2", factory=_http2),\n',
        '    AlpnEntry(alpn="h2", kind="http2"),\n',
        '    UpgradeEntry(token="websocket", factory=_upgrade_websocket),\n',
        '    MediaTypeEntry(media_type="text/event-stream", factory=_sse,\n'
        '                   directions=(Direction.SERVER_TO_CLIENT,)),\n',
    ]
    for line in quoted:
        assert line in doc and line in table, line
    source = ('    # dns (UDP, TCP, HTTPS)\n'
              '    TableSource(name="dns", tables=(DNS,), build=_dns,\n'
              '                consumes=(HttpBody, HttpExchange, Http2StreamEnded)),\n')
    assert source in tables and source in doc
    build = tables[tables.index("def _dns(ctx: BuildContext)"):]
    build = build[:build.index("\n\n\n")]
    assert build in doc, build
    assert "[adding a protocol](docs/adding-a-protocol.md)" in (root / "README.md").read_text(
        encoding="utf-8"
    )
