"""Credentials on the wire, for the redaction tests: a server and a client that send them in
every place pcaptools must hide (issue 18).

Run inside namespaces (the recorder does this through ``ip netns exec``)::

    python secretskit.py serve --listen 192.0.2.20 --secrets S.json --events E.jsonl
    python secretskit.py client --server 192.0.2.20 --local 192.0.2.10 --secrets S.json \
        --events C.jsonl

``S.json`` maps a name to each credential value (the recorder writes it). Cleartext on
purpose, so that anyone (tshark included) sees the values in the capture.

Server (aiohttp on port 8080, HTTP/2 prior knowledge with the ``h2`` library on 8081):

``GET /oauth/callback?code=...``
    ``ok`` (the client sends ``Private-Token``, ``X-Amz-Security-Token``, ``X-Vault-Token``).
``GET /v1/events`` (also as ``http://user:password@host/v1/events``)
    ``text/event-stream``: JSON events with ``api_key``, ``token``, ``password``,
    ``authorization`` and ``secret`` fields, an OpenAI logprobs ``token`` (text, not a
    credential), then ``[DONE]``.
``GET /ws``
    WebSocket (no compression): answers the client's first text message with a
    ``session.created`` JSON message carrying ``client_secret: {"value": ...}`` and an
    ``access_token``, then echoes; the client closes (1000).
HTTP/2 ``GET /v1/stream?code=...`` with ``:authority: user:password@host``
    ``text/event-stream`` with a ``secret`` and an ``api_key`` field.

Client: one connection per item above, from fixed ports (50801-50804), one after the
other.

``client-more`` (the ``secrets-more`` capture: what the first one did not carry), from ports
50811-50814, against the same server:

``GET /oauth/authorize?access_token=&refresh_token=&client_secret=&id_token=&password=``
    with ``Host: user:password@host``, ``X-Client-Key``, ``X-Webhook-Secret``,
    ``X-Csrf-Token`` and a ``Referer`` holding a userinfo password and a ``password=``
    parameter (and an ``Idempotency-Key``, which is not a secret); the server answers ``302``
    with ``Location: ...?code=&id_token=``, ``Set-Cookie`` and an ``X-Session-Token``.
``GET http://user:password@host/v2/events``
    ``text/event-stream`` (:func:`sse_more_events`): ``apikey``, ``access_token``,
    ``refresh_token``, ``client_secret: {"value": ...}``, ``authorization`` and ``password``
    in a nested array, a JSON string holding a presigned URL (``?sig=``), and a plain-text
    ``Authorization: Bearer ...`` line.
HTTP/2 ``GET /v2/stream?access_token=&refresh_token=&client_secret=&id_token=&password=``
    with ``:authority: user:password@host``, ``x-client-key``, ``x-webhook-secret``; the answer
    carries ``x-session-token`` and SSE events with ``access_token`` / ``refresh_token`` /
    nested ``password`` (:func:`h2_more_events`).
``GET /ws2?access_token=`` (WebSocket, ``Sec-WebSocket-Protocol: realtime,
openai-insecure-api-key.<key>``)
    the client's ``apikey`` / ``client_secret`` message; the server's answer is longer than
    the 256-character preview, which ends inside its ``access_token`` value
    (:func:`ws_more_reply`); the server closes with a reason holding a JSON ``token``.

Both sides log what they sent or saw (JSON lines, ``time.time_ns()``). Bounded: the
server exits after ``--lifetime`` seconds, every client step has a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

H1_PORT, H2_PORT = 8080, 8081
CLIENT_PORTS = {"h1-headers": 50801, "h1-userinfo-sse": 50802, "h2": 50803, "ws": 50804,
                "more-h1-oauth": 50811, "more-h1-sse": 50812, "more-h2": 50813, "more-ws": 50814}
#: pcaptools' WebSocket preview length (pcaptools.protocols.websocket.DEFAULT_PREVIEW_CHARS)
PREVIEW_CHARS = 256


class Log:
    def __init__(self, path: str) -> None:
        self.out = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def __call__(self, what: str, **rec: Any) -> None:
        self.out.write(json.dumps({"t_ns": time.time_ns(), "what": what, **rec}) + "\n")
        self.out.flush()


def sse_events(s: dict[str, str]) -> list[dict[str, Any] | str]:
    """The events of GET /v1/events (JSON objects, then the [DONE] marker)."""
    return [
        {"type": "session", "api_key": s["sse_api_key"], "user": "alice"},
        {"type": "auth", "token": s["sse_token"], "expires_in": 3600},
        {"type": "login", "credentials": {"username": "alice", "password": s["sse_password"]}},
        {"choices": [{"index": 0, "delta": {"content": "Hi"},
                      "logprobs": {"content": [{"token": "Hi", "logprob": -0.25}]}}],
         "authorization": f"Bearer {s['sse_authorization']}"},
        {"type": "config", "secret": s["sse_secret"], "max_tokens": 16},
        "[DONE]",
    ]


def h2_events(s: dict[str, str]) -> list[dict[str, Any]]:
    return [{"type": "h2", "secret": s["h2_sse_secret"]},
            {"type": "h2", "apiKey": s["h2_sse_api_key"]}]


def sse_more_events(s: dict[str, str]) -> list[dict[str, Any] | str]:
    """The events of GET /v2/events (the last one plain text, not JSON)."""
    return [
        {"type": "session", "apikey": s["sse_apikey"], "user": "carol"},
        {"type": "oauth", "access_token": s["sse_access_token"],
         "refresh_token": s["sse_refresh_token"], "expires_in": 3600},
        {"type": "realtime", "client_secret": {"value": s["sse_client_secret"],
                                               "expires_at": 1767225600}},
        {"type": "accounts", "items": [{"name": "a", "password": s["sse_nested_password"]}],
         "authorization": s["sse_authorization2"]},
        {"type": "image", "url": f"https://blob.example/img.png?se=2026-12-02&sig="
                                 f"{s['sse_url_sig']}&sp=r"},
        f"Authorization: Bearer {s['sse_text_bearer']}",
    ]


def h2_more_events(s: dict[str, str]) -> list[dict[str, Any]]:
    return [{"type": "h2", "access_token": s["h2_sse_access_token"],
             "refresh_token": s["h2_sse_refresh_token"]},
            {"type": "h2", "user": {"name": "frank", "password": s["h2_sse_password"]}}]


def ws_more_reply(s: dict[str, str]) -> str:
    """The server's first WebSocket message: its ``access_token`` value starts 12 characters
    before the end of pcaptools' preview, so the preview ends inside it."""
    head = '{"type":"session.created","note":"'
    mid = '","access_token":"'
    pad = "x" * (PREVIEW_CHARS - 12 - len(head) - len(mid))
    return f'{head}{pad}{mid}{s["ws_long_access_token"]}","expires_in":3600}}'


