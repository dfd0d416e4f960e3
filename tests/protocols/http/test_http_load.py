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
