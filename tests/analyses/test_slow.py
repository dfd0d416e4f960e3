"""Why was it slow (pcaptools.analyses.slow): the time split per request, the stalls and their
causes, the per-connection series and the report section.

Truth: the recorded captures and their facts (captures/README.md). h2-sse-lossy.pcapng: 10
streamed chats on one HTTP/2 connection over a link of 100 ms each way and 2% seeded loss,
captured at the client; its facts hold the forwarder's drop log (two server segments and one
client segment with data were dropped) and the client's own arrival time of every SSE event.
http1-lossy.pcap: HTTP/1.1 over 30 ms each way. h3-flow-control.pcapng: an HTTP/3 response
held up by the client's QUIC stream window (STREAM_DATA_BLOCKED, then MAX_STREAM_DATA), its
frames checked against tshark. Hand-built HTTP/2 and QUIC frames for the flow-control windows
the recordings do not exhaust.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.slow import (
    CONNECTION_SERIES,
    REQUEST_TIMING,
    STALLS,
    NeedsPacketsError,
    _H2Windows,
    connection_series,
    request_timing,
    stalls,
)
from pcaptools.report.html import render_report, slow_section
from pcaptools.report.slow_section import MAX_SEQUENCE_CONNECTIONS
from pcaptools.result import Capture
from pcaptools.tables.registry import TABLES
from tests.analyses import llmcap
from tests.conftest import CAPTURES
from tests.oracle import keylog_options, tshark_fields

H2 = CAPTURES / "h2-sse-lossy.pcapng"
H1 = CAPTURES / "http1-lossy.pcap"
PARTS = ["dns_ms", "connect_ms", "tls_ms", "client_ms", "upload_ms", "network_rtt_ms",
         "server_wait_ms", "model_wait_ms", "streaming_ms", "stall_ms"]


def _load(path: object, **kw: object) -> Capture:
    p = CAPTURES / str(path)
    if not p.is_file():
        pytest.skip(f"{p.name} is absent")
    keys = p.with_suffix(".keys")
    return pcaptools.load(p, keylog=keys if keys.is_file() else None, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def h2() -> Capture:
    return _load(H2.name)


@pytest.fixture(scope="module")
def h1() -> Capture:
    return _load(H1.name)


@pytest.fixture(scope="module")
def h2_facts() -> dict[str, object]:
    return json.loads(H2.with_name(H2.name + ".facts.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def h2_stalls(h2: Capture) -> pd.DataFrame:
    return stalls(h2)


@pytest.fixture(scope="module")
def h2_timing(h2: Capture, h2_stalls: pd.DataFrame) -> pd.DataFrame:
    return request_timing(h2, stall_table=h2_stalls)


def _check_adds_up(rt: pd.DataFrame) -> None:
    REQUEST_TIMING.check(rt)
    done = rt[rt["total_ms"].notna()]
    assert len(done)
    total = done[PARTS].sum(axis=1, skipna=True).to_numpy()
    np.testing.assert_allclose(total, done["total_ms"].to_numpy(), atol=1e-6)
    end_minus_start = (done["end_ts"] - done["start_ts"]).dt.total_seconds().to_numpy() * 1e3
    np.testing.assert_allclose(done["total_ms"].to_numpy(), end_minus_start, atol=1e-6)


def test_h2_time_split_adds_up(h2: Capture, h2_timing: pd.DataFrame) -> None:
    rt = h2_timing
    _check_adds_up(rt)
    assert len(rt) == len(h2.latency()) == 10
    first = rt.iloc[0]
    assert (first["stream_id"], first["setup"]) == (1, "new_connection")
    hs = h2.tcp_handshakes.iloc[0]
    assert first["connect_ms"] == pytest.approx(hs["irtt_ms"])
    assert first["tls_ms"] == pytest.approx(h2.tls_handshakes.iloc[0]["handshake_ms"])
    assert math.isnan(first["dns_ms"])  # no lookup in the capture
    assert first["start_ts"] == h2.connections.iloc[0]["first_ts"]
    reused = rt.iloc[1:]
    assert (reused["setup"] == "reused").all()
    assert (reused[["dns_ms", "connect_ms", "tls_ms", "client_ms"]] == 0.0).all().all()
    # the round trip at the request's time: 100 ms each way on the link, at the client
    assert (rt["rtt_source"] == "ack_rtt").all()
    assert rt["rtt_ms"].between(200.0, 215.0).all()
    assert rt["rtt_frame"].notna().all()
    # every response streamed 20 tokens: a model wait and a streaming time each
    assert rt["model_wait_ms"].notna().all() and (rt["streaming_ms"] > 0).all()


def test_h2_sentences(h2_timing: pd.DataFrame) -> None:
    s = h2_timing.set_index("stream_id")["sentence"]
    assert s[3].startswith("HTTP/2 stream 3 on tcp.stream 0: TTFT 356 ms: 3 ms request upload, "
                           "201 ms network round trip, 8 ms server wait before the headers, "
                           "148 ms model wait after the headers; streaming 571 ms, total "
                           "1166 ms; stalled 237 ms (loss recovery)")
    assert all("stalled" in x for x in s)  # every stream waited behind a loss


def test_h2_stalls_are_the_dropped_segments(h2: Capture, h2_stalls: pd.DataFrame,
                                            h2_facts: dict[str, object]) -> None:
    st = h2_stalls
    STALLS.check(st)
    link = h2_facts["link"]
    assert isinstance(link, dict)
    server_drops = [d for d in link["server_to_client"]["dropped_segments"] if d["len"]]
    client_drops = [d for d in link["client_to_server"]["dropped_segments"] if d["len"]]
    assert (len(server_drops), len(client_drops)) == (2, 1)
    assert st["cause"].tolist() == ["loss_recovery"] * 3  # nothing else stalled
    assert st["mechanism"].tolist() == ["fast_retransmit"] * 3
    losses = h2.tcp_losses
    srv = losses[losses["direction"] == "server_to_client"]
    cli = losses[losses["direction"] == "client_to_server"]
    by_resend = st.set_index("resend_frame")
    assert sorted(by_resend.index) == sorted([*srv["frame"], *cli["frame"]]) == [110, 169, 320]
    # head-of-line blocking: the streams whose frames the resend delivered
    assert by_resend.loc[110, "hol_blocked_streams"] == "1,3,5,7,9,11"
    assert by_resend.loc[110, "hol_blocked_count"] == 6
    assert by_resend.loc[320, "hol_blocked_streams"] == "13,15,17,19"
    assert by_resend.loc[110, "scope"] == "connection"
    assert by_resend.loc[110, "evidence_frames"] == "60,110"  # the hole seen at 60, filled at 110
    # the client's lost request segment held up the answers of streams 13 and 15
    assert by_resend.loc[169, "streams"] == "13,15"
    assert by_resend.loc[169, "phase"] == "waiting"
    assert by_resend.loc[169, "lost_frame"] == 93
    assert by_resend.loc[169, "duration_ms"] == pytest.approx(
        float(cli["recovery_ms"].iloc[0]), abs=0.01)


def test_h2_stalls_match_the_clients_own_log(h2_stalls: pd.DataFrame,
                                             h2_facts: dict[str, object]) -> None:
    """The client's app saw each server-loss stall as its longest gap between SSE events:
    same start within 50 ms, same length within 20 %."""
    conns = h2_facts["connections"]
    assert isinstance(conns, list)
    log = {r["h2_stream_id"]: np.array(r["client_event_times_ns"], np.int64)
           for r in conns[0]["requests"]}
    for r in h2_stalls[h2_stalls["phase"] == "streaming"].itertuples():
        start = pd.Timestamp(r.start_ts).value
        for sid in (int(x) for x in r.streams.split(",")):
            t = log[sid]
            gaps = np.diff(t)
            k = int(np.argmax(gaps))
            if not (t[k] <= start + 50_000_000 and t[k + 1] >= start):
                continue  # this stream's longest gap is elsewhere (it was not streaming yet)
            assert abs(t[k] - start) < 50_000_000, (sid, r.resend_frame)
            assert gaps[k] / 1e6 == pytest.approx(r.duration_ms, rel=0.2), (sid, r.resend_frame)


def test_h1_time_split(h1: Capture) -> None:
    cap = h1
    rt = request_timing(cap)
    _check_adds_up(rt)
    assert rt["protocol"].tolist() == ["HTTP/1.1"] * 3
    assert rt["setup"].tolist() == ["new_connection", "reused", "new_connection"]
    assert rt["rtt_ms"].between(60.0, 75.0).all()  # 30 ms each way
    assert rt["model_wait_ms"].isna().all()  # plain downloads: no token
    # every lost server segment is a stall, whatever its length: the forwarder dropped 10 of
    # the download's segments in two bursts, each burst one recovery episode
    st = stalls(cap)
    assert st["cause"].tolist() == ["loss_recovery"] * 2
    assert st["request_index"].tolist() == [1, 1]
    losses = cap.tcp_losses
    lost = losses[(losses["direction"] == "server_to_client") & (losses["kind"] == "loss")]
    resends = {int(f) for f in lost["frame"]}
    assert len(resends) == 9  # (and one spurious resend: not a stall)
    shown = {int(x) for e in st["evidence_frames"] for x in e.split(",")}
    assert resends <= shown
    assert st["duration_ms"].round(3).tolist() == [114.623, 146.090]
    # (the last resend came 10 µs after the response end the capture saw: clipped there)
    assert rt["stall_ms"].iloc[0] == pytest.approx(st["duration_ms"].sum(), abs=0.02)


def test_without_packets(h2_stalls: pd.DataFrame) -> None:
    cap = _load(H2.name, packets=False)
    with pytest.raises(NeedsPacketsError, match="packets=True"):
        connection_series(cap)
    st = stalls(cap)  # the causes come from tcp_losses, not from packets
    assert st["resend_frame"].tolist() == h2_stalls["resend_frame"].tolist()
    rt = request_timing(cap, stall_table=st)
    assert (rt["rtt_source"] == "handshake").all()
    _check_adds_up(rt)


def test_connection_series(h2: Capture) -> None:
    cs = connection_series(h2, 0)
    CONNECTION_SERIES.check(cs)
    rtt = cs[(cs["series"] == "rtt_ms") & (cs["direction"] == "server_to_client")]
    p = h2.packets
    want = p[(p["direction"] == "client_to_server") & p["ack_rtt_ms"].notna()]
    assert rtt["value"].tolist() == want["ack_rtt_ms"].tolist()
    fl = cs[(cs["series"] == "bytes_in_flight") & (cs["direction"] == "server_to_client")]
    data = p.loc[(p["direction"] == "server_to_client") & (p["tcp_len"] > 0), "frame"]
    # every data segment has a sample but the two that arrived past a hole (tshark shows
    # none there either: "previous segment not captured" until the client's next ACK)
    ev = h2.tcp_events
    lost = ev.loc[ev["kind"] == "lost_segment", "frame"].tolist()
    assert sorted(set(data) - set(fl["frame"].astype(int))) == lost == [60, 285]
    assert (fl["value"] > 0).all()
    tp = cs[(cs["series"] == "throughput_bps")]
    assert (tp["value"] > 0).all() and tp["frame"].isna().all()
    win = cs[(cs["series"] == "receive_window") & (cs["direction"] == "server_to_client")]
    assert win["value"].tolist() == p.loc[p["direction"] == "client_to_server",
                                          "window"].astype(float).tolist()


def _h2_frames(rows: list[tuple[int, str, int, str, int, int | None, str | None]]) -> pd.DataFrame:
    cols = TABLES["http2_frames"].columns
    recs = []
    for frame, d, sid, kind, length, inc, settings in rows:
        r: dict[str, object] = {c.name: None for c in cols}
        r.update(frame=frame, ts=frame * 1_000_000, tcp_stream=0, direction=d, stream_id=sid,
                 type=kind, type_code=0, flags=0, flag_names="", length=length,
                 end_stream=False, ack=False, window_increment=inc, settings=settings)
        recs.append(tuple(r[c.name] for c in cols))
    return TABLES["http2_frames"].frame(recs)


def test_h2_windows_exhausted_until_window_update() -> None:
    c2s, s2c = "client_to_server", "server_to_client"
    f = _h2_frames([
        (1, c2s, 0, "SETTINGS", 18, None, "INITIAL_WINDOW_SIZE=1000"),
        (2, s2c, 1, "DATA", 600, None, None),
        (3, s2c, 1, "DATA", 400, None, None),  # the stream window is now 0
        (9, c2s, 1, "WINDOW_UPDATE", 4, 1000, None),
        (10, s2c, 1, "DATA", 500, None, None),
        (11, s2c, 3, "DATA", 100, None, None),
    ])
    w = _H2Windows(f)
    assert w.blocked(1, 4 * 10**6, 10 * 10**6) == ("stream_window", 3, 9)
    assert w.blocked(3, 4 * 10**6, 10 * 10**6) is None  # another stream's update
    assert w.blocked(1, 10 * 10**6, 12 * 10**6) is None  # no update in that window


def _quic_frames(rows: list[tuple[int, str, str, int | None, int | None, int | None,
                                  int | None]]) -> pd.DataFrame:
    """quic_frames rows (frame, direction, type, stream id, offset, length, maximum) of
    connection 0, frame n at n ms."""
    cols = TABLES["quic_frames"].columns
    recs = []
    for frame, d, kind, sid, off, length, mx in rows:
        r: dict[str, object] = {c.name: None for c in cols}
        r.update(frame=frame, ts=frame * 1_000_000, quic_connection=0, direction=d,
                 packet_index=0, packet_type="1rtt", packet_number=frame, frame_index=0,
                 frame_type=kind, frame_type_code=0, stream_id=sid, offset=off, length=length,
                 maximum=mx, frame_bytes=1)
        recs.append(tuple(r[c.name] for c in cols))
    return TABLES["quic_frames"].frame(recs)


def test_quic_flow_control_blocked_until_max_stream_data() -> None:
    """_QuicFlow (RFC 9000 §4): the server's stream 0 reaches the client's MAX_STREAM_DATA
    limit of 1000 and says so (STREAM_DATA_BLOCKED at 1000) until the client raises it: a
    stream_data_blocked stall. Without the BLOCKED frame the same wait is
    max_stream_data_late; the connection limit (MAX_DATA, DATA_BLOCKED) likewise. No claim
    without a limit announced by a frame (the initial limits are transport parameters), nor
    when the server had not reached the limit."""
    from pcaptools.analyses.slow import _QuicFlow

    c2s, s2c = "client_to_server", "server_to_client"
    base = [
        (1, c2s, "MAX_STREAM_DATA", 0, None, None, 1000),
        (2, c2s, "MAX_DATA", None, None, None, 5000),
        (3, s2c, "STREAM", 0, 0, 600, None),
        (4, s2c, "STREAM", 0, 600, 400, None),   # stream 0 at its limit of 1000
        (5, s2c, "STREAM", 4, 0, 100, None),
    ]
    said = _QuicFlow(_quic_frames([*base, (6, s2c, "STREAM_DATA_BLOCKED", 0, None, None, 1000),
                                   (9, c2s, "MAX_STREAM_DATA", 0, None, None, 3000),
                                   (10, s2c, "STREAM", 0, 1000, 500, None)]))
    ms = 1_000_000
    assert said.blocked(0, 4 * ms, 10 * ms) == ("stream_data_blocked", 6, 9)
    assert said.blocked(4, 4 * ms, 10 * ms) is None  # another stream's limit
    assert said.blocked(0, 10 * ms, 12 * ms) is None  # raised outside the window
    quiet = _QuicFlow(_quic_frames([*base, (9, c2s, "MAX_STREAM_DATA", 0, None, None, 3000)]))
    assert quiet.blocked(0, 4 * ms, 10 * ms) == ("max_stream_data_late", 4, 9)
    conn = _QuicFlow(_quic_frames([
        (2, c2s, "MAX_DATA", None, None, None, 1100),
        (3, s2c, "STREAM", 0, 0, 1000, None),
        (4, s2c, "STREAM", 4, 0, 100, None),  # 1100 bytes over the streams: at the limit
        (5, s2c, "DATA_BLOCKED", None, None, None, 1100),
        (9, c2s, "MAX_DATA", None, None, None, 9000)]))
    assert conn.blocked(0, 4 * ms, 10 * ms) == ("data_blocked", 5, 9)
    # the first announced limit: what it replaced is not known, so no claim
    first = _QuicFlow(_quic_frames([(3, s2c, "STREAM", 0, 0, 600, None),
                                    (9, c2s, "MAX_STREAM_DATA", 0, None, None, 3000)]))
    assert first.blocked(0, 4 * ms, 10 * ms) is None
    # a raise while the server was below the old limit: not what held it back
    below = _QuicFlow(_quic_frames([base[0], (3, s2c, "STREAM", 0, 0, 600, None),
                                    (9, c2s, "MAX_STREAM_DATA", 0, None, None, 3000)]))
    assert below.blocked(0, 4 * ms, 10 * ms) is None


FLOW = CAPTURES / "h3-flow-control.pcapng"
#: h3-flow-control as tshark 4.0.17 decrypts it (the shipped key log): the client's
#: MAX_STREAM_DATA frames (frame, limit) on request stream 0 and the server's
#: STREAM_DATA_BLOCKED frames; the first BLOCKED is at the limit of frame 48, sent while the
#: client had stopped reading; frame 64 raises it after the pause; then the backlog drains
#: one 1024-byte window per round trip, blocked again at each
FLOW_MAX_STREAM_DATA = [(16, 1619), (24, 2155), (32, 2696), (40, 3239), (48, 3770),
                        (64, 4794), (67, 5818), (72, 6842), (77, 7866), (81, 8445)]
FLOW_STREAM_DATA_BLOCKED = [(62, 3770), (66, 4794), (71, 5818), (76, 6842)]


def _flow_frames(cap: Capture, kind: str) -> list[tuple[int, int]]:
    f = cap.quic_frames
    f = f[(f["frame_type"].astype(str) == kind).to_numpy(bool)]
    assert set(f["stream_id"].astype(int)) == {0}
    return list(zip(f["frame"].astype(int), f["maximum"].astype(int), strict=True))


def test_quic_flow_control_stall_in_the_recording() -> None:
    """h3-flow-control.pcapng (scripts/record_captures.py --only h3-flow-control): the client
    (aioquic, 1024-byte stream windows, credit as it reads) stopped reading for 1 s; the
    server filled the window (frame 61 reaches 3770, the limit the client announced in frame
    48), said so with STREAM_DATA_BLOCKED in frame 62 and sent again only after the
    MAX_STREAM_DATA of frame 64: one stall, cause quic_flow_control, mechanism
    stream_data_blocked, from the last complete token (frame 59) to the next (frame 65)."""
    cap = _load(FLOW.name)
    assert _flow_frames(cap, "MAX_STREAM_DATA") == FLOW_MAX_STREAM_DATA
    assert _flow_frames(cap, "STREAM_DATA_BLOCKED") == FLOW_STREAM_DATA_BLOCKED
    st = stalls(cap)
    STALLS.check(st)
    assert len(st) == 1
    r = st.iloc[0]
    assert (r["cause"], r["mechanism"], r["protocol"]) == (
        "quic_flow_control", "stream_data_blocked", "HTTP/3")
    assert (r["quic_connection"], r["streams"], r["phase"]) == (0, "0", "streaming")
    assert (r["start_frame"], r["end_frame"], r["evidence_frames"]) == (59, 65, "62,64")
    assert "BLOCKED frame in frame 62" in r["detail"] and "in frame 64" in r["detail"]
    # the stall is on the stream whose reading the client paused (the recorder's plan)
    facts = json.loads(FLOW.with_name(FLOW.name + ".facts.json").read_text())
    (pause,) = facts["truth"]["read_pauses"]
    assert (pause["stream_id"], pause["limit"]) == (0, 3770)
    # the stall runs from frame 59 to frame 65 (tshark's frame.time_epoch: 1796543809.366710733
    # and 1796543810.290627689): its duration is the capture's, between those two frames
    start, end = 1796543809366710733, 1796543810290627689
    assert (r["start_ts"].value, r["end_ts"].value) == (start, end)
    assert r["duration_ms"] == (end - start) / 1e6


def test_quic_flow_control_frames_against_tshark(tshark: str) -> None:
    """The MAX_STREAM_DATA / STREAM_DATA_BLOCKED frames of h3-flow-control (frame, stream,
    limit) and the stall's frames as tshark 4.0.17 decrypts and numbers them."""
    if not FLOW.is_file():
        pytest.skip(f"{FLOW.name} is absent")
    fields = ("frame.number", "quic.frame_type", "quic.msd.stream_id", "quic.sdb.stream_id",
              "quic.msd.maximum_stream_data", "quic.sb.stream_data_limit")
    rows = tshark_fields(FLOW, fields, keylog_options(FLOW.with_suffix(".keys")),
                         display_filter="quic.frame_type == 0x11 || quic.frame_type == 0x15")
    got: dict[str, list[tuple[int, int]]] = {"17": [], "21": []}
    for fr, types, msd_sid, sdb_sid, msd, sdb in rows:
        # tshark lists every frame type of the packet; these carry one flow frame each
        kind = "21" if sdb_sid else "17"
        assert (msd_sid or sdb_sid) == "0", fr
        assert kind in types.split(","), fr
        got[kind].append((int(fr), int(msd or sdb)))
    assert got == {"17": FLOW_MAX_STREAM_DATA, "21": FLOW_STREAM_DATA_BLOCKED}
    # frame 59 and 65 carry stream 0's STREAM data (tshark: offsets 3460 and 3770), frame
    # 61 the bytes up to the limit of 3770
    data = {int(r[0]): (r[1], r[2], r[3]) for r in tshark_fields(
        FLOW, ("frame.number", "quic.stream.stream_id", "quic.stream.offset",
               "quic.stream.length"), keylog_options(FLOW.with_suffix(".keys")),
        display_filter="(frame.number == 59 || frame.number == 61 || frame.number == 65) "
        "&& quic.stream.stream_id == 0")}
    assert data == {59: ("0", "3460", "179"), 61: ("0", "3639", "131"),
                    65: ("0", "3770", "1024")}
    # the stall's start and end times are those frames' times as tshark reads them
    epoch = {int(f): t for f, t in tshark_fields(
        FLOW, ("frame.number", "frame.time_epoch"), (),
        display_filter="frame.number == 59 || frame.number == 65")}
    r = stalls(_load(FLOW.name)).iloc[0]
    want = {59: r["start_ts"].value, 65: r["end_ts"].value}
    assert {f: int(t.replace(".", "")) for f, t in epoch.items()} == want


