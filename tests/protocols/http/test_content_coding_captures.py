"""Compressed SSE streams recorded from real servers (captures/sse-compressed.pcap): nginx's
gzip filter over HTTP/1.1 and h2c, and chatsse.py compressing each flushed event with br,
zstd, raw deflate, gzip+br, and a gzip stream corrupted after 3 events.

Truth: the chat server's log in the facts file (every event's text, decoded and compressed
byte counts and send time, time.time_ns() on the capture's clock) and tshark 4.0, which
decodes gzip, deflate and br bodies (not zstd or stacked codings)."""

from __future__ import annotations

import json
import re
import subprocess
from functools import cache
from typing import Any

import pytest

import pcaptools
from pcaptools.capture import Capture
from tests.conftest import CAPTURES

CAP = CAPTURES / "sse-compressed.pcap"
pytestmark = pytest.mark.skipif(not CAP.exists(), reason="captures/sse-compressed.pcap absent")


@cache
def _cap() -> Capture:
    return pcaptools.load(CAP)


@cache
def _facts() -> dict[str, Any]:
    return json.loads(CAP.with_name(CAP.name + ".facts.json").read_text())


def _by_port() -> dict[int, dict[str, Any]]:
    """client port -> the request the server logged"""
    return {int(c["client"].rsplit(":", 1)[1]): c["requests"][0] for c in _facts()["connections"]}


def _stream_of_port() -> dict[int, int]:
    conns = _cap().connections
    return dict(zip(conns["client_port"].astype(int), conns["tcp_stream"].astype(int), strict=True))


def _rows() -> dict[int, dict[str, Any]]:
    """tcp_stream -> (status, encoding, wire bytes, decoded bytes, decoding, sse_events)"""
    cap = _cap()
    out: dict[int, dict[str, Any]] = {}
    for r in cap.http_requests.itertuples():
        out[int(r.tcp_stream)] = {
            "encoding": r.content_encoding,
            "wire": int(r.response_body_bytes),
            "decoded": r.response_decoded_bytes,
            "decoding": r.content_decoding,
            "sse": int(r.sse_events),
        }
    for r in cap.http2_streams.itertuples():
        out[int(r.tcp_stream)] = {
            "encoding": r.content_encoding,
            "wire": int(r.server_data_bytes),
            "decoded": r.response_decoded_bytes,
            "decoding": r.content_decoding,
            "sse": int(r.sse_events),
        }
    return out


def test_every_coded_stream_decodes_to_what_the_server_wrote() -> None:
    rows = _rows()
    ports = _stream_of_port()
    seen = {}
    for port, req in _by_port().items():
        row = rows[ports[port]]
        corrupt = (req["plan"] or {}).get("corrupt_after")
        seen[port] = (row["encoding"], row["decoding"], row["sse"])
        assert row["encoding"] == req["content_encoding"]
        # decoded bytes: exactly what the app wrote before compression (up to the damage)
        assert row["decoded"] == req["decoded_bytes_sent"]
        if req["wire_bytes_sent"] is not None:  # compressed by chatsse.py: its count is exact
            assert row["wire"] == req["wire_bytes_sent"]
        assert row["sse"] == req["sse_events_sent"] == (10 if corrupt is None else 3)
    assert seen == {
        50501: ("gzip", "decoded", 10),  # nginx, HTTP/1.1
        50502: ("gzip", "decoded", 10),  # nginx, h2c
        50503: ("br", "decoded", 10),
        50504: ("zstd", "decoded", 10),
        50505: ("deflate", "decoded", 10),  # raw deflate sent as "deflate"
        50506: ("gzip, br", "decoded", 10),
        50507: ("gzip", "corrupt", 3),
    }


def test_event_texts_and_arrival_times_against_the_server_log() -> None:
    ev = _cap().sse_events
    ports = _stream_of_port()
    checked = 0
    for port, req in _by_port().items():
        got = ev[ev["tcp_stream"] == ports[port]].sort_values("index")
        sent = req["server_event_times_ns"]
        kinds = [k for k in req["server_event_kinds"] if k != "garbage"]
        n = len(kinds)
        assert len(got) == n
        tokens = [t for t in got["delta_text"].tolist()[: len(req["tokens"])]]
        assert tokens == req["tokens"][: len(tokens)]
        ts = got["ts"].astype("int64").tolist()
        for i in range(n):
            # parsed from the packet that carried its compressed bytes: in its own 30 ms slot,
            # after the server wrote the previous token and before it wrote the next one, never
            # at the body's end (the server logs a time just after each write returned; the
            # finish chunk and [DONE] go out back to back: no order between those two)
            if i > 0 and sent[i] - sent[i - 1] > 10_000_000:
                assert ts[i] > sent[i - 1]
            if i + 1 < len(sent) and sent[i + 1] - sent[i] > 10_000_000:
                assert ts[i] < sent[i + 1]
                checked += 1
        if "done" in kinds:
            assert got["done"].tolist()[-1] is True
    assert checked >= 6 * 8 + 2  # every token gap of the 6 whole streams, 2 of the corrupt one


def test_the_corrupt_stream_has_one_warning_and_no_misleading_sse_warning() -> None:
    cap = _cap()
    w = cap.warnings
    stream = _stream_of_port()[50507]
    assert w["code"].tolist() == ["http.content_decoding_failed"]
    row = w.iloc[0]
    assert int(row["tcp_stream"]) == stream
    # the frame that carried the garbage: the first server data packet after the 3rd event's
    ev = cap.sse_events
    third = int(ev[ev["tcp_stream"] == stream]["frame"].max())
    assert int(row["frame"]) > third
    assert "557 decoded bytes kept" in row["detail"]


