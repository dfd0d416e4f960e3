"""A realtime voice server and client (python ``websockets``) speaking OpenAI-Realtime-style
JSON events over wss, with scripted pacing, and a JSON-lines log of everything they did.

Run inside namespaces (the recorder, ``scripts/record_captures.py`` scenario
``voice-realtime``, does this through ``ip netns exec``)::

    python voicekit.py serve --listen 192.0.2.20:443 --certfile c.pem --keyfile k.pem \
        --events S.jsonl --lifetime 60
    python voicekit.py client --url wss://lab.test/v1/realtime --local-ip 192.0.2.10 \
        --first-port 51001 --cacert c.pem --keylog keys.txt --events C.jsonl

Server: sends ``session.created`` on open; answers ``session.update`` with
``session.updated``; collects ``input_audio_buffer.append`` audio (base64 pcm16) and binary
audio messages; answers ``input_audio_buffer.commit`` with ``input_audio_buffer.committed``;
answers ``response.create`` with ``response.created``, then after a scripted think time the
response's ``response.audio.delta`` chunks (100 ms of pcm16 24 kHz each, base64) on the
scripted schedule of :data:`RESPONSES` (response 2 has jitter and one long gap), a
``response.audio_transcript.delta`` after every second chunk, then
``response.audio.done``, ``response.audio_transcript.done`` and ``response.done``. It pings
every ``--ping-every`` s (payload ``server-ping-<n>``).

Client: connection 1: ``session.update`` (input pcm16 at 16 kHz, output pcm16 at 24 kHz),
then two turns (microphone chunks of 40 ms paced in real time as
``input_audio_buffer.append``, ``input_audio_buffer.commit``, ``response.create``, wait for
``response.done``). It pings every ``--ping-every`` s (payload ``client-ping-<n>``); when a pong
has not come back within ``--ping-timeout`` s it declares the connection dead, aborts it and
reconnects with exponential backoff: attempt k starts ``backoff * 2**(k-2)`` s after attempt
k-1 (start to start), each with an opening timeout of ``--open-timeout`` s, from local port
``first-port + k - 1``. Once connected again: one more turn whose microphone audio goes as
binary messages, then a clean close (1000). It simulates a playout buffer of
``--buffer-ms`` for every response (playback starts buffer_ms after the first chunk, a chunk
that arrives after its playout time stalls playback until it arrives) and logs the
underruns.

Every event sent and received is logged with ``time.time_ns()`` (same clock as the capture).
Bounded: the client ends after ``--deadline`` s, the server after ``--lifetime`` s.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import random
import ssl
import sys
import time
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

OUT_RATE = 24000  # pcm16 output (the Realtime default)
IN_RATE = 16000   # microphone, as set by session.update
CHUNK_MS = 100    # one response.audio.delta
MIC_CHUNK_MS = 40

#: per response (1-based, counted by the server across connections): think time before the
#: first audio delta, the chunk count, the nominal interval between chunks, the jitter
#: (uniform +-, seeded), and extra gaps {chunk index: ms added before that chunk}
RESPONSES: dict[int, dict[str, Any]] = {
    1: {"think_ms": 160, "chunks": 12, "interval_ms": 80, "jitter_ms": 0, "gaps": {},
        "text": "Hello there, how can I help you today?"},
    2: {"think_ms": 230, "chunks": 16, "interval_ms": 100, "jitter_ms": 30, "gaps": {9: 700},
        "text": "Sure, here is a longer answer that pauses in the middle for a while."},
    3: {"think_ms": 130, "chunks": 10, "interval_ms": 100, "jitter_ms": 15, "gaps": {},
        "text": "Welcome back, the line dropped for a moment."},
}


class Log:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def __call__(self, what: str, **detail: Any) -> int:
        t = time.time_ns()
        self.f.write(json.dumps({"t_ns": t, "what": what, **detail}) + "\n")
        self.f.flush()
        return t


def pcm(n_bytes: int, seed: int) -> bytes:
    """Deterministic noise-like pcm16 samples (not compressible, not silence)."""
    return random.Random(seed).randbytes(n_bytes)


# --------------------------------------------------------------------------- server

async def serve_main(args: argparse.Namespace) -> None:
    log = Log(args.events)
    sslctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sslctx.load_cert_chain(args.certfile, args.keyfile)
    sslctx.set_alpn_protocols(["http/1.1"])
    state = {"responses": 0, "events": 0}

    def ev_id() -> str:
        state["events"] += 1
        return f"event_{state['events']:04d}"

    async def pinger(ws: ServerConnection, peer: str) -> None:
        n = 0
        while n < 1000 and args.ping_every > 0:
            await asyncio.sleep(args.ping_every)
            n += 1
            payload = f"server-ping-{n}".encode()
            try:
                await ws.ping(payload)
            except ConnectionClosed:
                return
            log("ping sent", peer=peer, payload=payload.decode())

    async def respond(ws: ServerConnection, peer: str, rid: str, n: int) -> None:
        plan = RESPONSES.get(n, RESPONSES[3])
        rng = random.Random(1000 + n)

        async def send(obj: dict[str, Any], **extra: Any) -> None:
            obj = {"type": obj.pop("type"), "event_id": ev_id(), **obj}
            await ws.send(json.dumps(obj))
            log("sent", peer=peer, type=obj["type"], response_id=rid, **extra)

        await send({"type": "response.created",
                    "response": {"id": rid, "object": "realtime.response",
                                 "status": "in_progress"}})
        words = plan["text"].split(" ")
        t0 = time.monotonic() + plan["think_ms"] / 1000
        at = t0
        chunk_bytes = OUT_RATE * 2 * CHUNK_MS // 1000
        said: list[str] = []
        for i in range(plan["chunks"]):
            if i:
                at += (plan["interval_ms"] + plan["gaps"].get(i, 0)
                       + rng.uniform(-plan["jitter_ms"], plan["jitter_ms"])) / 1000
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            audio = pcm(chunk_bytes, n * 100 + i)
            await send({"type": "response.audio.delta", "response_id": rid,
                        "item_id": f"item_{rid}", "output_index": 0, "content_index": 0,
                        "delta": base64.b64encode(audio).decode()},
                       index=i, audio_bytes=len(audio))
            if i % 2 == 1 and len(said) < len(words):
                w = words[len(said)] + ("" if len(said) == len(words) - 1 else " ")
                said.append(w)
                await send({"type": "response.audio_transcript.delta", "response_id": rid,
                            "item_id": f"item_{rid}", "output_index": 0, "content_index": 0,
                            "delta": w}, chars=len(w))
        rest = "".join(words[len(said):]) if len(said) >= len(words) else \
            " ".join(words[len(said):])
        if rest:
            said.append(rest)
            await send({"type": "response.audio_transcript.delta", "response_id": rid,
                        "item_id": f"item_{rid}", "output_index": 0, "content_index": 0,
                        "delta": rest}, chars=len(rest))
        transcript = "".join(said)
        await send({"type": "response.audio.done", "response_id": rid, "item_id": f"item_{rid}",
                    "output_index": 0, "content_index": 0})
        await send({"type": "response.audio_transcript.done", "response_id": rid,
                    "item_id": f"item_{rid}", "output_index": 0, "content_index": 0,
                    "transcript": transcript}, chars=len(transcript))
        await send({"type": "response.done",
                    "response": {"id": rid, "object": "realtime.response",
                                 "status": "completed",
                                 "usage": {"output_audio_ms": plan["chunks"] * CHUNK_MS}}})

    async def handler(ws: ServerConnection) -> None:
        peer = "{}:{}".format(*ws.remote_address[:2])
        log("open", peer=peer, path=ws.request.path if ws.request else None)
        task = asyncio.create_task(pinger(ws, peer))
        audio_in = 0
        pending: list[asyncio.Task[None]] = []
        try:
            await ws.send(json.dumps({
                "type": "session.created", "event_id": ev_id(),
                "session": {"id": "sess_lab", "object": "realtime.session",
                            "modalities": ["audio", "text"], "input_audio_format": "pcm16",
                            "output_audio_format": "pcm16"}}))
            log("sent", peer=peer, type="session.created")
            async for msg in ws:
                if isinstance(msg, bytes):
                    audio_in += len(msg)
                    log("received", peer=peer, type="binary audio", bytes=len(msg))
                    continue
                ev = json.loads(msg)
                typ = ev.get("type")
                log("received", peer=peer, type=typ, bytes=len(msg.encode()))
                if typ == "session.update":
                    await ws.send(json.dumps({"type": "session.updated", "event_id": ev_id(),
                                              "session": ev.get("session", {})}))
                    log("sent", peer=peer, type="session.updated")
                elif typ == "input_audio_buffer.append":
                    audio_in += len(base64.b64decode(ev["audio"]))
                elif typ == "input_audio_buffer.commit":
                    await ws.send(json.dumps({"type": "input_audio_buffer.committed",
                                              "event_id": ev_id(),
                                              "item_id": f"item_in_{state['responses'] + 1}"}))
                    log("sent", peer=peer, type="input_audio_buffer.committed",
                        audio_bytes=audio_in)
                    audio_in = 0
                elif typ == "response.create":
                    state["responses"] += 1
                    n = state["responses"]
                    pending.append(asyncio.create_task(respond(ws, peer, f"resp_{n:03d}", n)))
            log("closed", peer=peer, code=ws.close_code, reason=ws.close_reason)
        except ConnectionClosed as exc:
            log("closed", peer=peer, code=ws.close_code, how=f"{exc.__class__.__name__}")
        finally:
            task.cancel()
            for p in pending:
                p.cancel()

    host, _, port = args.listen.rpartition(":")
    async with serve(handler, host.strip("[]"), int(port), ssl=sslctx, compression=None,
                     ping_interval=None, max_size=2**22) as server:
        log("listening", listen=args.listen)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.serve_forever(), args.lifetime)


# --------------------------------------------------------------------------- client

class Turns:
    """The client's view of each response: times and the playout-buffer simulation."""

    def __init__(self, log: Log, buffer_ms: float) -> None:
        self.log = log
        self.buffer_ns = int(buffer_ms * 1e6)
        self.cur: dict[str, Any] | None = None
        self.done = asyncio.Event()

    def start(self, create_ns: int, n: int) -> None:
        self.cur = {"turn": n, "response_create_ns": create_ns, "response_created_ns": None,
                    "response_id": None, "first_audio_ns": None, "chunks": [],
                    "transcript_chars": 0, "done_ns": None}
        self.done = asyncio.Event()

    def on_event(self, ev: dict[str, Any], t: int) -> None:
        c = self.cur
        if c is None:
            return
        typ = ev.get("type")
        if typ == "response.created":
            c["response_created_ns"] = t
            c["response_id"] = ev.get("response", {}).get("id")
        elif typ == "response.audio.delta":
            n = len(base64.b64decode(ev["delta"]))
            if c["first_audio_ns"] is None:
                c["first_audio_ns"] = t
            c["chunks"].append((t, n))
        elif typ == "response.audio_transcript.delta":
            c["transcript_chars"] += len(ev.get("delta", ""))
        elif typ == "response.done":
            c["done_ns"] = t
            self.finish()

    def finish(self) -> None:
        c = self.cur
        if c is None:
            return
        play = None
        under_n, under_ns = 0, 0
        for t, n in c["chunks"]:
            dur = n * 1_000_000_000 // (OUT_RATE * 2)
            if play is None:
                play = t + self.buffer_ns
            elif t > play:
                under_n += 1
                under_ns += t - play
                play = t
            play += dur
        self.log("turn", turn=c["turn"], response_id=c["response_id"],
                 response_create_ns=c["response_create_ns"],
                 response_created_ns=c["response_created_ns"],
                 first_audio_ns=c["first_audio_ns"],
                 time_to_first_audio_ms=(c["first_audio_ns"] - c["response_create_ns"]) / 1e6
                 if c["first_audio_ns"] else None,
                 audio_chunks=len(c["chunks"]), audio_bytes=sum(n for _, n in c["chunks"]),
                 audio_ms=sum(n for _, n in c["chunks"]) * 1000 / (OUT_RATE * 2),
                 transcript_chars=c["transcript_chars"], done_ns=c["done_ns"],
                 buffer_ms=self.buffer_ns / 1e6, underruns=under_n,
                 underrun_ms=under_ns / 1e6,
                 chunk_recv_ns=[t for t, _ in c["chunks"]])
        self.cur = None
        self.done.set()


