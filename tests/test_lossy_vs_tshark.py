"""On captures with loss, the payload tables agree with tshark frame by frame once tshark
reassembles out-of-order segments too.

The shipped lossy captures (``scripts/record_captures.py``: seeded loss on a TAP link, captured
at the client and at the server) hold segments that arrive after later ones (the resend of a
lost segment). pcaptools reassembles them, as it does every TCP stream. tshark 4.0 does only
with ``tcp.reassemble_out_of_order:TRUE``; with its default (FALSE) it shows fewer PDUs or
puts them in other frames: on ``h2-sse-lossy.pcapng`` it shows 74 of the 286 HTTP/2 frames and
50 of the 270 TLS records in another frame, on ``http1-lossy.pcap`` one response fewer (and,
on the benchmark's 420,630-frame capture, 270 WebSocket frames of one wss connection missing).
With the option on, every row below is equal. The TCP analysis itself (``test_load_vs_tshark.py``)
needs no option: it is the same either way. Where the capture missed bytes that were never
resent, the option makes tshark wait for them: the last test pins what it then shows.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest

import pcaptools
from tests.conftest import CAPTURES, shipped_captures
from tests.oracle import keylog_options, tshark_fields

pytestmark = pytest.mark.tshark

OUT_OF_ORDER = ("-o", "tcp.reassemble_out_of_order:TRUE")

#: capture -> its key log (None: cleartext)
TLS_LOSSY = {"h2-sse-lossy.pcapng": "h2-sse-lossy.keys",
             "h2-sse-lossy-server.pcapng": "h2-sse-lossy.keys"}
H1_LOSSY = ("http1-lossy.pcap", "http1-lossy-server.pcap")


def _load(name: str, keys: str | None) -> pcaptools.Capture:
    return pcaptools.load(CAPTURES / name, keylog=CAPTURES / keys if keys else None,
                          packets=False)


def _opts(keys: str | None) -> tuple[str, ...]:
    return (*keylog_options(CAPTURES / keys if keys else None), *OUT_OF_ORDER)


def _resent_payload_frames(cap: pcaptools.Capture) -> int:
    """TCP segments whose payload was seen before (the captures do hold loss)."""
    ev = cap.tcp_events
    return int((ev["kind"].astype(object) == "resent").sum())


@pytest.mark.parametrize("name", sorted(TLS_LOSSY))
def test_http2_frames_and_tls_records_equal_tshark(tshark: str, name: str) -> None:
    keys = TLS_LOSSY[name]
    cap = _load(name, keys)
    assert _resent_payload_frames(cap) > 0
    path = Path(CAPTURES / name)

    fr = cap.http2_frames
    ours = Counter(zip(fr["tcp_stream"], fr["frame"], fr["stream_id"], fr["type_code"],
                       strict=True))
    theirs: Counter[tuple[int, int, int, int]] = Counter()
    for frame, stream, sids, types in tshark_fields(
            path, ("frame.number", "tcp.stream", "http2.streamid", "http2.type"), _opts(keys),
            "http2"):
        for sid, t in zip(sids.split(","), types.split(","), strict=True):
            theirs[(int(stream), int(frame), int(sid), int(t))] += 1
    assert sum(ours.values()) == 286
    assert ours == theirs

    rec = cap.tls_records
    ours_r = Counter(zip(rec["frame"], rec["length"], strict=True))
    theirs_r: Counter[tuple[int, int]] = Counter()
    for frame, lengths in tshark_fields(path, ("frame.number", "tls.record.length"), _opts(keys),
                                        "tcp && tls.record"):
        for ln in lengths.split(","):
            theirs_r[(int(frame), int(ln))] += 1
    assert sum(ours_r.values()) == 270
    assert ours_r == theirs_r


@pytest.mark.parametrize("name", H1_LOSSY)
def test_http1_requests_and_responses_equal_tshark(tshark: str, name: str) -> None:
    cap = _load(name, None)
    assert _resent_payload_frames(cap) > 0
    rq = cap.http_requests
    ours_q = Counter(rq["request_frame"].dropna().astype("int64"))
    ours_s = Counter(zip(rq["response_frame"].dropna().astype("int64"),
                         rq["status"].dropna().astype("int64"), strict=True))
    theirs_q: Counter[int] = Counter()
    theirs_s: Counter[tuple[int, int]] = Counter()
    for frame, methods, codes in tshark_fields(
            CAPTURES / name, ("frame.number", "http.request.method", "http.response.code"),
            OUT_OF_ORDER, "http"):
        for _ in filter(None, methods.split(",")):
            theirs_q[int(frame)] += 1
        for code in filter(None, codes.split(",")):
            theirs_s[(int(frame), int(code))] += 1
    assert sum(ours_s.values()) == len(rq) == 3
    assert ours_q == theirs_q
    assert ours_s == theirs_s


def test_out_of_order_reassembly_waits_for_bytes_the_capture_missed(tshark: str) -> None:
    """``http1-keepalive-drops.pcap`` lost segments in the capture file only (never resent:
    ``tcp_losses`` kind ``capture_drop``). pcaptools reports the gaps and pairs what follows
    them; tshark with out-of-order reassembly waits for the missing bytes and shows nothing
    more of that direction (the caveat pcaptools.wireshark and the report give)."""
    name = "http1-keepalive-drops.pcap"
    cap = _load(name, None)
    assert set(cap.tcp_losses["kind"].astype(str)) == {"capture_drop"}
    rq = cap.http_requests
    assert (len(rq), int(rq["response_frame"].notna().sum())) == (42, 37)
    rows = tshark_fields(CAPTURES / name, ("http.request.method", "http.response.code"),
                         OUT_OF_ORDER, "http")
    assert (sum(1 for m, _ in rows if m), sum(1 for _, c in rows if c)) == (15, 0)


@pytest.mark.parametrize(("name", "lines"), [
    ("h2-sse-lossy.pcapng", ["TLS records (frame, length): pcaptools 270, tshark 270; only "
                             "pcaptools 0, only tshark 0",
                             "HTTP/2 frames (frame, stream id, type): pcaptools 286, tshark 286; "
                             "only pcaptools 0, only tshark 0",
                             "HTTP/2 requests (frame, method, path): pcaptools 10, tshark 10; "
                             "only pcaptools 0, only tshark 0"]),
    ("tls-versions-ciphers.pcapng", ["TLS ServerHellos (frame, version, cipher suite): "
                                     "pcaptools 9, tshark 9; only pcaptools 0, only tshark 0",
                                     "HTTP/1.x responses (frame, status): pcaptools 16, tshark "
                                     "16; only pcaptools 0, only tshark 0"]),
    ("ws-tls.pcapng", ["WebSocket frames (frame, opcode, payload length): pcaptools 41, "
                       "tshark 41; only pcaptools 0, only tshark 0"]),
])
def test_the_parity_script_agrees_on_shipped_captures(tshark: str, name: str,
                                                      lines: list[str]) -> None:
    """``benchmarks/parity.py`` (the same comparisons on a capture too big to ship) finds
    every layer equal here, and says so with exit status 0."""
    import subprocess
    import sys

    script = CAPTURES.parent / "benchmarks" / "parity.py"
    res = subprocess.run([sys.executable, str(script), str(CAPTURES / name)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout.splitlines()
    assert out[0].endswith("mismatched fields: none")
    for line in lines:
        assert line in out


@functools.cache
def _parity_layers() -> object:
    """``layers`` of benchmarks/parity.py (a script, not a module of the package)"""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_pcaptools_parity", CAPTURES.parent / "benchmarks" / "parity.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.layers


#: HTTP/2 without TLS on another port than 80: tshark needs decode-as (as they were recorded)
_DECODE_AS = {"secrets.pcap": "tcp.port==8081,http2", "secrets-more.pcap": "tcp.port==8081,http2",
              "sse-compressed.pcap": "tcp.port==8082,http2"}
#: the known differences (benchmarks/parity.py's docstring): layer -> (only pcaptools, only
#: tshark). http1-keepalive.pcap ends with two HTTP/0.9 exchanges (no version, no status line:
#: pcaptools' rows have status NA, shown as -1; tshark shows one of the requests).
_KNOWN = {"http1-keepalive.pcap": {
    "HTTP/1.x requests (frame)": ({(204,): 1}, {}),
    "HTTP/1.x responses (frame, status)": ({(208, -1): 1, (218, -1): 1}, {}),
}}
#: the capture missed bytes: out-of-order reassembly stops tshark at the gap (pinned above)
_NOT_COMPARED = {"http1-keepalive-drops.pcap"}


@pytest.mark.parametrize(
    "path", [p for p in shipped_captures() if p.name not in _NOT_COMPARED], ids=lambda p: p.name)
def test_every_payload_layer_equals_tshark_on_every_shipped_capture(tshark: str,
                                                                     path: Path) -> None:
    """TLS handshakes and records, HTTP/1.x, HTTP/2 frames, requests and responses, WebSocket
    frames: benchmarks/parity.py's layers, the same rows as tshark with out-of-order reassembly
    on every shipped capture, but for the differences it names."""
    d = _DECODE_AS.get(path.name)
    keys = path.with_suffix(".keys")  # (every shipped key log is named after its capture)
    layers = _parity_layers()(path, keys if keys.exists() else None,  # type: ignore[operator]
                              ("-d", d) if d else ())
    known = _KNOWN.get(path.name, {})
    for name, ours, theirs in layers:
        only_ours, only_theirs = known.get(name, ({}, {}))
        assert (dict(ours - theirs), dict(theirs - ours)) == (only_ours, only_theirs), name
