"""pcaptools.select.subset / Capture.subset: every table cut consistently, row counts checked
against tshark (-Y display filters through tests/oracle.py) and the facts files of captures/."""

from __future__ import annotations

import datetime as dt
import functools
import json
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.capture import TABLES, Capture
from pcaptools.select import RULES, Rule, parse_time, rule_for, subset
from pcaptools.tables.schema import TS_DTYPE, Column, TableSchema
from tests.conftest import CAPTURES
from tests.oracle import keylog_options, tshark_fields


@functools.cache
def _cap(name: str, packets: bool = True) -> Capture:
    path = CAPTURES / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    keys = path.with_suffix(".keys")
    return pcaptools.load(path, keylog=keys if keys.is_file() else None, packets=packets)


def _facts(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((CAPTURES / f"{name}.facts.json").read_text())  # type: ignore[no-any-return]


def _tshark_frames(name: str, display_filter: str) -> list[int]:
    path = CAPTURES / name
    keys = path.with_suffix(".keys")
    rows = tshark_fields(
        path, ("frame.number",), keylog_options(keys if keys.is_file() else None), display_filter
    )
    return [int(r[0]) for r in rows]


def _check_schemas(sub: Capture) -> None:
    for name, schema in TABLES.items():
        schema.check(getattr(sub, name))
        assert list(getattr(sub, name).index) == list(range(len(getattr(sub, name))))


# --------------------------------------------------------------------------- rules


def test_every_table_has_a_rule() -> None:
    """A new table in TABLES without a tcp_stream column (or a new per-packet table without
    its time column) has no rule: this fails until select.py says how to cut it."""
    assert set(RULES) == set(TABLES)
    for name, rule in RULES.items():
        names = {c.name: c for c in TABLES[name].columns}
        if rule.stream is not None:
            assert names[rule.stream].dtype in ("int64", "Int64"), name
        if rule.time is not None:
            assert names[rule.time].dtype == TS_DTYPE, name
    assert RULES["packets"] == Rule("tcp_stream", "ts", "per_packet")
    assert RULES["tcp_events"] == Rule("tcp_stream", "ts", "per_connection")
    assert RULES["warnings"] == Rule("tcp_stream", "ts", "warnings")
    assert RULES["dns"] == Rule(None, None, "dns")
    assert RULES["connections"].kind == "connections"
    assert {n for n, r in RULES.items() if r.time is not None} == {
        "packets",
        "tcp_events",
        "warnings",
    }


def test_a_table_without_a_rule_is_found() -> None:
    lonely = TableSchema("lonely", "one row per thing", ("x",), (Column("x", "int64", None, "x"),))
    assert rule_for(lonely) is None
    keyed = TableSchema(
        "quic_streams",
        "one row per thing",
        ("tcp_stream",),
        (Column("tcp_stream", "int64", None, "x"),),
    )
    assert rule_for(keyed) == Rule("tcp_stream", None)


# --------------------------------------------------------------------------- by connection


@pytest.mark.tshark
@pytest.mark.parametrize("streams", [3, [3, 5], [0, 9]])
def test_streams_match_tshark_and_facts(tshark: str, streams: int | list[int]) -> None:
    name = "compare-h1.pcapng"
    cap = _cap(name)
    sub = cap.subset(stream=streams)
    want = [streams] if isinstance(streams, int) else streams
    flt = "tcp.stream in {" + ",".join(map(str, want)) + "}"
    frames = _tshark_frames(name, flt)
    assert sub.packets["frame"].tolist() == frames
    facts = {s["stream"]: s for s in _facts(name)["tshark"]["streams"]}
    assert len(frames) == sum(sum(facts[s]["frames"]) for s in want)
    assert sub.summary.frames == sub.summary.tcp_frames == len(frames)
    assert sub.summary.wire_bytes == sum(sum(facts[s]["bytes"]) for s in want)
    assert sub.connections["tcp_stream"].tolist() == want
    for table in ("tcp_handshakes", "tls_handshakes", "http_requests"):
        assert sorted(set(getattr(sub, table)["tcp_stream"])) == want
        assert len(getattr(sub, table)) == len(want)  # one connection, one request each
    # per-connection protocol tables: every row of the kept connections, none other
    for table in ("tls_records", "sse_events"):
        full = getattr(cap, table)
        assert len(getattr(sub, table)) == int(full["tcp_stream"].isin(want).sum()) > 0
    # every frame named by a kept row is one of tshark's frames of those connections
    for table in ("tls_records", "sse_events", "tcp_events"):
        assert set(getattr(sub, table)["frame"]) <= set(frames), table
    assert sub.summary.extra["subset"] == "tcp.stream " + ", ".join(map(str, want))
    assert sub.summary.extra["subset_display_filter"] == flt
    assert sub.summary.extra["subset_of_frames"] == 627
    # the capture's observation window is unchanged (no time filter)
    assert (sub.summary.first_ts_ns, sub.summary.last_ts_ns) == (
        cap.summary.first_ts_ns,
        cap.summary.last_ts_ns,
    )
    _check_schemas(sub)


def test_stream_subset_keeps_per_request_numbers() -> None:
    from pcaptools.analyses.latency import stream_latency

    cap = _cap("compare-h1.pcapng")
    sub = cap.subset(stream=3)
    lat, full = stream_latency(sub), stream_latency(cap)
    assert len(lat) == 1
    row = full[full["tcp_stream"] == 3].iloc[0]
    assert (
        int(lat["token_events"].iloc[0])
        == 20
        == _facts("compare-h1.pcapng")["truth"]["plan"][3]["lab"]["tokens"]
    )
    for col in ("ttfb_ms", "ttft_ms", "total_ms", "connect_ms", "tls_ms"):
        assert lat[col].iloc[0] == row[col]


@pytest.mark.tshark
@pytest.mark.parametrize(
    ("kw", "flt", "streams"),
    [
        # demo: two WebSockets on port 8443 (tcp.stream 0 and 1), the HTTP/2 chat on 443
        ({"port": 8443}, "tcp.port == 8443", [0, 1]),
        ({"port": 443}, "tcp.port == 443", [2]),
        ({"host": "192.0.2.20", "port": 443}, "ip.addr == 192.0.2.20 && tcp.port == 443", [2]),
        ({"host": "192.0.2.10"}, "ip.addr == 192.0.2.10", [0, 1, 2]),
        ({"host": "192.0.2.99"}, "ip.addr == 192.0.2.99", []),
    ],
)
def test_host_and_port_match_tshark(
    tshark: str, kw: dict[str, object], flt: str, streams: list[int]
) -> None:
    name = "demo.pcapng"
    sub = _cap(name).subset(**kw)
    assert sub.connections["tcp_stream"].tolist() == streams
    assert sub.packets["frame"].tolist() == _tshark_frames(name, flt)
    assert sub.summary.frames == len(sub.packets)
    _check_schemas(sub)


def test_port_subset_facts_and_warnings() -> None:
    cap = _cap("tcp-reset.pcap")
    facts = _facts("tcp-reset.pcap")
    ends = {int(c["client"].rsplit(":", 1)[1]): c["end"] for c in facts["connections"]}
    sub = cap.subset(port=9002)  # the server that sends 6000 of 24000 bytes, then RST
    assert sub.connections["client_port"].tolist() == [43002] and ends[43002] == "rst-server"
    assert sub.connections["end_reason"].astype(str).tolist() == ["rst"]
    # its truncated response is one of the capture's warnings, kept with it; the others
    # (the client's two resets on port 9003, the mid-stream start on 9001) are not
    assert sub.warnings[["frame", "code"]].astype(object).values.tolist() == [
        [26, "http1.truncated_message"]
    ]
    assert len(cap.warnings) == 4
    assert cap.subset(port=9003).warnings["frame"].tolist() == [61, 93]
    assert cap.subset(port=9002).summary.extra["subset"] == "port 9002"


def test_sni_and_host_names() -> None:
    cap = _cap("tls-versions-ciphers.pcapng")
    everything = list(range(9))
    assert cap.connections["tcp_stream"].tolist() == everything
    # tcp.stream 8 sent no SNI
    for pattern in ("lab.test", "LAB.TEST", "*.test", "lab.*", "l?b.test"):
        assert cap.subset(sni=pattern).connections["tcp_stream"].tolist() == everything[:8], pattern
    assert len(cap.subset(sni="*.openai.com").connections) == 0
    assert cap.subset(sni="*.test").summary.extra["subset"] == "SNI *.test"
    # host as a name: SNI or HTTP Host (stream 7: SNI, no decrypted request; stream 8: no
    # SNI, Host: 192.0.2.20)
    assert cap.subset(host="lab.test").connections["tcp_stream"].tolist() == everything[:8]
    assert set(cap.http_requests.loc[cap.http_requests["tcp_stream"] == 8, "host"]) == {
        "192.0.2.20"
    }
    assert cap.subset(host="192.0.2.20").connections["tcp_stream"].tolist() == everything
    # HTTP/2 :authority
    h2 = _cap("h2-sse-chat.pcapng")
    assert set(h2.http2_streams["authority"]) == {"lab.test"}
    assert len(h2.subset(host="lab.test").http2_streams) == 7
    assert len(h2.subset(host="other.test").http2_streams) == 0
    assert (
        len(h2.subset(sni="lab.test", port=443, host="192.0.2.20").sse_events)
        == len(h2.sse_events)
        > 0
    )


# --------------------------------------------------------------------------- by time


@pytest.mark.tshark
@pytest.mark.parametrize(("start", "end"), [(0.5, 1.0), (0.0, 0.25), (1.2, None), (None, 0.3)])
def test_time_window_matches_tshark(tshark: str, start: float | None, end: float | None) -> None:
    name = "compare-h1.pcapng"
    cap = _cap(name)
    sub = cap.subset(start=start, end=end)
    parts = []
    if start is not None:
        parts.append(f"frame.time_relative >= {start}")
    if end is not None:
        parts.append(f"frame.time_relative <= {end}")
    flt = " && ".join(parts)
    assert sub.packets["frame"].tolist() == _tshark_frames(name, flt)
    assert sub.summary.extra["subset_display_filter"] == flt.replace("0.0", "0").replace("1.0", "1")
    # connections overlapping the window, from tshark's per-stream start and duration
    lo = -1e9 if start is None else start
    hi = 1e9 if end is None else end
    want = [
        s["stream"]
        for s in _facts(name)["tshark"]["streams"]
        if s["start_s"] <= hi + 1e-6 and s["start_s"] + s["duration_s"] >= lo - 1e-6
    ]
    assert sub.connections["tcp_stream"].tolist() == want
    # tcp_events: those of the kept connections inside the window; per-connection tables whole
    t0 = pd.Timestamp(cap.summary.first_ts_ns, unit="ns", tz="UTC")
    ev = cap.tcp_events
    rel = (ev["ts"] - t0).dt.total_seconds()
    keep = ev["tcp_stream"].isin(want) & rel.ge(lo - 1e-12) & rel.le(hi + 1e-12)
    assert sub.tcp_events["frame"].tolist() == ev.loc[keep, "frame"].tolist()
    assert len(sub.sse_events) == int(cap.sse_events["tcp_stream"].isin(want).sum())
    # the observation window is cut to the filter; the time origin stays the first frame
    s = sub.summary
    assert s.extra["subset_origin_ts_ns"] == cap.summary.first_ts_ns
    assert s.first_ts_ns == cap.summary.first_ts_ns + round((start or 0) * 1e9)
    assert s.last_ts_ns == (
        cap.summary.last_ts_ns if end is None else cap.summary.first_ts_ns + round(end * 1e9)
    )
    _check_schemas(sub)


def test_absolute_and_relative_times_agree() -> None:
    cap = _cap("compare-h1.pcapng")
    t0 = pd.Timestamp(cap.summary.first_ts_ns, unit="ns", tz="UTC")
    rel = cap.subset(start=0.5, end=1.0)
    for start, end in [
        ((t0 + pd.Timedelta(seconds=0.5)).isoformat(), (t0 + pd.Timedelta(seconds=1)).isoformat()),
        (
            t0 + pd.Timedelta(seconds=0.5),
            (t0 + pd.Timedelta(seconds=1)).floor("us").to_pydatetime(),
        ),
        ("0.5", "1"),
        ((t0 + pd.Timedelta(seconds=0.5)).tz_localize(None).isoformat(), 1),  # naive: UTC
    ]:
        sub = cap.subset(start=start, end=end)
        assert sub.packets["frame"].tolist() == rel.packets["frame"].tolist(), (start, end)
    assert rel.summary.extra["subset"] == "time 0.5 s to 1 s"
    assert cap.subset(start=1.25).summary.extra["subset"] == "time from 1.25 s"
    assert (
        cap.subset(end=dt.datetime(2030, 1, 1, tzinfo=dt.UTC)).summary.extra["subset"]
        == "time until 2030-01-01T00:00:00+00:00"
    )
    assert parse_time("2026-11-29T21:31:14Z") == 1_795_987_874_000_000_000
    assert parse_time(1.5, 10) == 1_500_000_010


def test_subset_of_a_subset_keeps_the_time_origin() -> None:
    cap = _cap("compare-h1.pcapng")
    once = cap.subset(start=0.5)
    twice = once.subset(end=1.0, port=443)
    direct = cap.subset(start=0.5, end=1.0, port=443)
    assert twice.packets["frame"].tolist() == direct.packets["frame"].tolist()
    assert twice.summary.extra["subset"] == "time from 0.5 s; then port 443, time until 1 s"
    assert twice.summary.extra["subset_of_frames"] == 627
    assert twice.summary.extra["subset_display_filter"] == (
        "tcp.stream in {0,1,2,3,4} && frame.time_relative <= 1"
    )


# ------------------------------------------------------------------- dns, no packets, errors


@pytest.mark.corpus
def test_dns_rows_follow_the_connections(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "raw_ip.pcap")
    assert cap.dns["frame"].tolist() == [51, 70, 73]
    # www.ynet.co.il -> CNAME ... e12476.b.akamaiedge.net -> 23.221.143.117 (tcp.stream 5)
    for host in ("www.ynet.co.il", "23.221.143.117"):
        sub = cap.subset(host=host)
        assert sub.connections["tcp_stream"].tolist() == [5]
        assert sub.dns["frame"].tolist() == [70, 73]
        # the DNS packets of those rows are kept with them
        assert sorted(
            set(sub.packets["frame"]) - set(sub.packets.dropna(subset=["tcp_stream"])["frame"])
        ) == [70, 71, 73, 76]
    assert cap.subset(host="crl.microsoft.com").dns["frame"].tolist() == [51]
    assert cap.subset(port=53).dns["frame"].tolist() == [51, 70, 73]
    assert len(cap.subset(port=53).connections) == 0
    assert len(cap.subset(stream=0).dns) == 0  # www.uk6x.com was not looked up here
    _check_schemas(cap.subset(host="10.0.0.1"))


def test_without_packets_table() -> None:
    cap = _cap("demo.pcapng", packets=False)
    sub = cap.subset(port=8443)
    facts = {s["stream"]: s for s in _facts("demo.pcapng")["tshark"]["streams"]}
    assert sub.summary.tcp_frames == sum(sum(facts[s]["frames"]) for s in (0, 1))
    assert sub.summary.wire_bytes == sum(sum(facts[s]["bytes"]) for s in (0, 1))
    assert "subset_counts" in sub.summary.extra
    _check_schemas(sub)


def test_no_filter_copies_everything() -> None:
    cap = _cap("demo.pcapng")
    sub = subset(cap)
    assert type(sub) is Capture
    assert sub.summary.extra["subset"] == "everything"
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(sub, name), getattr(cap, name))
    assert sub.summary.frames == cap.summary.frames == int(
        _facts("demo.pcapng")["capinfos"]["Number of packets"])
    assert sub.summary.extra["tcp_data_segments"] == cap.summary.extra["tcp_data_segments"]
    assert "warning_counts" not in sub.summary.extra
    assert cap.summary.extra.get("subset") is None  # the original is untouched


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"port": 70000}, "port 70000: not in 0..65535"),
        ({"port": "http"}, "port 'http': not a number"),
        ({"stream": "x"}, "not a tcp.stream number"),
        ({"stream": []}, "stream: no tcp.stream given"),
        ({"start": "yesterday"}, "start 'yesterday': give seconds"),
        ({"start": 2, "end": 1}, "start 2 is after end 1"),
        ({"end": float("nan")}, "not a finite number"),
        ({"host": " "}, "host: empty"),
    ],
)
def test_bad_filters_raise_value_error(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        _cap("demo.pcapng").subset(**kw)


def test_http3_rows_follow_their_quic_connections() -> None:
    """HTTP/3 rows are keyed by quic_connection: an SNI or time filter keeps those of the kept
    QUIC connections, a tcp.stream filter (TCP only) none; the second connection of
    h3-sse-chat (the 0-RTT one) is cut out by a window that ends before it starts."""
    path = CAPTURES / "h3-sse-chat.pcapng"
    if not path.is_file():
        pytest.skip("shipped captures absent")
    cap = pcaptools.load(path, keylog=path.with_suffix(".keys"))
    assert cap.http3_streams["quic_connection"].tolist() == [0, 0, 0, 1, 1]
    by_sni = cap.subset(sni="lab.test")
    for name in ("http3_connections", "http3_frames", "http3_streams", "http3_sse_events"):
        assert len(getattr(by_sni, name)) == len(getattr(cap, name)) > 0, name
    assert len(cap.subset(stream=0).http3_streams) == 0
    second = cap.quic_connections["first_ts"].iloc[1]
    early = cap.subset(end=second - pd.Timedelta(1, "ns"))
    assert early.http3_streams["quic_connection"].tolist() == [0, 0, 0]
    assert set(early.http3_sse_events["quic_connection"]) == {0}
    assert early.http3_sse_events["ts"].max() < second
