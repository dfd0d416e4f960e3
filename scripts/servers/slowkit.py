"""An HTTP/2-over-TLS chat server and client (python h2) that inject known causes of slowness.

Written for the ``slow-causes`` recording (issue #16): every cause of a stall happens at a
time both ends log, so the capture can be checked against what really happened.

Server (``serve``)::

    python slowkit.py serve --listen 192.0.2.20:443 --cert C --key K --log server.jsonl \
        --arm-dir DIR --lifetime 60

Each request's plan travels in its JSON body (POST ``/v1/chat/completions``, field ``lab``)
or, for GETs, in the query string (``/v1/files/large.bin?bytes=262144``).  A chat plan:

* ``tokens`` / ``every_ms`` / ``headers_ms`` / ``first_ms`` / ``size``: the response HEADERS
  go out ``headers_ms`` after the request ended, the first token ``first_ms`` after them,
  then one token every ``every_ms``; every token is one SSE event of exactly ``size`` bytes
  (one DATA frame, one TLS record, one TCP segment while the window is open).
* ``pause_after`` / ``pause_ms``: after token ``pause_after`` the server stops for
  ``pause_ms`` (the "model" stalls); the later tokens' due times move by that much.
* ``arm_at`` / ``arm`` / ``pad``: just before writing token ``arm_at`` (``tokens`` means the
  final frame: last token, finish chunk and ``[DONE]`` with END_STREAM) the server creates
  the file ``<arm-dir>/<arm>`` (the TAP forwarder's drop rule waits for it) and pads that
  token to ``pad`` bytes, so the frame the forwarder drops is that token's segment.

Tokens wait for HTTP/2 flow control like a real server's (they queue while the stream or
connection window is too small and go out when a WINDOW_UPDATE opens it).  A GET for a file
streams ``bytes`` bytes as fast as TCP takes them.

Client (``client``)::

    python slowkit.py client --connect 192.0.2.20:443 --server-name lab.test --cafile C \
        --keylog keys.txt --plan plan.json --log client.jsonl --out result.json

plan.json is a list of connections, run one after the other::

    {"name": "A", "local_port": 50001, "close_after_ms": 7000,
     "rcvbuf": null, "initial_window": null, "connection_window": 16777216,
     "requests": [{"id": "a1", "at_ms": 0, "method": "POST", "lab": {...}},
                  {"id": "c1", "at_ms": 0, "method": "POST", "lab": {...},
                   "late_window_update_ms": 800},
                  {"id": "b1", "at_ms": 0, "method": "GET", "path": "/v1/files/large.bin",
                   "query": {"bytes": 262144}, "stop_reading": {"after_bytes": 65536,
                                                              "for_ms": 1500}}]}

``rcvbuf`` sets SO_RCVBUF before connect (a small receive buffer: the window reaches zero
while the client does not read); ``initial_window`` is the client's
SETTINGS_INITIAL_WINDOW_SIZE; ``late_window_update_ms``: the client sends no WINDOW_UPDATE
for that stream until its window is used up, then waits that long before sending one;
``stop_reading``: once that many body bytes of the stream arrived, the client stops reading
the socket for ``for_ms``; ``"after": ["a1", "a2"], "delay_ms": 700`` (instead of ``at_ms``):
the request goes out 700 ms after the last of those responses ended (client think time).

Both ends write JSON lines with ``time.time()`` (``t``, epoch seconds, the capture's clock)
for every scripted event (request sent, HEADERS, each token sent / received, pause, arm,
window exhausted, WINDOW_UPDATE sent, stop / resume reading, kernel loss counters).
Everything is bounded: each connection by its plan's ``close_after_ms`` plus a margin, the
whole run by ``--deadline`` / ``--lifetime``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import socket
import ssl
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlsplit

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

#: kernel counters (``/proc/net/netstat`` TcpExt, ``/proc/net/snmp`` Tcp) the server logs
#: whenever one changes: they say which loss recovery the kernel used
NETSTAT_KEYS = ("TCPLossProbes", "TCPLossProbeRecovery", "TCPTimeouts", "TCPFastRetrans",
                "TCPSlowStartRetrans", "TCPLostRetransmit", "TCPSackRecovery",
                "TCPRenoRecovery", "TCPSpuriousRTOs", "TCPWinProbe", "TCPToZeroWindowAdv",
                "TCPFromZeroWindowAdv", "TCPTSReorder", "TCPSACKReorder", "TCPRenoReorder",
                "TCPFullUndo", "TCPPartialUndo", "TCPDSACKUndo", "TCPLossUndo")
SNMP_KEYS = ("RetransSegs",)


class Log:
    """A JSON-lines log; every row gets ``t`` (time.time()) unless it brings its own."""

    def __init__(self, path: Path) -> None:
        self._f: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()

    def __call__(self, what: str, **kw: Any) -> None:
        row = {"t": kw.pop("t", time.time()), "what": what, **kw}
        with self._lock:
            self._f.write(json.dumps(row) + "\n")
            self._f.flush()

    def close(self) -> None:
        self._f.close()


def kernel_counters() -> dict[str, int]:
    """The NETSTAT_KEYS / SNMP_KEYS counters of the calling process's network namespace."""
    out: dict[str, int] = {}
    for path, prefix, keys in (("/proc/net/netstat", "TcpExt:", NETSTAT_KEYS),
                               ("/proc/net/snmp", "Tcp:", SNMP_KEYS)):
        try:
            lines = [ln.split() for ln in Path(path).read_text().splitlines()
                     if ln.startswith(prefix)]
        except OSError:
            continue
        if len(lines) >= 2:
            row = dict(zip(lines[0][1:], lines[1][1:], strict=False))
            out.update({k: int(row[k]) for k in keys if k in row})
    return out