@pytest.mark.parametrize("name", ["h3-sse-lossy.pcapng", "h3-sse-lossy-server.pcapng",
                                  "h3-sse-chat.pcapng", "quic-endings.pcapng"])
def test_no_quic_flow_control_stall_in_the_recordings(name: str) -> None:
    """The recordings' servers never ran into a QUIC flow-control limit: no BLOCKED frame
    and no MAX_STREAM_DATA / MAX_DATA in their decrypted frames, so no quic_flow_control
    stall (quic-endings carries no HTTP/3 request: no stall at all)."""
    cap = _load(name)
    kinds = set(cap.quic_frames["frame_type"].astype(str))
    assert len(kinds) > 3
    assert not kinds & {"STREAM_DATA_BLOCKED", "DATA_BLOCKED", "MAX_STREAM_DATA", "MAX_DATA"}
    st = stalls(cap)
    assert "quic_flow_control" not in set(st["cause"].astype(str))
    if name == "quic-endings.pcapng":
        assert len(st) == 0


def test_capture_methods_have_the_functions_options() -> None:
    for method, fn in ((Capture.request_timing, request_timing), (Capture.stalls, stalls),
                       (Capture.connection_series, connection_series)):
        mine = list(inspect.signature(method).parameters.values())[1:]
        theirs = list(inspect.signature(fn).parameters.values())[1:]
        assert [(p.name, p.kind, p.default) for p in mine] == \
            [(p.name, p.kind, p.default) for p in theirs]