def sse_body(events: list[dict[str, Any] | str]) -> bytes:
    return b"".join(
        f"data: {e if isinstance(e, str) else json.dumps(e, separators=(',', ':'))}\n\n".encode()
        for e in events)


# --------------------------------------------------------------------------- server


async def serve(args: argparse.Namespace) -> None:
    from aiohttp import WSMsgType, web

    s = json.loads(Path(args.secrets).read_text(encoding="utf-8"))
    log = Log(args.events)

    async def callback(req: web.Request) -> web.Response:
        log("request", path=req.path_qs, headers=dict(req.headers))
        return web.Response(text="ok")

    async def events(req: web.Request) -> web.StreamResponse:
        log("request", path=req.path_qs, url=str(req.url), headers=dict(req.headers))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(req)
        evs = sse_events(s)
        for e in evs:
            await resp.write(sse_body([e]))
            await asyncio.sleep(0.02)
        await resp.write_eof()
        log("sse sent", events=len(evs))
        return resp

    async def ws(req: web.Request) -> web.WebSocketResponse:
        log("request", path=req.path_qs, headers=dict(req.headers))
        w = web.WebSocketResponse(compress=False, autoping=True)
        await w.prepare(req)
        first = True
        async for msg in w:
            if msg.type != WSMsgType.TEXT:
                break
            log("ws received", text=msg.data)
            if first:
                first = False
                reply = {"type": "session.created",
                         "session": {"id": "sess_1",
                                     "client_secret": {"value": s["ws_client_secret"],
                                                       "expires_at": 1767225600}},
                         "access_token": s["ws_access_token"]}
                text = json.dumps(reply, separators=(",", ":"))
                await w.send_str(text)
                log("ws sent", text=text)
            else:
                await w.send_str(msg.data)
                log("ws sent", text=msg.data)
        log("ws closed", code=w.close_code)
        return w

    async def authorize(req: web.Request) -> web.Response:
        log("request", path=req.path_qs, url=str(req.url), headers=dict(req.headers))
        return web.Response(status=302, headers={
            "Location": f"http://{args.listen}:{H1_PORT}/done?code={s['location_code']}"
                        f"&id_token={s['location_id_token']}&state=st-2",
            "Set-Cookie": f"session={s['set_cookie_session']}; HttpOnly",
            "X-Session-Token": s["resp_session_token"]})

    async def events_more(req: web.Request) -> web.StreamResponse:
        log("request", path=req.path_qs, url=str(req.url), headers=dict(req.headers))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(req)
        evs = sse_more_events(s)
        for e in evs:
            await resp.write(sse_body([e]))
            await asyncio.sleep(0.02)
        await resp.write_eof()
        log("sse sent", events=len(evs), path=req.path)
        return resp

    async def ws_more(req: web.Request) -> web.WebSocketResponse:
        log("request", path=req.path_qs, headers=dict(req.headers))
        w = web.WebSocketResponse(compress=False, autoping=True, protocols=("realtime",))
        await w.prepare(req)
        async for msg in w:
            if msg.type != WSMsgType.TEXT:
                break
            log("ws received", text=msg.data)
            text = ws_more_reply(s)
            await w.send_str(text)
            log("ws sent", text=text)
            reason = json.dumps({"error": "expired", "token": s["ws_close_token"]},
                                separators=(",", ":"))
            await w.close(code=4001, message=reason.encode())
            log("ws close sent", code=4001, reason=reason)
            break
        log("ws closed", code=w.close_code)
        return w

    app = web.Application()
    app.router.add_get("/oauth/callback", callback)
    app.router.add_get("/oauth/authorize", authorize)
    app.router.add_get("/v2/events", events_more)
    app.router.add_get("/ws2", ws_more)
    app.router.add_get("/v1/events", events)
    app.router.add_get("/ws", ws)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.listen, H1_PORT).start()
    h2srv = await asyncio.get_running_loop().create_server(
        lambda: H2Server(s, log), args.listen, H2_PORT)
    log("listening", ports=[H1_PORT, H2_PORT])
    await asyncio.sleep(args.lifetime)
    h2srv.close()
    await runner.cleanup()


