"""The stalls the slow-cause recordings caused on purpose are found, with their cause, on the
right connection and streams, at the right time; nothing else long is reported; the
per-connection RTT and retransmission series agree with tcptrace on the same capture.

Truth: ``captures/slow-*.facts.json`` (scripts/record_captures.py, scenario slow-causes): each
injected event with its cause, connection, HTTP/2 streams, start and duration at the capture
point (measured with tshark and the recording's logs), and ``tcptrace -l -r -n`` per
connection. Skipped when those captures are absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.slow import MIN_STALL_MS, connection_series, request_timing, stalls
from pcaptools.result import Capture
from tests.conftest import CAPTURES

FACTS = sorted(p for p in CAPTURES.glob("slow-*.facts.json")
               if not p.name.endswith((".pcapng.facts.json", ".pcap.facts.json")))
PARTS = ["dns_ms", "connect_ms", "tls_ms", "client_ms", "upload_ms", "network_rtt_ms",
         "server_wait_ms", "model_wait_ms", "streaming_ms", "stall_ms"]
#: RTO and tail-loss probe: a lone last segment resent after ~one RTO looks the same either way
#: (Linux caps the probe timer at the RTO): the capture cannot tell them apart
_TIMER = {"rto", "tail_loss_probe"}

pytestmark = pytest.mark.skipif(not FACTS, reason="no captures/slow-*.facts.json")


@pytest.fixture(scope="module", params=FACTS, ids=lambda p: p.name)
def recorded(request: pytest.FixtureRequest) -> tuple[dict[str, Any], Capture, pd.DataFrame]:
    facts_path: Path = request.param
    facts = json.loads(facts_path.read_text())
    cap_path = CAPTURES / facts.get("capture", facts_path.name.replace(".facts.json", ".pcapng"))
    if not cap_path.is_file():
        pytest.skip(f"{cap_path.name} is absent")
    keys = cap_path.with_suffix(".keys")
    cap = pcaptools.load(cap_path, keylog=keys if keys.is_file() else None)
    return facts, cap, stalls(cap)


def _match(st: pd.DataFrame, ev: dict[str, Any]) -> pd.Series:
    start = pd.Timestamp(ev["start"], unit="s", tz="UTC")
    near = st[(st["tcp_stream"] == ev["tcp_stream"])
              & ((st["start_ts"] - start).abs() < pd.Timedelta(milliseconds=50))]
    assert len(near) == 1, (ev["id"], st[["tcp_stream", "start_ts", "cause"]])
    return near.iloc[0]


def test_every_injected_stall_is_found(
        recorded: tuple[dict[str, Any], Capture, pd.DataFrame]) -> None:
    facts, _cap, st = recorded
    assert facts["injected"]
    for ev in facts["injected"]:
        r = _match(st, ev)
        assert r["cause"] == ev["cause"], ev["id"]
        if ev["cause"] == "loss_recovery":
            want = ev["mechanism"]
            assert r["mechanism"] == want or (want in _TIMER and r["mechanism"] == "unknown"), \
                (ev["id"], r["mechanism"])
            assert r["resend_frame"] in ev["frames"], ev["id"]
            assert r["hol_blocked_streams"] == ",".join(map(str, sorted(ev["h2_streams"])))
        assert [int(x) for x in r["streams"].split(",")] == sorted(ev["h2_streams"]), ev["id"]
        assert r["duration_ms"] == pytest.approx(ev["duration_s"] * 1e3, rel=0.2), ev["id"]
        shown = {int(x) for x in r["evidence_frames"].split(",") if x} | {
            int(r["start_frame"]), int(r["end_frame"])}
        assert shown & set(ev["frames"]), ev["id"]  # the frames that show it


def test_nothing_long_that_was_not_injected(
        recorded: tuple[dict[str, Any], Capture, pd.DataFrame]) -> None:
    facts, _cap, st = recorded
    found = {int(_match(st, ev).name) for ev in facts["injected"]}
    extra = st.drop(index=list(found))
    assert extra[extra["duration_ms"] >= MIN_STALL_MS].empty, extra


def test_time_split_of_the_recorded_requests(
        recorded: tuple[dict[str, Any], Capture, pd.DataFrame]) -> None:
    facts, cap, st = recorded
    rt = request_timing(cap, stall_table=st)
    assert len(rt) == len(facts["requests"])
    done = rt[rt["total_ms"].notna()]
    assert ((done[PARTS].sum(axis=1) - done["total_ms"]).abs() < 1e-6).all()
    for ev in facts["injected"]:
        for sid in ev["h2_streams"]:
            row = rt[(rt["tcp_stream"] == ev["tcp_stream"]) & (rt["stream_id"] == sid)]
            assert row["stalls"].item() >= 1, ev["id"]
    if facts.get("capture_point") == "server":
        # seen at the server, the round trip to the client is outside the TTFB
        assert rt["network_rtt_ms"].max() < 5.0


def test_rtt_and_resends_agree_with_tcptrace(
        recorded: tuple[dict[str, Any], Capture, pd.DataFrame]) -> None:
    facts, cap, _st = recorded
    series = connection_series(cap)
    by_port = {c["client_port"]: c["tcp_stream"] for c in facts["connections"]}
    p = cap.packets
    losses = cap.tcp_losses
    for t in facts["tcptrace"]["connections"]:
        s, d = by_port[t["client_port"]], t["direction"]
        rtt = series[(series["tcp_stream"] == s) & (series["direction"] == d)
                     & (series["series"] == "rtt_ms")]
        # tshark's ack_rtt also times the ACK of a resent segment (from either copy);
        # tcptrace leaves those out (Karn's rule): drop the samples of resent segments
        # (the ACKs of either copy, and the ACK that first covers a resent segment)
        mine = losses[losses["tcp_stream"] == s]
        resent_first = set(mine["first_frame"].dropna()) | set(mine["frame"].dropna())
        acks = p.set_index("frame")["acks_frame"]
        peer = p[(p["tcp_stream"] == s) & (p["direction"] != d) & p["ack"].notna()]
        covering = set()
        for r in mine.itertuples():
            later = peer[(peer["ts"] > r.ts) & (peer["ack"] >= r.seq + r.len)]
            if len(later):
                covering.add(int(later["frame"].iloc[0]))
        karn = rtt[~(rtt["frame"].map(acks).isin(resent_first)
                     | rtt["frame"].isin(covering))]["value"]
        assert len(karn) == t["rtt_samples"], t["client_port"]
        assert karn.min() == pytest.approx(t["rtt_min_ms"], abs=0.1)
        assert karn.max() == pytest.approx(t["rtt_max_ms"], abs=0.1)
        assert karn.mean() == pytest.approx(t["rtt_avg_ms"], abs=0.1)
        data = p[(p["tcp_stream"] == s) & (p["direction"] == d) & (p["tcp_len"] > 0)]
        assert int(data["resent"].sum()) == t["rexmt_data_pkts"], t["client_port"]