def counters_thread(log: Log, stop: threading.Event, every_s: float = 0.02) -> None:
    """Log the kernel counters once, then each change (one row per change) until ``stop``."""
    last = kernel_counters()
    log("kernel_counters", values=last)
    while not stop.wait(every_s):
        now = kernel_counters()
        diff = {k: now[k] - last.get(k, 0) for k in now if now[k] != last.get(k, 0)}
        if diff:
            log("kernel_counters_changed", delta=diff, values=now)
            last = now


# =========================================================================== the tokens

def sse_token(rid: str, i: int, size: int) -> bytes:
    """Token ``i`` of request ``rid``: one OpenAI-style SSE chunk of exactly ``size`` bytes."""
    head = ('data: {"id":"chatcmpl-' + rid + '","object":"chat.completion.chunk",'
            '"model":"lab","choices":[{"index":0,"delta":{"content":"')
    tail = '"},"finish_reason":null}],"i":' + str(i) + '}\n\n'
    word = f" tok{i:03d}"
    fill = size - len(head) - len(tail) - len(word)
    return (head + word + "." * max(0, fill) + tail).encode()


def sse_final(rid: str, i: int, size: int) -> bytes:
    """The last token, the finish chunk and ``[DONE]``, padded to ``size`` bytes in all."""
    done = ('data: {"id":"chatcmpl-' + rid + '","object":"chat.completion.chunk",'
            '"model":"lab","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
            'data: [DONE]\n\n').encode()
    return sse_token(rid, i, max(0, size - len(done))) + done


# =========================================================================== server

class _OutStream:
    """One response the server is sending: its queue of (due time, bytes, end, label)."""

    def __init__(self, sid: int, rid: str) -> None:
        self.sid = sid
        self.rid = rid
        self.headers_due: float | None = None
        self.queue: list[tuple[float, bytes, bool, dict[str, Any]]] = []
        self.blob_left = 0
        self.blocked_since: float | None = None
        self.done = False
        self.plan: dict[str, Any] | None = None


