"""HTTP/3 over QUIC (aioquic): a streaming chat server and a client that logs a timeline.

Run inside namespaces (the recorder does this through ``ip netns exec``)::

    python h3kit.py cert --out-dir DIR --name lab.test
    python h3kit.py serve --listen 192.0.2.20:443 --cert C.pem --key K.pem \
        --events E.jsonl [--retry] --lifetime 60
    python h3kit.py client --connect 192.0.2.20:443 --host lab.test --cacert C.pem \
        --plan PLAN.json --out RESULT.json --keylog KEYS.txt --deadline 40

``cert`` makes a self-signed ECDSA P-256 certificate for ``--name`` with the
``cryptography`` package (``cert.pem``, ``key.pem`` in ``--out-dir``).

Server: HTTP/3 (ALPN ``h3``).  ``POST /v1/chat/completions`` with the same JSON body as
``chatsse.py`` (``lab``: ``tokens``, ``first_ms``, ``every_ms``, ``seed``) answers
``text/event-stream``: ``tokens`` chunks ``data: {chat.completion.chunk}`` (one HTTP/3 DATA
frame each), the first ``first_ms`` after the request body ended and then one every
``every_ms`` (an absolute schedule), then a ``finish_reason: stop`` chunk and ``data:
[DONE]`` with FIN: ``tokens + 2`` SSE events per request.  With ``lab.push`` (a list of
paths) it first pushes each path (RFC 9114 §4.6: a PUSH_PROMISE on the request stream with
a GET request for it, then a push stream with a 200 ``text/css`` response of
``PUSH_BODY_BYTES`` bytes), when the client allows pushes (MAX_PUSH_ID).  It issues session
tickets that allow 0-RTT (each ticket is used once), and with ``--retry`` answers every
first Initial with a Retry (address validation).  Each request is logged as one JSON line
when it ends (its id, QUIC stream id, arrival time, plan, tokens, every event's text and send
time, the pushes); each connection's handshake as one line (ALPN, resumed, 0-RTT accepted).

Client: PLAN.json is ``{"connections": [{"id": "conn-1", "local_port": 50443, "resume":
false, "early_data": false, "requests": [{"id": "chat-1", "at_ms": 0, "lab": {...}}]}]}``.
Connections run one after the other, each from its own fixed local port; requests on one
connection start ``at_ms`` after it was opened (they overlap when their times do).
``resume``: present the session ticket the previous connection got; ``early_data``: also
send the requests with ``at_ms`` 0 before the handshake completes (0-RTT); ``cipher_suites``:
offer only these TLS 1.3 suites (aioquic ``CipherSuite`` names, e.g.
``["CHACHA20_POLY1305_SHA256"]``; default: aioquic's list); ``versions``: the QUIC versions
the client supports, the first being the one its Initial uses (``QuicProtocolVersion``
names, e.g. ``["VERSION_2", "VERSION_1"]``; default: aioquic's, v1 first).  After a Retry
the client resends its ClientHello with the same random (as browsers do; aioquic alone
would pick a new one, which tshark 4.0 cannot match to the key log).  The TLS key log
is appended to ``--keylog`` (NSS SSLKEYLOGFILE format, QUIC labels).  RESULT.json holds per
connection the handshake facts and connection ids and per request its timeline: stream id,
request sent, response headers, first byte, every SSE event's arrival time and text, end;
the QUIC version and TLS cipher suite the connection used (``version``,
``cipher_suite``); and per server push (``pushes``) its push id, promised request and
request stream, push stream, status, body bytes and end.

Flow control (RFC 9000 §4): with ``--blocked-frames`` the server sends STREAM_DATA_BLOCKED
(DATA_BLOCKED) when a stream (the connection) has data queued that the client's limit does
not let it send, once per limit (aioquic does not send these frames itself), and logs each
(``what`` blocked_sent).  A client connection with ``read`` (``{"window": 1024,
"pause_after_bytes": 3000, "pause_ms": 1000}``) announces ``window`` as its initial
max_stream_data and grants request streams credit only as its application reads (limit =
bytes read + ``window``, raised once at least half a window is read; aioquic instead doubles
its limit as data arrives), and stops reading a request stream for ``pause_ms`` once
``pause_after_bytes`` of it arrived: the server fills the window and waits for the
MAX_STREAM_DATA that follows the pause.  The result lists each pause (``read_pauses``: stream,
bytes read, limit, start and end) and every MAX_STREAM_DATA the client sent
(``max_stream_data_sent``).

Bounded: the server exits after ``--lifetime`` seconds, each request has a 20 s timeout,
each connection 30 s and the whole client run ``--deadline`` seconds; a stream never has
more than 1000 events.  Loopback / lab namespaces only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.buffer import UINT_VAR_MAX_SIZE
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived, PushPromiseReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import (
    MAX_STREAM_DATA_FRAME_CAPACITY,
    QuicConnection,
    QuicPacketBuilder,
    QuicPacketSpace,
)
from aioquic.quic.events import HandshakeCompleted, QuicEvent, StreamDataReceived
from aioquic.quic.packet import QuicFrameType, QuicProtocolVersion
from aioquic.quic.stream import QuicStream
from aioquic.tls import CipherSuite, SessionTicket

WORDS = ("The", " packet", " capture", " shows", " a", " stream", " of", " tokens", ",",
         " each", " one", " in", " its", " own", " SSE", " event", " over", " HTTP", "/3",
         ".", " QUIC", " streams", " do", " not", " block", " each", " other")
MAX_EVENTS = 1000
MAX_PUSHES = 8
PUSH_BODY_BYTES = 600
REQUEST_TIMEOUT_S = 20.0
CONNECTION_TIMEOUT_S = 30.0


def tokens_for(n: int, seed: int) -> list[str]:
    """The ``n`` tokens a request with ``seed`` gets (deterministic)."""
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(n)]


def sse_events(buf: str) -> tuple[list[str], str]:
    """Split complete SSE events (blank-line terminated) off ``buf``; returns (events, rest)."""
    out = []
    buf = buf.replace("\r\n", "\n")
    while "\n\n" in buf:
        ev, buf = buf.split("\n\n", 1)
        out.append(ev)
    return out, buf


# =========================================================================== certificate

def make_cert(out_dir: Path, name: str) -> tuple[Path, Path]:
    """A self-signed ECDSA P-256 certificate for ``name`` (valid 30 days)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    out_dir.mkdir(parents=True, exist_ok=True)
    cp, kp = out_dir / "cert.pem", out_dir / "key.pem"
    cp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    kp.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()))
    return cp, kp