class H2Server(asyncio.Protocol):
    """HTTP/2 prior knowledge, one stream at a time: an event stream per request."""

    def __init__(self, s: dict[str, str], log: Log) -> None:
        import h2.config
        import h2.connection

        self.s, self.log = s, log
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conn.initiate_connection()
        transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        import h2.events
        import h2.exceptions

        assert self.transport is not None
        try:
            evs = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            self.log("h2 error", error=str(exc))
            self.transport.close()
            return
        for ev in evs:
            if isinstance(ev, h2.events.RequestReceived):
                hdrs = {k.decode() if isinstance(k, bytes) else k:
                        v.decode() if isinstance(v, bytes) else v for k, v in ev.headers}
                self.log("h2 request", headers=hdrs)
                more = str(hdrs.get(":path", "")).startswith("/v2/")
                body = sse_body(list(h2_more_events(self.s) if more else h2_events(self.s)))
                extra = [("x-session-token", self.s["h2_resp_session_token"])] if more else []
                self.conn.send_headers(ev.stream_id, [(":status", "200"),
                                                      ("content-type", "text/event-stream"),
                                                      *extra])
                self.conn.send_data(ev.stream_id, body, end_stream=True)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.transport.close()
        self.transport.write(self.conn.data_to_send())


# --------------------------------------------------------------------------- client


def _sock(local: str, port: int, server: str, sport: int) -> socket.socket:
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    c.settimeout(10)
    c.bind((local, port))
    c.connect((server, sport))
    return c


def _read_all(c: socket.socket, limit: int = 1 << 20) -> bytes:
    buf = b""
    with contextlib.suppress(TimeoutError, OSError):
        while len(buf) < limit:
            got = c.recv(65536)
            if not got:
                break
            buf += got
    return buf


