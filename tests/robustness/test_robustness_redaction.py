"""Credentials in URLs and WebSocket subprotocols are redacted by default
(:mod:`pcaptools.redaction`): query parameters such as ``?api_key=`` or ``X-Amz-Signature`` in
every path/URL column (HTTP/1.1 request targets, HTTP/2 ``:path``, the WebSocket handshake
path, URL-valued headers), and ``Sec-WebSocket-Protocol`` entries that look like tokens.
``show_secrets=True`` keeps them. The redacted values appear nowhere: not in any table, not
in a warning, not in the HTML report, not in the ``--json`` output.

Shipped captures (``captures/ws-healthy.pcap``, ``captures/sse-h1-cleartext.pcap``) are
rewritten to carry credentials (bytes spliced into a request, later sequence numbers
shifted) next to hand-built edge cases."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.capture import Capture
from pcaptools.cli import main as cli_main
from pcaptools.protocols._base import Direction
from pcaptools.redaction import (
    is_credential_subprotocol,
    redact_headers,
    redact_subprotocols,
    redact_url,
)
from pcaptools.report import write_report
from tests.conftest import CAPTURES
from tests.protocols.http.helpers import PREFACE, FrameFactory
from tests.robustness._build import C2S, S2C, Conv, codes, good_conv, later, pcap
from tests.robustness._hostile import _ws_frame

# --------------------------------------------------------------------------- the functions


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("/v1/models?api_key=sk-123&limit=5", "/v1/models?api_key=<redacted: 6 bytes>&limit=5"),
        ("/x?KEY=abc;Token=t&q=1", "/x?KEY=<redacted: 3 bytes>;Token=<redacted: 1 bytes>&q=1"),
        ("/x?access_token=a&ACCESS_TOKEN=bb&auth=c&sig=dd&signature=e&password=f&key=g",
         "/x?access_token=<redacted: 1 bytes>&ACCESS_TOKEN=<redacted: 2 bytes>"
         "&auth=<redacted: 1 bytes>&sig=<redacted: 2 bytes>&signature=<redacted: 1 bytes>"
         "&password=<redacted: 1 bytes>&key=<redacted: 1 bytes>"),
        ("https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256"
         "&X-Amz-Credential=AKIA%2F20261129%2Fus&X-Amz-Signature=ab12",
         "https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256"
         "&X-Amz-Credential=<redacted: 20 bytes>&X-Amz-Signature=<redacted: 4 bytes>"),
        ("/o?X-Goog-Signature=00ff&X-Goog-Date=1",
         "/o?X-Goog-Signature=<redacted: 4 bytes>&X-Goog-Date=1"),
        ("/o?refresh_token=r&client_secret=s&user%5Bpassword%5D=p",
         "/o?refresh_token=<redacted: 1 bytes>&client_secret=<redacted: 1 bytes>"
         "&user%5Bpassword%5D=<redacted: 1 bytes>"),
        ("/cb?next=https://h/?access_token=xyz",
         "/cb?next=https://h/?access_token=<redacted: 3 bytes>"),
        ("http://user:hunter2@proxy.example/x", "http://user:<redacted: 7 bytes>@proxy.example/x"),
        ("/x?token=&token#frag?token=zz", "/x?token=&token#frag?token=zz"),  # nothing to hide
        ("/socket.io/?EIO=4&transport=websocket", "/socket.io/?EIO=4&transport=websocket"),
        ("/chat", "/chat"),
        ("*", "*"),
        ("", ""),
    ],
)
def test_redact_url(url: str, want: str) -> None:
    assert redact_url(url) == want
    assert redact_url(want) == want  # idempotent


def test_redact_url_none_and_identity() -> None:
    assert redact_url(None) is None
    u = "/v1/chat/completions?stream=true"
    assert redact_url(u) is u


@pytest.mark.parametrize(
    "token",
    [
        "openai-insecure-api-key.sk-proj-abc123",
        "bearer.eyJhbGciOiJIUzI1NiJ9",
        "base64url.bearer.authorization.k8s.io.ZXlKaGJHY2lPaUpTVXpJ",
        "Authorization",
        "access_token.x",
        "0123456789abcdef0123456789abcdef",
        "123e4567-e89b-12d3-a456-426614174000",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2ln",
        "aGVsbG8gd29ybGQgc2VjcmV0IHRva2Vu",
    ],
)
def test_credential_subprotocols(token: str) -> None:
    assert is_credential_subprotocol(token)


@pytest.mark.parametrize(
    "name",
    ["realtime", "graphql-ws", "graphql-transport-ws", "v10.stomp", "wamp.2.json", "mqtt",
     "base64.channel.k8s.io", "v4.channel.k8s.io", "actioncable-v1-json", "ocpp2.0.1",
     "openai-beta.realtime-v1", "chat", "soap", "xmpp", "msgpack-rpc-v2-compressed-protocol"],
)
def test_plain_subprotocols_are_kept(name: str) -> None:
    assert not is_credential_subprotocol(name)
    assert redact_subprotocols(name) == name


def test_redact_subprotocols_keeps_plain_entries_and_spacing() -> None:
    v = "realtime, openai-insecure-api-key.sk-abc ,openai-beta.realtime-v1"
    assert redact_subprotocols(v) == (
        "realtime, <redacted: 30 bytes> ,openai-beta.realtime-v1"
    )
    assert redact_subprotocols(None) is None


def test_redact_headers_all_kinds() -> None:
    h = (
        (":path", "/a?api_key=K"),
        ("cookie", ""),
        ("Location", "https://h/x?sig=S1"),
        ("Referer", "https://h/?q=1"),
        ("Sec-WebSocket-Protocol", "graphql-ws, auth.T0KEN"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("x-other", "?api_key=not-a-url-header"),
    )
    assert redact_headers(h) == (
        (":path", "/a?api_key=<redacted: 1 bytes>"),
        ("cookie", "<redacted: 0 bytes>"),
        ("Location", "https://h/x?sig=<redacted: 2 bytes>"),
        ("Referer", "https://h/?q=1"),
        ("Sec-WebSocket-Protocol", "graphql-ws, <redacted: 10 bytes>"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),  # a nonce, kept
        ("x-other", "?api_key=not-a-url-header"),
    )
    plain = ((":path", "/a?b=c"), ("accept", "*/*"))
    assert redact_headers(plain) is plain and redact_headers(None) is None


# --------------------------------------------------------------------------- hand-built capture

K_QUERY = "sk-live-QueryKey0123456789"
K_LOCATION_SIG = "f00dfacecafe0123456789abcdef"
K_LOCATION_CRED = "AKIAEXAMPLE%2F20261129%2Fus-east-1"
K_H2_PATH = "h2-access-token-0123456789"
K_REFERER = "referer-token-0123456789"
K_WS_PATH = "ws-path-key-0123456789"
K_WS_PROTO = "sk-proj-WsProtocolKey0123456789"
K_WS_SELECTED = "eyJhbGciOiJIUzI1NiJ9SelectedToken"
SECRETS = (K_QUERY, K_LOCATION_SIG, K_LOCATION_CRED, K_H2_PATH, K_REFERER, K_WS_PATH,
           K_WS_PROTO, K_WS_SELECTED)  # fmt: skip
WS_KEY = "dGhlIHNhbXBsZSBub25jZQ=="
WS_ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def credentials_capture_bytes() -> bytes:
    # HTTP/1.1: a key in the query; a 302 to a presigned URL
    h1 = Conv(sport=42001, t0=later(1)).handshake()
    h1.send(C2S, f"GET /v1/models?api_key={K_QUERY}&limit=5 HTTP/1.1\r\nHost: api\r\n\r\n".encode())
    h1.send(
        S2C,
        (
            "HTTP/1.1 302 Found\r\nLocation: https://b.s3.example/o?X-Amz-Credential="
            f"{K_LOCATION_CRED}&X-Amz-Signature={K_LOCATION_SIG}\r\nContent-Length: 0\r\n\r\n"
        ).encode(),
    ).close()
    # HTTP/2 (prior knowledge): a token in :path and in the Referer
    ff = FrameFactory()
    h2 = Conv(sport=42002, t0=later(2)).handshake()
    h2.send(
        C2S,
        PREFACE
        + ff.settings({})
        + ff.headers(
            1,
            [
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", "api"),
                (":path", f"/v1/stream?access_token={K_H2_PATH}&n=1"),
                ("referer", f"https://app.example/?token={K_REFERER}"),
            ],
            flags=("END_HEADERS", "END_STREAM"),
        ),
    )
    h2.send(
        S2C,
        ff.settings({})
        + ff.headers(1, [(":status", "200")], direction=Direction.SERVER_TO_CLIENT)
        + ff.data(1, b"ok", end_stream=True),
    ).close()
    # WebSocket: a key in the path, a token among the offered subprotocols, a plain one chosen
    ws = Conv(sport=42003, t0=later(3)).handshake()
    ws.send(
        C2S,
        (
            f"GET /v1/realtime?model=gpt-4o&key={K_WS_PATH} HTTP/1.1\r\nHost: api\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Protocol: realtime, "
            f"openai-insecure-api-key.{K_WS_PROTO}, openai-beta.realtime-v1\r\n"
            f"Sec-WebSocket-Key: {WS_KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode(),
    )
    ws.send(
        S2C,
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {WS_ACCEPT}\r\nSec-WebSocket-Protocol: realtime\r\n\r\n"
        ).encode(),
    )
    ws.send(C2S, _ws_frame(b'{"type":"session.update"}', mask=b"abcd"))
    ws.send(S2C, _ws_frame(b'{"type":"session.updated"}')).close()
    # WebSocket: the server "selects" a token nobody offered (a ws.bad_handshake warning)
    ws2 = Conv(sport=42004, t0=later(4)).handshake()
    ws2.send(
        C2S,
        (
            "GET /graphql HTTP/1.1\r\nHost: api\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Protocol: graphql-ws\r\nSec-WebSocket-Key: {WS_KEY}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        ).encode(),
    )
    ws2.send(
        S2C,
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {WS_ACCEPT}\r\nSec-WebSocket-Protocol: {K_WS_SELECTED}\r\n\r\n"
        ).encode(),
    ).close()
    return pcap(good_conv(), h1, h2, ws, ws2)


@pytest.fixture(scope="module")
def creds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("creds") / "creds.pcap"
    p.write_bytes(credentials_capture_bytes())
    return p


def _everything(cap: Capture) -> str:
    """Every table as CSV (header tuples included), the reprs and the summary."""
    return "\n".join(
        [*(df.to_csv() for df in cap.tables.values()), repr(cap), cap._repr_html_(),
         repr(cap.summary)]
    )


def _assert_absent(text: str, where: str, secrets: tuple[str, ...] = SECRETS) -> None:
    for s in secrets:
        assert s not in text, f"{s!r} in {where}"


def _headers(df: pd.DataFrame, col: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for hs in df[col].dropna():
        out.update(dict(hs))
    return out


def test_every_column_is_redacted_by_default(creds: Path) -> None:
    cap = pcaptools.load(creds)
    req = cap.http_requests.set_index("tcp_stream")
    # HTTP/1.1 request target and the Location header of its 302
    assert req.loc[1, "path"] == f"/v1/models?api_key=<redacted: {len(K_QUERY)} bytes>&limit=5"
    loc = dict(req.loc[1, "response_headers"])["location"]
    assert loc == (
        f"https://b.s3.example/o?X-Amz-Credential=<redacted: {len(K_LOCATION_CRED)} bytes>"
        f"&X-Amz-Signature=<redacted: {len(K_LOCATION_SIG)} bytes>"
    )
    # HTTP/2 :path in http2_streams, http2_frames (path and headers), and the Referer
    h2_path = f"/v1/stream?access_token=<redacted: {len(K_H2_PATH)} bytes>&n=1"
    assert cap.http2_streams["path"].tolist() == [h2_path]
    assert cap.http2_frames["path"].dropna().tolist() == [h2_path]
    fh = _headers(cap.http2_frames, "headers")
    assert fh[":path"] == h2_path
    assert fh["referer"] == f"https://app.example/?token=<redacted: {len(K_REFERER)} bytes>"
    assert _headers(cap.http2_streams, "request_headers")[":path"] == h2_path
    # the WebSocket handshake: http_requests row of the Upgrade and ws_connections
    ws_path = f"/v1/realtime?model=gpt-4o&key=<redacted: {len(K_WS_PATH)} bytes>"
    offered = (
        f"realtime, <redacted: {len('openai-insecure-api-key.' + K_WS_PROTO)} bytes>, "
        "openai-beta.realtime-v1"
    )
    assert req.loc[3, "path"] == ws_path
    up = dict(req.loc[3, "request_headers"])
    assert up["sec-websocket-protocol"] == offered
    assert up["sec-websocket-key"] == WS_KEY  # a nonce, not a secret
    wsc = cap.ws_connections.set_index("tcp_stream")
    assert wsc.loc[3, "path"] == ws_path
    assert wsc.loc[3, "offered_protocols"] == offered
    assert wsc.loc[3, "protocol"] == "realtime"
    assert bool(wsc.loc[3, "accept_ok"]) and wsc.loc[3, "client_messages"] == 1
    assert wsc.loc[4, "offered_protocols"] == "graphql-ws"
    assert wsc.loc[4, "protocol"] == f"<redacted: {len(K_WS_SELECTED)} bytes>"
    assert str(cap.ws_connections["path"].dtype) == "string"  # dtypes kept
    pcaptools.TABLES["ws_connections"].check(cap.ws_connections)
    # the warning about the unoffered subprotocol names it redacted
    w = cap.warnings[cap.warnings["code"].astype(str) == "ws.bad_handshake"]
    assert w["detail"].tolist() == [
        f"the server selected subprotocol '<redacted: {len(K_WS_SELECTED)} bytes>', not offered"
    ]
    assert codes(cap).count("ws.bad_handshake") == 1
    _assert_absent(_everything(cap), "the tables")


def test_show_secrets_keeps_everything(creds: Path) -> None:
    cap = pcaptools.load(creds, show_secrets=True)
    req = cap.http_requests.set_index("tcp_stream")
    assert req.loc[1, "path"] == f"/v1/models?api_key={K_QUERY}&limit=5"
    assert cap.http2_streams["path"].tolist() == [f"/v1/stream?access_token={K_H2_PATH}&n=1"]
    assert cap.http2_frames["path"].dropna().tolist() == [
        f"/v1/stream?access_token={K_H2_PATH}&n=1"
    ]
    wsc = cap.ws_connections.set_index("tcp_stream")
    assert wsc.loc[3, "path"] == f"/v1/realtime?model=gpt-4o&key={K_WS_PATH}"
    assert K_WS_PROTO in wsc.loc[3, "offered_protocols"]
    assert wsc.loc[4, "protocol"] == K_WS_SELECTED
    text = _everything(cap)
    for s in SECRETS:
        assert s in text, s
    # warnings never quote a credential, whatever show_secrets says
    assert K_WS_SELECTED not in "\n".join(cap.warnings["detail"])


def _report_and_json(path: Path, tmp_path: Path, *extra: str) -> tuple[str, str]:
    out, js = tmp_path / f"{path.stem}.html", tmp_path / f"{path.stem}.json"
    assert cli_main([str(path), "-o", str(out), "--json", str(js), "-q", *extra]) == 0
    return out.read_text(encoding="utf-8"), js.read_text(encoding="utf-8")


def test_report_and_json_never_show_them(creds: Path, tmp_path: Path) -> None:
    page, blob = _report_and_json(creds, tmp_path)
    _assert_absent(page, "the CLI report")
    _assert_absent(blob, "the --json output")
    assert "&lt;redacted:" in page  # the report shows the redacted forms, escaped
    json.loads(blob)
    cap = pcaptools.load(creds)
    write_report(cap, tmp_path / "api.html")
    _assert_absent((tmp_path / "api.html").read_text(encoding="utf-8"), "write_report")


def test_streamed_export_is_redacted(creds: Path, tmp_path: Path) -> None:
    """``load(out=...)`` writes tables to Parquet while reading (rows handed over in chunks of
    one here): the files hold the redacted forms only."""
    import pyarrow.parquet as pq

    out = tmp_path / "tables"
    cap = pcaptools.load(creds, out=out, chunk_rows=1)
    files = sorted(out.glob("*.parquet"))
    assert {f.stem for f in files} >= {"http_requests", "http2_frames", "ws_connections"}
    for f in files:
        _assert_absent(pq.read_table(f).to_pandas().to_csv(), f.name)
    assert sorted(cap.ws_connections["protocol"].tolist()) == [
        "<redacted: 33 bytes>", "realtime"
    ]


# --------------------------------------------------------------------------- shipped captures


def _splice(data: bytes, frame: int, old: bytes, new: bytes) -> bytes:
    """An Ethernet/IPv4 pcap with ``old`` replaced by ``new`` in the TCP payload of ``frame``
    (1-based): lengths fixed, later sequence numbers of that direction and the peer's
    acknowledgements shifted. Checksums are left stale (pcaptools, like tshark by default,
    does not check them)."""
    delta = len(new) - len(old)
    out = bytearray(data[:24])
    off, n, me = 24, 0, None
    cut_seq = 0
    while off + 16 <= len(data):
        hdr = bytearray(data[off : off + 16])
        incl = struct.unpack_from("<I", hdr, 8)[0]
        rec = bytearray(data[off + 16 : off + 16 + incl])
        off += 16 + incl
        n += 1
        if struct.unpack_from("!H", rec, 12)[0] == 0x0800 and rec[23] == 6:
            ip = 14
            t = ip + (rec[ip] & 0xF) * 4
            key = (bytes(rec[ip + 12 : ip + 16]), struct.unpack_from("!H", rec, t)[0])
            seq, ack = struct.unpack_from("!II", rec, t + 4)
            if n == frame:
                payload = t + (rec[t + 12] >> 4) * 4
                i = rec.index(old, payload)
                rec[i : i + len(old)] = new
                ip_len = struct.unpack_from("!H", rec, ip + 2)[0]
                struct.pack_into("!H", rec, ip + 2, ip_len + delta)
                orig_len = struct.unpack_from("<I", hdr, 12)[0]
                struct.pack_into("<II", hdr, 8, len(rec), orig_len + delta)
                me, cut_seq = key, seq
            elif me is not None and key == me and (seq - cut_seq) % 2**32 < 2**31:
                struct.pack_into("!I", rec, t + 4, (seq + delta) % 2**32)
            elif (me is not None and key != me and rec[t + 13] & 0x10
                  and (ack - cut_seq) % 2**32 < 2**31 and ack != cut_seq):
                struct.pack_into("!I", rec, t + 8, (ack + delta) % 2**32)
        out += hdr + rec
    assert me is not None, f"frame {frame} not found"
    return bytes(out)


def _shipped(name: str) -> Path:
    p = CAPTURES / name
    if not p.is_file():
        pytest.skip(f"captures/{name} is absent")
    return p


REAL_WS_KEY = "sk-proj-RealWsQueryKey0123456789"
REAL_WS_PROTO = "sk-proj-RealWsProtocol0123456789"
REAL_SSE_TOKEN = "RealSseAccessToken0123456789"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ws_src, sse_src = _shipped("ws-healthy.pcap"), _shipped("sse-h1-cleartext.pcap")
    d = tmp_path_factory.mktemp("shipped")
    data = ws_src.read_bytes()
    data = _splice(data, 6, b"GET /chat HTTP/1.1", f"GET /chat?key={REAL_WS_KEY} HTTP/1.1".encode())
    data = _splice(
        data, 6, b"\r\n\r\n",
        f"\r\nSec-WebSocket-Protocol: realtime, openai-insecure-api-key.{REAL_WS_PROTO}\r\n\r\n"
        .encode(),
    )  # fmt: skip
    data = _splice(data, 8, b"\r\n\r\n", b"\r\nSec-WebSocket-Protocol: realtime\r\n\r\n")
    ws = d / "ws-healthy-creds.pcap"
    ws.write_bytes(data)
    sse = d / "sse-creds.pcap"
    sse.write_bytes(
        _splice(
            sse_src.read_bytes(), 62, b"every_ms=200 ",
            f"every_ms=200&access_token={REAL_SSE_TOKEN} ".encode(),
        )
    )  # fmt: skip
    return {"ws": ws, "sse": sse, "ws_orig": ws_src, "sse_orig": sse_src}


def test_shipped_websocket_capture_with_credentials(shipped: dict[str, Any]) -> None:
    orig = pcaptools.load(shipped["ws_orig"])
    cap = pcaptools.load(shipped["ws"])
    raw = pcaptools.load(shipped["ws"], show_secrets=True)
    # the rewrite kept the conversation intact: same frames, messages, close
    keep = ["client_frames", "server_frames", "client_messages", "server_messages",
            "client_payload_bytes", "server_payload_bytes", "end_reason", "accept_ok"]  # fmt: skip
    assert cap.ws_connections[keep].astype(object).values.tolist() == (
        orig.ws_connections[keep].astype(object).values.tolist()
    )
    assert len(cap.ws_frames) == len(orig.ws_frames) > 30
    assert codes(cap) == codes(orig)
    (row,) = cap.ws_connections.itertuples()
    assert row.path == f"/chat?key=<redacted: {len(REAL_WS_KEY)} bytes>"
    n = len("openai-insecure-api-key." + REAL_WS_PROTO)
    assert row.offered_protocols == f"realtime, <redacted: {n} bytes>"
    assert row.protocol == "realtime"
    assert cap.http_requests["path"].tolist() == [row.path]
    (rawrow,) = raw.ws_connections.itertuples()
    assert rawrow.path == f"/chat?key={REAL_WS_KEY}"
    assert rawrow.offered_protocols == f"realtime, openai-insecure-api-key.{REAL_WS_PROTO}"
    _assert_absent(_everything(cap), "the tables", (REAL_WS_KEY, REAL_WS_PROTO))


def test_shipped_sse_capture_with_credentials(shipped: dict[str, Any]) -> None:
    orig = pcaptools.load(shipped["sse_orig"])
    cap = pcaptools.load(shipped["sse"])
    assert cap.http_requests["path"].tolist() == [
        "/v1/chat/completions",
        f"/v1/events?n=6&every_ms=200&access_token=<redacted: {len(REAL_SSE_TOKEN)} bytes>",
    ]
    assert len(cap.sse_events) == len(orig.sse_events) > 6
    assert cap.sse_events["data"].tolist() == orig.sse_events["data"].tolist()
    assert codes(cap) == codes(orig)
    raw = pcaptools.load(shipped["sse"], show_secrets=True)
    assert REAL_SSE_TOKEN in raw.http_requests["path"].iloc[1]
    _assert_absent(_everything(cap), "the tables", (REAL_SSE_TOKEN,))


@pytest.mark.parametrize("which", ["ws", "sse"])
def test_shipped_report_and_json(shipped: dict[str, Any], tmp_path: Path, which: str) -> None:
    page, blob = _report_and_json(shipped[which], tmp_path)
    secrets = (REAL_WS_KEY, REAL_WS_PROTO, REAL_SSE_TOKEN)
    _assert_absent(page, "the report", secrets)
    _assert_absent(blob, "the --json output", secrets)
    assert "&lt;redacted:" in page
    page, _ = _report_and_json(shipped[which], tmp_path, "--show-secrets")
    assert (REAL_WS_KEY if which == "ws" else REAL_SSE_TOKEN) in page


# --------------------------------------------------------------------------- open: http1 warnings

_H1_LEAKS = {
    # a request whose framing is bad: the warning quotes its target (http1/observer.py, _request_head)
    "bad-framing": b"POST /x?api_key=LeakKey0123456789 HTTP/1.1\r\nHost: h\r\n"
    b"Content-Length: abc\r\n\r\n",
    # a request line that does not parse: the warning quotes the line (http1/observer.py, _head)
    "bad-request-line": b"GET /y?token=LeakKey0123456789 HTTP/1.1 junk\r\nHost: h\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(_H1_LEAKS))
def test_http1_warning_details_never_quote_a_credential(tmp_path: Path, case: str) -> None:
    c = Conv(sport=42010, t0=later(1)).handshake()
    c.send(C2S, b"GET /ok HTTP/1.1\r\nHost: h\r\n\r\n")
    c.send(S2C, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    c.send(C2S, _H1_LEAKS[case]).close()
    p = tmp_path / "h1.pcap"
    p.write_bytes(pcap(good_conv(), c))
    cap = pcaptools.load(p)
    assert "http1.bad_message" in codes(cap)
    _assert_absent(_everything(cap), "the tables", ("LeakKey0123456789",))