def test_report_section(h2: Capture) -> None:
    page = render_report(h2, sections=[slow_section])
    start = page.index('id="slow"')
    body = page[start: page.index("</section>", start)]
    assert "Why was it slow" in body
    assert "3 stalls (3 loss recovery" in body
    assert "HTTP/2 stream 3 on tcp.stream 0: TTFT 356 ms" in body
    assert "fig-slow-split" in body
    assert 1 <= body.count("fig-slow-seq-") // 2 <= 2 * MAX_SEQUENCE_CONNECTIONS
    assert "SACK blocks as purple bars" in body and '"name":"SACK block"' in body


def test_time_sequence_draws_the_sack_blocks(h2: Capture) -> None:
    """Each direction's chart carries the SACK blocks its receiver sent (h2-sse-lossy: 61
    blocks, one per segment, as tshark: the client's 43 on the server's data, the server's
    18 on the client's lost request bytes), each a bar from its left to its right edge."""
    from pcaptools.report import slow_charts

    sb = h2.tcp_sack_blocks
    for d, n, first in (("server_to_client", 43, (6481, 6691)),
                        ("client_to_server", 18, None)):
        ts = slow_charts.time_sequence_rows(h2.packets, 0, d, 0, 10_000, sb)
        assert ts is not None and len(ts.sack_t) == n
        theirs = sb[sb["direction"] != d]
        assert ts.sack_lo.tolist() == theirs["left_edge"].tolist()
        assert ts.sack_hi.tolist() == theirs["right_edge"].tolist()
        if first is not None:
            assert (ts.sack_lo[0], ts.sack_hi[0]) == first
        fig = slow_charts.time_sequence_figure(ts).to_dict()
        sack = next(t for t in fig["data"] if t["name"] == "SACK block")
        assert len(sack["y"]) == 3 * n and sack["y"][2] is None
    assert len(sb) == 61
    none = slow_charts.time_sequence_rows(h2.packets, 0, "server_to_client", 0, 10_000, None)
    assert none is not None and len(none.sack_t) == 0


