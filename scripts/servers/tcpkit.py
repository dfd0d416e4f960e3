"""Tiny TCP servers with scripted behaviour, for recording test captures.

Run inside a namespace (the recorder does this through ``ip netns exec``)::

    python tcpkit.py --events EVENTS.jsonl --lifetime 60 \
        --listen abort:5000@192.0.2.20:9002 --listen stream:100:50@192.0.2.20:9001

Each ``--listen MODE@HOST:PORT`` (HOST may be an IPv6 literal in brackets) starts a listener:

``abort:N``
    Reads the request head (up to a blank line, at most 64 KB), sends an HTTP/1.1 200 header
    that promises more bytes than it sends, then N body bytes, then closes with SO_LINGER 0
    so the kernel sends RST instead of FIN.
``stream:INTERVAL_MS:COUNT``
    Reads the request head, sends a chunked HTTP/1.1 200 response and one small chunk every
    INTERVAL_MS until COUNT chunks were sent (then the final chunk and a FIN) or the peer goes
    away (EOF, RST or a failed send).
``sink``
    Reads until EOF, then answers with the number of bytes it read and closes.

Every accepted connection is logged to the events file as JSON lines with ``time.time_ns()``
timestamps (``accept``, ``close`` with how it ended and the byte counts).  Bounded: each
connection ends after ``--lifetime`` seconds at the latest and so does the whole process.
Body bytes are deterministic (a counter pattern), so captures are repeatable.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

_lock = threading.Lock()


def _log(out: IO[str], **event: Any) -> None:
    event = {"t_ns": time.time_ns(), **event}
    with _lock:
        out.write(json.dumps(event) + "\n")
        out.flush()


def _body(n: int, start: int = 0) -> bytes:
    """``n`` deterministic printable bytes (a repeating counter pattern)."""
    line = b"".join(b"%07d\n" % i for i in range(start, start + n // 8 + 2))
    return line[:n]


def _read_head(conn: socket.socket, deadline: float) -> bytes:
    buf = b""
    while b"\r\n\r\n" not in buf and len(buf) < 65536 and time.monotonic() < deadline:
        conn.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = conn.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def _handle(mode: list[str], conn: socket.socket, peer: str, local: str, out: IO[str],
            deadline: float) -> None:
    sent = received = 0
    how = "fin"
    try:
        if mode[0] == "sink":
            while time.monotonic() < deadline:
                conn.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = conn.recv(65536)
                if not chunk:
                    break
                received += len(chunk)
            reply = b"received %d\n" % received
            conn.sendall(reply)
            sent += len(reply)
        else:
            head = _read_head(conn, deadline)
            received += len(head)
            if mode[0] == "abort":
                n = int(mode[1])
                hdr = (b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                       b"Content-Length: %d\r\n\r\n" % (n * 4))
                conn.sendall(hdr + _body(n))
                sent += len(hdr) + n
                time.sleep(0.05)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                how = "rst-sent"
            elif mode[0] == "stream":
                interval = int(mode[1]) / 1000.0
                count = int(mode[2])
                hdr = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                       b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n")
                conn.sendall(hdr)
                sent += len(hdr)
                conn.setblocking(False)
                for i in range(count):
                    if time.monotonic() >= deadline:
                        how = "lifetime"
                        break
                    payload = b"tick %d %s\n" % (i, _body(24, i * 3))
                    chunk = b"%x\r\n%s\r\n" % (len(payload), payload)
                    conn.sendall(chunk)
                    sent += len(chunk)
                    end = time.monotonic() + interval
                    gone = False
                    while time.monotonic() < end:
                        try:
                            data = conn.recv(4096)
                        except BlockingIOError:
                            time.sleep(min(0.01, max(0.0, end - time.monotonic())))
                            continue
                        if not data:
                            gone = True
                            how = "peer-fin"
                            break
                        received += len(data)
                    if gone:
                        break
                else:
                    conn.sendall(b"0\r\n\r\n")
                    sent += 5
                conn.setblocking(True)
            else:
                raise ValueError(f"unknown mode {mode!r}")
    except ConnectionResetError:
        how = "peer-rst"
    except BrokenPipeError:
        how = "broken-pipe"
    except (TimeoutError, OSError) as exc:
        how = f"error:{exc.__class__.__name__}"
    finally:
        try:
            conn.close()
        finally:
            _log(out, event="close", mode=":".join(mode), peer=peer, local=local, how=how,
                 bytes_sent=sent, bytes_received=received)


def _serve(spec: str, out: IO[str], stop_at: float, per_conn_s: float) -> None:
    mode_s, _, addr = spec.partition("@")
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    srv = socket.socket(fam, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, int(port)))
    srv.listen(16)
    srv.settimeout(0.2)
    mode = mode_s.split(":")
    _log(out, event="listen", mode=mode_s, local=addr)
    while time.monotonic() < stop_at:
        try:
            conn, peer_addr = srv.accept()
        except TimeoutError:
            continue
        peer = f"{peer_addr[0]}:{peer_addr[1]}" if fam == socket.AF_INET else \
            f"[{peer_addr[0]}]:{peer_addr[1]}"
        _log(out, event="accept", mode=mode_s, peer=peer, local=addr)
        deadline = min(stop_at, time.monotonic() + per_conn_s)
        threading.Thread(target=_handle, args=(mode, conn, peer, addr, out, deadline),
                         daemon=True).start()
    srv.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Start the listeners; returns 0 after ``--lifetime`` seconds (or on SIGTERM/SIGINT)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", action="append", required=True, help="MODE@HOST:PORT")
    ap.add_argument("--events", required=True, help="JSON-lines event log")
    ap.add_argument("--lifetime", type=float, default=60.0)
    ap.add_argument("--per-conn", type=float, default=30.0)
    args = ap.parse_args(argv)
    stop_at = time.monotonic() + args.lifetime
    with open(args.events, "a", encoding="utf-8") as out:
        threads = [threading.Thread(target=_serve, args=(s, out, stop_at, args.per_conn),
                                    daemon=True) for s in args.listen]
        for t in threads:
            t.start()
        print("ready", flush=True)
        try:
            while time.monotonic() < stop_at and any(t.is_alive() for t in threads):
                time.sleep(0.1)
        except KeyboardInterrupt:
            pass
        time.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
