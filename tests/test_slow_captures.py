"""The slow-causes recording (captures/slow-causes.pcapng) against its facts, with tshark 4.0.

``scripts/record_captures.py --only slow-causes`` injected five causes of stalls at logged
times (scripts/servers/slowkit.py, the TAP forwarder's drop rules in scripts/netlab.py) and
wrote ``captures/slow-causes.facts.json`` in the shape agreed for issue #16 (its ``injected``
list is what the "why was it slow" analysis must find).  These tests decrypt the capture with
tshark and the shipped key log, independently of the recorder's own parsing, and check that
the facts say what the capture shows: the connections' tcp.stream indexes, the requests and
their HTTP/2 stream ids, each loss's lost frame and resend (tshark calls the resend a
retransmission, a fast retransmission for the fast-retransmit one, after >= 3 duplicate
ACKs), the zero-window frames, the HTTP/2 WINDOW_UPDATE that ends the flow-control stall, the
server pause's DATA frames, every start / duration against the frames' times, and the
tcptrace numbers against tshark's retransmissions.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from tests.conftest import CAPTURES
from tests.oracle import keylog_options, tshark_fields

CAP = CAPTURES / "slow-causes.pcapng"
FACTS = CAPTURES / "slow-causes.facts.json"
KEYS = CAPTURES / "slow-causes.keys"
HTTPS = 443
H2_DATA, H2_HEADERS, H2_WINDOW_UPDATE = 0, 1, 8

pytestmark = pytest.mark.skipif(not (CAP.is_file() and FACTS.is_file() and KEYS.is_file()),
                                reason="the slow-causes capture is absent")

_FIELDS = ("frame.number", "frame.time_epoch", "tcp.stream", "tcp.srcport", "tcp.dstport",
           "tcp.seq_raw", "tcp.len", "tcp.window_size", "tcp.analysis.retransmission",
           "tcp.analysis.fast_retransmission", "tcp.analysis.duplicate_ack",
           "tcp.analysis.zero_window", "tcp.analysis.keep_alive",
           "tcp.analysis.zero_window_probe", "http2.type", "http2.streamid",
           "http2.headers.method")


@pytest.fixture(scope="module")
def facts() -> dict[str, Any]:
    return dict(json.loads(FACTS.read_text()))


@pytest.fixture(scope="module")
def frames(tshark: str) -> dict[int, dict[str, Any]]:
    """Every TCP frame as tshark sees it, decrypted with the shipped key log (one run)."""
    rows = tshark_fields(CAP, _FIELDS, keylog_options(KEYS), display_filter="tcp")
    out = {}
    for r in rows:
        c = dict(zip(_FIELDS, r, strict=False))
        types = [int(x) for x in c["http2.type"].split(",") if x]
        sids = [int(x) for x in c["http2.streamid"].split(",") if x]
        out[int(c["frame.number"])] = {
            "t": float(c["frame.time_epoch"]), "stream": int(c["tcp.stream"]),
            "from_server": int(c["tcp.srcport"]) == HTTPS,
            "client_port": int(c["tcp.dstport"] if int(c["tcp.srcport"]) == HTTPS
                               else c["tcp.srcport"]),
            "seq": int(c["tcp.seq_raw"]), "len": int(c["tcp.len"] or 0),
            "win": int(c["tcp.window_size"] or 0),
            "flags": {f.rsplit(".", 1)[1] for f in _FIELDS
                      if f.startswith("tcp.analysis.") and c[f]},
            "h2": list(zip(types, sids, strict=False)),
            "requests": [s for t, s in zip(types, sids, strict=False) if t == H2_HEADERS]
            if c["http2.headers.method"] else []}
    return out


def _event(facts: dict[str, Any], cause: str, mechanism: str | None = None) -> dict[str, Any]:
    got = [e for e in facts["injected"] if e["cause"] == cause
           and (mechanism is None or e["mechanism"] == mechanism)]
    assert len(got) == 1, (cause, mechanism, [e["id"] for e in facts["injected"]])
    return got[0]


def test_shape(facts: dict[str, Any]) -> None:
    assert facts["scenario"] == "slow-causes"
    assert facts["capture_point"] == "server"
    assert facts["link"]["one_way_delay_ms"] == 20.0
    causes = {"server_pause", "loss_recovery", "receive_window", "h2_flow_control",
              "client_pause"}
    for e in facts["injected"]:
        assert e["cause"] in causes
        assert (e["mechanism"] is None) == (e["cause"] != "loss_recovery")
        assert e["mechanism"] in (None, "fast_retransmit", "rto", "tail_loss_probe")
        assert isinstance(e["start"], float) and 0.0 < e["duration_s"] < 5.0
        assert e["frames"] == sorted(e["frames"]) and e["h2_streams"] and e["source"]
    for r in facts["requests"]:
        for k in ("client_port", "tcp_stream", "h2_stream", "path", "sent", "headers",
                  "first_token", "last_token", "tokens"):
            assert k in r
    # every cause the recording injects is there once (two losses), in time order
    assert sorted((e["cause"], e["mechanism"]) for e in facts["injected"]) == [
        ("client_pause", None), ("h2_flow_control", None), ("loss_recovery", "fast_retransmit"),
        ("loss_recovery", "tail_loss_probe"), ("receive_window", None),
        ("server_pause", None)]
    starts = [(e["start"], e["start"] + e["duration_s"]) for e in facts["injected"]]
    assert starts == sorted(starts)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(starts))  # no overlap
    assert facts["other_gaps_over_120ms"] == []


def test_connections_and_requests(facts: dict[str, Any],
                                  frames: dict[int, dict[str, Any]]) -> None:
    streams = {f["client_port"]: f["stream"] for f in frames.values()}
    assert {c["client_port"]: c["tcp_stream"] for c in facts["connections"]} == streams
    assert sorted(streams.values()) == [0, 1, 2]
    seen = sorted((f["stream"], s) for f in frames.values() if not f["from_server"]
                  for s in f["requests"])
    want = sorted((r["tcp_stream"], r["h2_stream"]) for r in facts["requests"])
    assert seen == want == [(0, 1), (0, 3), (0, 5), (0, 7), (1, 1), (2, 1), (2, 3)]
    port = {c["tcp_stream"]: c["client_port"] for c in facts["connections"]}
    for r in facts["requests"]:
        assert r["sent"] < r["headers"] and r["client_port"] == port[r["tcp_stream"]]
        if r["tokens"]:
            assert r["headers"] < r["first_token"] <= r["last_token"]
    # the client's own token counts: every token stream got its tokens plus the final one
    assert [r["tokens"] for r in facts["requests"]] == [91, 81, 91, 13, 0, 61, 61]


def _check_times(e: dict[str, Any], first: dict[str, Any], last: dict[str, Any]) -> None:
    assert e["start"] == pytest.approx(first["t"], abs=1e-6)
    assert e["duration_s"] == pytest.approx(last["t"] - first["t"], abs=1e-5)


def test_server_pause(facts: dict[str, Any], frames: dict[int, dict[str, Any]]) -> None:
    e = _event(facts, "server_pause")
    before, after = (frames[n] for n in e["frames"])
    sid = e["h2_streams"][0]
    for f in (before, after):
        assert f["from_server"] and f["stream"] == e["tcp_stream"] and (H2_DATA, sid) in f["h2"]
    # no DATA of that stream in between, while the other streams keep streaming
    between = [f for n, f in frames.items() if e["frames"][0] < n < e["frames"][1]
               and f["stream"] == e["tcp_stream"] and f["from_server"]]
    assert not any((H2_DATA, sid) in f["h2"] for f in between)
    others = {s for f in between for t, s in f["h2"] if t == H2_DATA}
    assert others == {1, 5}
    _check_times(e, before, after)
    assert 0.8 <= e["duration_s"] <= 0.9  # the 800 ms pause plus one 40 ms token interval


@pytest.mark.parametrize("mechanism", ["fast_retransmit", "tail_loss_probe"])
def test_losses(facts: dict[str, Any], frames: dict[int, dict[str, Any]],
                mechanism: str) -> None:
    e = _event(facts, "loss_recovery", mechanism)
    d = e["detail"]
    lost = [frames[n] for n in d["lost_frames"]]
    resent = [frames[n] for n in d["resend_frames"]]
    assert sorted(d["lost_frames"] + d["resend_frames"]) == e["frames"]
    for drop, a, b in zip(d["dropped_by_forwarder"], lost, resent, strict=True):
        assert a["from_server"] and a["stream"] == e["tcp_stream"]
        assert a["seq"] == b["seq"] == drop["seq"] and a["len"] == drop["len"]
        assert "retransmission" in b["flags"] and "retransmission" not in a["flags"]
    _check_times(e, lost[0], max(resent, key=lambda f: f["t"]))
    dup = d["dup_ack_frames"]
    assert all("duplicate_ack" in frames[n]["flags"] and not frames[n]["from_server"]
               for n in dup)
    if mechanism == "fast_retransmit":
        assert len(lost) == 1 and "fast_retransmission" in resent[0]["flags"]
        assert len(dup) >= 3
        assert e["h2_streams"] == [1, 3, 5]  # head-of-line blocking: all three streams
        assert e["duration_s"] < 0.2
    else:
        # the last two segments of stream 7's response; nothing else from the server until
        # the probe resends the highest one (no duplicate ACK before it), then the older one
        assert len(lost) == 2 and e["h2_streams"] == [7]
        assert d["first_resend_frame"] == d["resend_frames"][1] and d["dup_acks_before_resend"] == 0
        assert d["kernel_counter_deltas"].get("TCPLossProbes", 0) >= 1
        assert not d["kernel_counter_deltas"].get("TCPTimeouts")
        assert not [f for n, f in frames.items() if d["lost_frames"][1] < n < d[
            "first_resend_frame"] and f["stream"] == e["tcp_stream"] and f["from_server"]
            and f["len"]]
        # the probe fires after about two round trips, well before a 200 ms+ timeout
        assert frames[d["first_resend_frame"]]["t"] - lost[1]["t"] < 0.15


def test_receive_window(facts: dict[str, Any], frames: dict[int, dict[str, Any]]) -> None:
    e = _event(facts, "receive_window")
    d = e["detail"]
    assert d["zero_window_frames"]
    for n in d["zero_window_frames"]:
        f = frames[n]
        assert "zero_window" in f["flags"] and f["win"] == 0 and not f["from_server"]
        assert f["stream"] == e["tcp_stream"]
    for n in d["probe_frames"]:
        assert frames[n]["from_server"] and {"keep_alive", "zero_window_probe"} & frames[n][
            "flags"]
    reopen = frames[d["window_reopened_frame"]]
    assert not reopen["from_server"] and reopen["win"] > 0
    assert set(e["frames"]) >= {*d["zero_window_frames"], *d["probe_frames"],
                                d["window_reopened_frame"]}
    assert e["start"] <= frames[d["zero_window_frames"][0]]["t"]
    assert reopen["t"] <= e["start"] + e["duration_s"]
    # the client stopped reading for 1.5 s; the window stayed closed for most of that
    assert 1.0 <= e["duration_s"] <= 1.6


def test_h2_flow_control(facts: dict[str, Any], frames: dict[int, dict[str, Any]]) -> None:
    e = _event(facts, "h2_flow_control")
    sid = e["h2_streams"][0]
    last_data, wu = (frames[n] for n in e["frames"])
    assert (H2_WINDOW_UPDATE, sid) in wu["h2"] and not wu["from_server"]
    assert (H2_DATA, sid) in last_data["h2"] and last_data["from_server"]
    assert wu["stream"] == last_data["stream"] == e["tcp_stream"]
    nxt = frames[e["detail"]["next_data_frame"]]
    assert (H2_DATA, sid) in nxt["h2"] and nxt["t"] >= wu["t"]
    # no DATA of that stream while its window was used up
    assert not any((H2_DATA, sid) in f["h2"] for n, f in frames.items()
                   if e["frames"][0] < n < e["detail"]["next_data_frame"])
    _check_times(e, last_data, nxt)
    assert 0.8 <= e["duration_s"] <= 0.95  # the 800 ms late update plus one round trip


def test_tcptrace_agrees_with_tshark(facts: dict[str, Any],
                                     frames: dict[int, dict[str, Any]]) -> None:
    tt = {c["client_port"]: c for c in facts["tcptrace"]["connections"]}
    assert "6.6.7" in facts["tcptrace"]["version"]
    for c in facts["connections"]:
        t = tt[c["client_port"]]
        resent = sum(1 for f in frames.values() if f["stream"] == c["tcp_stream"]
                     and f["from_server"] and "retransmission" in f["flags"])
        assert t["rexmt_data_pkts"] == resent
        # RTT at the server: two 20 ms link delays (plus the client's ACK delay)
        assert 39.0 <= t["rtt_min_ms"] <= 45.0 and t["rtt_min_ms"] <= t["rtt_avg_ms"]
        zw = sum(1 for f in frames.values() if f["stream"] == c["tcp_stream"]
                 and "zero_window" in f["flags"])
        assert t["client_zero_win_adv"] == zw
    # the fast retransmit, the tail-loss probe and the resend of the older tail segment
    assert tt[50001]["rexmt_data_pkts"] == 3