def test_client_pause_between_requests() -> None:
    """h2-ping.pcap: the client sent its second GET 3.5 s after the first answer ended (its
    own log in the facts): a client_pause stall; with client_pause_ms=None, none."""
    cap = _load("h2-ping.pcap")
    facts = json.loads((CAPTURES / "h2-ping.pcap.facts.json").read_text())
    first, second = facts["connections"][0]["requests"]
    st = stalls(cap)
    assert st["cause"].tolist() == ["client_pause"]
    r = st.iloc[0]
    assert (r["streams"], r["phase"], r["end_frame"]) == ("3", "waiting", 28)
    assert r["duration_ms"] == pytest.approx((second["t_sent_ns"] - first["t_end_ns"]) / 1e6,
                                             abs=2.0)
    assert len(stalls(cap, client_pause_ms=None)) == 0
    rt = request_timing(cap, stall_table=st)
    assert (rt["stall_ms"] == 0).all()  # before the request: not in its time
    _check_adds_up(rt)


def _tshark_fields(tshark: str, name: str, *fields: str) -> list[list[str]]:
    import subprocess

    out = subprocess.run(
        [tshark, "-n", "-r", str(CAPTURES / name), "-T", "fields",
         *[a for f in fields for a in ("-e", f)], "-Y", fields[1]],
        capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


LOSSY_TCP = ["slow-causes.pcapng", H2.name, "h2-sse-lossy-server.pcapng", H1.name,
             "http1-lossy-server.pcap", "pmtu-icmp-server.pcap"]


@pytest.mark.parametrize("name", ["h2-sse-chat.pcapng", "tcp-port-reuse.pcap",
                                  "voice-realtime.pcapng", *LOSSY_TCP])
def test_bytes_in_flight_is_tsharks(name: str, tshark: str, request: pytest.FixtureRequest) -> None:
    """connection_series' bytes_in_flight is tshark's tcp.analysis.bytes_in_flight on every
    data segment, in loss recovery too (SACKed bytes subtracted), and has no sample where
    tshark shows none."""
    want = {int(f): float(v) for f, v in _tshark_fields(
        tshark, name, "frame.number", "tcp.analysis.bytes_in_flight")}
    cap = {H2.name: "h2", H1.name: "h1"}.get(name)
    cap = request.getfixturevalue(cap) if cap else _load(name)
    cs = connection_series(cap)
    got = cs[cs["series"] == "bytes_in_flight"]
    got = dict(zip(got["frame"].astype(int), got["value"], strict=True))
    assert got == want
    if name in LOSSY_TCP:  # a loss recovery in which SACKed bytes count
        sb = cap.tcp_sack_blocks
        assert len(sb) > 0


@pytest.mark.parametrize("name", LOSSY_TCP)
def test_sack_blocks_are_tsharks(name: str, tshark: str, request: pytest.FixtureRequest) -> None:
    """tcp_sack_blocks: per frame, the SACK edges of tshark's tcp.options.sack_le / sack_re
    (relative), in order; D-SACK blocks are tshark's tcp.options.sack.dsack_le."""
    rows = _tshark_fields(tshark, name, "frame.number", "tcp.options.sack_le",
                          "tcp.options.sack_re", "tcp.stream", "tcp.ack",
                          "tcp.options.sack.dsack_le")
    cap = {H2.name: "h2", H1.name: "h1"}.get(name)
    cap = request.getfixturevalue(cap) if cap else _load(name)
    sb = cap.tcp_sack_blocks
    TABLES["tcp_sack_blocks"].check(sb)
    got = {int(f): (g["left_edge"].tolist(), g["right_edge"].tolist(),
                    int(g["tcp_stream"].iloc[0]), int(g["ack"].iloc[0]), g["block"].tolist())
           for f, g in sb.groupby("frame")}
    want = {int(f): ([int(x) for x in le.split(",")], [int(x) for x in re_.split(",")],
                     int(st), int(ack), list(range(len(le.split(",")))))
            for f, le, re_, st, ack, _ in rows}
    assert got == want and len(want) > 0
    dsack = {int(r[0]): int(r[5]) for r in rows if r[5]}
    assert dict(zip(sb.loc[sb["dsack"], "frame"], sb.loc[sb["dsack"], "left_edge"],
                    strict=True)) == dsack
    p = cap.packets.set_index("frame")
    # the SACK's sender is the receiver of the data: its packets' direction
    assert (p.loc[sb["frame"], "direction"].astype(str).to_numpy()
            == sb["direction"].astype(str).to_numpy()).all()
    if name == H1.name:
        assert dsack == {295: 157833}


def test_sack_blocks_follow_the_packets_switch() -> None:
    """Built with the packets table: none with packets=False, none past max_packet_rows."""
    assert len(_load(H2.name, packets=False).tcp_sack_blocks) == 0
    capped = _load(H2.name, max_packet_rows=70)
    assert capped.tcp_sack_blocks["frame"].tolist() == [61, 63, 65, 67, 69]


def _paused_h1(path: Path) -> Path:
    """Hand-built: DNS 0-20 ms, SYN 21 / SYN-ACK 31 / ACK 31.5, a POST to a hostile path at
    32 (the server ACKs it at 42: RTT 10 ms at the capture point), response head at 232,
    tokens at 250, 290, 330 (each ACKed 1 ms later), then nothing until 900 (a 570 ms server
    pause with nothing in flight), tokens at 940 and 980, end at 981, FIN at 1000."""
    w = llmcap.Wire()
    w.dns(0, 20, "llm.test", 0x0101)
    c = llmcap.Conn(w, 50000)
    c.handshake(21, 31, 31.5)
    body = b'{"stream":true}'
    c.send(32, True, b"POST /<script>alert(1)</script> HTTP/1.1\r\nHost: llm.test\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    c.ack(42, False)
    c.send(232, False, llmcap.SSE_HEAD)
    for t in (250, 290, 330, 900, 940):
        c.send(t, False, llmcap.chunked(llmcap.sse_chunk("tok")))
        c.ack(t + 1, True)
    c.send(980, False, llmcap.chunked(llmcap.sse_chunk("end")))
    c.send(981, False, llmcap.chunked(llmcap.sse_chunk()) + b"0\r\n\r\n")
    c.ack(982, True)
    c.close(1000)
    return w.write(path)


def test_hand_built_server_pause_and_escaping(tmp_path: Path) -> None:
    cap = pcaptools.load(_paused_h1(tmp_path / "paused.pcap"))
    st = stalls(cap)
    assert st["cause"].tolist() == ["server_pause"]
    r = st.iloc[0]
    assert (r["scope"], r["phase"], r["request_index"]) == ("connection", "streaming", 1)
    assert r["duration_ms"] == pytest.approx(570.0, abs=1e-6)
    assert r["cadence_ms"] == pytest.approx(40.0, abs=1e-6)
    rt = request_timing(cap, stall_table=st)
    _check_adds_up(rt)
    t = rt.iloc[0]
    assert (t["dns_ms"], t["connect_ms"], t["client_ms"]) == pytest.approx((20.0, 10.5, 1.5))
    assert t["rtt_source"] == "ack_rtt" and t["rtt_ms"] == pytest.approx(10.0)
    assert (t["network_rtt_ms"], t["server_wait_ms"]) == pytest.approx((10.0, 190.0))
    assert t["model_wait_ms"] == pytest.approx(18.0)
    assert (t["stall_ms"], t["streaming_ms"]) == pytest.approx((570.0, 161.0))
    assert t["total_ms"] == pytest.approx(981.0)
    # a packets table cut at its row cap cannot show that nothing was in flight: unknown
    cut = pcaptools.load(tmp_path / "paused.pcap", max_packet_rows=5)
    assert stalls(cut)["cause"].tolist() == ["unknown"]
    page = render_report(cap, sections=[slow_section])
    assert "<script>alert(1)</script>" not in page
    assert "/&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("name", ["h3-sse-lossy.pcapng", "h3-sse-lossy-server.pcapng"])
def test_h3_lost_datagrams_stall_one_stream_each(name: str) -> None:
    """h3-sse-lossy: the forwarder dropped three server datagrams (the facts' drop log); each
    is one stall of the one HTTP/3 stream whose data it carried, cause loss_recovery, no
    other stream held up. At the server the stall starts at the lost datagram itself, at the
    client with the stream's last delivery before it."""
    cap = _load(name)
    facts = json.loads((CAPTURES / f"{name}.facts.json").read_text())
    t0 = facts["link"]["forwarder"]["started_ns"]
    drops = [t0 + d["t_rel_ms"] * 1e6 for d in facts["link"]["server_to_client"]
             ["dropped_datagrams"]]
    st = stalls(cap)
    STALLS.check(st)
    assert len(drops) == 3
    assert st["cause"].tolist() == ["loss_recovery"] * 3
    assert st["stream_count"].tolist() == [1, 1, 1] and st["hol_blocked_count"].isna().all()
    assert st["quic_connection"].tolist() == [0, 0, 0]
    for r, drop in zip(st.itertuples(), drops, strict=True):
        start = pd.Timestamp(r.start_ts).value
        if facts["vantage"] == "server":
            assert abs(drop - start) < 1e6  # the first copy, just before the forwarder
        else:
            assert start < drop < pd.Timestamp(r.end_ts).value
    rt = request_timing(cap, stall_table=st)
    _check_adds_up(rt)
    # the round trip from the server's ACK frames before each request: 20 ms each way at the
    # client (the ACK delay included), the server's own ACK delay at the server
    assert (rt["rtt_source"] == "quic_ack_rtt").all() and rt["rtt_frame"].notna().all()
    if facts["vantage"] == "server":
        assert rt["rtt_ms"].lt(10.0).all()
    else:
        assert rt["rtt_ms"].between(40.0, 60.0).all()
    assert rt["stall_ms"].gt(0).sum() == 3


def _dropped_frames(name: str) -> list[int]:
    """Frames of ``name`` whose UDP payload is one the forwarder dropped (its drop log
    names each datagram by the first 16 hex digits of the payload's SHA-256)."""
    import hashlib

    import dpkt

    facts = json.loads((CAPTURES / f"{name}.facts.json").read_text())
    want = {d["payload_sha256_16"] for d in facts["link"]["server_to_client"]
            ["dropped_datagrams"]}
    out = []
    with (CAPTURES / name).open("rb") as fh:
        for i, (_ts, buf) in enumerate(dpkt.pcapng.Reader(fh), 1):
            ip = dpkt.ethernet.Ethernet(buf).data
            if isinstance(ip.data, dpkt.udp.UDP) and hashlib.sha256(
                    bytes(ip.data.data)).hexdigest()[:16] in want:
                out.append(i)
    return out


def test_h3_loss_mechanism_is_rfc9002s() -> None:
    """How the server found each dropped datagram lost (RFC 9002), the same at both vantage
    points. At the server the drop log's datagrams are frames 42, 93 and 167 (packets 22, 53
    and 94); the client's ACK before each resend acknowledged packet 23 (frame 47: one after
    22: time threshold), 56 (frame 109: three after 53: packet threshold) and 95 (frame 178:
    time threshold). At the client the first copies are missing: the lost packet is the
    number missing below the next one, and the ACKs that count are those sent one RTT
    before the resend arrived."""
    server = _load("h3-sse-lossy-server.pcapng")
    dropped = _dropped_frames("h3-sse-lossy-server.pcapng")
    assert dropped == [42, 93, 167]
    qp = server.quic_packets
    pns = qp.set_index("frame").loc[dropped, "packet_number"].astype(int).tolist()
    assert pns == [22, 53, 94]
    want = ["time_threshold", "packet_threshold", "time_threshold"]
    st = stalls(server)
    assert st["lost_frame"].tolist() == dropped
    assert st["mechanism"].astype(str).tolist() == want
    for r, ack in zip(st.to_dict("records"), [47, 109, 178], strict=True):
        assert ack in [int(x) for x in r["evidence_frames"].split(",")]
        assert f"in frame {ack} acknowledged" in r["detail"]
    f = server.quic_frames
    acks = f[(f["frame_type"] == "ACK") & (f["direction"] == "client_to_server")]
    largest = acks.set_index("frame").loc[[47, 109, 178], "ack_largest"].astype(int).tolist()
    assert [a - p for a, p in zip(largest, pns, strict=True)] == [1, 3, 1]
    client = stalls(_load("h3-sse-lossy.pcapng"))
    assert client["mechanism"].astype(str).tolist() == want
    for r, pn in zip(client.to_dict("records"), pns, strict=True):
        assert f"packet {pn} declared lost" in r["detail"] and "seen at the receiver" in \
            r["detail"]


def test_quic_resends_are_probes_when_the_server_vanished() -> None:
    """quic-endings: in the vanish and reset cases the server stopped answering after the
    handshake; the client's request bytes went out again in each of its probe timeouts
    (the facts count 4 PTO expiries in each case: RFC 9002 §6.2) with no ACK of anything
    later: quic_resends gives 4 pto rows per connection, each naming the copy before it as
    the lost packet. In h3-sse-lossy-server the same function lists the three resends of the
    dropped datagrams with the stalls' mechanisms."""
    from pcaptools.analyses.slow import QUIC_RESENDS, quic_resends

    cap = _load("quic-endings.pcapng")
    facts = json.loads((CAPTURES / "quic-endings.pcapng.facts.json").read_text())
    pto = facts["truth"]["client_pto_expiries"]
    qr = quic_resends(cap)
    QUIC_RESENDS.check(qr)
    qc = cap.quic_connections
    by_case = {}
    for case, conn in (("vanish", 6), ("reset", 7)):
        assert str(qc.loc[qc["quic_connection"] == conn, "end"].item()) in (
            "idle_timeout", "stateless_reset")
        rows = qr[qr["quic_connection"] == conn]
        by_case[case] = len(rows)
        assert (rows["direction"] == "client_to_server").all()
        assert rows["mechanism"].astype(str).tolist() == ["pto"] * len(rows)
        assert rows["ack_frame"].isna().all()
        # each resend's lost packet is the copy sent just before it
        assert (rows["lost_packet_number"] < rows["packet_number"]).all()
    assert by_case == {"vanish": pto["vanish"], "reset": pto["reset"]} == {"vanish": 4,
                                                                          "reset": 4}
    assert set(qr["quic_connection"]) == {6, 7}
    assert qr.loc[qr["quic_connection"] == 6, "lost_packet_number"].tolist() == [4, 6, 7, 8]
    server = quic_resends(_load("h3-sse-lossy-server.pcapng"))
    assert server["mechanism"].astype(str).tolist() == ["time_threshold", "packet_threshold",
                                                        "time_threshold"]
    assert server["first_frame"].tolist() == [42, 93, 167]
    assert server["lost_packet_number"].tolist() == [22, 53, 94]
    assert server["ack_frame"].tolist() == [47, 109, 178]
    assert len(quic_resends(_load(H2.name))) == 0  # no QUIC


def test_quic_mechanism_rules() -> None:
    """_quic_mechanism on hand-made ACK histories: no ACK of a later packet before the
    resend is a probe timeout; an ACK of the lost packet itself makes the resend spurious
    (no mechanism); at the receiver an ACK within 1 ms of one RTT before the resend leaves
    the mechanism unknown."""
    from pcaptools.analyses.slow import _quic_mechanism, _QuicAcks, _QuicResend

    ms = 1_000_000

    def acks(*rows: tuple[int, int, int, str]) -> _QuicAcks:
        return _QuicAcks(pns=set(range(0, 10)) - {5},
                         ack_ts=np.array([t * ms for t, _f, _l, _r in rows], np.int64),
                         ack_frame=np.array([f for _t, f, _l, _r in rows], np.int64),
                         ack_largest=np.array([la for _t, _f, la, _r in rows], np.int64),
                         ack_ranges=[[(int(x.split("-")[0]), int(x.split("-")[-1]))
                                      for x in r.split(",")] for _t, _f, _l, r in rows],
                         rtt_ns=40 * ms)

    # sender vantage: packet 5 sent at 100 ms, resent at 400 ms
    sent = _QuicResend(ts=400 * ms, frame=50, first_ts=100 * ms, first_frame=10,
                       reveal_ts=400 * ms, reveal_frame=None, pn=12, first_pn=5,
                       prev_ts=100 * ms)
    assert _quic_mechanism(acks((150, 20, 4, "0-4")), sent)[0] == "pto"
    assert _quic_mechanism(acks((150, 20, 6, "6,0-4")), sent)[0] == "time_threshold"
    got = _quic_mechanism(acks((150, 20, 6, "6,0-4"), (160, 21, 8, "6-8,0-4")), sent)
    assert got[0] == "packet_threshold" and got[2] == 21
    spurious = _quic_mechanism(acks((150, 20, 6, "0-6")), sent)
    assert spurious[0] is None and "spurious" in spurious[1]
    # an ACK after the resend does not count
    assert _quic_mechanism(acks((450, 20, 9, "6-9,0-4")), sent)[0] == "pto"
    # receiver vantage: packet 5 missing below packet 6 (seen at 300 ms), resend at 400 ms:
    # ACKs count when sent by 360 ms (one RTT of 40 ms before)
    recv = _QuicResend(ts=400 * ms, frame=50, first_ts=-1, first_frame=None,
                       reveal_ts=300 * ms, reveal_frame=30, pn=12, first_pn=-1, reveal_pn=6)
    assert _quic_mechanism(acks((305, 31, 6, "6,0-4")), recv)[0] == "time_threshold"
    assert _quic_mechanism(acks((365, 31, 6, "6,0-4")), recv)[0] == "pto"
    edge = _quic_mechanism(acks((359.5, 31, 6, "6,0-4")), recv)  # type: ignore[arg-type]
    assert edge[0] is None and "different answers" in edge[1]


def test_client_pause_in_the_chat_plan() -> None:
    """h2-sse-chat.pcapng: the plan starts chat-5 at 3.3 s, 0.89 s after every earlier
    response ended (the client's log): the one stall of the capture, a client_pause."""
    cap = _load("h2-sse-chat.pcapng")
    facts = json.loads((CAPTURES / "h2-sse-chat.pcapng.facts.json").read_text())
    reqs = facts["connections"][0]["requests"]
    wait_ms = (reqs[-1]["t_start_ns"] - max(r["t_end_ns"] for r in reqs[:-1])) / 1e6
    st = stalls(cap)
    assert st[["cause", "streams"]].values.tolist() == [["client_pause", "13"]]
    assert st["duration_ms"].iloc[0] == pytest.approx(wait_ms, abs=5.0)


def _pmtu_facts(name: str) -> tuple[Capture, dict[str, Any]]:
    cap = _load(name)
    facts = json.loads((CAPTURES / f"{name}.facts.json").read_text())
    return cap, facts["truth"]["pmtu"]


def test_pmtu_discovery_stalls_are_the_path_mtu_facts() -> None:
    """pmtu-icmp-server (captured at the server; the router's link toward the client has MTU
    1400 and it answers with ICMP too-big): one pmtu_blackhole stall per download, mechanism
    discovered, starting at the first segment too big (path_mtu.big_ts), with the facts'
    first ICMP error of that connection and the smaller resend as evidence; nothing else."""
    cap, truth = _pmtu_facts("pmtu-icmp-server.pcap")
    st = stalls(cap)
    assert st["tcp_stream"].tolist() == [0, 1]
    assert st["cause"].astype(str).tolist() == ["pmtu_blackhole"] * 2
    assert st["mechanism"].astype(str).tolist() == ["discovered"] * 2
    pm = cap.path_mtu.set_index("tcp_stream")
    for r in st.to_dict("records"):
        s = int(r["tcp_stream"])
        icmp = min(e["frame"] for e in truth["icmp_errors"] if e["tcp_stream"] == s)
        row = pm.loc[s]
        assert int(row["icmp_frame"]) == icmp and int(row["mtu"]) == truth["router_link_mtu"]
        assert int(row["big_seg_bytes"]) == truth["largest_tcp_len_by_stream"][str(s)]
        ev = [int(x) for x in r["evidence_frames"].split(",")]
        assert ev == [int(row["big_frame"]), icmp, int(row["resend_frame"]),
                      int(row["delivered_frame"])]
        assert r["start_ts"] == row["big_ts"]
        assert f"path MTU {truth['router_link_mtu']} bytes" in r["detail"]
        assert pd.isna(r["resend_frame"]) and pd.isna(r["lost_frame"])


def test_pmtu_black_hole_stalls_agree_with_disconnects() -> None:
    """pmtu-blackhole-server: the router's ICMP errors are dropped, the server resends its
    big segments without ever going smaller (no path_mtu row): each download's stall is a
    pmtu_blackhole (mechanism no_icmp), as disconnects() says, not loss_recovery (rto); its
    evidence is the first big segment and the facts' 3 resends of it. At the client
    (pmtu-blackhole-client) nothing of the response arrived: no stall (nothing resumed), and
    disconnects sees only the client's reset there."""
    from pcaptools.analyses.disconnects import disconnects

    cap, truth = _pmtu_facts("pmtu-blackhole-server.pcap")
    assert truth["router_icmp"] == "dropped" and truth["icmp_errors"] == []
    assert len(cap.path_mtu) == 0
    st = stalls(cap)
    d = disconnects(cap).set_index("tcp_stream")
    assert st["tcp_stream"].tolist() == [0, 1]
    assert st["cause"].astype(str).tolist() == ["pmtu_blackhole"] * 2
    assert st["mechanism"].astype(str).tolist() == ["no_icmp"] * 2
    ev_all = cap.tcp_events
    for r in st.to_dict("records"):
        s = int(r["tcp_stream"])
        assert d.loc[s, "verdict"] == "pmtu_black_hole"
        resends = ev_all.loc[(ev_all["tcp_stream"] == s)
                             & (ev_all["kind"] == "retransmission"), "frame"].tolist()
        assert len(resends) == truth["retransmissions_by_stream"][str(s)] == 3
        first = int(d.loc[s, "first_unanswered_frame"])
        assert [int(x) for x in r["evidence_frames"].split(",")] == [first, *resends]
        assert r["start_ts"] == d.loc[s, "first_unanswered_ts"]
        assert f"{truth['largest_tcp_len_by_stream'][str(s)]}-byte segments" in r["detail"]
        assert "pmtu_black_hole" in r["detail"]
    # the report hands its disconnects() over instead of stalls() computing it again
    pd.testing.assert_frame_equal(stalls(cap, verdicts=disconnects(cap)), st)
    client = _load("pmtu-blackhole-client.pcap")
    assert len(stalls(client)) == 0
    assert disconnects(client)["verdict"].tolist() == ["reset", "reset"]


def test_a_latency_table_given_is_used_not_computed_again(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The report computes stream_latency once and hands it to stalls and request_timing:
    with it they compute nothing of their own and give what they give without it."""
    cap = _load("slow-causes.pcapng")
    lat = cap.latency()
    st, rt = stalls(cap), request_timing(cap)
    assert len(st) > 3 and len(rt) > 3

    def not_again(_cap: object) -> pd.DataFrame:
        raise AssertionError("stream_latency computed again")

    monkeypatch.setattr("pcaptools.analyses.slow.stream_latency", not_again)
    st2 = stalls(cap, latency=lat)
    pd.testing.assert_frame_equal(st2, st, check_exact=True)
    pd.testing.assert_frame_equal(request_timing(cap, stall_table=st2, latency=lat), rt,
                                  check_exact=True)
