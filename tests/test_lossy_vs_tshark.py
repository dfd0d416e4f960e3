"""The payload tables agree with tshark frame by frame, on captures with loss too, once
tshark reassembles out-of-order segments as pcaptools does.

The comparisons are ``benchmarks/parity.py``'s (``layers``: TLS handshakes and records,
HTTP/1.x requests and responses, HTTP/2 frames, requests and responses, WebSocket frames), made
here on every shipped capture. The lossy ones (``scripts/record_captures.py``: seeded loss on
a TAP link, captured at the client and at the server) hold segments that arrive after later
ones (the resend of a lost segment). tshark 4.0 reassembles them only with
``tcp.reassemble_out_of_order:TRUE``; with its default (FALSE) it shows fewer PDUs or puts
them in other frames: on ``h2-sse-lossy.pcapng`` it shows 74 of the 286 HTTP/2 frames and 50
of the 270 TLS records in another frame, on ``http1-lossy.pcap`` one response fewer (and, on
the benchmark's 420,630-frame capture, 270 WebSocket frames of one wss connection are missing:
benchmarks/PARITY.md). The TCP analysis itself (``test_load_vs_tshark.py``) is the same
either way. Where the capture missed bytes that were never resent, the option makes tshark
wait for them: a test pins what it then shows.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pcaptools
from tests.conftest import CAPTURES, shipped_captures
from tests.oracle import tshark_fields

pytestmark = pytest.mark.tshark

PARITY = CAPTURES.parent / "benchmarks" / "parity.py"


@functools.cache
def _parity() -> Any:
    """benchmarks/parity.py (a script, not a module of the package)"""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_pcaptools_parity", PARITY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
#: the rows of the layers that loss disturbs in tshark's default view, on the lossy captures
#: (so that their equality is not that of empty tables)
_LOSSY_ROWS = {
    "h2-sse-lossy.pcapng": {"TLS records (frame, length)": 270,
                            "HTTP/2 frames (frame, stream id, type)": 286},
    "h2-sse-lossy-server.pcapng": {"TLS records (frame, length)": 270,
                                   "HTTP/2 frames (frame, stream id, type)": 286},
    "http1-lossy.pcap": {"HTTP/1.x responses (frame, status)": 3},
    "http1-lossy-server.pcap": {"HTTP/1.x responses (frame, status)": 3},
}
#: the capture missed bytes: out-of-order reassembly stops tshark at the gap (pinned below)
_NOT_COMPARED = {"http1-keepalive-drops.pcap"}


@pytest.mark.parametrize(
    "path", [p for p in shipped_captures() if p.name not in _NOT_COMPARED], ids=lambda p: p.name)
def test_every_payload_layer_equals_tshark_on_every_shipped_capture(tshark: str,
                                                                     path: Path) -> None:
    """The same rows as tshark with out-of-order reassembly, but for the differences named."""
    d = _DECODE_AS.get(path.name)
    keys = path.with_suffix(".keys")  # (every shipped key log is named after its capture)
    layers = _parity().layers(path, keys if keys.exists() else None, ("-d", d) if d else ())
    known = _KNOWN.get(path.name, {})
    rows = _LOSSY_ROWS.get(path.name, {})
    for name, ours, theirs in layers:
        only_ours, only_theirs = known.get(name, ({}, {}))
        assert (dict(ours - theirs), dict(theirs - ours)) == (only_ours, only_theirs), name
        if name in rows:
            assert sum(ours.values()) == rows[name], name
    if rows:  # (they do hold resends)
        cap = pcaptools.load(path, packets=False, payloads=False)
        assert (cap.tcp_events["kind"].astype(object) == "resent").sum() > 0


def test_out_of_order_reassembly_waits_for_bytes_the_capture_missed(tshark: str) -> None:
    """``http1-keepalive-drops.pcap`` lost segments in the capture file only (never resent:
    ``tcp_losses`` kind ``capture_drop``). pcaptools reports the gaps and pairs what follows
    them; tshark with out-of-order reassembly waits for the missing bytes and shows nothing
    more of that direction (the caveat pcaptools.wireshark and the report give)."""
    name = "http1-keepalive-drops.pcap"
    cap = pcaptools.load(CAPTURES / name, packets=False)
    assert set(cap.tcp_losses["kind"].astype(str)) == {"capture_drop"}
    rq = cap.http_requests
    assert (len(rq), int(rq["response_frame"].notna().sum())) == (42, 37)
    rows = tshark_fields(CAPTURES / name, ("http.request.method", "http.response.code"),
                         _parity().OUT_OF_ORDER, "http")
    assert (sum(1 for m, _ in rows if m), sum(1 for _, c in rows if c)) == (15, 0)


def test_the_parity_script_says_so_and_exits_0() -> None:
    """``benchmarks/parity.py`` as a command: the TCP line and one line per layer, exit 0
    when every layer agrees."""
    res = subprocess.run([sys.executable, str(PARITY), str(CAPTURES / "h2-sse-lossy.pcapng")],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout.splitlines()
    assert out[0] == ("TCP frames: pcaptools 340, tshark 340; 1 streams, 94 ACK RTTs, flags "
                      "{'duplicate_ack': 42, 'fast_retransmission': 2, 'lost_segment': 2, "
                      "'out_of_order': 1}; mismatched fields: none")
    assert ("HTTP/2 frames (frame, stream id, type): pcaptools 286, tshark 286; only "
            "pcaptools 0, only tshark 0") in out
    assert len(out) == 10  # (TCP, then the nine payload layers)


def test_a_misaligned_tshark_row_is_a_difference_not_a_crash(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tshark row whose values do not line up (a "," inside a path splits it in two) is
    counted as an unparsed row, so that layer differs, and the rows around it are read."""
    mod = _parity()
    rows = [["5", "GET", "/a"], ["6", "GET", "/a,b"], ["7", "POST", "/c"]]
    monkeypatch.setattr(mod, "tshark_fields", lambda *args: rows)
    got = mod._theirs(CAPTURES / "h2-sse-chat.pcapng", (), ("frame.number", "m", "p"), "x",
                      mod._pairs)
    assert got == {(5, "GET", "/a"): 1, ("6", "unparsed tshark row"): 1, (7, "POST", "/c"): 1}
