"""WebSocket traffic for the benchmark capture (python ``websockets``): a server and a client.

    python ws_bench.py serve --host 192.0.2.20 --port 8080 [--certfile C --keyfile K] \
        --lifetime 900
    python ws_bench.py client --url ws://192.0.2.20:8080/chat [--deflate] \
        [--cacert C --keylog KEYS] --requests 20 --tokens 60 --audio 12

The server accepts permessage-deflate when the client offers it (``--deflate``), so one server
serves both kinds. Per request the client sends a JSON prompt; the server answers with
``--tokens`` small JSON text messages (an LLM-style token stream, ``{"delta": " wN"}``) and a
final ``{"done": true}``; the client then sends ``--audio`` binary messages of 3,200 bytes
(100 ms of 16 kHz 16-bit audio, seeded random bytes so deflate cannot shrink them much) that
the server echoes, and one ping. After the requests the client closes with code 1000.
Bounded: the client gives up after ``--deadline`` s, the server after ``--lifetime`` s.
Prints one JSON line of counts (what it sent and received) on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import ssl
import sys
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

AUDIO_BYTES = 3200


async def serve_main(args: argparse.Namespace) -> None:
    sslctx = None
    if args.certfile:
        sslctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sslctx.load_cert_chain(args.certfile, args.keyfile)
        sslctx.set_alpn_protocols(["http/1.1"])

    async def handler(ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for msg in ws:
                if isinstance(msg, bytes):
                    await ws.send(msg)
                    continue
                try:
                    req = json.loads(msg)
                    n = int(req.get("tokens", 0))
                except (ValueError, AttributeError, TypeError):
                    n = 0
                for i in range(min(n, 10_000)):
                    await ws.send(json.dumps({"id": req.get("id"), "delta": f" w{i}"}))
                await ws.send(json.dumps({"id": req.get("id"), "done": True}))

    async with serve(handler, args.host, args.port, ssl=sslctx, compression="deflate",
                     ping_interval=None, max_size=2**20) as server:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.serve_forever(), args.lifetime)


async def client_main(args: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if args.url.startswith("wss:"):
        sslctx = ssl.create_default_context(cafile=args.cacert)
        sslctx.check_hostname = False
        sslctx.verify_mode = ssl.CERT_NONE
        if args.keylog:
            sslctx.keylog_filename = args.keylog
        sslctx.set_alpn_protocols(["http/1.1"])
        kw["ssl"] = sslctx
    rnd = random.Random(args.seed)
    counts = {"requests": 0, "text_received": 0, "binary_sent": 0, "binary_received": 0,
              "pings": 0}
    async with connect(args.url, compression="deflate" if args.deflate else None,
                       ping_interval=None, open_timeout=10, max_size=2**20, **kw) as ws:
        for r in range(args.requests):
            await ws.send(json.dumps({"id": r, "prompt": f"request {r}", "tokens": args.tokens}))
            counts["requests"] += 1
            while True:
                msg = await ws.recv()
                if isinstance(msg, bytes):
                    continue
                counts["text_received"] += 1
                if '"done"' in msg:
                    break
            for _ in range(args.audio):
                await ws.send(rnd.randbytes(AUDIO_BYTES))
                counts["binary_sent"] += 1
            for _ in range(args.audio):
                if isinstance(await ws.recv(), bytes):
                    counts["binary_received"] += 1
            await (await ws.ping(f"bench-{r}".encode()))
            counts["pings"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--certfile")
    s.add_argument("--keyfile")
    s.add_argument("--lifetime", type=float, default=900.0)
    c = sub.add_parser("client")
    c.add_argument("--url", required=True)
    c.add_argument("--deflate", action="store_true")
    c.add_argument("--cacert")
    c.add_argument("--keylog")
    c.add_argument("--requests", type=int, default=20)
    c.add_argument("--tokens", type=int, default=60)
    c.add_argument("--audio", type=int, default=12)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--deadline", type=float, default=120.0)
    args = ap.parse_args(argv)
    if args.cmd == "serve":
        asyncio.run(serve_main(args))
        return 0
    try:
        counts = asyncio.run(asyncio.wait_for(client_main(args), args.deadline))
    except (TimeoutError, OSError, ConnectionClosed) as e:
        print(json.dumps({"error": f"{e.__class__.__name__}: {e}"}))
        return 1
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