async def _reader(ws: Any, log: Log, turns: Turns) -> None:
    try:
        async for msg in ws:
            t = time.time_ns()
            if isinstance(msg, bytes):
                log("received", type="binary", bytes=len(msg))
                continue
            ev = json.loads(msg)
            log("received", type=ev.get("type"), bytes=len(msg.encode()), recv_ns=t)
            turns.on_event(ev, t)
    except ConnectionClosed as exc:
        log("reader stopped", error=f"{exc.__class__.__name__}")


async def _pinger(ws: Any, log: Log, every: float, timeout: float, dead: asyncio.Event,
                  tag: str) -> None:
    n = 0
    while n < 1000:
        await asyncio.sleep(every)
        n += 1
        payload = f"client-ping-{tag}{n}".encode()
        try:
            waiter = await ws.ping(payload)
        except ConnectionClosed:
            return
        log("ping sent", payload=payload.decode())
        try:
            lat = await asyncio.wait_for(asyncio.shield(waiter), timeout)
            log("pong received", payload=payload.decode(), latency_ms=round(lat * 1000, 3))
        except TimeoutError:
            log("ping timeout", payload=payload.decode(), timeout_s=timeout)
            dead.set()
            return
        except ConnectionClosed:
            return


async def _turn(ws: Any, log: Log, turns: Turns, n: int, *, mic_ms: int, binary: bool) -> None:
    chunk = IN_RATE * 2 * MIC_CHUNK_MS // 1000
    t0 = time.monotonic()
    total = 0
    for i in range(mic_ms // MIC_CHUNK_MS):
        await asyncio.sleep(max(0.0, t0 + i * MIC_CHUNK_MS / 1000 - time.monotonic()))
        audio = pcm(chunk, 10_000 * n + i)
        if binary:
            await ws.send(audio)
            log("sent", type="binary audio", index=i, audio_bytes=len(audio), turn=n)
        else:
            await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                      "event_id": f"c_{n}_{i}",
                                      "audio": base64.b64encode(audio).decode()}))
            log("sent", type="input_audio_buffer.append", index=i, audio_bytes=len(audio),
                turn=n)
        total += len(audio)
    await ws.send(json.dumps({"type": "input_audio_buffer.commit", "event_id": f"c_{n}_commit"}))
    log("sent", type="input_audio_buffer.commit", turn=n, audio_bytes=total)
    await ws.send(json.dumps({"type": "response.create", "event_id": f"c_{n}_create",
                              "response": {"modalities": ["audio", "text"]}}))
    t = log("sent", type="response.create", turn=n)
    turns.start(t, n)
    await asyncio.wait_for(turns.done.wait(), 15)


