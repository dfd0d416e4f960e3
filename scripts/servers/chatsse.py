"""An OpenAI-compatible streaming chat server (aiohttp) with scripted, logged timing.

Run inside a namespace (the recorder does this through ``ip netns exec``)::

    python chatsse.py --listen 127.0.0.1:8081 --events EVENTS.jsonl --lifetime 60

Routes:

``POST /v1/chat/completions``
    JSON body as OpenAI's (``model``, ``messages``, ``stream``); an optional ``lab`` object
    sets the plan: ``{"tokens": 20, "first_ms": 150, "every_ms": 40, "seed": 1}``.  Answers
    ``text/event-stream``: ``tokens`` chunks ``data: {"choices":[{"delta":{"content":TOK}}]}``
    (the first delta also carries ``"role": "assistant"``), the first ``first_ms`` after the
    request arrived and then one every ``every_ms`` (an absolute schedule, no drift), then a
    chunk with ``"finish_reason": "stop"`` and finally ``data: [DONE]``.  So a request makes
    ``tokens + 2`` SSE events.  ``"stream": false`` gets one JSON answer instead.
    ``lab.coding`` (``gzip``, ``deflate`` (zlib), ``deflate-raw`` (sent as ``deflate``),
    ``br``, ``zstd``, or a stack such as ``gzip, br``) compresses the stream with
    ``Content-Encoding``, each event flushed (sync flush) so it is decodable when it
    arrives; ``lab.corrupt_after: k`` sends 16 bytes of garbage instead of the compressed
    event ``k`` (0-based) and stops there.  Each logged event then also has ``wire_bytes``.
``GET /v1/events?n=5&every_ms=100``
    A generic event stream that exercises the SSE syntax: a ``retry:`` line, comment lines,
    ``event:`` names, ``id:`` fields and multi-line ``data:`` (n events).
``GET /health``
    ``ok``.

Each request is logged to the events file as one JSON line when it ends: its id (the
``x-lab-request-id`` header or a counter), path, the plan, every event's text and the
``time.time_ns()`` at which it was written, and how it ended (``complete`` or
``client-gone``).  Bounded: the process exits after ``--lifetime`` seconds, a stream never
has more than 1000 events.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
import zlib
from typing import Any

from aiohttp import web

WORDS = ("The", " packet", " capture", " shows", " a", " stream", " of", " tokens", ",",
         " each", " one", " in", " its", " own", " SSE", " event", " over", " HTTP", "/2",
         ".", " Latency", " matters", " for", " chat", " clients", " and", " servers", " alike")
MAX_EVENTS = 1000
CODINGS = ("gzip", "deflate", "deflate-raw", "br", "zstd")


class _Coder:
    """One content coding, compressing a stream with a flush after every write."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name in ("gzip", "deflate", "deflate-raw"):
            wbits = {"gzip": 31, "deflate": 15, "deflate-raw": -15}[name]
            self.z = zlib.compressobj(6, zlib.DEFLATED, wbits)
        elif name == "br":
            import brotli
            self.b = brotli.Compressor()
        elif name == "zstd":
            import zstandard
            self.c = zstandard.ZstdCompressor(level=3).compressobj()
            self.flush_block = zstandard.COMPRESSOBJ_FLUSH_BLOCK
        else:
            raise ValueError(f"unknown coding {name!r}")

    def write(self, data: bytes) -> bytes:
        if self.name == "br":
            return bytes(self.b.process(data) + self.b.flush())
        if self.name == "zstd":
            return bytes(self.c.compress(data) + self.c.flush(self.flush_block))
        return self.z.compress(data) + self.z.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        if self.name == "br":
            return bytes(self.b.finish())
        if self.name == "zstd":
            return bytes(self.c.flush())
        return self.z.flush()


