"""HTTP/3 server push (http3_pushes) on captures/h3-push.pcapng, against tshark 4.0.17's
decrypted QUIC stream data and the recording's facts.

scripts/record_captures.py (scenario h3-push) recorded one aioquic connection: a chat request
on stream 0 whose answer starts with two PUSH_PROMISE frames (GET /static/chat.css, push id 0;
GET /static/chat-theme.css, push id 1), each answered on its own push stream (200 text/css,
600 bytes), then a second request on stream 4 without pushes. tshark 4.0 has no HTTP/3
dissector: the HTTP/3 frames of its decrypted stream data (``quic.stream_data``) are parsed
here, independently of pcaptools: the push streams (server-initiated unidirectional, type
0x01, then the push id), their DATA bytes and FIN, and the PUSH_PROMISE frames of stream 0
(type 0x05: push id, then the QPACK field section, which the facts' client view decodes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.http3 import Http3Observer
from pcaptools.tables.http3_tables import HTTP3_PUSHES, http3_tables
from pcaptools.tcp.stream import Direction
from tests.conftest import CAPTURES
from tests.oracle import keylog_options, tshark_fields

PUSH = CAPTURES / "h3-push.pcapng"
KEYS = CAPTURES / "h3-push.keys"
SERVER = "192.0.2.20"

pytestmark = pytest.mark.skipif(not PUSH.is_file(), reason="h3-push.pcapng is absent")

_FIELDS = ("frame.number", "ip.src", "quic.stream.stream_id", "quic.stream.offset",
           "quic.stream.off", "quic.stream.len", "quic.stream.length", "quic.stream.fin",
           "quic.stream_data")


def _varint(b: bytes, i: int) -> tuple[int, int]:
    n = 1 << (b[i] >> 6)
    return int.from_bytes(bytes([b[i] & 0x3F]) + b[i + 1:i + n], "big"), i + n


def _server_streams() -> dict[int, dict[str, Any]]:
    """Server->client bytes of every stream from tshark, reassembled by offset: for each
    byte offset the frame that delivered it, and the frame of the FIN."""
    rows = tshark_fields(PUSH, _FIELDS, keylog_options(KEYS), display_filter="quic")
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        v = {f: (r[i].split(",") if r[i] else []) for i, f in enumerate(_FIELDS)}
        if v["ip.src"][0] != SERVER:
            continue
        oi = li = di = 0
        for k, sid in enumerate(v["quic.stream.stream_id"]):
            off = 0
            if v["quic.stream.off"][k] in ("1", "True"):
                off, oi = int(v["quic.stream.offset"][oi]), oi + 1
            n = None
            if v["quic.stream.len"][k] in ("1", "True"):
                n, li = int(v["quic.stream.length"][li]), li + 1
            data = b""
            if n is None or n > 0:
                data, di = bytes.fromhex(v["quic.stream_data"][di].replace(":", "")), di + 1
            s = out.setdefault(int(sid), {"bytes": {}, "fin": None})
            for j, byte in enumerate(data):
                s["bytes"].setdefault(off + j, (byte, int(v["frame.number"][0])))
            if v["quic.stream.fin"][k] in ("1", "True") and s["fin"] is None:
                s["fin"] = int(v["frame.number"][0])
    for s in out.values():
        offs = sorted(s["bytes"])
        assert offs == list(range(len(offs)))  # no hole (no loss on this link)
        s["data"] = bytes(s["bytes"][o][0] for o in offs)
        s["frame_at"] = [s["bytes"][o][1] for o in offs]
    return out


@pytest.fixture(scope="module")
def cap() -> pcaptools.Capture:
    return pcaptools.load(PUSH, keylog=KEYS)


@pytest.fixture(scope="module")
def facts() -> dict[str, Any]:
    return dict(json.loads(Path(f"{PUSH}.facts.json").read_text()))


def test_pushes_equal_tshark_stream_data(cap: pcaptools.Capture) -> None:
    streams = _server_streams()
    # the push streams: server-initiated unidirectional (id % 4 == 3) of type 0x01
    want: dict[int, dict[str, Any]] = {}
    for sid, s in streams.items():
        b = s["data"]
        if sid % 4 != 3 or not b or b[0] != 0x01:
            continue
        pid, i = _varint(b, 1)
        data_bytes = 0
        while i < len(b):
            ftype, i = _varint(b, i)
            flen, i = _varint(b, i)
            if ftype == 0x00:
                data_bytes += flen
            i += flen
        want[pid] = {"push_stream_id": sid, "push_stream_frame": s["frame_at"][0],
                     "data_bytes": data_bytes, "end_frame": s["fin"]}
    # the PUSH_PROMISE frames of the request streams: push id, the frame completing them
    for sid, s in streams.items():
        b, i = s["data"], 0
        if sid % 4 != 0:
            continue
        while i < len(b):
            ftype, i = _varint(b, i)
            flen, i = _varint(b, i)
            if ftype == 0x05:
                pid, _ = _varint(b, i)
                want[pid].update(promise_stream_id=sid, promise_frame=s["frame_at"][i + flen - 1])
            i += flen
    p = cap.http3_pushes
    HTTP3_PUSHES.check(p)
    assert sorted(want) == p["push_id"].tolist() == [0, 1]
    for r in p.to_dict("records"):
        w = want[r["push_id"]]
        for k, v in w.items():
            assert r[k] == v, (r["push_id"], k)
        assert r["end_reason"] == "end_stream" and r["promises"] == 1
    assert p["push_stream_id"].tolist() == [15, 19]


def test_pushes_equal_the_facts(cap: pcaptools.Capture, facts: dict[str, Any]) -> None:
    (conn,) = facts["connections"]
    got = conn["quic"]["pushes_received"]  # aioquic's client view
    sent = conn["requests"][0]["server_pushes"]  # the server's log
    p = cap.http3_pushes
    assert len(p) == len(got) == len(sent) == 2
    for r, g, s in zip(p.to_dict("records"), got, sent, strict=True):
        assert r["push_id"] == g["push_id"] == s["push_id"]
        assert r["push_stream_id"] == g["push_stream_id"] == s["push_stream_id"]
        assert r["promise_stream_id"] == g["promise_stream_id"] == 0
        assert (r["method"], r["scheme"], r["authority"], r["path"]) == (
            g["request"][":method"], g["request"][":scheme"], g["request"][":authority"],
            g["request"][":path"])
        assert r["path"] == s["path"]
        assert (r["status"], r["content_type"]) == (g["status"], g["content_type"]) == (
            200, "text/css")
        assert r["data_bytes"] == g["body_bytes"] == s["body_bytes"] == 600
        assert pd.isna(r["cancelled_by"]) and r["informational"] == 0
    # the pushes are not request streams: http3_streams keeps the two requests only
    st = cap.http3_streams
    assert st["stream_id"].tolist() == [0, 4]
    assert st["sse_events"].tolist() == [7, 7]
    assert cap.warnings.empty


def test_captures_without_push_have_no_rows() -> None:
    chat = CAPTURES / "h3-sse-chat.pcapng"
    if not chat.exists():
        pytest.skip("h3-sse-chat.pcapng is absent")
    c = pcaptools.load(chat, keylog=chat.with_suffix(".keys"))
    assert len(c.http3_streams) == 5 and c.http3_pushes.empty
    assert list(c.http3_pushes.columns) == list(HTTP3_PUSHES.names)


def test_push_stream_without_promise_cancel_and_repeated_push_id() -> None:
    """Hand-made streams: a push stream (15) for push id 5 with a DATA frame and FIN but no
    PUSH_PROMISE captured, a second push stream (19) repeating push id 5 (H3_ID_ERROR: a
    warning, its bytes counted), and the client's CANCEL_PUSH of push id 9, never promised
    nor opened in the capture."""
    c2s, s2c = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
    diag = Diagnostics()
    obs = Http3Observer(connection=3, diag=diag)
    obs.stream_data(2, c2s, 0, b"\x00\x04\x00" + b"\x03\x01\x09", False, 1000, 1)
    obs.stream_data(15, s2c, 0, b"\x01\x05" + b"\x00\x03abc", True, 2000, 2)
    obs.stream_data(19, s2c, 0, b"\x01\x05" + b"\x00\x01z", True, 3000, 3)
    obs.finish(4000, 4)
    p = http3_tables([obs])["http3_pushes"]
    HTTP3_PUSHES.check(p)
    assert p["push_id"].tolist() == [5, 9]
    five, nine = p.to_dict("records")
    assert (five["promises"], five["push_stream_id"], five["push_stream_frame"]) == (0, 15, 2)
    assert pd.isna(five["promise_stream_id"]) and pd.isna(five["path"])
    assert (five["data_bytes"], five["end_reason"], five["end_frame"]) == (3, "end_stream", 2)
    assert pd.isna(five["status"])  # no HEADERS on the push stream
    assert (nine["promises"], nine["end_reason"], nine["cancelled_by"]) == (
        0, "not_seen", "client")
    assert pd.isna(nine["push_stream_id"])
    assert dict(diag.counts) == {"http3.unexpected_stream": 1}