def client_h1(args: argparse.Namespace, s: dict[str, str], log: Log) -> None:
    host = f"{args.server}:{H1_PORT}"
    c = _sock(args.local, CLIENT_PORTS["h1-headers"], args.server, H1_PORT)
    req = (f"GET /oauth/callback?code={s['oauth_code']}&state=st-1 HTTP/1.1\r\nHost: {host}\r\n"
           f"Private-Token: {s['private_token']}\r\n"
           f"X-Amz-Security-Token: {s['amz_security_token']}\r\n"
           f"X-Vault-Token: {s['vault_token']}\r\nConnection: close\r\n\r\n")
    c.sendall(req.encode())
    resp = _read_all(c)
    c.close()
    log("h1 done", step="h1-headers", request=req, status=resp[:12].decode("latin-1"))
    c = _sock(args.local, CLIENT_PORTS["h1-userinfo-sse"], args.server, H1_PORT)
    req = (f"GET http://alice:{s['url_password']}@{host}/v1/events HTTP/1.1\r\n"
           f"Host: {host}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n")
    c.sendall(req.encode())
    resp = _read_all(c)
    c.close()
    log("h1 done", step="h1-userinfo-sse", request=req, status=resp[:12].decode("latin-1"),
        sse_blocks=resp.count(b"data: "))


def client_h2(args: argparse.Namespace, s: dict[str, str], log: Log) -> None:
    headers = [(":method", "GET"), (":scheme", "http"),
               (":authority", f"bob:{s['h2_authority_password']}@{args.server}:{H2_PORT}"),
               (":path", f"/v1/stream?code={s['h2_code']}&stream=true"),
               ("private-token", s["h2_private_token"]),
               ("x-amz-security-token", s["h2_amz_security_token"]),
               ("accept", "text/event-stream")]
    _h2_request(args, log, CLIENT_PORTS["h2"], headers)


def _h2_request(args: argparse.Namespace, log: Log, port: int,
                headers: list[tuple[str, str]]) -> None:
    import h2.config
    import h2.connection
    import h2.events

    c = _sock(args.local, port, args.server, H2_PORT)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, headers, end_stream=True)
    c.sendall(conn.data_to_send())
    body, ended = b"", False
    deadline = time.monotonic() + 10
    while not ended and time.monotonic() < deadline:
        try:
            data = c.recv(65536)
        except (TimeoutError, OSError):
            break
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.DataReceived):
                body += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                ended = True
        c.sendall(conn.data_to_send())
    conn.close_connection()
    c.sendall(conn.data_to_send())
    time.sleep(0.05)
    c.close()
    log("h2 done", headers=headers, ended=ended, sse_blocks=body.count(b"data: "))


async def client_ws(args: argparse.Namespace, s: dict[str, str], log: Log) -> None:
    from websockets.asyncio.client import connect

    url = f"ws://{args.server}:{H1_PORT}/ws"
    first = json.dumps({"type": "session.update",
                        "session": {"api_key": s["ws_api_key"], "password": s["ws_password"],
                                    "voice": "alloy"}}, separators=(",", ":"))
    second = json.dumps({"type": "auth.refresh", "refresh_token": s["ws_refresh_token"]},
                        separators=(",", ":"))
    async with asyncio.timeout(15):
        async with connect(url, compression=None, ping_interval=None,
                           additional_headers={"X-Api-Token": s["ws_header_token"]},
                           local_addr=(args.local, CLIENT_PORTS["ws"])) as w:
            for text in (first, second):
                await w.send(text)
                log("ws sent", text=text)
                got = await w.recv()
                log("ws received", text=got)
            await w.close(1000, "bye")
    log("ws done")


def _oauth_params(s: dict[str, str], prefix: str) -> str:
    return (f"access_token={s[prefix + 'access_token']}&refresh_token="
            f"{s[prefix + 'refresh_token']}&client_secret={s[prefix + 'client_secret']}"
            f"&id_token={s[prefix + 'id_token']}&password={s[prefix + 'password']}"
            f"&client_id=app-1")


