"""A real HTTP/3 exchange in memory: aioquic's QUIC client and server exchanging datagrams
in a loop (no network, a fake clock), aioquic's H3Connection on both, and every stream byte
each side receives recorded as the QUIC tracker would hand it to an application observer
(stream id, direction, offset, data, fin, time, a "frame" number per datagram).

``run_exchange(requests)`` -> the recorded stream deliveries and what the aioquic peers
sent and received, for the tests to compare with what :class:`Http3Observer` reports.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any

from aioquic.buffer import Buffer
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import StreamDataReceived, StreamReset
from aioquic.quic.packet import pull_quic_header
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pcaptools.tcp.stream import Direction

CLIENT_ADDR = ("192.0.2.10", 50443)
SERVER_ADDR = ("192.0.2.20", 443)
T0_NS = 1_800_000_000_000_000_000
ONE_WAY_NS = 20_000_000


@dataclass
class Delivery:
    """One call the QUIC tracker would make: stream bytes in order, or a reset."""

    kind: str  # "data" | "reset"
    stream_id: int
    direction: Direction
    offset: int
    data: bytes
    fin: bool
    ts_ns: int
    frame: int
    error_code: int = 0


@dataclass
class Planned:
    """One request and the SSE response the server streams for it."""

    path: str
    tokens: list[str]
    method: str = "POST"
    body: bytes = b'{"stream": true}'
    extra_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    content_encoding: str | None = None
    reset_after: int | None = None
    """the server resets the stream after this many events (None: ends it with FIN)"""


@dataclass
class Exchange:
    deliveries: list[Delivery]
    client_stream_ids: dict[str, int]
    """path -> stream id"""
    server_sent: dict[int, dict[str, Any]]
    """stream id -> what the server sent: status, content-type, body bytes, events"""
    client_received: dict[int, dict[str, Any]]
    """stream id -> what the client's H3Connection received"""


