"""HTTP/3 end to end on the shipped aioquic recordings (captures/h3-sse-*.pcapng with their key
logs): every request of the per-request timeline in the facts is an http3_streams row on the
right QUIC connection and stream id, with its status, body bytes, SSE event count and the
exact tokens; every event's capture time is that of the packet that carried it (a few ms
before the application at the capture's end logged it: the client when it read it, the
server when it had sent it); stream_latency has one HTTP/3 row per request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.latency import STREAM_LATENCY, stream_latency
from pcaptools.tables.http3_tables import HTTP3_FRAMES, HTTP3_SSE_EVENTS, HTTP3_STREAMS
from tests.conftest import CAPTURES

NAMES = ("h3-sse-chat", "h3-sse-lossy", "h3-sse-lossy-server")
SLACK_NS = 12_000_000
"""the recording applications log a token a little after its packet is captured (the asyncio
loop's latency: 0.2-9 ms in these recordings); a token one event off would be 25 ms or more
away"""


def _load(name: str) -> tuple[pcaptools.Capture, dict[str, Any], pd.DataFrame]:
    path = CAPTURES / f"{name}.pcapng"
    keys = CAPTURES / f"{name}.keys"
    if not (path.exists() and keys.exists()):
        pytest.skip(f"{name}.pcapng (+ .keys) is absent")
    cap = pcaptools.load(path, keylog=keys)
    facts = json.loads(Path(f"{path}.facts.json").read_text(encoding="utf-8"))
    return cap, facts, stream_latency(cap)


@pytest.fixture(scope="module", params=NAMES)
def loaded(request: pytest.FixtureRequest) -> tuple[str, pcaptools.Capture, dict[str, Any],
                                                    pd.DataFrame]:
    cap, facts, lat = _load(request.param)
    return request.param, cap, facts, lat


def _requests(facts: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    conns = [c for c in facts["connections"] if c.get("transport") == "quic"]
    return [(qi, r) for qi, c in enumerate(conns) for r in c["requests"]]


def test_every_request_of_the_timeline_is_a_stream_row(loaded: Any) -> None:
    _, cap, facts, _ = loaded
    HTTP3_STREAMS.check(cap.http3_streams)
    HTTP3_FRAMES.check(cap.http3_frames)
    HTTP3_SSE_EVENTS.check(cap.http3_sse_events)
    st = cap.http3_streams.set_index(["quic_connection", "stream_id"])
    reqs = _requests(facts)
    assert len(st) == len(reqs) >= 5
    for qi, r in reqs:
        row = st.loc[(qi, r["quic_stream_id"])]
        assert (row["method"], row["path"], row["status"]) == (r["method"], r["path"], r["status"])
        assert row["content_type"] == "text/event-stream"
        assert row["end_reason"] == "end_stream" and not row["desynced"] and not row["partial"]
        assert row["server_data_bytes"] == r["body_bytes"]
        assert row["sse_events"] == r["sse_events_received"] == r["sse_events_sent"]
        assert row["content_decoding"] == "identity"
        assert row["request_frame"] <= row["response_headers_frame"] <= row["end_frame"]
    assert not cap.warnings["code"].astype(str).str.startswith("http3.").any()
    # the connections: aioquic's SETTINGS (a 4096-byte QPACK table, 16 blocked streams)
    conns = cap.http3_connections.set_index("quic_connection")
    assert sorted(conns.index) == sorted({qi for qi, _ in reqs})
    for qi, c in conns.iterrows():
        assert c["request_streams"] == sum(1 for q, _ in reqs if q == qi)
        assert c["client_qpack_max_table_capacity"] == 4096 == c[
            "server_qpack_max_table_capacity"]
        assert c["client_qpack_blocked_streams"] == 16 == c["server_qpack_blocked_streams"]
        assert (c["client_control_stream"], c["server_control_stream"]) == (2, 3)
        assert c["client_field_sections"] == c["server_field_sections"] == c[
            "request_streams"]
        assert c["client_undecoded_field_sections"] == c["server_undecoded_field_sections"] == 0


def test_tokens_and_their_times(loaded: Any) -> None:
    _, cap, facts, _ = loaded
    ev = cap.http3_sse_events
    client_side = facts["vantage"] == "client"
    for qi, r in _requests(facts):
        e = ev[ev["quic_connection"].eq(qi) & ev["stream_id"].eq(r["quic_stream_id"])]
        assert e["index"].tolist() == list(range(r["sse_events_received"]))
        tok = e[e["delta_text"].fillna("").str.len().gt(0)]
        assert tok["delta_text"].tolist() == r["tokens"] == r["server_tokens"]
        assert len(tok) == r["tokens_received"]
        got = e["ts"].astype("int64").tolist()
        # the application at the capture's end logs each event just after its packet is
        # captured (the client when it has read it; the server when it has sent it)
        want = r["client_event_times_ns" if client_side else "server_event_times_ns"]
        assert all(0 <= w - g <= SLACK_NS for g, w in zip(got, want, strict=True))
        assert e["done"].tolist()[-1] and e["finish_reason"].tolist()[-2] == "stop"


def test_stream_latency_rows(loaded: Any) -> None:
    _, cap, facts, lat = loaded
    STREAM_LATENCY.check(lat)
    h3 = lat[lat["protocol"].astype(str).eq("HTTP/3")]
    reqs = _requests(facts)
    assert len(h3) == len(lat) == len(reqs)
    assert h3["tcp_stream"].isna().all() and h3["tls"].all()
    by = h3.set_index(["quic_connection", "stream_id"])
    st = cap.http3_streams.set_index(["quic_connection", "stream_id"])
    ev = cap.http3_sse_events
    for qi, r in reqs:
        row = by.loc[(qi, r["quic_stream_id"])]
        s = st.loc[(qi, r["quic_stream_id"])]
        e = ev[ev["quic_connection"].eq(qi) & ev["stream_id"].eq(r["quic_stream_id"])]
        first_tok = e.loc[e["delta_text"].fillna("").str.len().gt(0), "ts"].iloc[0]
        sent = s["request_end_ts"]
        assert row["ttfb_ms"] == pytest.approx((s["response_headers_ts"] - sent).value / 1e6)
        assert row["ttft_ms"] == pytest.approx((first_tok - sent).value / 1e6)
        assert row["token_events"] == r["tokens_received"]
        assert row["sse_events"] == r["sse_events_received"]
        assert row["complete"] and row["end_reason"] == "end_stream"
        assert row["wireshark_filter"] == (
            f"quic.connection.number eq {qi} && quic.stream.stream_id eq {r['quic_stream_id']}")
    first = h3.groupby("quic_connection")["request_ts"].idxmin()
    assert h3.loc[first, "reused"].eq(False).all()
    assert h3.drop(index=first)["reused"].eq(True).all()
    # TCP connect does not apply to QUIC; its TLS handshake is QUIC's
    assert h3.loc[first, "connect_ms"].isna().all()
    q = cap.quic_connections.set_index("quic_connection")
    for i in first:
        qc = int(h3.loc[i, "quic_connection"])
        assert h3.loc[i, "tls_ms"] == q.loc[qc, "handshake_ms"] > 0
        assert h3.loc[i, "tls_start_ts"] == h3.loc[i, "connection_start_ts"] == q.loc[
            qc, "first_ts"]
    assert h3.drop(index=first)["tls_ms"].eq(0.0).all()


def test_the_0rtt_request_of_the_resumed_connection(loaded: Any) -> None:
    name, cap, facts, _ = loaded
    early = [(qi, r) for qi, r in _requests(facts) if r.get("sent_in_0rtt")]
    if not early:
        pytest.skip(f"{name} has no 0-RTT request")
    for qi, r in early:
        row = cap.http3_streams.set_index(["quic_connection", "stream_id"]).loc[
            (qi, r["quic_stream_id"])]
        assert row["method"] == "POST" and row["status"] == 200
        frames = cap.quic_frames
        zero = frames[frames["quic_connection"].eq(qi)
                      & frames["packet_type"].astype(str).eq("0rtt")]
        assert int(row["request_frame"]) in set(zero["frame"].astype(int))


def test_report_charts_take_http3_rows(loaded: Any) -> None:
    from pcaptools.report import charts

    _, cap, facts, lat = loaded
    points, total = charts.token_cadence_rows(lat, cap.sse_events, 50, cap.http3_sse_events)
    reqs = _requests(facts)
    assert total == len(reqs)
    counts = points.groupby("key").size()
    for qi, r in reqs:
        key = f"q{qi} s{r['quic_stream_id']} {r['path']}"[:60]
        assert counts[key] == r["tokens_received"]
    t0 = int(lat["request_ts"].min().value)
    wf = charts.waterfall_rows(lat, t0, int(lat["end_ts"].max().value), 50)
    assert wf.rows["label"].str.match(r"q\d+ s\d+ POST ").all()


def test_the_http3_tables_are_the_same_with_two_workers() -> None:
    path = CAPTURES / "h3-sse-chat.pcapng"
    if not path.exists():
        pytest.skip("h3-sse-chat.pcapng is absent")
    keys = path.with_suffix(".keys")
    one = pcaptools.load(path, keylog=keys)
    two = pcaptools.load(path, keylog=keys, workers=2)
    for t in ("http3_connections", "http3_frames", "http3_streams", "http3_sse_events"):
        assert len(getattr(one, t))
        pd.testing.assert_frame_equal(getattr(one, t), getattr(two, t), check_categorical=False)