def client_more(args: argparse.Namespace) -> None:
    """The ``secrets-more`` connections (see the module docstring)."""
    s = json.loads(Path(args.secrets).read_text(encoding="utf-8"))
    log = Log(args.events)
    host = f"{args.server}:{H1_PORT}"
    c = _sock(args.local, CLIENT_PORTS["more-h1-oauth"], args.server, H1_PORT)
    req = (f"GET /oauth/authorize?{_oauth_params(s, 'q_')} HTTP/1.1\r\n"
           f"Host: carol:{s['host_password']}@{host}\r\n"
           f"X-Client-Key: {s['hdr_client_key']}\r\n"
           f"X-Webhook-Secret: {s['hdr_webhook_secret']}\r\n"
           f"X-Csrf-Token: {s['hdr_csrf_token']}\r\n"
           f"Idempotency-Key: {IDEMPOTENCY_KEY}\r\n"
           f"Referer: http://erin:{s['referer_password']}@{host}/login?password="
           f"{s['referer_query_password']}\r\nConnection: close\r\n\r\n")
    c.sendall(req.encode())
    resp = _read_all(c)
    c.close()
    log("h1 done", step="more-h1-oauth", request=req, status=resp[:12].decode("latin-1"))
    c = _sock(args.local, CLIENT_PORTS["more-h1-sse"], args.server, H1_PORT)
    req = (f"GET http://dave:{s['url_password2']}@{host}/v2/events HTTP/1.1\r\n"
           f"Host: {host}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n")
    c.sendall(req.encode())
    resp = _read_all(c)
    c.close()
    log("h1 done", step="more-h1-sse", request=req, status=resp[:12].decode("latin-1"),
        sse_blocks=resp.count(b"data: "))
    time.sleep(0.2)
    _h2_request(args, log, CLIENT_PORTS["more-h2"], [
        (":method", "GET"), (":scheme", "http"),
        (":authority", f"frank:{s['h2_authority_password2']}@{args.server}:{H2_PORT}"),
        (":path", f"/v2/stream?{_oauth_params(s, 'h2_q_')}"),
        ("x-client-key", s["h2_client_key"]), ("x-webhook-secret", s["h2_webhook_secret"]),
        ("accept", "text/event-stream")])
    time.sleep(0.2)
    asyncio.run(client_ws_more(args, s, log))


#: an Idempotency-Key: not a credential (a request id), kept by pcaptools
IDEMPOTENCY_KEY = "idem-kept-7f3a9c21"


async def client_ws_more(args: argparse.Namespace, s: dict[str, str], log: Log) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    url = f"ws://{args.server}:{H1_PORT}/ws2?access_token={s['ws_query_access_token']}"
    first = json.dumps({"type": "session.update",
                        "session": {"apikey": s["ws_apikey"],
                                    "client_secret": {"value": s["ws_client_secret2"]}}},
                       separators=(",", ":"))
    protocols = ["realtime", f"openai-insecure-api-key.{s['ws_subprotocol_key']}"]
    async with asyncio.timeout(15):
        async with connect(url, compression=None, ping_interval=None,
                           subprotocols=protocols,  # type: ignore[arg-type]
                           local_addr=(args.local, CLIENT_PORTS["more-ws"])) as w:
            await w.send(first)
            log("ws sent", text=first)
            got = await w.recv()
            log("ws received", text=got)
            try:
                await w.recv()
            except ConnectionClosed as exc:
                log("ws closed", code=exc.rcvd.code if exc.rcvd else None,
                    reason=exc.rcvd.reason if exc.rcvd else None)
    log("ws done")


def client(args: argparse.Namespace) -> None:
    s = json.loads(Path(args.secrets).read_text(encoding="utf-8"))
    log = Log(args.events)
    client_h1(args, s, log)
    time.sleep(0.2)
    client_h2(args, s, log)
    time.sleep(0.2)
    asyncio.run(client_ws(args, s, log))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve")
    sv.add_argument("--listen", required=True)
    sv.add_argument("--secrets", required=True)
    sv.add_argument("--events", required=True)
    sv.add_argument("--lifetime", type=float, default=40)
    cl = sub.add_parser("client")
    cl.add_argument("--server", required=True)
    cl.add_argument("--local", required=True)
    cl.add_argument("--secrets", required=True)
    cl.add_argument("--events", required=True)
    cm = sub.add_parser("client-more")
    for a in ("--server", "--local", "--secrets", "--events"):
        cm.add_argument(a, required=True)
    args = p.parse_args(argv)
    if args.cmd == "serve":
        asyncio.run(serve(args))
    elif args.cmd == "client-more":
        client_more(args)
    else:
        client(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