def _cert() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lab.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("lab.test")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def sse_event(token: str, i: int) -> bytes:
    chunk = {"id": f"c{i}", "choices": [{"index": 0, "delta": {"content": token}}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


FINISH = (b'data: {"id": "end", "choices": [{"index": 0, "delta": {}, '
          b'"finish_reason": "stop"}]}\n\n')
DONE = b"data: [DONE]\n\n"


def run_exchange(requests: list[Planned], *, max_rounds: int = 400,
                 gzip_body: bool = False) -> Exchange:
    cert, key = _cert()
    ccfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="lab.test")
    ccfg.verify_mode = 0  # ssl.CERT_NONE
    scfg = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    scfg.certificate = cert
    scfg.private_key = key
    now_ns = T0_NS
    client = QuicConnection(configuration=ccfg)
    client.connect(SERVER_ADDR, now=now_ns / 1e9)
    first = client.datagrams_to_send(now=now_ns / 1e9)
    dcid = pull_quic_header(Buffer(data=first[0][0]), host_cid_length=8).destination_cid
    server = QuicConnection(configuration=scfg, original_destination_connection_id=dcid)
    server.receive_datagram(first[0][0], CLIENT_ADDR, now=now_ns / 1e9)
    for data, _ in first[1:]:
        server.receive_datagram(data, CLIENT_ADDR, now=now_ns / 1e9)
    ch3: H3Connection | None = None
    sh3: H3Connection | None = None
    deliveries: list[Delivery] = []
    offsets: dict[tuple[int, Direction], int] = {}
    frame = 0
    ids: dict[str, int] = {}
    sent: dict[int, dict[str, Any]] = {}
    got: dict[int, dict[str, Any]] = {}
    plans: dict[str, Planned] = {r.path: r for r in requests}
    todo: list[tuple[int, int, bytes | None, bool]] = []
    """(at round, stream id, bytes or None for a reset, end)"""
    requested = False
    pending_srv: list[tuple[int, Planned]] = []

    def drain(conn: QuicConnection, h3: H3Connection | None, d: Direction) -> list[Any]:
        out: list[Any] = []
        while True:
            ev = conn.next_event()
            if ev is None:
                return out
            if isinstance(ev, StreamDataReceived):
                key_ = (ev.stream_id, d)
                off = offsets.get(key_, 0)
                deliveries.append(Delivery("data", ev.stream_id, d, off, ev.data,
                                           ev.end_stream, now_ns, frame))
                offsets[key_] = off + len(ev.data)
            elif isinstance(ev, StreamReset):
                deliveries.append(Delivery("reset", ev.stream_id, d, offsets.get(
                    (ev.stream_id, d), 0), b"", False, now_ns, frame,
                    error_code=ev.error_code))
            if h3 is not None:
                out += h3.handle_event(ev)

    for rnd in range(max_rounds):
        # datagrams both ways, each its own "frame", 20 ms one way
        moved = False
        for src, dst, srcaddr in ((client, server, CLIENT_ADDR), (server, client, SERVER_ADDR)):
            for data, _addr in src.datagrams_to_send(now=now_ns / 1e9):
                now_ns += ONE_WAY_NS // 4
                frame += 1
                dst.receive_datagram(data, srcaddr, now=now_ns / 1e9)
                moved = True
                if dst is server:
                    if sh3 is None:
                        sh3 = H3Connection(server)
                    for h in drain(server, sh3, Direction.CLIENT_TO_SERVER):
                        if isinstance(h, HeadersReceived):
                            hd = dict(h.headers)
                            plan = plans[hd[b":path"].decode()]
                            pending_srv.append((h.stream_id, plan))
                else:
                    if ch3 is None:
                        ch3 = H3Connection(client)
                    for h in drain(client, ch3, Direction.SERVER_TO_CLIENT):
                        rec = got.setdefault(h.stream_id, {"headers": None, "body": b"",
                                                           "ended": False})
                        if isinstance(h, HeadersReceived):
                            rec["headers"] = h.headers
                            rec["ended"] = rec["ended"] or h.stream_ended
                        elif isinstance(h, DataReceived):
                            rec["body"] += h.data
                            rec["ended"] = rec["ended"] or h.stream_ended
        if client._handshake_complete and ch3 is not None and not requested:
            requested = True
            for r in requests:
                sid = client.get_next_available_stream_id()
                ids[r.path] = sid
                hdrs = [(b":method", r.method.encode()), (b":scheme", b"https"),
                        (b":authority", b"lab.test"), (b":path", r.path.encode()),
                        (b"content-type", b"application/json"), *r.extra_headers]
                ch3.send_headers(sid, hdrs, end_stream=False)
                ch3.send_data(sid, r.body, end_stream=True)
        for sid, plan in pending_srv:
            assert sh3 is not None
            body_events = [sse_event(t, i) for i, t in enumerate(plan.tokens)] + [FINISH, DONE]
            hdrs = [(b":status", b"200"), (b"content-type", b"text/event-stream")]
            if plan.content_encoding:
                hdrs.append((b"content-encoding", plan.content_encoding.encode()))
            sh3.send_headers(sid, hdrs)
            wire = body_events
            if plan.content_encoding == "gzip":
                import gzip
                wire = [gzip.compress(b"".join(body_events))]
            sent[sid] = {"status": 200, "content_type": "text/event-stream",
                         "body": b"".join(wire), "events": len(body_events),
                         "tokens": list(plan.tokens), "reset": plan.reset_after is not None}
            for i, chunk in enumerate(wire):
                if plan.reset_after is not None and i == plan.reset_after:
                    todo.append((rnd + 2 + i, sid, None, True))
                    sent[sid]["body"] = b"".join(wire[:i])
                    sent[sid]["events"] = i
                    break
                todo.append((rnd + 1 + i, sid, chunk, i == len(wire) - 1))
        pending_srv.clear()
        for item in [t for t in todo if t[0] <= rnd]:
            todo.remove(item)
            _, sid, chunk, end = item
            assert sh3 is not None
            if chunk is None:
                server.reset_stream(sid, 0x10C)
            else:
                sh3.send_data(sid, chunk, end_stream=end)
        if not moved:
            now_ns += ONE_WAY_NS
            if requested and not todo and not pending_srv and all(
                v["ended"] or sent.get(k, {}).get("reset") for k, v in got.items()
            ) and len(got) >= len(requests):
                break
            for conn in (client, server):
                t = conn.get_timer()
                if t is not None and t * 1e9 <= now_ns:
                    conn.handle_timer(now=now_ns / 1e9)
    return Exchange(deliveries, ids, sent, got)
