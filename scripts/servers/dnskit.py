"""A tiny authoritative DNS server for ``lab.test``, over UDP, TCP and HTTPS, for recording
test captures.

Run inside a namespace (the recorder does this through ``ip netns exec``)::

    python dnskit.py --host 192.0.2.20 --events EVENTS.jsonl --lifetime 60 \
        [--doh-http 80] [--doh-h2 443 --cert C --key K]

Zone (any name not under ``lab.test`` gets NXDOMAIN):

- ``big.lab.test`` A: 41 A records (192.0.2.20, then 198.51.100.1..40), 674 bytes; over UDP
  (no EDNS: 512-byte limit) the answer is cut to the question with TC=1 (RFC 1035 §4.2.1),
  so clients retry over TCP.
- ``huge.lab.test`` TXT: 20 TXT strings of 200 bytes (about 4 KB: several TCP segments).
- ``split.lab.test`` A: over TCP the 2-byte length prefix and the message are written in two
  sends 50 ms apart, so the message is split across two segments.
- every other ``*.lab.test`` name: A 192.0.2.20, AAAA 2001:db8:77::20, TTL 300.

Listeners: UDP and TCP port 53 (several queries per connection, answered in order);
``--doh-http PORT``: DNS over HTTPS on cleartext HTTP/1.1 (``POST /dns-query`` with an
``application/dns-message`` body, ``GET /dns-query?dns=<base64url>``; anything else gets
``200 ok``, keep-alive); ``--doh-h2 PORT``: the same over TLS with ALPN h2 (python ``h2``).

Every message answered is logged as a JSON line (``time.time_ns()``, transport, id, name,
type, rcode, truncated, answer count, the TCP/HTTP details). Bounded: the process exits after
``--lifetime`` seconds; each connection ends after 20 s idle or 1000 messages.
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import ssl
import struct
import sys
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

_lock = threading.Lock()
_log: Any = None
SERVER4 = "192.0.2.20"
SERVER6 = "2001:db8:77::20"


def log(**row: Any) -> None:
    with _lock:
        _log.write(json.dumps({"t_ns": time.time_ns(), **row}) + "\n")
        _log.flush()


# -- messages -----------------------------------------------------------------------------------

def parse_query(msg: bytes) -> tuple[int, int, str, int, int, bytes]:
    """(id, flags, name, qtype, qclass, question bytes) of a query with one question."""
    ident, flags, qd = struct.unpack_from(">HHH", msg, 0)
    if qd != 1:
        raise ValueError("want one question")
    pos, labels = 12, []
    while True:
        n = msg[pos]
        pos += 1
        if n == 0:
            break
        labels.append(msg[pos:pos + n].decode("ascii"))
        pos += n
    qtype, qclass = struct.unpack_from(">HH", msg, pos)
    return ident, flags, ".".join(labels), qtype, qclass, msg[12:pos + 4]


def _rr(rtype: int, rdata: bytes, ttl: int = 300) -> bytes:
    return b"\xc0\x0c" + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata


def answer(msg: bytes, *, udp: bool) -> tuple[bytes, dict[str, Any]]:
    """The response to ``msg`` and what it says (for the log)."""
    ident, flags, name, qtype, _qclass, question = parse_query(msg)
    lname = name.lower()
    rcode, rrs = 0, []
    if not (lname == "lab.test" or lname.endswith(".lab.test")):
        rcode = 3
    elif lname == "big.lab.test" and qtype == 1:
        rrs = [_rr(1, socket.inet_aton(SERVER4))] + [
            _rr(1, bytes([198, 51, 100, i])) for i in range(1, 41)]
    elif lname == "huge.lab.test" and qtype == 16:
        rrs = [_rr(16, bytes([200]) + bytes([97 + i % 26]) * 200, 60) for i in range(20)]
    elif qtype == 1:
        rrs = [_rr(1, socket.inet_aton(SERVER4))]
    elif qtype == 28:
        rrs = [_rr(28, socket.inet_pton(socket.AF_INET6, SERVER6))]
    rd = flags & 0x0100
    out_flags = 0x8000 | 0x0400 | rd | rcode  # QR, AA, RD copied
    body = b"".join(rrs)
    truncated = False
    if udp and 12 + len(question) + len(body) > 512:
        truncated, body, rrs = True, b"", []
        out_flags |= 0x0200
    resp = struct.pack(">HHHHHH", ident, out_flags, 1, len(rrs), 0, 0) + question + body
    return resp, {"id": ident, "name": name, "qtype": qtype, "rcode": rcode,
                  "truncated": truncated, "answers": len(rrs), "bytes": len(resp)}


# -- UDP and TCP ---------------------------------------------------------------------------------

def serve_udp(host: str, deadline: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 53))
    s.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            msg, peer = s.recvfrom(65535)
        except TimeoutError:
            continue
        try:
            resp, info = answer(msg, udp=True)
        except (ValueError, IndexError, struct.error):
            continue
        s.sendto(resp, peer)
        log(transport="udp", peer=f"{peer[0]}:{peer[1]}", **info)


def _recv_exact(c: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        data = c.recv(n - len(buf))
        if not data:
            return None
        buf += data
    return buf


def tcp_conn(c: socket.socket, peer: tuple[str, int]) -> None:
    c.settimeout(20)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    n = 0
    try:
        while n < 1000:
            head = _recv_exact(c, 2)
            if head is None:
                break
            msg = _recv_exact(c, struct.unpack(">H", head)[0])
            if msg is None:
                break
            n += 1
            resp, info = answer(msg, udp=False)
            prefix = struct.pack(">H", len(resp))
            if info["name"].lower() == "split.lab.test":
                c.sendall(prefix)
                time.sleep(0.05)
                c.sendall(resp)
            else:
                c.sendall(prefix + resp)
            log(transport="tcp", peer=f"{peer[0]}:{peer[1]}", index=n, **info)
    except (OSError, ValueError, IndexError, struct.error) as exc:
        log(transport="tcp", peer=f"{peer[0]}:{peer[1]}", error=type(exc).__name__)
    finally:
        c.close()


def serve_tcp(host: str, port: int, deadline: float, handler: Any) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(16)
    s.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            c, peer = s.accept()
        except TimeoutError:
            continue
        threading.Thread(target=handler, args=(c, peer), daemon=True).start()


# -- DNS over HTTPS ------------------------------------------------------------------------------

def doh_query(method: str, target: str, body: bytes) -> bytes | None:
    """The DNS query of a DoH request, or None when it is not one."""
    url = urlsplit(target)
    if url.path != "/dns-query":
        return None
    if method == "POST":
        return body
    vals = parse_qs(url.query).get("dns")
    if not vals:
        return None
    return base64.urlsafe_b64decode(vals[0] + "=" * (-len(vals[0]) % 4))


def http1_conn(c: socket.socket, peer: tuple[str, int]) -> None:
    c.settimeout(20)
    buf = b""
    n = 0
    try:
        while n < 1000:
            while b"\r\n\r\n" not in buf:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            hdrs = {k.strip().lower(): v.strip() for k, v in
                    (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
            length = int(hdrs.get("content-length", "0"))
            while len(buf) < length:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
            body, buf = buf[:length], buf[length:]
            n += 1
            q = doh_query(method, target, body)
            if q is None:
                out, ctype, info = b"ok\n", "text/plain", {}
            else:
                out, info = answer(q, udp=False)
                ctype = "application/dns-message"
            c.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(out)}"
                      f"\r\nCache-Control: max-age=0\r\n\r\n".encode() + out)
            log(transport="doh" if q is not None else "http", http="1.1", method=method,
                target=target, peer=f"{peer[0]}:{peer[1]}", index=n, **info)
    except (OSError, ValueError, IndexError, struct.error) as exc:
        log(transport="http", peer=f"{peer[0]}:{peer[1]}", error=type(exc).__name__)
    finally:
        c.close()


def h2_conn(ctx: ssl.SSLContext, raw: socket.socket, peer: tuple[str, int]) -> None:
    import h2.config
    import h2.connection
    import h2.events

    raw.settimeout(20)
    try:
        c = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError) as exc:
        log(transport="h2", peer=f"{peer[0]}:{peer[1]}", error=type(exc).__name__)
        raw.close()
        return
    conn = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    c.sendall(conn.data_to_send())
    reqs: dict[int, dict[str, Any]] = {}
    try:
        for _ in range(10000):
            data = c.recv(65536)
            if not data:
                break
            for e in conn.receive_data(data):
                if isinstance(e, h2.events.RequestReceived):
                    reqs[e.stream_id] = {"headers": dict(e.headers), "body": b""}
                elif isinstance(e, h2.events.DataReceived):
                    reqs[e.stream_id]["body"] += e.data
                    conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.StreamEnded):
                    r = reqs.pop(e.stream_id)
                    h = r["headers"]
                    q = doh_query(h[":method"], h[":path"], r["body"])
                    if q is None:
                        out, ctype, info = b"ok\n", "text/plain", {}
                    else:
                        out, info = answer(q, udp=False)
                        ctype = "application/dns-message"
                    conn.send_headers(e.stream_id, [
                        (":status", "200"), ("content-type", ctype),
                        ("content-length", str(len(out))), ("cache-control", "max-age=0")])
                    conn.send_data(e.stream_id, out, end_stream=True)
                    log(transport="doh" if q is not None else "http", http="2",
                        method=h[":method"], target=h[":path"], stream_id=e.stream_id,
                        peer=f"{peer[0]}:{peer[1]}", **info)
                elif isinstance(e, h2.events.ConnectionTerminated):
                    break
            out = conn.data_to_send()
            if out:
                c.sendall(out)
    except (OSError, ssl.SSLError, KeyError, ValueError) as exc:
        log(transport="h2", peer=f"{peer[0]}:{peer[1]}", error=type(exc).__name__)
    finally:
        c.close()


def main(argv: list[str] | None = None) -> int:
    global _log
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--host", default=SERVER4)
    ap.add_argument("--events", required=True)
    ap.add_argument("--lifetime", type=float, default=60)
    ap.add_argument("--doh-http", type=int)
    ap.add_argument("--doh-h2", type=int)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    a = ap.parse_args(argv)
    _log = open(a.events, "a")  # noqa: SIM115 - the process's log
    deadline = time.monotonic() + a.lifetime
    threads = [threading.Thread(target=serve_udp, args=(a.host, deadline), daemon=True),
               threading.Thread(target=serve_tcp, args=(a.host, 53, deadline, tcp_conn),
                                daemon=True)]
    if a.doh_http:
        threads.append(threading.Thread(target=serve_tcp, daemon=True,
                                        args=(a.host, a.doh_http, deadline, http1_conn)))
    if a.doh_h2:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        ctx.set_alpn_protocols(["h2"])
        threads.append(threading.Thread(
            target=serve_tcp, daemon=True,
            args=(a.host, a.doh_h2, deadline, lambda c, p: h2_conn(ctx, c, p))))
    for t in threads:
        t.start()
    while time.monotonic() < deadline:
        time.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