class ServerConn:
    """One accepted TLS connection speaking HTTP/2 (server side)."""

    def __init__(self, sock: ssl.SSLSocket, peer: tuple[str, int], log: Log, arm_dir: Path,
                 deadline: float) -> None:
        self.sock = sock
        self.port = peer[1]
        self.log = log
        self.arm_dir = arm_dir
        self.deadline = deadline
        self.h2 = h2.connection.H2Connection(config=h2.config.H2Configuration(
            client_side=False, header_encoding="utf-8"))
        self.bodies: dict[int, bytearray] = {}
        self.headers: dict[int, dict[str, str]] = {}
        self.out: dict[int, _OutStream] = {}

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def run(self) -> None:
        self.h2.initiate_connection()
        self.flush()
        eof = False
        while not eof and time.monotonic() < self.deadline:
            timeout = 0.05
            nxt = self.next_due()
            if nxt is not None:
                timeout = max(0.0, min(timeout, nxt - time.time()))
            if self.sock.pending() or select.select([self.sock], [], [], timeout)[0]:
                try:
                    data = self.sock.recv(65536)
                except (ssl.SSLError, OSError) as exc:
                    self.log("server_read_error", conn=self.port, error=str(exc))
                    break
                if not data:
                    eof = True
                else:
                    try:
                        events = self.h2.receive_data(data)
                    except h2.exceptions.ProtocolError as exc:
                        self.log("server_h2_error", conn=self.port, error=str(exc))
                        break
                    for ev in events:
                        self.on_event(ev)
            self.send_due()
            self.flush()
        self.log("server_conn_end", conn=self.port, eof=eof)
        if eof:  # the client's close_notify: answer it
            with contextlib.suppress(OSError, ssl.SSLError):
                self.sock.unwrap()
        with contextlib.suppress(OSError):
            self.sock.close()

    def next_due(self) -> float | None:
        dues = []
        for st in self.out.values():
            if st.headers_due is not None:
                dues.append(st.headers_due)
            elif st.queue and st.blocked_since is None:
                dues.append(st.queue[0][0])
            elif st.blob_left and st.blocked_since is None:
                dues.append(time.time())
        return min(dues) if dues else None

    def on_event(self, ev: h2.events.Event) -> None:
        if isinstance(ev, h2.events.RequestReceived):
            self.headers[ev.stream_id] = {str(k): str(v) for k, v in ev.headers or []}
            self.bodies[ev.stream_id] = bytearray()
            if ev.stream_ended is not None:
                self.start_response(ev.stream_id)
        elif isinstance(ev, h2.events.DataReceived):
            self.bodies.setdefault(ev.stream_id, bytearray()).extend(ev.data or b"")
            self.h2.acknowledge_received_data(ev.flow_controlled_length or 0,
                                              ev.stream_id or 0)
        elif isinstance(ev, h2.events.StreamEnded):
            if ev.stream_id in self.headers and ev.stream_id not in self.out:
                self.start_response(ev.stream_id or 0)
        elif isinstance(ev, h2.events.WindowUpdated):
            now = time.time()
            for st in self.out.values():
                if st.blocked_since is not None and ev.stream_id in (0, st.sid):
                    self.log("flow_unblocked", conn=self.port, stream=st.sid, rid=st.rid,
                             blocked_s=round(now - st.blocked_since, 6),
                             by_stream=ev.stream_id, increment=ev.delta)
                    st.blocked_since = None
        elif isinstance(ev, h2.events.StreamReset):
            gone = self.out.get(ev.stream_id or 0)
            if gone is not None:
                gone.done = True
                gone.queue.clear()
                gone.blob_left = 0

    def start_response(self, sid: int) -> None:
        hdr = self.headers.get(sid, {})
        now = time.time()
        rid = hdr.get("x-lab-request-id", f"s{sid}")
        st = _OutStream(sid, rid)
        self.out[sid] = st
        if hdr.get(":method") == "POST":
            try:
                plan = dict(json.loads(bytes(self.bodies.get(sid, b"")) or b"{}").get("lab", {}))
            except (ValueError, AttributeError):
                plan = {}
            self.plan_tokens(st, plan, now)
        else:
            q = dict(parse_qsl(urlsplit(hdr.get(":path", "/")).query))
            st.blob_left = int(q.get("bytes", "0"))
            st.headers_due = now + float(q.get("headers_ms", "0")) / 1000
            st.queue = []
        self.log("request", conn=self.port, stream=sid, rid=rid,
                 method=hdr.get(":method"), path=hdr.get(":path"),
                 plan=st.plan)

    def plan_tokens(self, st: _OutStream, plan: dict[str, Any], now: float) -> None:
        n = int(plan.get("tokens", 20))
        every = float(plan.get("every_ms", 40)) / 1000
        size = int(plan.get("size", 160))
        st.headers_due = now + float(plan.get("headers_ms", 0)) / 1000
        first = st.headers_due + float(plan.get("first_ms", 100)) / 1000
        pause_after = plan.get("pause_after")
        pause = float(plan.get("pause_ms", 0)) / 1000
        arm_at, arm, pad = plan.get("arm_at"), plan.get("arm"), int(plan.get("pad", size))
        queue = []
        for i in range(n + 1):  # token n: the final frame (last words, finish, [DONE])
            due = first + i * every
            if pause_after is not None and i > int(pause_after):
                due += pause
            want = pad if arm_at is not None and i == int(arm_at) else size
            data = sse_final(st.rid, i, want) if i == n else sse_token(st.rid, i, want)
            label: dict[str, Any] = {"i": i}
            if pause_after is not None and i == int(pause_after):
                label["pause_ms"] = pause * 1000
            if arm_at is not None and i == int(arm_at):
                label["arm"] = arm
            queue.append((due, data, i == n, label))
        st.queue = queue
        st.plan = plan

    def send_due(self) -> None:
        now = time.time()
        for st in self.out.values():
            if st.done:
                continue
            if st.headers_due is not None:
                if st.headers_due > now:
                    continue
                ctype = "text/event-stream" if st.queue else "application/octet-stream"
                hdrs = [(":status", "200"), ("content-type", ctype),
                        ("cache-control", "no-cache"), ("server", "slowkit")]
                if not st.queue:
                    hdrs.append(("content-length", str(st.blob_left)))
                self.h2.send_headers(st.sid, hdrs)
                self.flush()
                self.log("headers_sent", conn=self.port, stream=st.sid, rid=st.rid)
                st.headers_due = None
            if st.blob_left:
                self.send_blob(st)
                continue
            while st.queue and st.queue[0][0] <= time.time() and st.blocked_since is None:
                due, data, end, label = st.queue[0]
                if min(self.h2.local_flow_control_window(st.sid),
                       self.h2.max_outbound_frame_size) < len(data):
                    st.blocked_since = time.time()
                    self.log("flow_blocked", conn=self.port, stream=st.sid, rid=st.rid,
                             i=label["i"], window=self.h2.local_flow_control_window(st.sid),
                             connection_window=self.h2.outbound_flow_control_window)
                    break
                if label.get("arm"):
                    (self.arm_dir / str(label["arm"])).touch()
                    self.log("armed", conn=self.port, stream=st.sid, rid=st.rid,
                             arm=label["arm"], i=label["i"], bytes=len(data))
                self.h2.send_data(st.sid, data, end_stream=end)
                self.flush()
                t = time.time()
                self.log("token_sent", t=t, conn=self.port, stream=st.sid, rid=st.rid,
                         i=label["i"], bytes=len(data), due=due, late_ms=round((t - due) * 1e3, 3),
                         end=end)
                st.queue.pop(0)
                if "pause_ms" in label:
                    self.log("pause_start", t=t, conn=self.port, stream=st.sid, rid=st.rid,
                             after_token=label["i"], pause_ms=label["pause_ms"])
                if end:
                    st.done = True

    def send_blob(self, st: _OutStream) -> None:
        """Up to 64 KiB of the file per call (as the windows allow); blocks while TCP does."""
        budget = 65536
        while st.blob_left and budget > 0:
            room = min(self.h2.local_flow_control_window(st.sid),
                       self.h2.max_outbound_frame_size, st.blob_left, budget)
            if room <= 0:
                st.blocked_since = time.time()
                self.log("flow_blocked", conn=self.port, stream=st.sid, rid=st.rid,
                         left=st.blob_left)
                return
            end = room == st.blob_left
            self.h2.send_data(st.sid, b"x" * room, end_stream=end)
            self.flush()
            st.blob_left -= room
            budget -= room
            if end:
                st.done = True
                self.log("blob_sent", conn=self.port, stream=st.sid, rid=st.rid)


