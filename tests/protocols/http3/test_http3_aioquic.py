"""The HTTP/3 observer against aioquic's real HTTP/3 stack, in memory (tests/protocols/http3/
aioquic_pair.py): what the observer reports of each request stream (method, path, status,
bytes, SSE events and their text) equals what the aioquic peers sent and received, QPACK
included (aioquic's encoder uses the dynamic table), fed whole and byte by byte; field
sections that wait for encoder-stream bytes are decoded when those arrive, and are reported,
never guessed, when they never do."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

pytest.importorskip("aioquic")

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.http3 import Http3Observer
from pcaptools.redaction import redact_frame
from pcaptools.tables.http3_tables import (
    HTTP3_CONNECTIONS,
    HTTP3_FRAMES,
    HTTP3_SSE_EVENTS,
    HTTP3_STREAMS,
    http3_tables,
)
from pcaptools.tables.http3_tables import HTTP3_TABLES as TABLES
from pcaptools.tcp.stream import Direction
from tests.protocols.http3.aioquic_pair import (
    Delivery,
    Exchange,
    Planned,
    run_exchange,
)

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT

PLANS = [
    Planned("/v1/chat/completions", ["Hel", "lo", ",", " wor", "ld"]),
    Planned("/v1/chat/completions?n=2", [f" t{i}" for i in range(12)],
            extra_headers=[(b"authorization", b"Bearer sk-secret-123")]),
    Planned("/v1/gz", ["zip", "ped"], content_encoding="gzip"),
    Planned("/v1/cut", ["a", "b", "c", "d"], reset_after=2),
]


def feed(deliveries: list[Delivery], *, split: bool = False,
         obs: Http3Observer | None = None) -> tuple[Http3Observer, Diagnostics]:
    diag = Diagnostics()
    if obs is None:
        obs = Http3Observer(connection=7, diag=diag)
    else:
        diag = obs.diag
    for d in deliveries:
        if d.kind == "reset":
            obs.stream_reset(d.stream_id, d.direction, d.error_code, d.offset, d.ts_ns, d.frame)
        elif split and len(d.data) > 1:
            for i in range(len(d.data)):
                obs.stream_data(d.stream_id, d.direction, d.offset + i, d.data[i:i + 1],
                                d.fin and i == len(d.data) - 1, d.ts_ns, d.frame)
        else:
            obs.stream_data(d.stream_id, d.direction, d.offset, d.data, d.fin, d.ts_ns,
                            d.frame)
    last = deliveries[-1]
    obs.finish(last.ts_ns, last.frame)
    return obs, diag


@pytest.fixture(scope="module")
def ex() -> Exchange:
    return run_exchange(PLANS)


@pytest.fixture(scope="module")
def fed(ex: Exchange) -> tuple[Http3Observer, Diagnostics]:
    return feed(ex.deliveries)


def _streams(obs: Http3Observer) -> dict[int, object]:
    return {s.stream_id: s for s in obs.streams}


def test_every_request_stream_matches_what_aioquic_sent(
    ex: Exchange, fed: tuple[Http3Observer, Diagnostics]
) -> None:
    obs, diag = fed
    streams = {s.stream_id: s for s in obs.streams}
    assert sorted(streams) == sorted(ex.client_stream_ids.values()) == [0, 4, 8, 12]
    for plan in PLANS:
        sid = ex.client_stream_ids[plan.path]
        s = streams[sid]
        sent = ex.server_sent[sid]
        assert (s.method, s.scheme, s.authority, s.path) == (
            "POST", "https", "lab.test", plan.path)
        assert s.status == 200 and s.content_type == "text/event-stream"
        assert s.client_data_bytes == len(plan.body)
        assert s.server_data_bytes == len(sent["body"])
        assert s.server_data_bytes == len(ex.client_received[sid]["body"])
        assert s.request_headers is not None
        assert dict(s.request_headers)["content-type"] == "application/json"
        assert s.informational == 0 and not s.partial and not s.desynced
        assert s.request_frame is not None and s.response_headers_frame is not None
        assert s.first_frame <= s.request_frame <= s.response_headers_frame <= s.end_frame
        assert s.request_ts_ns <= s.request_end_ts_ns <= s.response_headers_ts_ns
        assert s.first_data_ts_ns is not None and s.first_data_ts_ns <= s.end_ts_ns
        if plan.reset_after is None:
            assert s.end_reason == "end_stream" and s.reset_by is None
            assert s.sse_events == sent["events"] == len(plan.tokens) + 2
        else:
            assert s.end_reason == "reset" and s.reset_by == S2C
            assert s.reset_error_code == 0x10C
            assert s.sse_events == plan.reset_after
    gz = streams[ex.client_stream_ids["/v1/gz"]]
    assert gz.content_encoding == "gzip" and gz.content_decoding == "decoded"
    assert gz.decoded_body_bytes == len(gzip.decompress(ex.server_sent[8]["body"]))
    assert streams[0].content_decoding == "identity"
    assert streams[0].decoded_body_bytes == streams[0].server_data_bytes
    assert [r.code for r in diag.rows] == []


def test_sse_events_carry_the_tokens_aioquic_streamed(
    ex: Exchange, fed: tuple[Http3Observer, Diagnostics]
) -> None:
    obs, _ = fed
    for plan in PLANS:
        sid = ex.client_stream_ids[plan.path]
        events = [e for e in obs.sse if e.stream_id == sid]
        assert [e.index for e in events] == list(range(len(events)))
        assert all(e.tcp_stream is None for e in events)
        tokens = [e.delta_text for e in events if e.delta_text]
        if plan.reset_after is None:
            assert tokens == plan.tokens
            assert events[-1].done and events[-2].finish_reason == "stop"
        else:
            assert tokens == plan.tokens[: plan.reset_after]
        for e in events:
            if e.json_ok:
                assert json.loads(e.data)["choices"][0]["delta"].get("content") == (
                    e.delta_text)


def test_control_streams_settings_and_qpack_dynamic_table(
    fed: tuple[Http3Observer, Diagnostics]
) -> None:
    obs, _ = fed
    # aioquic announces a 4096-byte QPACK table and 16 blocked streams on both sides
    for d in (C2S, S2C):
        settings = dict(obs.settings[d])
        assert settings[0x01] == 4096 and settings[0x07] == 16
    first = [f for f in obs.frames if f.stream_kind == "control"]
    assert {f.direction for f in first if f.type == 0x04} == {C2S, S2C}
    heads = [f for f in obs.frames if f.type == 0x01]
    assert heads and all(f.qpack == "decoded" and f.headers is not None for f in heads)
    # the encoder inserted fields: later field sections are shorter than the first ones
    server_heads = [f for f in heads if f.direction == S2C]
    assert min(f.length for f in server_heads) < max(f.length for f in server_heads)
    assert obs._qpack[S2C].encoder_bytes > 0 and obs._qpack[C2S].encoder_bytes > 0


def _key(obs: Http3Observer) -> tuple[object, ...]:
    streams = sorted(
        (s.stream_id, s.method, s.path, s.status, s.client_data_bytes, s.server_data_bytes,
         s.sse_events, s.end_reason, s.request_headers, s.response_headers)
        for s in obs.streams
    )
    frames = [(f.stream_id, f.direction, f.type, f.length, f.headers) for f in obs.frames]
    sse = [(e.stream_id, e.index, e.data) for e in obs.sse]
    return tuple(streams), tuple(sorted(frames, key=repr)), tuple(sse)


def test_byte_by_byte_gives_the_same_result(
    ex: Exchange, fed: tuple[Http3Observer, Diagnostics]
) -> None:
    split, diag = feed(ex.deliveries, split=True)
    assert _key(split) == _key(fed[0])
    assert diag.rows == []


def test_blocked_field_sections_are_decoded_when_encoder_bytes_arrive(ex: Exchange) -> None:
    # hold the server's QPACK encoder stream back until the end: every response field
    # section that refers to the dynamic table waits, then decodes
    enc = [d for d in ex.deliveries if d.direction == S2C and d.stream_id % 4 == 3
           and d.data[:1] == b"\x02" and d.offset == 0]
    assert enc, "aioquic opened a server encoder stream"
    enc_sid = enc[0].stream_id
    held = [d for d in ex.deliveries if d.stream_id == enc_sid and d.direction == S2C]
    rest = [d for d in ex.deliveries if d not in held]
    last = rest[-1]
    moved = [Delivery(d.kind, d.stream_id, d.direction, d.offset, d.data, d.fin,
                      last.ts_ns + 1, last.frame + 1) for d in held]
    obs, diag = feed(rest[:-1] + moved + rest[-1:])
    assert _key(obs)[0] == _key(feed(ex.deliveries)[0])[0]
    blocked = [f for f in obs.frames if f.type == 0x01 and f.qpack == "blocked"]
    assert blocked and all(f.decoded_frame == last.frame + 1 > f.frame for f in blocked)
    assert all(f.headers is not None for f in blocked)
    # the body waited for its content type, then was parsed: same events
    assert [(e.stream_id, e.data) for e in obs.sse] != []
    assert sorted((e.stream_id, e.index, e.data) for e in obs.sse) == sorted(
        (e.stream_id, e.index, e.data) for e in feed(ex.deliveries)[0].sse)
    assert diag.rows == []


def test_lost_encoder_bytes_are_reported_not_guessed(ex: Exchange) -> None:
    enc_sid = next(d.stream_id for d in ex.deliveries if d.direction == S2C
                   and d.stream_id % 4 == 3 and d.data[:1] == b"\x02" and d.offset == 0)
    obs = Http3Observer(connection=3, diag=Diagnostics())
    lost = False
    for d in ex.deliveries:
        if d.stream_id == enc_sid and d.direction == S2C and not lost:
            lost = True  # the first encoder-stream packet never reaches the capture
            obs.stream_data(d.stream_id, d.direction, 0, d.data[:1], False, d.ts_ns, d.frame)
            obs.stream_gap(d.stream_id, d.direction, 1, len(d.data) - 1, d.ts_ns, d.frame)
            continue
        if d.kind == "data":
            obs.stream_data(d.stream_id, d.direction, d.offset, d.data, d.fin, d.ts_ns,
                            d.frame)
        else:
            obs.stream_reset(d.stream_id, d.direction, d.error_code, d.offset, d.ts_ns,
                             d.frame)
    obs.finish(ex.deliveries[-1].ts_ns, ex.deliveries[-1].frame)
    codes = [r.code for r in obs.diag.rows]
    assert "http3.qpack_encoder_stream_gap" in codes and "http3.qpack_blocked" in codes
    undecoded = [s for s in obs.streams if s.response_headers is None]
    assert undecoded, "some response referred to the lost dynamic-table entries"
    for s in undecoded:  # nothing guessed: no status, no content type, no SSE
        assert s.status is None and s.content_type is None and s.sse_events == 0
        assert s.response_headers_frame is not None  # the HEADERS frame itself was seen
        assert s.server_data_bytes == ex.server_sent[s.stream_id]["body"].__len__()
    never = [f for f in obs.frames if f.qpack == "never_decoded"]
    assert never and all(f.headers is None for f in never)


def test_tables_have_their_schemas_and_redact(
    ex: Exchange, fed: tuple[Http3Observer, Diagnostics]
) -> None:
    shown = http3_tables([fed[0]])  # values as seen: load() redacts the marked columns
    t = {name: redact_frame(df, TABLES[name].secret_columns) for name, df in shown.items()}
    HTTP3_FRAMES.check(t["http3_frames"])
    HTTP3_STREAMS.check(t["http3_streams"])
    HTTP3_SSE_EVENTS.check(t["http3_sse_events"])
    st = t["http3_streams"].set_index("stream_id")
    assert st["quic_connection"].eq(7).all()
    assert st.loc[0, "path"] == "/v1/chat/completions" and st.loc[0, "status"] == 200
    assert st.loc[12, "end_reason"] == "reset" and st.loc[12, "reset_by"] == "server"
    assert st.loc[12, "reset_error"] == "H3_REQUEST_CANCELLED"
    auth = dict(st.loc[4, "request_headers"])["authorization"]
    assert "sk-secret-123" not in auth
    raw = shown["http3_streams"].set_index("stream_id")
    assert dict(raw.loc[4, "request_headers"])["authorization"] == "Bearer sk-secret-123"
    ev = t["http3_sse_events"]
    assert len(ev) == sum(s.sse_events for s in fed[0].streams)
    assert ev.loc[ev["stream_id"].eq(0), "delta_text"].dropna().tolist() == PLANS[0].tokens
    fr = t["http3_frames"]
    assert set(fr["type"].astype(str)) >= {"SETTINGS", "HEADERS", "DATA"}
    assert fr.loc[fr["type"].eq("SETTINGS"), "settings"].str.contains(
        "QPACK_MAX_TABLE_CAPACITY=4096").all()
    assert fr["index"].tolist() == list(range(len(fr)))
    HTTP3_CONNECTIONS.check(t["http3_connections"])
    (c,) = t["http3_connections"].to_dict("records")
    assert c["quic_connection"] == 7 and c["request_streams"] == 4
    assert c["client_qpack_max_table_capacity"] == c["server_qpack_max_table_capacity"] == 4096
    assert c["client_control_stream"] == 2 and c["server_control_stream"] == 3
    assert c["client_field_sections"] == 4 and c["server_field_sections"] == 4
    assert c["client_blocked_field_sections"] == c["server_blocked_field_sections"] == 0
    assert c["server_encoder_stream_bytes"] > 0 and c["frames"] == len(fr)
    assert c["desynced_streams"] == 0 and pd.isna(c["goaway_by"])
    empty = http3_tables([])
    assert all(len(v) == 0 for v in empty.values())
    HTTP3_STREAMS.check(empty["http3_streams"])


def test_encoder_bytes_before_the_receivers_settings_wait_for_them(ex: Exchange) -> None:
    # the client's control stream (its SETTINGS: the table the server's encoder may use)
    # reaches the observer last: the server's encoder-stream bytes and every field section
    # that uses the dynamic table wait, then decode with the announced capacity
    ctrl = [d for d in ex.deliveries if d.direction == C2S and d.stream_id % 4 == 2
            and d.offset == 0 and d.data[:1] == b"\x00"]
    assert ctrl
    held = [d for d in ex.deliveries if d.stream_id == ctrl[0].stream_id and d.direction == C2S]
    rest = [d for d in ex.deliveries if d not in held]
    obs, diag = feed(rest[:-1] + held + rest[-1:])
    assert _key(obs)[0] == _key(feed(ex.deliveries)[0])[0]
    assert dict(obs.settings[C2S])[0x01] == 4096
    assert obs.qpack(S2C).decoded == 4 and obs.qpack(S2C).blocked >= 1
    assert diag.rows == []
