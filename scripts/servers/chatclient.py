"""A streaming chat client (httpx) that runs a timed plan of requests and logs what it saw.

Run inside a namespace (the recorder does this through ``ip netns exec``)::

    python chatclient.py --base https://lab.test --plan PLAN.json --out RESULT.json \
        --cacert cert.pem --keylog keys.txt --http2

PLAN.json is a list of requests: ``{"id": "r1", "at_ms": 0, "method": "POST", "path":
"/v1/chat/completions", "lab": {"tokens": 20, "first_ms": 150, "every_ms": 40, "seed": 1}}``
(a POST sends an OpenAI-style streaming chat body with that ``lab`` plan) or ``{"id": "s1",
"at_ms": 900, "method": "GET", "path": "/static/page.html"}``.  Each request starts
``at_ms`` after the client started (requests overlap when their times do); its id goes out
as the ``x-lab-request-id`` header.

``--http2``: one ``httpx.AsyncClient(http2=True)``, so every request shares one connection
(ALPN h2).  Without it, HTTP/1.1; ``--new-connection-per-request`` disables keep-alive so
every request opens (and the client closes) its own TCP + TLS connection.
``--keylog`` sets ``SSLContext.keylog_filename`` (NSS key log format).

RESULT.json: per request the status, HTTP version, stream id (HTTP/2), local port, start /
headers / end times (``time.time_ns()``), and for event streams every SSE event's arrival time
and data.  Bounded: each request has a 20 s timeout and the whole run ``--deadline`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
import time
from typing import Any

import httpx


def sse_events(buf: str) -> tuple[list[str], str]:
    """Split complete SSE events (blank-line terminated) off ``buf``; returns (events, rest)."""
    out = []
    buf = buf.replace("\r\n", "\n")
    while "\n\n" in buf:
        ev, buf = buf.split("\n\n", 1)
        out.append(ev)
    return out, buf


async def one(client: httpx.AsyncClient, base: str, req: dict[str, Any], t0: float
              ) -> dict[str, Any]:
    await asyncio.sleep(max(0.0, t0 + req.get("at_ms", 0) / 1000 - time.monotonic()))
    rec: dict[str, Any] = {"id": req["id"], "method": req["method"], "path": req["path"],
                           "t_start_ns": time.time_ns()}
    headers = {"x-lab-request-id": req["id"]}
    kw: dict[str, Any] = {}
    if req["method"] == "POST":
        kw["json"] = {"model": "lab", "stream": True, "lab": req.get("lab", {}),
                      "messages": [{"role": "user", "content": f"request {req['id']}"}]}
        headers["accept"] = "text/event-stream"
    try:
        async with client.stream(req["method"], base + req["path"], headers=headers,
                                 **kw) as resp:
            rec["t_headers_ns"] = time.time_ns()
            rec["status"] = resp.status_code
            rec["http_version"] = resp.http_version
            rec["stream_id"] = resp.extensions.get("stream_id")
            ns_ = resp.extensions.get("network_stream")
            if ns_ is not None:
                local = ns_.get_extra_info("client_addr")
                rec["local_port"] = local[1] if local else None
            rec["content_type"] = resp.headers.get("content-type", "")
            events: list[dict[str, Any]] = []
            size = 0
            buf = ""
            async for text in resp.aiter_text():
                size += len(text.encode())
                evs, buf = sse_events(buf + text)
                now = time.time_ns()
                for ev in evs:
                    data = "\n".join(line[5:].lstrip(" ") for line in ev.split("\n")
                                     if line.startswith("data:"))
                    events.append({"t_ns": now, "data": data})
            rec["body_bytes"] = size
            if rec["content_type"].startswith("text/event-stream"):
                rec["sse_events"] = events
                toks = []
                for event in events:
                    if event["data"] == "[DONE]" or not event["data"].startswith("{"):
                        continue
                    for ch in json.loads(event["data"]).get("choices", []):
                        if "content" in ch.get("delta", {}):
                            toks.append(ch["delta"]["content"])
                rec["tokens"] = toks
        rec["end"] = "complete"
    except (httpx.HTTPError, OSError) as exc:
        rec["end"] = f"error: {exc.__class__.__name__}: {exc}"
    rec["t_end_ns"] = time.time_ns()
    return rec


async def amain(args: argparse.Namespace) -> list[dict[str, Any]]:
    with open(args.plan, encoding="utf-8") as f:
        plan = json.load(f)
    verify: ssl.SSLContext | bool = False
    if args.base.startswith("https:"):
        sslctx = ssl.create_default_context(cafile=args.cacert)
        if args.keylog:
            sslctx.keylog_filename = args.keylog
        verify = sslctx
    limits = httpx.Limits(max_keepalive_connections=0 if args.new_connection_per_request
                          else 20)
    async with httpx.AsyncClient(http2=args.http2, http1=True, verify=verify, limits=limits,
                                 timeout=20.0) as client:
        t0 = time.monotonic()
        return list(await asyncio.wait_for(
            asyncio.gather(*(one(client, args.base, r, t0) for r in plan)), args.deadline))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cacert")
    ap.add_argument("--keylog")
    ap.add_argument("--http2", action="store_true")
    ap.add_argument("--new-connection-per-request", action="store_true")
    ap.add_argument("--deadline", type=float, default=40.0)
    args = ap.parse_args(argv)
    t = time.time_ns()
    results = asyncio.run(amain(args))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"t_start_ns": t, "t_end_ns": time.time_ns(), "httpx": httpx.__version__,
                   "requests": results}, f, indent=1)
    return 0 if all(r.get("end") == "complete" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