def serve_main(args: argparse.Namespace) -> int:
    log = Log(args.log)
    stop = threading.Event()
    threading.Thread(target=counters_thread, args=(log, stop), daemon=True).start()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    ctx.set_alpn_protocols(["h2"])
    # a client that closes without close_notify gets a FIN, not a decode_error alert (as nginx)
    ctx.options |= ssl.OP_IGNORE_UNEXPECTED_EOF
    host, _, port = args.listen.rpartition(":")
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((host, int(port)))
    lsock.listen(16)
    lsock.settimeout(0.2)
    deadline = time.monotonic() + args.lifetime
    log("listening", listen=args.listen)
    threads: list[threading.Thread] = []
    while time.monotonic() < deadline and len(threads) < 32:
        try:
            raw, peer = lsock.accept()
        except TimeoutError:
            continue
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(10.0)
        try:
            sk = ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            log("tls_error", peer=list(peer), error=str(exc))
            raw.close()
            continue
        sk.settimeout(10.0)  # blocking sends, bounded
        log("accepted", conn=peer[1], alpn=sk.selected_alpn_protocol(), tls=sk.version(),
            cipher=(sk.cipher() or ("",))[0])
        conn = ServerConn(sk, peer, log, args.arm_dir, deadline)
        t = threading.Thread(target=conn.run, daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stop.set()
    log.close()
    return 0


# =========================================================================== client

class _InStream:
    def __init__(self, req: dict[str, Any]) -> None:
        self.req = req
        self.buf = b""
        self.tokens: list[dict[str, Any]] = []
        self.body_bytes = 0
        self.unacked = 0
        self.status: str | None = None
        self.t_headers: float | None = None
        self.t_end: float | None = None
        self.late_state = "waiting" if req.get("late_window_update_ms") else None
        self.late_due: float | None = None


def run_connection(plan: dict[str, Any], args: argparse.Namespace, log: Log,
                   tls: ssl.SSLContext, run_deadline: float) -> dict[str, Any]:
    """One connection of the plan, start to close; returns what happened on it."""
    host, _, port = args.connect.rpartition(":")
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if plan.get("rcvbuf"):
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(plan["rcvbuf"]))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw.bind(("", int(plan.get("local_port", 0))))
    lport = raw.getsockname()[1]
    t_conn = time.time()
    log("connect", conn=lport, name=plan.get("name"),
        rcvbuf=raw.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
    raw.settimeout(10.0)
    raw.connect((host, int(port)))
    sk = tls.wrap_socket(raw, server_hostname=args.server_name)
    log("tls_done", conn=lport, alpn=sk.selected_alpn_protocol(), tls=sk.version())
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(
        client_side=True, header_encoding="utf-8"))
    settings: dict[int, int] = {}
    if plan.get("initial_window"):
        settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] = int(plan["initial_window"])
    conn.initiate_connection()
    if settings:
        conn.update_settings(settings)
    cwin = int(plan.get("connection_window") or 65535)
    if cwin > 65535:
        conn.increment_flow_control_window(cwin - 65535)
    sk.sendall(conn.data_to_send())
    t0 = time.time()
    pending = sorted((r for r in plan["requests"] if "after" not in r),
                     key=lambda r: r["at_ms"])
    # requests sent ``delay_ms`` after the responses they wait for ended (client think time)
    waiting = [r for r in plan["requests"] if "after" in r]
    streams: dict[int, _InStream] = {}
    close_at = t0 + float(plan.get("close_after_ms", 5000)) / 1000
    hard_end = min(run_deadline, close_at + 10.0)
    paused_until: float | None = None
    eof = False

    def send_request(req: dict[str, Any]) -> None:
        sid = conn.get_next_available_stream_id()
        st = streams[sid] = _InStream(req)
        path = req.get("path", "/v1/chat/completions")
        if req.get("query"):
            path += "?" + "&".join(f"{k}={v}" for k, v in req["query"].items())
        hdrs = [(":method", req.get("method", "POST")), (":scheme", "https"),
                (":authority", args.server_name), (":path", path),
                ("user-agent", "pcaptools-lab slowkit (python h2)"),
                ("x-lab-request-id", req["id"])]
        if req.get("method", "POST") == "POST":
            body = json.dumps({"model": "lab", "stream": True,
                               "messages": [{"role": "user", "content": f"request {req['id']}"}],
                               "lab": req.get("lab", {})}).encode()
            conn.send_headers(sid, [*hdrs, ("content-type", "application/json"),
                                    ("accept", "text/event-stream"),
                                    ("content-length", str(len(body)))])
            conn.send_data(sid, body, end_stream=True)
        else:
            conn.send_headers(sid, hdrs, end_stream=True)
        sk.sendall(conn.data_to_send())
        st.req["path_sent"] = path
        log("request_sent", conn=lport, stream=sid, rid=req["id"], path=path)
        st.req["t_sent"] = time.time()

    def on_data(ev: h2.events.DataReceived) -> None:
        nonlocal paused_until
        sid = ev.stream_id or 0
        st = streams.get(sid)
        now = time.time()
        n = ev.flow_controlled_length or 0
        if st is None:
            conn.acknowledge_received_data(n, sid)
            return
        st.body_bytes += len(ev.data or b"")
        if st.late_state == "waiting" or st.late_state == "due":
            st.unacked += n
            if st.late_state == "waiting" and conn.remote_flow_control_window(sid) < int(
                    st.req.get("lab", {}).get("size", 160)):
                st.late_state = "due"
                st.late_due = now + float(st.req["late_window_update_ms"]) / 1000
                log("window_exhausted", conn=lport, stream=sid, rid=st.req["id"],
                    window=conn.remote_flow_control_window(sid), unacked=st.unacked,
                    update_due=st.late_due)
        else:
            conn.acknowledge_received_data(n, sid)
        st.buf += ev.data or b""
        while b"\n\n" in st.buf:
            event, _, st.buf = st.buf.partition(b"\n\n")
            text = event.decode(errors="replace")
            if text.startswith("data: {") and '"content":' in text:
                try:
                    i = int(json.loads(text[6:]).get("i", -1))
                except ValueError:
                    i = -1
                st.tokens.append({"t": now, "i": i})
                log("token", t=now, conn=lport, stream=sid, rid=st.req["id"], i=i)
        sr = st.req.get("stop_reading")
        if sr and not st.req.get("_stopped") and st.body_bytes >= int(sr["after_bytes"]):
            st.req["_stopped"] = True
            paused_until = now + float(sr["for_ms"]) / 1000
            log("stop_reading", conn=lport, stream=sid, rid=st.req["id"],
                body_bytes=st.body_bytes, for_ms=sr["for_ms"], until=paused_until)

    goaway_sent = False
    while not eof and time.time() < hard_end:
        now = time.time()
        while pending and t0 + pending[0]["at_ms"] / 1000 <= time.time():
            send_request(pending.pop(0))
        for req in list(waiting):
            ends = [st.t_end for st in streams.values() if st.req["id"] in req["after"]]
            if len(ends) == len(req["after"]) and all(e is not None for e in ends):
                last = max(e for e in ends if e is not None)
                if "_due" not in req:
                    req["_due"] = last + float(req.get("delay_ms", 0)) / 1000
                    log("request_due", rid=req["id"], after=req["after"], last_end=last,
                        delay_ms=req.get("delay_ms", 0), due=req["_due"])
                if time.time() >= req["_due"]:
                    waiting.remove(req)
                    send_request(req)
        for sid, st in streams.items():
            if st.late_state == "due" and st.late_due is not None and now >= st.late_due:
                conn.increment_flow_control_window(st.unacked, stream_id=sid)
                sk.sendall(conn.data_to_send())
                log("window_update_sent", conn=lport, stream=sid, rid=st.req["id"],
                    increment=st.unacked, late_ms=st.req["late_window_update_ms"])
                st.unacked = 0
                st.late_state = "done"
        if not pending and not waiting and now >= close_at and not goaway_sent:
            conn.close_connection()
            sk.sendall(conn.data_to_send())
            log("goaway_sent", conn=lport)
            goaway_sent = True
            # close_notify, then the server's close_notify and FIN (unwrap waits for them)
            sk.settimeout(3.0)
            try:
                sk.unwrap()
                eof = True
            except (OSError, ssl.SSLError) as exc:
                log("tls_close", conn=lport, error=repr(exc))
            log("tls_closed", conn=lport)
            break
        if paused_until is not None:
            if now < paused_until:
                time.sleep(min(0.01, paused_until - now))
                continue
            log("resume_reading", conn=lport, paused_until=paused_until)
            paused_until = None
        timeout = 0.02
        if pending:
            timeout = max(0.0, min(timeout, t0 + pending[0]["at_ms"] / 1000 - time.time()))
        for req in waiting:
            if "_due" in req:
                timeout = max(0.0, min(timeout, req["_due"] - time.time()))
        if sk.pending() or select.select([sk], [], [], timeout)[0]:
            try:
                data = sk.recv(65536)
            except (ssl.SSLError, OSError) as exc:
                log("client_read_error", conn=lport, error=str(exc))
                break
            if not data:
                eof = True
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    rs = streams.get(ev.stream_id or 0)
                    if rs is not None:
                        rs.t_headers = time.time()
                        rs.status = {str(k): str(v) for k, v in ev.headers or []}.get(":status")
                        log("headers", conn=lport, stream=ev.stream_id, rid=rs.req["id"],
                            status=rs.status)
                elif isinstance(ev, h2.events.DataReceived):
                    on_data(ev)
                elif isinstance(ev, h2.events.StreamEnded):
                    es = streams.get(ev.stream_id or 0)
                    if es is not None:
                        es.t_end = time.time()
                        log("stream_end", conn=lport, stream=ev.stream_id, rid=es.req["id"],
                            tokens=len(es.tokens), body_bytes=es.body_bytes)
            out = conn.data_to_send()
            if out:
                sk.sendall(out)
    log("closed", conn=lport, eof=eof)
    with contextlib.suppress(OSError):
        sk.close()
    return {"name": plan.get("name"), "client_port": lport, "t_connect": t_conn,
            "t_h2_start": t0, "eof": eof,
            "requests": [{"id": st.req["id"], "h2_stream": sid,
                          "path": st.req.get("path_sent"), "method": st.req.get("method"),
                          "sent": st.req.get("t_sent"), "headers": st.t_headers,
                          "status": st.status, "end": st.t_end, "body_bytes": st.body_bytes,
                          "tokens": st.tokens} for sid, st in sorted(streams.items())]}


