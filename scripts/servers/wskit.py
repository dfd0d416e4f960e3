"""WebSocket server and client (python ``websockets``) with scripted, logged behaviour.

Run inside namespaces (the recorder does this through ``ip netns exec``)::

    python wskit.py serve --listen 192.0.2.20:8765 --events S.jsonl --ping-every 3 \
        [--certfile cert.pem --keyfile key.pem] --lifetime 60
    python wskit.py client --url ws://192.0.2.20:8765/chat --local 192.0.2.10:48001 \
        --events C.jsonl --script healthy [--cacert cert.pem --keylog keys.txt]

The server echoes every message (same type, one frame) and, with ``--ping-every S``, sends
its own pings every S seconds (payload ``server-ping-<n>``), never the library's automatic
ones.  Compression (permessage-deflate) is off on both ends so payloads are readable.

Client scripts (``--script``):

``healthy``
    pings every ``--ping-every`` s (payload ``client-ping-<n>``), and on a fixed schedule sends
    a text message, a 1000-byte binary message, a text message in three fragments (opcode 1
    FIN=0, continuation FIN=0, continuation FIN=1), a 5000-byte text message, then after
    ``--duration`` s closes with code 1000 ``bye`` (the close handshake; the server closes the
    TCP connection first).
``blackhole``
    pings every ``--ping-every`` s and sends a small text message every second; when a pong
    has not come back within ``--ping-timeout`` s it gives up: it starts the close handshake
    (code 1011) and, as the close frame cannot be answered, closes the socket after
    ``--close-timeout`` s.
``idle``
    one text message and its echo, then silence (no pings from either end) for ``--idle``
    s, then another text message; logs how the connection failed (the recorder answers that
    message with a TCP reset).

Every send, receive, ping, pong and close is logged as a JSON line with ``time.time_ns()``.
Bounded: the client ends after ``--deadline`` s, the server after ``--lifetime`` s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import ssl
import sys
import time
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed


class Log:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def __call__(self, what: str, **detail: Any) -> None:
        self.f.write(json.dumps({"t_ns": time.time_ns(), "what": what, **detail}) + "\n")
        self.f.flush()


def _desc(msg: str | bytes) -> dict[str, Any]:
    if isinstance(msg, str):
        return {"type": "text", "bytes": len(msg.encode()), "head": msg[:40]}
    return {"type": "binary", "bytes": len(msg)}


# --------------------------------------------------------------------------- server

async def serve_main(args: argparse.Namespace) -> None:
    log = Log(args.events)
    sslctx = None
    if args.certfile:
        sslctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sslctx.load_cert_chain(args.certfile, args.keyfile)
        sslctx.set_alpn_protocols(["http/1.1"])

    async def pinger(ws: ServerConnection, peer: str) -> None:
        n = 0
        while n < 1000:
            await asyncio.sleep(args.ping_every)
            n += 1
            payload = f"server-ping-{n}".encode()
            log("ping sent", peer=peer, payload=payload.decode())
            waiter = asyncio.ensure_future(await ws.ping(payload))

            def done(fut: asyncio.Future[float], p: bytes = payload) -> None:
                if not fut.cancelled() and fut.exception() is None:
                    log("pong received", peer=peer, payload=p.decode(),
                        latency_ms=round(fut.result() * 1000, 3))
            waiter.add_done_callback(done)

    async def handler(ws: ServerConnection) -> None:
        peer = "{}:{}".format(*ws.remote_address[:2])
        log("open", peer=peer, path=ws.request.path if ws.request else None)
        task = asyncio.create_task(pinger(ws, peer)) if args.ping_every > 0 else None
        try:
            async for msg in ws:
                log("received", peer=peer, **_desc(msg))
                await ws.send(msg)
                log("sent", peer=peer, **_desc(msg))
            log("closed", peer=peer, code=ws.close_code, reason=ws.close_reason,
                how="close handshake")
        except ConnectionClosed as exc:
            log("closed", peer=peer, code=ws.close_code, reason=ws.close_reason,
                how=f"{exc.__class__.__name__}: {exc}")
        finally:
            if task:
                task.cancel()

    host, _, port = args.listen.rpartition(":")
    async with serve(handler, host.strip("[]"), int(port), ssl=sslctx, compression=None,
                     ping_interval=None, max_size=2**20) as server:
        log("listening", listen=args.listen, tls=bool(sslctx))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.serve_forever(), args.lifetime)


# --------------------------------------------------------------------------- client

async def client_main(args: argparse.Namespace) -> int:
    log = Log(args.events)
    host, _, port = args.local.rpartition(":")
    kw: dict[str, Any] = {}
    if args.url.startswith("wss:"):
        sslctx = ssl.create_default_context(cafile=args.cacert)
        if args.keylog:
            sslctx.keylog_filename = args.keylog
        sslctx.set_alpn_protocols(["http/1.1"])
        kw["ssl"] = sslctx
    log("connecting", url=args.url, local=args.local)
    async with connect(args.url, compression=None, ping_interval=None,
                       close_timeout=args.close_timeout, open_timeout=5,
                       local_addr=(host.strip("[]"), int(port)), **kw) as ws:
        tls = None
        sslobj = ws.transport.get_extra_info("ssl_object")
        if sslobj is not None:
            tls = {"version": sslobj.version(), "cipher": sslobj.cipher()[0],
                   "alpn": sslobj.selected_alpn_protocol(), "resumed": sslobj.session_reused,
                   "sni": sslobj.server_hostname}
        sock = ws.transport.get_extra_info("socket")
        log("open", local="{}:{}".format(*sock.getsockname()[:2]), subprotocol=ws.subprotocol,
            tls=tls)
        if args.script == "healthy":
            return await healthy(ws, log, args)
        if args.script == "blackhole":
            return await blackhole(ws, log, args)
        return await idle(ws, log, args)


async def _reader(ws: Any, log: Log) -> None:
    try:
        async for msg in ws:
            log("received", **_desc(msg))
    except ConnectionClosed as exc:
        log("reader stopped", error=f"{exc.__class__.__name__}: {exc}")


async def _ping_loop(ws: Any, log: Log, every: float, timeout: float,
                     lost: asyncio.Event) -> None:
    n = 0
    while n < 1000:
        await asyncio.sleep(every)
        n += 1
        payload = f"client-ping-{n}".encode()
        try:
            waiter = await ws.ping(payload)
        except ConnectionClosed:
            return
        log("ping sent", payload=payload.decode())

        def done(fut: asyncio.Future[float], p: bytes = payload) -> None:
            if not fut.cancelled() and fut.exception() is None:
                log("pong received", payload=p.decode(), latency_ms=round(fut.result() * 1000, 3))
        waiter.add_done_callback(done)

        async def watch(w: asyncio.Future[float] = waiter, p: bytes = payload) -> None:
            try:
                await asyncio.wait_for(asyncio.shield(w), timeout)
            except TimeoutError:
                log("ping timeout", payload=p.decode(), timeout_s=timeout)
                lost.set()
            except (ConnectionClosed, asyncio.CancelledError):
                pass
        asyncio.get_running_loop().create_task(watch())


async def healthy(ws: Any, log: Log, args: argparse.Namespace) -> int:
    reader = asyncio.create_task(_reader(ws, log))
    lost = asyncio.Event()
    pinger = asyncio.create_task(_ping_loop(ws, log, args.ping_every, 5.0, lost))
    t0 = time.monotonic()
    plan: list[tuple[float, str | bytes | list[str]]] = [
        (0.5, "hello from the client"),
        (1.7, bytes(range(256)) * 3 + bytes(232)),
        (3.1, ["fragmented ", "message in ", "three parts"]),
        (4.6, "x" * 5000),
        (6.2, "second text message"),
        (7.4, b"\x00\x01binary-two"),
    ]
    for at, msg in plan:
        await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
        if isinstance(msg, list):
            await ws.send(iter(msg))
            log("sent", type="text", fragments=len(msg), bytes=len("".join(msg).encode()),
                head="".join(msg)[:40])
        else:
            await ws.send(msg)
            log("sent", **_desc(msg))
    await asyncio.sleep(max(0.0, t0 + args.duration - time.monotonic()))
    pinger.cancel()
    log("close sent", code=1000, reason="bye")
    await ws.close(1000, "bye")
    log("closed", code=ws.close_code, reason=ws.close_reason)
    await reader
    return 0


async def blackhole(ws: Any, log: Log, args: argparse.Namespace) -> int:
    reader = asyncio.create_task(_reader(ws, log))
    lost = asyncio.Event()
    pinger = asyncio.create_task(_ping_loop(ws, log, args.ping_every, args.ping_timeout, lost))

    async def talker() -> None:
        n = 0
        while n < 1000:
            await asyncio.sleep(1.0)
            n += 1
            try:
                await ws.send(f"message {n}")
            except ConnectionClosed:
                return
            log("sent", type="text", bytes=len(f"message {n}"), head=f"message {n}")

    talk = asyncio.create_task(talker())
    await lost.wait()
    pinger.cancel()
    talk.cancel()
    log("giving up: close sent", code=1011, reason="ping timeout",
        close_timeout_s=args.close_timeout)
    await ws.close(1011, "ping timeout")
    log("closed", code=ws.close_code, reason=ws.close_reason,
        note="close_timeout expired, the socket was closed without a close frame from the "
             "server")
    reader.cancel()
    return 0


async def idle(ws: Any, log: Log, args: argparse.Namespace) -> int:
    await ws.send("before the idle gap")
    log("sent", type="text", bytes=19, head="before the idle gap")
    msg = await ws.recv()
    log("received", **_desc(msg))
    log("idle start", seconds=args.idle)
    await asyncio.sleep(args.idle)
    log("idle end")
    try:
        await ws.send("after the idle gap")
        log("sent", type="text", bytes=18, head="after the idle gap")
        msg = await asyncio.wait_for(ws.recv(), 5.0)
        log("received", **_desc(msg))
    except ConnectionClosed as exc:
        log("connection failed", error=f"{exc.__class__.__name__}: {exc}",
            cause=repr(exc.__cause__))
    except TimeoutError:
        log("no answer", timeout_s=5.0)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--listen", required=True)
    s.add_argument("--events", required=True)
    s.add_argument("--ping-every", type=float, default=0.0)
    s.add_argument("--certfile")
    s.add_argument("--keyfile")
    s.add_argument("--lifetime", type=float, default=60.0)
    c = sub.add_parser("client")
    c.add_argument("--url", required=True)
    c.add_argument("--local", required=True, metavar="IP:PORT")
    c.add_argument("--events", required=True)
    c.add_argument("--script", choices=("healthy", "blackhole", "idle"), default="healthy")
    c.add_argument("--ping-every", type=float, default=2.0)
    c.add_argument("--ping-timeout", type=float, default=4.0)
    c.add_argument("--close-timeout", type=float, default=2.0)
    c.add_argument("--duration", type=float, default=10.0)
    c.add_argument("--idle", type=float, default=6.0)
    c.add_argument("--cacert")
    c.add_argument("--keylog")
    c.add_argument("--deadline", type=float, default=40.0)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "serve":
            asyncio.run(serve_main(args))
            return 0
        return asyncio.run(asyncio.wait_for(client_main(args), args.deadline))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