class Stack:
    """Codings in the order they are applied (``gzip, br``: gzip first, then br)."""

    def __init__(self, spec: str) -> None:
        self.names = [c.strip() for c in spec.split(",") if c.strip()]
        self.coders = [_Coder(n) for n in self.names]

    @property
    def header(self) -> str:
        return ", ".join("deflate" if n == "deflate-raw" else n for n in self.names)

    def write(self, data: bytes) -> bytes:
        for c in self.coders:
            data = c.write(data)
        return data

    def finish(self) -> bytes:
        out = b""
        for i, c in enumerate(self.coders):
            # what the inner codings still hold goes through the outer ones
            tail = c.finish()
            for outer in self.coders[i + 1:]:
                tail = outer.write(tail)
            out += tail
        return out


def tokens_for(n: int, seed: int) -> list[str]:
    """The ``n`` tokens a request with ``seed`` gets (deterministic)."""
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(n)]


class App:
    def __init__(self, events_path: str) -> None:
        self.out = open(events_path, "a", encoding="utf-8")  # noqa: SIM115
        self.counter = 0

    def log(self, **rec: Any) -> None:
        self.out.write(json.dumps({"t_ns": time.time_ns(), **rec}) + "\n")
        self.out.flush()

    def rid(self, request: web.Request) -> str:
        self.counter += 1
        return request.headers.get("x-lab-request-id", f"req{self.counter}")

    async def _send(self, resp: web.StreamResponse, text: str, sent: list[dict[str, Any]],
                    kind: str, coder: Stack | None = None, corrupt: bool = False) -> None:
        raw = text.encode()
        wire = raw if coder is None else coder.write(raw)
        if corrupt:
            wire = b"\xde\xad\xbe\xef" * 4
        await resp.write(wire)
        rec: dict[str, Any] = {"t_ns": time.time_ns(), "kind": kind, "bytes": len(raw),
                               "text": text}
        if coder is not None:
            rec["wire_bytes"] = len(wire)
            if corrupt:
                rec["corrupt"] = True
        sent.append(rec)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        t_arrival = time.time_ns()
        t0 = time.monotonic()
        rid = self.rid(request)
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            body = {}
        lab = body.get("lab") or {}
        n = max(0, min(int(lab.get("tokens", 20)), MAX_EVENTS - 2))
        first_ms = float(lab.get("first_ms", 150))
        every_ms = float(lab.get("every_ms", 40))
        seed = int(lab.get("seed", 1))
        toks = tokens_for(n, seed)
        cid = f"chatcmpl-lab-{rid}"
        created = 1700000000
        plan: dict[str, Any] = {"tokens": n, "first_ms": first_ms, "every_ms": every_ms,
                                "seed": seed}
        coding = str(lab.get("coding") or "")
        corrupt_after = lab.get("corrupt_after")
        coder = Stack(coding) if coding else None
        if coder is not None:
            plan["coding"] = coding
            if corrupt_after is not None:
                plan["corrupt_after"] = int(corrupt_after)
        if not body.get("stream", True):
            await asyncio.sleep(first_ms / 1000)
            self.log(what="request", id=rid, method=request.method, path=request.path,
                     t_arrival_ns=t_arrival, plan=plan, stream=False, end="complete",
                     http_version=f"{request.version.major}.{request.version.minor}")
            return web.json_response({"id": cid, "object": "chat.completion",
                                      "created": created, "model": "lab",
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant",
                                                               "content": "".join(toks)}}]})
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                   "X-Accel-Buffering": "no", "x-lab-request-id": rid}
        if coder is not None:
            headers["Content-Encoding"] = coder.header
        resp = web.StreamResponse(status=200, headers=headers)
        await resp.prepare(request)
        sent: list[dict[str, Any]] = []
        end = "complete"
        try:
            for i, tok in enumerate(toks):
                if corrupt_after is not None and i == int(corrupt_after):
                    await self._send(resp, "", sent, "garbage", coder, corrupt=True)
                    end = "corrupted"
                    await resp.write_eof()
                    return resp
                due = t0 + (first_ms + i * every_ms) / 1000
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                delta: dict[str, Any] = {"content": tok}
                if i == 0:
                    delta = {"role": "assistant", "content": tok}
                chunk = {"id": cid, "object": "chat.completion.chunk", "created": created,
                         "model": "lab", "choices": [{"index": 0, "delta": delta,
                                                      "finish_reason": None}]}
                data = json.dumps(chunk, separators=(",", ":"))
                await self._send(resp, f"data: {data}\n\n", sent, "token", coder)
            due = t0 + (first_ms + n * every_ms) / 1000
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            fin = {"id": cid, "object": "chat.completion.chunk", "created": created,
                   "model": "lab", "choices": [{"index": 0, "delta": {},
                                                "finish_reason": "stop"}]}
            data = json.dumps(fin, separators=(",", ":"))
            await self._send(resp, f"data: {data}\n\n", sent, "finish", coder)
            await self._send(resp, "data: [DONE]\n\n", sent, "done", coder)
            if coder is not None:
                tail = coder.finish()
                await resp.write(tail)
                sent.append({"t_ns": time.time_ns(), "kind": "end-of-coding", "bytes": 0,
                             "text": "", "wire_bytes": len(tail)})
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            end = "client-gone"
            raise
        finally:
            self.log(what="request", id=rid, method=request.method, path=request.path,
                     t_arrival_ns=t_arrival, plan=plan, stream=True, tokens=toks, end=end,
                     http_version=f"{request.version.major}.{request.version.minor}",
                     events=sent)
        return resp

    async def events(self, request: web.Request) -> web.StreamResponse:
        t_arrival = time.time_ns()
        t0 = time.monotonic()
        rid = self.rid(request)
        n = max(0, min(int(request.query.get("n", "5")), MAX_EVENTS))
        every_ms = float(request.query.get("every_ms", "100"))
        resp = web.StreamResponse(status=200, headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        sent: list[dict[str, Any]] = []
        end = "complete"
        try:
            await self._send(resp, "retry: 3000\n: stream opened\n\n", sent, "retry+comment")
            for i in range(n):
                due = t0 + (i + 1) * every_ms / 1000
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if i % 3 == 0:
                    text = f"event: tick\nid: {i + 1}\ndata: tick {i + 1}\n\n"
                elif i % 3 == 1:
                    text = (f"id: {i + 1}\ndata: line one of event {i + 1}\n"
                            f"data: line two of event {i + 1}\n\n")
                else:
                    text = (f": keep-alive comment\nevent: status\nid: {i + 1}\n"
                            f"data: {{\"n\": {i + 1}}}\n\n")
                await self._send(resp, text, sent, "event")
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            end = "client-gone"
            raise
        finally:
            self.log(what="request", id=rid, method=request.method, path=request.path,
                     query=dict(request.query), t_arrival_ns=t_arrival,
                     plan={"events": n, "every_ms": every_ms}, stream=True, end=end,
                     http_version=f"{request.version.major}.{request.version.minor}",
                     events=sent)
        return resp

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")


async def amain(args: argparse.Namespace) -> None:
    app = App(args.events)
    web_app = web.Application()
    web_app.router.add_post("/v1/chat/completions", app.chat)
    web_app.router.add_get("/v1/events", app.events)
    web_app.router.add_get("/health", app.health)
    runner = web.AppRunner(web_app, access_log=None, handle_signals=False)
    await runner.setup()
    for spec in args.listen:
        host, _, port = spec.rpartition(":")
        await web.TCPSite(runner, host.strip("[]"), int(port)).start()
    app.log(what="listening", listen=args.listen)
    try:
        await asyncio.sleep(args.lifetime)
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", action="append", required=True, metavar="HOST:PORT")
    ap.add_argument("--events", required=True)
    ap.add_argument("--lifetime", type=float, default=60.0)
    args = ap.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(amain(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