SESSION = {"type": "session.update", "event_id": "c_session",
           "session": {"modalities": ["audio", "text"], "voice": "alloy",
                       "instructions": "You are a terse voice assistant in a test lab. " * 8,
                       "input_audio_format": "pcm16", "output_audio_format": "pcm16",
                       "audio": {"input": {"format": {"type": "audio/pcm", "rate": IN_RATE}},
                                 "output": {"format": {"type": "audio/pcm",
                                                       "rate": OUT_RATE}}},
                       "turn_detection": None}}


async def _open(args: argparse.Namespace, log: Log, attempt: int) -> Any:
    sslctx = ssl.create_default_context(cafile=args.cacert)
    sslctx.keylog_filename = args.keylog
    sslctx.set_alpn_protocols(["http/1.1"])
    port = args.first_port + attempt - 1
    log("connect attempt", attempt=attempt, local_port=port)
    return await connect(args.url, compression=None, ping_interval=None, close_timeout=1.0,
                         open_timeout=args.open_timeout, ssl=sslctx, max_size=2**22,
                         local_addr=(args.local_ip, port))


async def client_main(args: argparse.Namespace) -> int:
    log = Log(args.events)
    turns = Turns(log, args.buffer_ms)
    ws = await _open(args, log, 1)
    log("open", attempt=1, local_port=args.first_port)
    reader = asyncio.create_task(_reader(ws, log, turns))
    dead = asyncio.Event()
    pinger = asyncio.create_task(_pinger(ws, log, args.ping_every, args.ping_timeout, dead,
                                         "a"))
    await ws.send(json.dumps(SESSION))
    log("sent", type="session.update")
    await asyncio.sleep(0.3)
    await _turn(ws, log, turns, 1, mic_ms=800, binary=False)
    await asyncio.sleep(0.4)
    await _turn(ws, log, turns, 2, mic_ms=800, binary=False)
    log("turns done on connection 1")
    # the recorder black-holes the path now; the pinger notices
    await asyncio.wait_for(dead.wait(), args.ping_every + args.ping_timeout + 10)
    t_dead = log("connection declared dead", attempt=1)
    ws.transport.abort()
    reader.cancel()
    pinger.cancel()
    # reconnect with exponential backoff, start to start
    attempt, start = 1, time.monotonic()
    ws = None
    while attempt < 8:
        attempt += 1
        if attempt > 2:
            start += args.backoff * 2 ** (attempt - 3)
        await asyncio.sleep(max(0.0, start - time.monotonic()))
        try:
            ws = await _open(args, log, attempt)
        except (OSError, TimeoutError) as exc:
            log("connect failed", attempt=attempt, error=f"{exc.__class__.__name__}: {exc}")
            continue
        break
    if ws is None:
        log("gave up")
        return 1
    log("open", attempt=attempt, local_port=args.first_port + attempt - 1,
        down_ms=(time.time_ns() - t_dead) / 1e6)
    reader = asyncio.create_task(_reader(ws, log, turns))
    dead = asyncio.Event()
    pinger = asyncio.create_task(_pinger(ws, log, args.ping_every, args.ping_timeout, dead,
                                         "b"))
    await ws.send(json.dumps(SESSION))
    log("sent", type="session.update")
    await asyncio.sleep(0.3)
    await _turn(ws, log, turns, 3, mic_ms=600, binary=True)
    await asyncio.sleep(args.ping_every + 0.3)
    pinger.cancel()
    log("close sent", code=1000, reason="bye")
    await ws.close(1000, "bye")
    log("closed", code=ws.close_code)
    await reader
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--listen", required=True)
    s.add_argument("--events", required=True)
    s.add_argument("--certfile", required=True)
    s.add_argument("--keyfile", required=True)
    s.add_argument("--ping-every", type=float, default=5.0)
    s.add_argument("--lifetime", type=float, default=60.0)
    c = sub.add_parser("client")
    c.add_argument("--url", required=True)
    c.add_argument("--local-ip", required=True)
    c.add_argument("--first-port", type=int, required=True)
    c.add_argument("--events", required=True)
    c.add_argument("--cacert", required=True)
    c.add_argument("--keylog", required=True)
    c.add_argument("--ping-every", type=float, default=2.0)
    c.add_argument("--ping-timeout", type=float, default=3.0)
    c.add_argument("--open-timeout", type=float, default=1.2)
    c.add_argument("--backoff", type=float, default=1.25)
    c.add_argument("--buffer-ms", type=float, default=200.0)
    c.add_argument("--deadline", type=float, default=50.0)
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