def client_main(args: argparse.Namespace) -> int:
    log = Log(args.log)
    tls = ssl.create_default_context(cafile=args.cafile)
    tls.set_alpn_protocols(["h2"])
    tls.keylog_filename = str(args.keylog)
    plan = json.loads(Path(args.plan).read_text())
    deadline = time.time() + args.deadline
    result: dict[str, Any] = {"connections": [], "h2": h2.__version__,
                              "python": sys.version.split()[0],
                              "openssl": ssl.OPENSSL_VERSION}
    rc = 0
    for cp in plan:
        if time.time() >= deadline:
            break
        try:
            result["connections"].append(run_connection(cp, args, log, tls, deadline))
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError) as exc:
            log("connection_failed", name=cp.get("name"), error=repr(exc))
            rc = 1
        time.sleep(float(cp.get("gap_after_ms", 300)) / 1000)
    tmp = Path(str(args.out) + ".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, args.out)
    log.close()
    return rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--listen", required=True)
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--log", required=True, type=Path)
    s.add_argument("--arm-dir", required=True, type=Path)
    s.add_argument("--lifetime", type=float, default=60.0)
    c = sub.add_parser("client")
    c.add_argument("--connect", required=True)
    c.add_argument("--server-name", required=True)
    c.add_argument("--cafile", required=True)
    c.add_argument("--keylog", required=True, type=Path)
    c.add_argument("--plan", required=True, type=Path)
    c.add_argument("--log", required=True, type=Path)
    c.add_argument("--out", required=True, type=Path)
    c.add_argument("--deadline", type=float, default=60.0)
    args = ap.parse_args(argv)
    return serve_main(args) if args.cmd == "serve" else client_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