# =========================================================================== server

class Log:
    def __init__(self, path: str) -> None:
        self.out = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def __call__(self, **rec: Any) -> None:
        self.out.write(json.dumps({"t_ns": time.time_ns(), **rec}) + "\n")
        self.out.flush()


def send_blocked_frames(quic: QuicConnection, log: Log) -> None:
    """Make ``quic`` send STREAM_DATA_BLOCKED / DATA_BLOCKED (RFC 9000 §4.1, §19.12-13) when
    a stream / the connection has queued data its peer's limit holds back, once per limit,
    logging each (aioquic never sends them).  Hooks the limit writers aioquic calls for every
    1-RTT packet it builds, before the STREAM frames."""
    told: set[tuple[int, int]] = set()  # (stream id or -1, limit)
    stream_limits, conn_limits = quic._write_stream_limits, quic._write_connection_limits

    def blocked(builder: QuicPacketBuilder, kind: QuicFrameType, sid: int, limit: int) -> None:
        if (sid, limit) in told or len(told) > 10_000:
            return
        told.add((sid, limit))
        buf = builder.start_frame(kind, capacity=1 + 2 * UINT_VAR_MAX_SIZE)
        if sid >= 0:
            buf.push_uint_var(sid)
        buf.push_uint_var(limit)
        log(what="blocked_sent", frame=kind.name, stream_id=None if sid < 0 else sid,
            limit=limit)

    def write_stream_limits(builder: QuicPacketBuilder, space: QuicPacketSpace,
                            stream: QuicStream) -> None:
        stream_limits(builder=builder, space=space, stream=stream)
        snd = stream.sender
        if snd._buffer_stop > snd.highest_offset >= stream.max_stream_data_remote > 0:
            blocked(builder, QuicFrameType.STREAM_DATA_BLOCKED, stream.stream_id,
                    stream.max_stream_data_remote)

    def write_connection_limits(builder: QuicPacketBuilder, space: QuicPacketSpace) -> None:
        conn_limits(builder=builder, space=space)
        if quic._remote_max_data_used >= quic._remote_max_data > 0 and any(
                st.sender._buffer_stop > st.sender.highest_offset
                for st in quic._streams.values()):
            blocked(builder, QuicFrameType.DATA_BLOCKED, -1, quic._remote_max_data)

    quic._write_stream_limits = write_stream_limits  # type: ignore[method-assign]
    quic._write_connection_limits = write_connection_limits  # type: ignore[method-assign]


