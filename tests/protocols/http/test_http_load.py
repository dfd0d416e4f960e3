"""End to end: ``pcaptools.load()`` fills the HTTP tables as tshark sees the corpus.

Skipped until the pipeline wires the HTTP observers (``pcaptools.TABLES`` has the tables).
"""

from __future__ import annotations

import inspect
from collections import Counter
from pathlib import Path

import pytest

import pcaptools
from pcaptools.tables.http_tables import HTTP_TABLES
from tests.oracle import tshark_fields

pytestmark = [pytest.mark.corpus, pytest.mark.tshark]

H2 = {
    "http2_h2c.pcap": (None, ()),
    "http2-nghttp2.pcap": (None, ("-d", "tcp.port==80,http2")),
    "suricata-http2-continuation-input.pcap": (None, ()),
    "http2-with-cookies.pcapng": (None, ()),
    "dsb-tls3.cryptohack.org.pcapng": (None, ()),
    "chrome-cloudflare-quic-with-secrets.pcapng": (None, ()),
    "tls3.cryptohack.org.pcapng": ("keylogfile.txt", ()),
}
H1 = [
    "http_ip4and6.pcapng",
    "http-vlan-0.pcap",
    "twovlan.pcap",
    "raw_ip.pcap",
    "nanosecs_big_endian.pcap",
    "tcp-fast-open.pcap",
    "wireshark-retrans.pcap",
    "sseapp.pcap",
    "http2_h2c.pcap",
    "wsapp.pcap",
    "syn_retransmit_with_ts.pcap",
    "suricata-decode-sll2-01-input.pcap",
]


@pytest.fixture(scope="module")
def wired() -> None:
    missing = [n for n in HTTP_TABLES if n not in pcaptools.TABLES]
    if missing:
        pytest.skip(f"pcaptools.load() does not build {missing} yet")


def _load(path: Path, keylog: Path | None) -> pcaptools.Capture:
    if keylog is None:
        return pcaptools.load(path, packets=False)
    if "keylog" not in inspect.signature(pcaptools.load).parameters:
        pytest.skip("pcaptools.load() takes no keylog yet")
    return pcaptools.load(path, packets=False, keylog=keylog)  # type: ignore[call-arg]


@pytest.mark.parametrize("name", sorted(H2))
def test_http2_tables_match_tshark(wired: None, corpus: Path, tshark: str, name: str) -> None:
    key, opts = H2[name]
    keylog = corpus / key if key else None
    cap = _load(corpus / name, keylog)
    if keylog is not None:
        opts = (*opts, "-o", f"tls.keylog_file:{keylog}")
    for table, schema in HTTP_TABLES.items():
        schema.check(getattr(cap, table))
    fr = cap.http2_frames  # type: ignore[attr-defined]
    ours = Counter(
        zip(fr["tcp_stream"], fr["frame"], fr["stream_id"], fr["type_code"], strict=True)
    )
    rows = tshark_fields(
        corpus / name, ("frame.number", "tcp.stream", "http2.streamid", "http2.type"), opts
    )
    theirs: Counter[tuple[int, int, int, int]] = Counter()
    for frame, stream, sids, types in rows:
        if types:
            for sid, t in zip(sids.split(","), types.split(","), strict=True):
                theirs[(int(stream), int(frame), int(sid), int(t))] += 1
    assert ours == theirs
    st = cap.http2_streams  # type: ignore[attr-defined]
    assert set(zip(st["tcp_stream"], st["stream_id"], strict=True)) == {
        (s, sid) for (s, _, sid, _) in theirs if sid > 0
    }
    hdr = tshark_fields(corpus / name, ("http2.headers.status",), opts, "http2.header")
    assert Counter(int(s) for row in hdr for s in row[0].split(",") if s) == Counter(
        int(s) for s in st["status"].dropna()
    )


@pytest.mark.parametrize("name", H1)
def test_http_requests_match_tshark(wired: None, corpus: Path, tshark: str, name: str) -> None:
    cap = _load(corpus / name, None)
    rq = cap.http_requests  # type: ignore[attr-defined]
    rows = tshark_fields(
        corpus / name,
        (
            "frame.number",
            "tcp.stream",
            "http.request.method",
            "http.response.code",
            "tcp.analysis.retransmission",
        ),
        (),
        "http",
    )
    req = sorted((int(s), int(f)) for f, s, m, _, r in rows if m and not r for _ in m.split(","))
    resp = sorted((int(s), int(f)) for f, s, _, c, r in rows if c and not r for _ in c.split(","))
    done = rq[rq["request_frame"].notna()]
    assert sorted(zip(done["tcp_stream"], done["request_frame"].astype(int), strict=True)) == req
    done = rq[rq["response_frame"].notna()]
    assert sorted(zip(done["tcp_stream"], done["response_frame"].astype(int), strict=True)) == resp


