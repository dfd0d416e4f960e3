"""The HTTP observers on the public corpus, compared with tshark 4.0.

Byte streams come from :func:`tests.protocols.http.helpers.capture_items` (tshark's TCP
dissection + our Reassembler) until ``pcaptools.load()`` wires the observers itself.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.http1 import Http1Observer, HttpExchange
from pcaptools.protocols.http2 import Http2Frame, Http2Observer, Http2StreamEnded
from pcaptools.protocols.sse import SseEvent
from tests.oracle import tshark_fields
from tests.protocols.http.helpers import run_capture

pytestmark = [pytest.mark.corpus, pytest.mark.tshark]

# capture -> (observer class, tshark options). tshark 4.0 only reassembles HTTP/2 frames
# across TCP segments in http2-nghttp2.pcap when told the port is HTTP/2: by default the
# HTTP dissector hands the preface to HTTP/2 in a way that disables reassembly, so it shows
# 16 frames (one of them a partial HEADERS) instead of 21.
H2_CAPTURES = {
    "http2_h2c.pcap": (Http1Observer, ()),
    "http2-nghttp2.pcap": (Http2Observer, ("-d", "tcp.port==80,http2")),
    "suricata-http2-continuation-input.pcap": (Http2Observer, ()),
}

H1_CAPTURES = [
    "http_ip4and6.pcapng",
    "http-vlan-0.pcap",
    "twovlan.pcap",
    "raw_ip.pcap",
    "nanosecs_big_endian.pcap",
    "tcp-fast-open.pcap",
    "wireshark-retrans.pcap",
    "sseapp.pcap",
    "http2_h2c.pcap",
    "syn_retransmit_with_ts.pcap",
    "suricata-decode-sll2-01-input.pcap",
    "wsapp.pcap",
]


def _events(path: Path, cls: type) -> tuple[list[object], Diagnostics]:
    diag = Diagnostics()
    res = run_capture(path, lambda c: cls(tcp_stream=c.tcp_stream, diag=diag))
    return [e for evs in res.values() for e in evs], diag


@pytest.mark.parametrize("name", sorted(H2_CAPTURES))
def test_http2_frames_match_tshark(corpus: Path, tshark: str, name: str) -> None:
    cls, opts = H2_CAPTURES[name]
    events, diag = _events(corpus / name, cls)
    ours = Counter(
        (f.tcp_stream, f.frame, f.stream_id, f.type) for f in events if isinstance(f, Http2Frame)
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
    assert [r.code for r in diag.rows if r.layer == "http2"] == []
    # streams: the same ids, and the same :method / :path / :status values
    streams = [e for e in events if isinstance(e, Http2StreamEnded)]
    their_ids = {(s, sid) for (s, _, sid, _) in theirs if sid > 0}
    assert {(e.tcp_stream, e.stream_id) for e in streams} == their_ids
    hdr = tshark_fields(
        corpus / name,
        ("http2.headers.method", "http2.headers.path", "http2.headers.status"),
        opts,
        "http2.header",
    )
    t_method = Counter(m for row in hdr for m in row[0].split(",") if m)
    t_path = Counter(p for row in hdr for p in row[1].split(",") if p)
    t_status = Counter(int(s) for row in hdr for s in row[2].split(",") if s)
    # h2c: stream 1's request came over HTTP/1.1, so tshark has no :method/:path for it
    requests = [e for e in streams if not (name == "http2_h2c.pcap" and e.stream_id == 1)]
    assert Counter(e.method for e in requests if e.method) == t_method
    assert Counter(e.path for e in requests if e.path) == t_path
    assert Counter(e.status for e in streams if e.status is not None) == t_status


def test_http2_nghttp2_details(corpus: Path) -> None:
    events, _ = _events(corpus / "http2-nghttp2.pcap", Http2Observer)
    s = {e.stream_id: e for e in events if isinstance(e, Http2StreamEnded)}
    assert sorted(s) == [2, 3, 5, 7, 9, 11, 13]
    assert (s[13].method, s[13].path, s[13].status, s[13].request_frame, s[13].end_reason) == (
        "GET",
        "/",
        200,
        24,
        "end_stream",
    )
    assert s[13].client_header_bytes > 16384  # HEADERS + CONTINUATION
    assert (
        s[2].pushed,
        s[2].parent_stream_id,
        s[2].path,
        s[2].request_frame,
        s[2].server_data_bytes,
    ) == (True, 13, "/stylesheets/screen.css", 26, 39082)
    assert [s[i].end_reason for i in (3, 5, 7, 9, 11)] == ["idle"] * 5


def test_http2_continuation_rst(corpus: Path) -> None:
    events, _ = _events(corpus / "suricata-http2-continuation-input.pcap", Http2Observer)
    (s,) = [e for e in events if isinstance(e, Http2StreamEnded)]
    assert (
        s.stream_id,
        s.method,
        s.path,
        s.status,
        s.request_frame,
        s.end_reason,
        s.rst_by,
        s.rst_error_code,
    ) == (1, "GET", "/tata", 200, 19, "rst_stream", 1, 0)


def _tshark_messages(
    path: Path,
) -> tuple[set[tuple[int, int, str, str]], set[tuple[int, int, int]], dict[int, int]]:
    rows = tshark_fields(
        path,
        (
            "frame.number",
            "tcp.stream",
            "http.request.method",
            "http.request.uri",
            "http.response.code",
            "http.request_in",
            "tcp.analysis.retransmission",
        ),
        (),
        "http",
    )
    req, resp, pairs = set(), set(), {}
    for frame, stream, methods, uris, codes, req_in, retrans in rows:
        if retrans:
            # tshark 4.0 dissects some (fast) retransmissions again as new messages; our byte
            # stream carries each byte once
            continue
        ms = methods.split(",") if methods else []
        us = (
            [uris] if len(ms) == 1 else uris.split(",") if ms else []
        )  # one URI may itself hold commas
        req |= {(int(stream), int(frame), m, u) for m, u in zip(ms, us, strict=True)}
        for c, r in zip(
            codes.split(",") if codes else [],
            req_in.split(",") if req_in else [""] * 9,
            strict=False,
        ):
            resp.add((int(stream), int(frame), int(c)))
            if r:
                pairs[int(frame)] = int(r)
    return req, resp, pairs


@pytest.mark.parametrize("name", H1_CAPTURES)
def test_http1_messages_match_tshark(corpus: Path, tshark: str, name: str) -> None:
    events, diag = _events(corpus / name, Http1Observer)
    ex = [e for e in events if isinstance(e, HttpExchange)]
    ours_req = {
        (e.tcp_stream, e.request.end_frame, e.request.method, e.request.target)
        for e in ex
        if e.request is not None and e.request.complete
    }
    ours_resp = {
        (e.tcp_stream, e.response.end_frame, e.response.status)
        for e in ex
        if e.response is not None and e.response.complete
    }
    ours_pairs = {
        e.response.end_frame: e.request.end_frame
        for e in ex
        if e.response is not None and e.response.complete and e.request is not None
    }
    req, resp, pairs = _tshark_messages(corpus / name)
    assert ours_req == req
    assert ours_resp == resp
    assert ours_pairs == pairs
    assert [
        r.code for r in diag.rows if r.code in ("http1.bad_message", "http1.truncated_message")
    ] == (
        # raw_ip.pcap stream 4 is TLS on a port the test feeds to HTTP/1.x regardless
        ["http1.bad_message"] if name == "raw_ip.pcap" else []
    )


def test_http1_counts_against_truth(corpus: Path) -> None:
    # raw_ip.pcap: 19 requests, 6 responses (truth.txt); stream 2 pipelines 10 requests
    events, _ = _events(corpus / "raw_ip.pcap", Http1Observer)
    ex = [e for e in events if isinstance(e, HttpExchange)]
    assert sum(1 for e in ex if e.request is not None and e.request.complete) == 19
    assert sum(1 for e in ex if e.response is not None and e.response.complete) == 6
    stream2 = sorted(e.position for e in ex if e.tcp_stream == 2 and e.position is not None)
    assert stream2 == list(range(1, 11))
    # tcp-fast-open.pcap: the second request rode in the SYN (frame 8); bodies end at the FIN
    events, _ = _events(corpus / "tcp-fast-open.pcap", Http1Observer)
    ex = sorted((e for e in events if isinstance(e, HttpExchange)), key=lambda e: e.tcp_stream)
    assert [
        (e.request.end_frame, e.response.end_frame, e.response.until_close, e.response.body_bytes)
        for e in ex
        if e.request and e.response
    ] == [(3, 6, True, 0), (8, 14, True, 1158)]


def test_sseapp_events(corpus: Path) -> None:
    events, diag = _events(corpus / "sseapp.pcap", Http1Observer)
    sse = [e for e in events if isinstance(e, SseEvent)]
    assert [(e.frame, e.request_index, e.index, e.data, e.json_ok) for e in sse] == [
        (14, 2, 0, '{"time": "11:42:14"}', True),
        (16, 2, 1, '{"time": "11:42:24"}', True),
        (18, 2, 2, '{"time": "11:42:34"}', True),
    ]
    ex = {e.request_index: e for e in events if isinstance(e, HttpExchange)}
    assert ex[2].request is not None and ex[2].request.target == "/time"
    assert ex[2].response is not None and ex[2].response.chunked and not ex[2].response.complete
    assert (ex[2].sse_events, ex[2].end_reason, ex[2].position) == (3, "open_at_eof", 2)
    assert diag.rows == []


def test_websocket_upgrades_are_handed_off(corpus: Path) -> None:
    events, _ = _events(corpus / "wsapp.pcap", Http1Observer)
    ex = [e for e in events if isinstance(e, HttpExchange) and e.upgrade]
    assert [
        (e.tcp_stream, e.request.target, e.response.end_frame, e.upgrade)  # type: ignore[union-attr]
        for e in ex
    ] == [(1, "/time", 15, "websocket")]


# --------------------------------------------------------------------------- through TLS

TLS_CAPTURES = {
    # capture: (key log file, or None for the pcapng Decryption Secrets Block)
    "tls3.cryptohack.org.pcapng": "keylogfile.txt",
    "dsb-tls3.cryptohack.org.pcapng": None,
    "http2-with-cookies.pcapng": None,
    "chrome-cloudflare-quic-with-secrets.pcapng": None,
    "tls12-decryption.pcap": "tls12-decryption.keylog.txt",
    "tls_nss_example.pcap": "tls_nss_example.keys.txt",
    "dump.pcapng": "premaster.txt",
}


def _tls_events(path: Path, keyfile: Path | None) -> tuple[list[object], Diagnostics]:
    tls = pytest.importorskip("pcaptools.protocols.tls")
    from pcaptools.io import open_capture
    from pcaptools.protocols.detect import tls_inner_factory

    diag = Diagnostics()
    if keyfile is not None:
        keylog = tls.KeyLog.from_file(keyfile, diag)
    else:
        keylog = tls.KeyLog()
        with open_capture(path, diag) as reader:
            for _ in reader.frames():
                pass
            for i, (_, data) in enumerate(reader.secrets):
                keylog.add_text(data, diag, source=f"dsb {i}")
    res = run_capture(
        path,
        lambda c: tls.TlsObserver(
            tcp_stream=c.tcp_stream,
            diag=diag,
            keylog=keylog,
            inner_factory=tls_inner_factory(tcp_stream=c.tcp_stream, diag=diag),
        ),
    )
    return [e for evs in res.values() for e in evs], diag


@pytest.mark.parametrize("name", sorted(TLS_CAPTURES))
def test_http_over_tls_matches_tshark(corpus: Path, tshark: str, name: str) -> None:
    key = TLS_CAPTURES[name]
    keyfile = corpus / key if key else None
    events, diag = _tls_events(corpus / name, keyfile)
    opts = ("-o", f"tls.keylog_file:{keyfile}") if keyfile else ()
    ours = Counter(
        (f.tcp_stream, f.frame, f.stream_id, f.type) for f in events if isinstance(f, Http2Frame)
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
    rows = tshark_fields(
        corpus / name,
        ("frame.number", "tcp.stream", "http.request.method", "http.response.code"),
        opts,
        "http",
    )
    ex = [e for e in events if isinstance(e, HttpExchange)]
    assert sorted(
        (e.tcp_stream, e.request.end_frame) for e in ex if e.request and e.request.complete
    ) == sorted((int(s), int(f)) for f, s, m, _ in rows if m)
    resp = sorted(
        (e.tcp_stream, e.response.end_frame) for e in ex if e.response and e.response.complete
    )
    their_resp = sorted((int(s), int(f)) for f, s, _, c in rows if c)
    if name in ("tls_nss_example.pcap", "dump.pcapng"):
        # HTTP/1.0 bodies that end with the connection: tshark 4.0 never completes them over
        # TLS (it does not see the end of the TLS stream); we end them at the TCP FIN/RST
        assert (
            their_resp == []
            and len(resp) == len(ex) == {"tls_nss_example.pcap": 2, "dump.pcapng": 73}[name]
        )
        assert all(e.response is not None and e.response.until_close for e in ex)
    else:
        assert resp == their_resp
    assert [r for r in diag.rows if r.layer in ("http1", "http2", "sse")] == []
    if name == "http2-with-cookies.pcapng":
        streams = [e for e in events if isinstance(e, Http2StreamEnded)]
        assert len(streams) == 15 and {e.end_reason for e in streams} == {"end_stream"}
        assert sum(1 for f in events if isinstance(f, Http2Frame) and f.type == 0) == 159