class ChatServerProtocol(QuicConnectionProtocol):
    """One QUIC connection on the server: HTTP/3 requests, streamed chat answers."""

    log: Log
    blocked_frames = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.h3: H3Connection | None = None
        self.reqs: dict[int, dict[str, Any]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        if self.blocked_frames:
            send_blocked_frames(self._quic, self.log)

    def quic_event_received(self, event: QuicEvent) -> None:
        if self.h3 is None:
            # from the first event on: 0-RTT requests can arrive before HandshakeCompleted
            self.h3 = H3Connection(self._quic)
        if isinstance(event, HandshakeCompleted):
            self.log(what="handshake", alpn=event.alpn_protocol,
                     resumed=event.session_resumed, early_data_accepted=event.early_data_accepted,
                     peer=list(self._transport.get_extra_info("peername") or [])[:2])
        for ev in self.h3.handle_event(event):
            self.h3_event(ev)

    def h3_event(self, ev: H3Event) -> None:
        if isinstance(ev, HeadersReceived):
            h = {k.decode(): v.decode() for k, v in ev.headers}
            self.reqs[ev.stream_id] = {"headers": h, "body": b"", "t_headers_ns": time.time_ns()}
            if ev.stream_ended:
                self.start(ev.stream_id)
        elif isinstance(ev, DataReceived) and ev.stream_id in self.reqs:
            r = self.reqs[ev.stream_id]
            r["body"] += ev.data
            if ev.stream_ended:
                self.start(ev.stream_id)

    def start(self, stream_id: int) -> None:
        t = asyncio.ensure_future(self.answer(stream_id))
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    def send(self, stream_id: int, text: str, sent: list[dict[str, Any]], kind: str, *,
             end: bool = False) -> None:
        assert self.h3 is not None
        self.h3.send_data(stream_id, text.encode(), end_stream=end)
        self.transmit()
        sent.append({"t_ns": time.time_ns(), "kind": kind, "bytes": len(text.encode()),
                     "text": text})

    async def answer(self, stream_id: int) -> None:
        assert self.h3 is not None
        r = self.reqs.pop(stream_id)
        t_arrival = time.time_ns()
        t0 = time.monotonic()
        h = r["headers"]
        rid = h.get("x-lab-request-id", f"s{stream_id}")
        try:
            body = json.loads(r["body"] or b"{}")
        except ValueError:
            body = {}
        lab = body.get("lab") or {}
        n = max(0, min(int(lab.get("tokens", 20)), MAX_EVENTS - 2))
        first_ms = float(lab.get("first_ms", 150))
        every_ms = float(lab.get("every_ms", 40))
        seed = int(lab.get("seed", 1))
        toks = tokens_for(n, seed)
        plan = {"tokens": n, "first_ms": first_ms, "every_ms": every_ms, "seed": seed}
        sent: list[dict[str, Any]] = []
        end = "complete"
        if h.get(":path") != "/v1/chat/completions":
            self.h3.send_headers(stream_id, [(b":status", b"404")], end_stream=True)
            self.transmit()
            self.log(what="request", id=rid, stream_id=stream_id, path=h.get(":path"),
                     status=404, t_arrival_ns=t_arrival, end="complete")
            return
        cid, created = f"chatcmpl-lab-{rid}", 1700000000
        pushed: list[dict[str, Any]] = []
        for path in [str(x) for x in lab.get("push") or []][:MAX_PUSHES]:
            try:
                push_sid = self.h3.send_push_promise(stream_id, [
                    (b":method", b"GET"), (b":scheme", b"https"),
                    (b":authority", h.get(":authority", "").encode()), (b":path", path.encode())])
            except Exception as exc:  # the client allows no (more) pushes
                pushed.append({"path": path, "error": type(exc).__name__})
                continue
            body = (f"/* {path} */\n" + "x" * PUSH_BODY_BYTES)[:PUSH_BODY_BYTES].encode()
            self.h3.send_headers(push_sid, [(b":status", b"200"), (b"content-type", b"text/css")])
            self.h3.send_data(push_sid, body, end_stream=True)
            self.transmit()
            pushed.append({"path": path, "push_id": self.h3._next_push_id - 1,
                           "push_stream_id": push_sid, "body_bytes": len(body),
                           "t_ns": time.time_ns()})
        try:
            self.h3.send_headers(stream_id, [
                (b":status", b"200"), (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"), (b"x-lab-request-id", rid.encode())])
            self.transmit()
            for i, tok in enumerate(toks):
                due = t0 + (first_ms + i * every_ms) / 1000
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                delta: dict[str, Any] = {"content": tok}
                if i == 0:
                    delta = {"role": "assistant", "content": tok}
                chunk = {"id": cid, "object": "chat.completion.chunk", "created": created,
                         "model": "lab", "choices": [{"index": 0, "delta": delta,
                                                      "finish_reason": None}]}
                self.send(stream_id, f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n",
                          sent, "token")
            due = t0 + (first_ms + n * every_ms) / 1000
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            fin = {"id": cid, "object": "chat.completion.chunk", "created": created,
                   "model": "lab", "choices": [{"index": 0, "delta": {},
                                                "finish_reason": "stop"}]}
            self.send(stream_id, f"data: {json.dumps(fin, separators=(',', ':'))}\n\n",
                      sent, "finish")
            self.send(stream_id, "data: [DONE]\n\n", sent, "done", end=True)
        except Exception as exc:  # the connection went away under us
            end = f"error: {type(exc).__name__}"
        finally:
            self.log(what="request", id=rid, stream_id=stream_id, method=h.get(":method"),
                     path=h.get(":path"), t_arrival_ns=t_arrival, plan=plan, tokens=toks,
                     end=end, events=sent, pushes=pushed)


async def serve_main(args: argparse.Namespace) -> None:
    log = Log(args.events)
    cfg = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN,
                            max_datagram_frame_size=None, idle_timeout=30.0)
    cfg.load_cert_chain(args.cert, args.key)
    tickets: dict[bytes, SessionTicket] = {}

    def fetch(label: bytes) -> SessionTicket | None:
        return tickets.pop(label, None)  # one use per ticket (0-RTT replay protection)

    def store(t: SessionTicket) -> None:
        if len(tickets) < 100:
            tickets[t.ticket] = t

    proto = type("P", (ChatServerProtocol,), {"log": log,
                                               "blocked_frames": args.blocked_frames})
    host, _, port = args.listen.rpartition(":")
    server = await serve(host.strip("[]"), int(port), configuration=cfg, create_protocol=proto,
                         session_ticket_fetcher=fetch, session_ticket_handler=store,
                         retry=args.retry)
    log(what="listening", listen=args.listen, retry=args.retry,
        blocked_frames=args.blocked_frames)
    try:
        await asyncio.sleep(args.lifetime)
    finally:
        server.close()


# =========================================================================== client

class ReadPacer:
    """Request-stream credit granted as the application reads (see the module docstring:
    the ``read`` plan of a connection), with one reading pause per stream."""

    def __init__(self, quic: QuicConnection, plan: dict[str, Any], transmit: Any) -> None:
        self.quic, self.transmit = quic, transmit
        self.window = int(plan["window"])
        self.pause_after = int(plan["pause_after_bytes"])
        self.pause_s = float(plan["pause_ms"]) / 1000
        self.received: dict[int, int] = {}
        self.read: dict[int, int] = {}
        self.paused: set[int] = set()
        self.pauses: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self._default = quic._write_stream_limits
        quic._write_stream_limits = self.write_limits  # type: ignore[method-assign]

    def data(self, ev: StreamDataReceived) -> None:
        sid = ev.stream_id
        if sid % 4 != 0:  # not a request stream: aioquic's own credit
            return
        n = self.received[sid] = self.received.get(sid, 0) + len(ev.data)
        if sid in self.paused:
            return
        if n >= self.pause_after and not any(p["stream_id"] == sid for p in self.pauses):
            self.paused.add(sid)
            st = self.quic._streams.get(sid)
            self.pauses.append({"stream_id": sid, "t_start_ns": time.time_ns(),
                                "bytes_read": self.read.get(sid, 0),
                                "limit": None if st is None else st.max_stream_data_local})
            asyncio.get_running_loop().call_later(self.pause_s, self.resume, sid)
            return
        self.read[sid] = n

    def resume(self, sid: int) -> None:
        self.paused.discard(sid)
        self.read[sid] = self.received.get(sid, 0)
        for p in self.pauses:
            if p["stream_id"] == sid and "t_end_ns" not in p:
                p["t_end_ns"], p["bytes_received"] = time.time_ns(), self.read[sid]
        self.transmit()

    def write_limits(self, builder: QuicPacketBuilder, space: QuicPacketSpace,
                     stream: QuicStream) -> None:
        sid = stream.stream_id
        if sid % 4 != 0 or not stream.max_stream_data_local:
            self._default(builder=builder, space=space, stream=stream)
            return
        want = self.read.get(sid, 0) + self.window
        if want - stream.max_stream_data_local >= self.window // 2:
            stream.max_stream_data_local = want
        if stream.max_stream_data_local_sent != stream.max_stream_data_local:
            buf = builder.start_frame(QuicFrameType.MAX_STREAM_DATA,
                                      capacity=MAX_STREAM_DATA_FRAME_CAPACITY,
                                      handler=self.quic._on_max_stream_data_delivery,
                                      handler_args=(stream,))
            buf.push_uint_var(sid)
            buf.push_uint_var(stream.max_stream_data_local)
            stream.max_stream_data_local_sent = stream.max_stream_data_local
            if len(self.sent) < 10_000:
                self.sent.append({"t_ns": time.time_ns(), "stream_id": sid,
                                  "maximum": stream.max_stream_data_local})


class ChatClientProtocol(QuicConnectionProtocol):
    """One QUIC connection on the client: HTTP/3 events go to the request that owns them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        # After a Retry aioquic starts a new TLS context, so the second ClientHello has a
        # new random; browsers resend the same random (as TLS does after a
        # HelloRetryRequest), and tshark 4.0 dissects only the first ClientHello of a
        # connection and finds the key log lines by its random.  Keep the random.
        quic = self._quic
        first_init = quic._initialize

        def initialize(peer_cid: bytes) -> None:
            old = getattr(quic, "tls", None)
            first_init(peer_cid)
            if old is not None and old.client_random:
                quic.tls.client_random = old.client_random
                quic.tls.legacy_session_id = old.legacy_session_id
        quic._initialize = initialize  # type: ignore[method-assign]
        self.queues: dict[int, asyncio.Queue[H3Event]] = {}
        self.handshake: dict[str, Any] = {}
        self.pushes: dict[int, dict[str, Any]] = {}
        """push id -> what the client saw of that server push"""
        self.pacer: ReadPacer | None = None

    def quic_event_received(self, event: QuicEvent) -> None:
        if self.pacer is not None and isinstance(event, StreamDataReceived):
            self.pacer.data(event)
        if isinstance(event, HandshakeCompleted):
            self.handshake = {"t_ns": time.time_ns(), "alpn": event.alpn_protocol,
                              "resumed": event.session_resumed,
                              "early_data_accepted": event.early_data_accepted}
        for ev in self.h3.handle_event(event):
            self.push_event(ev)
            sid = getattr(ev, "stream_id", None)
            if sid in self.queues:
                self.queues[sid].put_nowait(ev)

    def push_event(self, ev: H3Event) -> None:
        """Record a server push: its promise (request headers, request stream) and its
        response on the push stream (status, bytes, end)."""
        now = time.time_ns()
        if isinstance(ev, PushPromiseReceived):
            p = self.pushes.setdefault(ev.push_id, {"push_id": ev.push_id})
            p.update(promise_stream_id=ev.stream_id, t_promise_ns=now,
                     request={k.decode(): v.decode() for k, v in ev.headers})
            return
        pid = getattr(ev, "push_id", None)
        if pid is None or len(self.pushes) > 100:
            return
        p = self.pushes.setdefault(pid, {"push_id": pid})
        p["push_stream_id"] = ev.stream_id  # type: ignore[attr-defined]
        if isinstance(ev, HeadersReceived):
            h = {k.decode(): v.decode() for k, v in ev.headers}
            p["status"] = int(h.get(":status", "0"))
            p["content_type"] = h.get("content-type")
        elif isinstance(ev, DataReceived):
            p["body_bytes"] = p.get("body_bytes", 0) + len(ev.data)
        if getattr(ev, "stream_ended", False):
            p["ended"] = True
            p["t_end_ns"] = now


async def one_request(p: ChatClientProtocol, host: str, req: dict[str, Any], t0: float,
                      *, zero_rtt: bool) -> dict[str, Any]:
    await asyncio.sleep(max(0.0, t0 + req.get("at_ms", 0) / 1000 - time.monotonic()))
    body = json.dumps({"model": "lab", "stream": True, "lab": req.get("lab", {}),
                       "messages": [{"role": "user", "content": f"request {req['id']}"}]}
                      ).encode()
    sid = p._quic.get_next_available_stream_id()
    q: asyncio.Queue[H3Event] = asyncio.Queue()
    p.queues[sid] = q
    rec: dict[str, Any] = {"id": req["id"], "method": "POST", "path": "/v1/chat/completions",
                           "stream_id": sid, "plan": req.get("lab"),
                           "sent_before_handshake": zero_rtt and not p.handshake,
                           "t_start_ns": time.time_ns()}
    p.h3.send_headers(sid, [
        (b":method", b"POST"), (b":scheme", b"https"), (b":authority", host.encode()),
        (b":path", b"/v1/chat/completions"), (b"content-type", b"application/json"),
        (b"accept", b"text/event-stream"), (b"x-lab-request-id", req["id"].encode()),
        (b"content-length", str(len(body)).encode())])
    p.h3.send_data(sid, body, end_stream=True)
    p.transmit()
    rec["t_sent_ns"] = time.time_ns()
    events: list[dict[str, Any]] = []
    buf, nbytes, end = "", 0, "timeout"
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            ev = await asyncio.wait_for(q.get(), deadline - time.monotonic())
        except TimeoutError:
            break
        now = time.time_ns()
        if isinstance(ev, HeadersReceived):
            h = {k.decode(): v.decode() for k, v in ev.headers}
            rec.setdefault("t_headers_ns", now)
            rec["status"] = int(h.get(":status", "0"))
            rec["content_type"] = h.get("content-type")
        elif isinstance(ev, DataReceived):
            if ev.data:
                rec.setdefault("t_first_byte_ns", now)
            nbytes += len(ev.data)
            done, buf = sse_events(buf + ev.data.decode("utf-8", "replace"))
            events += [{"t_ns": now, "text": e} for e in done]
        if getattr(ev, "stream_ended", False):
            end = "complete"
            break
    rec["t_end_ns"] = time.time_ns()
    rec["end"] = end
    rec["body_bytes"] = nbytes
    rec["sse_events"] = events
    toks = []
    for e in events:
        data = e["text"].removeprefix("data: ")
        with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
            delta = json.loads(data)["choices"][0]["delta"]
            if "content" in delta:
                toks.append(delta["content"])
    rec["tokens"] = toks
    rec["token_times_ns"] = [e["t_ns"] for e in events if '"content"' in e["text"]]
    del p.queues[sid]
    return rec


async def one_connection(args: argparse.Namespace, conn: dict[str, Any], keylog: Any,
                         ticket: SessionTicket | None) -> tuple[dict[str, Any],
                                                                 SessionTicket | None]:
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=args.host,
                            secrets_log_file=keylog, idle_timeout=30.0)
    cfg.load_verify_locations(args.cacert)
    if conn.get("cipher_suites"):
        cfg.cipher_suites = [CipherSuite[n] for n in conn["cipher_suites"]]
    if conn.get("versions"):
        cfg.supported_versions = [QuicProtocolVersion[n] for n in conn["versions"]]
    if conn.get("read"):
        cfg.max_stream_data = int(conn["read"]["window"])
    got: list[SessionTicket] = []
    if conn.get("resume") and ticket is not None:
        cfg.session_ticket = ticket
    host, _, port = args.connect.rpartition(":")
    out: dict[str, Any] = {"id": conn["id"], "local_port": conn["local_port"],
                           "resume_requested": bool(conn.get("resume")),
                           "ticket_offered": cfg.session_ticket is not None,
                           "early_data_requested": bool(conn.get("early_data")),
                           "cipher_suites_offered": conn.get("cipher_suites"),
                           "versions_offered": conn.get("versions"),
                           "t_start_ns": time.time_ns()}
    early = bool(conn.get("early_data")) and cfg.session_ticket is not None
    async with connect(host.strip("[]"), int(port), configuration=cfg,
                       create_protocol=ChatClientProtocol, session_ticket_handler=got.append,
                       wait_connected=not early, local_port=int(conn["local_port"])) as p:
        assert isinstance(p, ChatClientProtocol)
        q = p._quic
        if conn.get("read"):
            p.pacer = ReadPacer(q, conn["read"], p.transmit)
        out["original_dcid"] = q._original_destination_connection_id.hex()
        out["client_scid"] = q.host_cid.hex()
        t0 = time.monotonic()
        reqs = conn.get("requests") or []
        tasks = [one_request(p, args.host, r, t0, zero_rtt=early and r.get("at_ms", 0) == 0)
                 for r in reqs]
        try:
            res = await asyncio.wait_for(asyncio.gather(*tasks), CONNECTION_TIMEOUT_S)
        except TimeoutError:
            res = []
        for _ in range(50):  # 0-RTT: the handshake may still be under way (at most 5 s)
            if p.handshake:
                break
            await asyncio.sleep(0.1)
        out["handshake"] = p.handshake
        out["server_cid"] = q._peer_cid.cid.hex()
        out["retry_seen"] = bool(getattr(q, "_retry_source_connection_id", None))
        out["version"] = f"0x{int(q._version):08x}"
        ks = q.tls.key_schedule
        out["cipher_suite"] = None if ks is None else CipherSuite(ks.cipher_suite).name
        out["requests"] = list(res)
        await asyncio.sleep(0.2)  # let late session tickets / ACKs arrive (and pushes end)
        out["pushes"] = [p.pushes[k] for k in sorted(p.pushes)]
        if p.pacer is not None:
            out["read_pauses"] = p.pacer.pauses
            out["max_stream_data_sent"] = p.pacer.sent
        p.close()
        await p.wait_closed()
    out["t_end_ns"] = time.time_ns()
    out["end"] = "connection-close-client"
    out["session_tickets_received"] = len(got)
    return out, (got[-1] if got else ticket)


async def client_main(args: argparse.Namespace) -> dict[str, Any]:
    plan = json.loads(Path(args.plan).read_text())
    result: dict[str, Any] = {"aioquic": _version("aioquic"), "t_start_ns": time.time_ns(),
                              "connections": []}
    ticket: SessionTicket | None = None
    with open(args.keylog, "a", encoding="ascii") as kl:
        for conn in plan["connections"][:10]:
            c, ticket = await one_connection(args, conn, kl, ticket)
            result["connections"].append(c)
            kl.flush()
            await asyncio.sleep(0.3)
    result["t_end_ns"] = time.time_ns()
    return result


def _version(name: str) -> str:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cert")
    c.add_argument("--out-dir", required=True, type=Path)
    c.add_argument("--name", default="lab.test")
    s = sub.add_parser("serve")
    s.add_argument("--listen", required=True, metavar="HOST:PORT")
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--events", required=True)
    s.add_argument("--retry", action="store_true")
    s.add_argument("--blocked-frames", action="store_true",
                   help="send STREAM_DATA_BLOCKED / DATA_BLOCKED when flow control holds "
                        "data back")
    s.add_argument("--lifetime", type=float, default=60.0)
    k = sub.add_parser("client")
    k.add_argument("--connect", required=True, metavar="HOST:PORT")
    k.add_argument("--host", default="lab.test")
    k.add_argument("--cacert", required=True)
    k.add_argument("--plan", required=True)
    k.add_argument("--out", required=True)
    k.add_argument("--keylog", required=True)
    k.add_argument("--deadline", type=float, default=40.0)
    args = ap.parse_args(argv)
    if args.cmd == "cert":
        for p in make_cert(args.out_dir, args.name):
            print(p)
        return 0
    if args.cmd == "serve":
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_main(args))
        return 0

    async def bounded() -> dict[str, Any]:
        return await asyncio.wait_for(client_main(args), args.deadline)
    res = asyncio.run(bounded())
    Path(args.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