def test_sseapp_events_end_to_end(wired: None, corpus: Path) -> None:
    cap = _load(corpus / "sseapp.pcap", None)
    ev = cap.sse_events  # type: ignore[attr-defined]
    assert list(ev["frame"]) == [14, 16, 18]
    assert list(ev["data"]) == [
        '{"time": "11:42:14"}',
        '{"time": "11:42:24"}',
        '{"time": "11:42:34"}',
    ]
    assert list(ev["request_index"]) == [2, 2, 2]
    rq = cap.http_requests  # type: ignore[attr-defined]
    row = rq[rq["request_index"] == 2].iloc[0]
    assert (row["path"], row["sse_events"], row["end_reason"]) == ("/time", 3, "open_at_eof")


# --------------------------------------------------------------------------- synthetic LLM streams


def _write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "llm.pcap"
    p.write_bytes(data)
    return p


def _chunk(s: bytes) -> bytes:
    return f"{len(s):x}\r\n".encode() + s + b"\r\n"


def _token(text: str) -> bytes:
    return b'data: {"choices":[{"delta":{"content":"' + text.encode() + b'"}}]}\n\n'


def test_llm_stream_over_h2c_end_to_end(wired: None, tmp_path: Path) -> None:
    from tests.protocols.http.helpers import C2S, PREFACE, S2C, FrameFactory, tcp_session_pcap

    ff = FrameFactory()
    req = [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "llm"),
        (":path", "/v1/chat/completions"),
    ]
    segs = [
        (
            C2S,
            PREFACE
            + ff.settings({})
            + ff.headers(1, req)
            + ff.data(1, b'{"stream":true}', end_stream=True),
        ),
        (S2C, ff.settings({3: 100}) + ff.settings(ack=True)),
        (
            S2C,
            ff.headers(
                1, [(":status", "200"), ("content-type", "text/event-stream")], direction=S2C
            ),
        ),
        *[(S2C, ff.data(1, _token(t))) for t in ("Hel", "lo", " wor", "ld")],
        (S2C, ff.data(1, b"data: [DONE]\n\n", end_stream=True)),
    ]
    data, frames = tcp_session_pcap(segs)
    cap = pcaptools.load(_write(tmp_path, data), packets=False)
    ev = cap.sse_events  # type: ignore[attr-defined]
    assert list(ev["frame"]) == [frames[i] for i in range(3, 8)]
    assert list(ev["delta_text"].fillna("")) == ["Hel", "lo", " wor", "ld", ""]
    assert list(ev["done"]) == [False] * 4 + [True]
    st = cap.http2_streams.iloc[0]  # type: ignore[attr-defined]
    assert (st["path"], st["status"], st["sse_events"], st["end_reason"]) == (
        "/v1/chat/completions",
        200,
        5,
        "end_stream",
    )
    # request ended with segment 0, response HEADERS in segment 2: two segments and their ACKs
    # later, one packet every 10 ms
    assert st["ttfb_ms"] == 40.0
    assert cap.http2_connections.iloc[0]["start"] == "preface"  # type: ignore[attr-defined]


def test_llm_stream_over_http1_with_a_lost_segment(wired: None, tmp_path: Path) -> None:
    from tests.protocols.http.helpers import C2S, S2C, tcp_session_pcap

    big = b"".join(_token(f"t{i}") for i in range(6))
    segs = [
        (C2S, b"POST /v1/chat/completions HTTP/1.1\r\nHost: llm\r\nContent-Length: 2\r\n\r\n{}"),
        (
            S2C,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n",
        ),
        (S2C, _chunk(_token("a"))),
        (S2C, f"{len(big):x}\r\n".encode() + big[:100]),  # one chunk over three segments...
        (S2C, big[100:200]),  # ...the middle one never captured
        (S2C, big[200:] + b"\r\n"),
        (S2C, _chunk(_token("z")) + b"0\r\n\r\n"),
    ]
    data, frames = tcp_session_pcap(segs, drop=[4])
    cap = pcaptools.load(_write(tmp_path, data), packets=False)
    ev = cap.sse_events  # type: ignore[attr-defined]
    texts = list(ev["delta_text"])
    assert texts[0] == "a" and texts[-1] == "z"
    assert (
        "t5" in texts and "t2" not in texts
    )  # events hit by the hole are dropped, later ones parse
    rq = cap.http_requests.iloc[0]  # type: ignore[attr-defined]
    assert (rq["end_reason"], rq["response_frame"], rq["sse_events"]) == (
        "complete",
        frames[6],
        len(ev),
    )
    assert rq["response_body_bytes"] == len(_token("a")) + len(big) + len(_token("z"))
    w = cap.warnings
    # the hole, and (the client acknowledged those bytes) a capture drop, not a loss
    assert list(w["code"].astype(str)) == ["tcp.reassembly_gap", "tcp.capture_drop"]
    lost = cap.tcp_losses  # type: ignore[attr-defined]
    assert [(str(r.kind), int(r.len)) for r in lost.itertuples()] == [("capture_drop", 100)]