def _tshark_entity_bodies(exe: str) -> dict[int, list[tuple[str, int, int | None]]]:
    """tcp.stream -> [(coding, wire bytes, decoded bytes or None)] from tshark -V."""
    out = subprocess.run(
        [exe, "-r", str(CAP), "-d", "tcp.port==8082,http2", "-Y", "http or http2", "-V"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: dict[int, list[tuple[str, int, int | None]]] = {}
    stream = -1
    pat = re.compile(r"Content-encoded entity body \(([^)]*)\): (\d+) bytes(?: -> (\d+) bytes)?")
    for line in out.splitlines():
        m = re.search(r"\[Stream index: (\d+)\]", line)
        if m:
            stream = int(m.group(1))
            continue
        m = pat.search(line)
        if m:
            found.setdefault(stream, []).append(
                (m.group(1), int(m.group(2)), int(m.group(3)) if m.group(3) else None)
            )
    return found


@pytest.mark.tshark
def test_decoded_bytes_agree_with_tshark(tshark: str) -> None:
    ts = _tshark_entity_bodies(tshark)
    rows = _rows()
    compared = 0
    for stream, bodies in ts.items():
        coding, wire, decoded = bodies[0]
        row = rows[stream]
        assert row["encoding"] == coding
        assert row["wire"] == wire
        if decoded is not None:  # tshark decoded it: gzip (HTTP/1.1 and h2c), br, deflate
            assert row["decoded"] == decoded
            compared += 1
        else:  # tshark 4.0 does not decode zstd nor stacked codings, nor the corrupt stream
            assert coding in ("zstd", "gzip, br") or row["decoding"] == "corrupt"
    assert compared == 4
    assert len(ts) == 7


def test_headline_json_and_report_show_the_encoded_bodies(tmp_path: Any) -> None:
    from pcaptools.analyses.summary import headline, verdicts
    from pcaptools.cli import main

    h = headline(_cap())
    assert h["http_content_encodings"] == {
        "gzip": 3,
        "br": 1,
        "deflate": 1,
        "gzip, br": 1,
        "zstd": 1,
    }
    assert h["http_content_decoding"] == {"decoded": 6, "corrupt": 1}
    reqs = list(_by_port().values())
    assert h["http_encoded_decoded_bytes"] == sum(r["decoded_bytes_sent"] for r in reqs)
    rows = _rows()
    assert h["http_encoded_wire_bytes"] == sum(r["wire"] for r in rows.values())
    v = verdicts(_cap())
    assert any(s.startswith("7 response bodies content-encoded (gzip: 3; ") for s in v)
    assert any(
        s.startswith("1 encoded body could not be decoded to the end (corrupt: 1)") for s in v
    )
    out, js = tmp_path / "r.html", tmp_path / "s.json"
    assert main([str(CAP), "-o", str(out), "--json", str(js), "--quiet"]) == 0
    doc = json.loads(js.read_text())
    assert doc["http_content_decoding"] == {"decoded": 6, "corrupt": 1}
    html = out.read_text()
    assert "Content-Encoding</th>" in html and "wire body bytes" in html


def test_capture_drops_inside_coded_streams(tmp_path: Any) -> None:
    """The recorded capture with the packet of the 5th event of the nginx gzip streams removed
    (HTTP/1.1 and h2c; editcap), as a capture drop would: the 4 events before are kept, the
    rest of each body is not decoded (never decoded from the middle: no bad JSON)."""
    import shutil

    editcap = shutil.which("editcap")
    if editcap is None:
        pytest.skip("editcap (wireshark-common) is not installed")
    ev = _cap().sse_events
    ports = _stream_of_port()
    h1, h2 = ports[50501], ports[50502]
    drop = [int(ev[ev["tcp_stream"] == s].sort_values("index")["frame"].iloc[4]) for s in (h1, h2)]
    out = tmp_path / "dropped.pcap"
    subprocess.run([editcap, str(CAP), str(out), *map(str, drop)], check=True)
    cap = pcaptools.load(out)
    w = cap.warnings
    gaps = w[w["code"] == "http.content_decoding_gap"]
    assert sorted(gaps["tcp_stream"].astype(int)) == sorted([h1, h2])
    assert not (w["code"] == "sse.bad_json").any()
    assert not (w["code"] == "sse.incomplete_event").any()
    failed = w[w["code"] == "http.content_decoding_failed"]
    assert failed["tcp_stream"].astype(int).tolist() == [ports[50507]]  # only the corrupt one
    e2 = cap.sse_events
    assert (e2["tcp_stream"] == h1).sum() == 4 and (e2["tcp_stream"] == h2).sum() == 4
    r1 = cap.http_requests[cap.http_requests["tcp_stream"] == h1].iloc[0]
    r2 = cap.http2_streams[cap.http2_streams["tcp_stream"] == h2].iloc[0]
    assert r1["content_decoding"] == r2["content_decoding"] == "gap"
    # what the server wrote before the dropped event: `data: {json}\n\n` per event
    want = [
        int((ev[ev["tcp_stream"] == s].sort_values("index")["data_bytes"].iloc[:4] + 8).sum())
        for s in (h1, h2)
    ]
    assert [int(r1["response_decoded_bytes"]), int(r2["response_decoded_bytes"])] == want
