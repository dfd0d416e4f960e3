"""analyses.realtime on the recorded voice session (captures/voice-realtime.pcapng, recorded by
``scripts/record_captures.py --only voice-realtime``) against the apps' own logs in its
facts file, plus the cadence rules and the event summaries on hand-made input."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses import realtime as rt
from pcaptools.capture import Capture
from pcaptools.tables.foundation import PACKETS
from pcaptools.tables.realtime_tables import (
    MAX_FIELDS,
    MAX_FIELDS_CHARS,
    REALTIME_EVENTS,
    base64_size,
    summarise_event,
)

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
VOICE = CAPTURES / "voice-realtime.pcapng"


@pytest.fixture(scope="module")
def facts() -> dict[str, Any]:
    return json.loads((CAPTURES / "voice-realtime.pcapng.facts.json").read_text())


@pytest.fixture(scope="module")
def cap() -> Capture:
    return pcaptools.load(VOICE, keylog=CAPTURES / "voice-realtime.keys")


@pytest.fixture(scope="module")
def idle_cap() -> Capture:
    return pcaptools.load(CAPTURES / "ws-idle-reset.pcap")


@pytest.fixture(scope="module")
def turns(cap: Capture) -> pd.DataFrame:
    return rt.turns(cap)


@pytest.fixture(scope="module")
def cadence(cap: Capture) -> pd.DataFrame:
    return rt.audio_cadence(cap)


def _log(facts: dict[str, Any], side: str, what: str) -> list[dict[str, Any]]:
    return [r for r in facts["truth"][f"{side}_log"] if r.get("what") == what]


# --------------------------------------------------------------------------- realtime_events

def test_every_json_message_is_an_event_with_its_audio_size(cap: Capture,
                                                            facts: dict[str, Any]) -> None:
    ev = cap.realtime_events
    REALTIME_EVENTS.check(ev)
    assert (ev["status"] == "ok").all()
    # one row per JSON text message: every text message of this session is JSON
    assert len(ev) == int((cap.ws_messages["type"] == "text").sum())
    sent = _log(facts, "server", "sent")
    deltas = ev[ev["type"] == "response.audio.delta"]
    assert len(deltas) == sum(1 for r in sent if r["type"] == "response.audio.delta")
    assert deltas["audio_bytes"].tolist() == [r["audio_bytes"] for r in sent
                                              if r["type"] == "response.audio.delta"]
    assert (deltas["audio_field"] == "delta").all()
    mic = ev[ev["type"] == "input_audio_buffer.append"]
    client_sent = _log(facts, "client", "sent")
    assert mic["audio_bytes"].tolist() == [r["audio_bytes"] for r in client_sent
                                           if r["type"] == "input_audio_buffer.append"]
    text = ev[ev["type"] == "response.audio_transcript.delta"]
    assert text["text_chars"].tolist() == [r["chars"] for r in sent
                                           if r["type"] == "response.audio_transcript.delta"]
    upd = json.loads(ev[ev["type"] == "session.update"]["fields"].iloc[0])
    assert upd["session.audio.input.format.rate"] == 16000
    assert upd["session.input_audio_format"] == "pcm16"
    assert "session.instructions" not in upd  # longer than MAX_FIELD_CHARS: not kept


# --------------------------------------------------------------------------- turns

def test_turns_match_the_client_log(turns: pd.DataFrame, facts: dict[str, Any]) -> None:
    rt.TURNS.check(turns)
    logged = facts["truth"]["turns"]
    assert turns["response_id"].tolist() == [t["response_id"] for t in logged]
    assert turns["tcp_stream"].tolist() == [0, 0, 4]
    assert (turns["request_type"] == "response.create").all()
    assert (turns["first_event_type"] == "response.created").all()
    for (_, row), t in zip(turns.iterrows(), logged, strict=True):
        # the capture was made at the client: the apps' times are within 5 ms
        assert abs(row["time_to_first_audio_ms"] - t["time_to_first_audio_ms"]) < 5
        assert abs(row["request_ts"].value - t["response_create_ns"]) < 5e6
        assert abs(row["first_audio_ts"].value - t["first_audio_ns"]) < 5e6
        assert row["audio_chunks"] == t["audio_chunks"]
        assert row["audio_bytes"] == t["audio_bytes"]
        assert row["audio_ms"] == pytest.approx(t["audio_ms"])
        assert row["transcript_chars"] == t["transcript_chars"]
    # and the same frames and times as tshark (its websocket.payload.text, decrypted)
    for (_, row), w in zip(turns.iterrows(), facts["truth"]["tshark_turns"], strict=True):
        assert (row["request_frame"], row["first_audio_frame"]) == (
            w["create_frame"], w["first_audio_frame"])
        assert row["time_to_first_audio_ms"] == pytest.approx(w["time_to_first_audio_ms"],
                                                              abs=0.001)
        assert row["audio_chunks"] == w["audio_chunks"]
    assert turns["audio_format"].tolist() == ["pcm16"] * 3
    assert turns["sample_rate_hz"].tolist() == [24000] * 3
    assert turns["status"].tolist() == ["completed"] * 3
    assert turns["end_reason"].tolist() == ["done"] * 3


def test_generic_mode_reads_another_type_field(cap: Capture, turns: pd.DataFrame) -> None:
    """An API naming its events with ``event`` (no top-level type): the same turns."""
    ev = cap.realtime_events.copy()
    ev["fields"] = [json.dumps({("event" if k == "type" else k): v
                                for k, v in json.loads(f).items()}) for f in ev["fields"]]
    ev["type"] = pd.Series([None] * len(ev), dtype="string")
    other = Capture(cap.summary, {**cap.tables, "realtime_events": ev})
    got = rt.turns(other, type_field="event")
    pd.testing.assert_frame_equal(got, turns)
    assert rt.turns(other).empty  # the default (type) finds no event names


# --------------------------------------------------------------------------- cadence

def test_underruns_match_the_client_playout(cadence: pd.DataFrame,
                                            facts: dict[str, Any]) -> None:
    rt.CADENCE.check(cadence)
    audio = cadence[cadence["kind"] == "audio"]
    logged = facts["truth"]["turns"]
    assert audio["chunks"].tolist() == [t["audio_chunks"] for t in logged]
    assert audio["underruns"].tolist() == [t["underruns"] for t in logged] == [0, 1, 0]
    for got, t in zip(audio["underrun_ms"], logged, strict=True):
        assert abs(got - t["underrun_ms"]) < 100
    assert (audio["buffer_ms"] == rt.DEFAULT_BUFFER_MS).all()
    # response 2 has the scripted 700 ms gap before chunk 9 and +-30 ms jitter
    r2 = audio.iloc[1]
    assert r2["interarrival_max_ms"] > 700 and r2["late_chunks"] > 0
    assert r2["first_underrun_frame"] == r2["max_gap_frame"]


def test_microphone_audio_per_turn(cadence: pd.DataFrame, facts: dict[str, Any]) -> None:
    mic = cadence[cadence["kind"] == "mic"]
    sent = _log(facts, "client", "sent")
    per_turn = [sum(1 for r in sent if r.get("turn") == n and r["type"] in
                    ("input_audio_buffer.append", "binary audio")) for n in (1, 2, 3)]
    assert mic["chunks"].tolist() == per_turn == [20, 20, 15]
    # 40 ms chunks at 16 kHz (session.update's audio.input.format.rate); turn 3 is binary
    assert mic["media_ms"].tolist() == pytest.approx([800.0, 800.0, 600.0])
    assert mic["nominal_ms"].tolist() == pytest.approx([40.0] * 3)
    assert (mic["direction"] == "client_to_server").all()


def test_sse_token_streams_get_the_same_view() -> None:
    cap = pcaptools.load(CAPTURES / "h2-sse-chat.pcapng",
                         keylog=CAPTURES / "h2-sse-chat.keys", packets=False)
    facts = json.loads((CAPTURES / "h2-sse-chat.pcapng.facts.json").read_text())
    c = rt.audio_cadence(cap)
    sse = c[c["kind"] == "sse"]
    assert len(sse) and sse["media_ms"].isna().all()
    ev = cap.sse_events
    for conn in facts["connections"]:
        for req in conn.get("requests", []):
            if not req.get("sse_events_received"):
                continue
            row = sse[sse["stream_id"] == req["h2_stream_id"]]
            assert len(row) == 1
            done = int(ev[(ev["stream_id"] == req["h2_stream_id"]) & ev["done"]].shape[0])
            assert row["chunks"].iloc[0] + done == req["sse_events_received"]
            assert abs(row["interarrival_p50_ms"].iloc[0] - req["plan"]["every_ms"]) < 10


def test_cadence_rules_on_known_arrivals() -> None:
    ms = 1_000_000
    paced = rt.cadence_stats([i * 100 * ms for i in range(10)], [100.0] * 10)
    assert paced["jitter_ms"] == 0 and paced["late_chunks"] == 0 and paced["underruns"] == 0
    # chunk 5 arrives 450 ms late: with 200 ms of buffer, playback stalls for 250 ms
    arr = [i * 100 * ms + (450 * ms if i >= 5 else 0) for i in range(10)]
    s = rt.cadence_stats(arr, [100.0] * 10, buffer_ms=200)
    assert s["underruns"] == 1 and s["underrun_ms"] == pytest.approx(250.0)
    assert s["first_underrun_index"] == 5 and s["max_gap_index"] == 5
    assert s["late_chunks"] == 5
    # RFC 3550: J += (|D| - J) / 16 with one transit jump of 450 ms
    assert s["jitter_ms"] == pytest.approx(450 / 16 * (15 / 16) ** 4)
    # a bigger buffer absorbs it
    assert rt.cadence_stats(arr, [100.0] * 10, buffer_ms=500)["underruns"] == 0
    # no media clock (SSE): the median inter-arrival is the nominal cadence
    sse = rt.cadence_stats([0, 40 * ms, 80 * ms, 400 * ms], None, buffer_ms=0)
    assert sse["nominal_ms"] == 40 and sse["underruns"] == 1
    assert sse["underrun_ms"] == pytest.approx(400 - 120)
    empty = rt.cadence_stats([], None)
    assert empty["chunks"] == 0 and math.isnan(empty["jitter_ms"])


# --------------------------------------------------------------------------- reconnects

def test_reconnect_storm_matches_the_client_log(cap: Capture, facts: dict[str, Any]) -> None:
    storms = rt.reconnect_storms(cap)
    attempts = rt.reconnect_attempts(cap)
    rt.RECONNECT_STORMS.check(storms)
    rt.RECONNECT_ATTEMPTS.check(attempts)
    assert len(storms) == 1
    s = storms.iloc[0]
    logged = facts["truth"]["connect_attempts"][1:]  # attempt 1 is the first connection
    assert s["attempts"] == len(logged) == 4
    assert s["failed_attempts"] == len(facts["truth"]["connect_failed"]) == 3
    assert s["previous_tcp_stream"] == 0 and s["previous_verdict"] == "peer_vanished"
    assert s["outcome"] == "connected" and s["connected_tcp_stream"] == 4
    assert s["syn_retransmissions"] == 3  # one SYN retransmission per failed attempt
    want = np.diff([a["t_ns"] for a in logged]) / 1e6
    got = attempts["interval_ms"].iloc[1:].to_numpy()
    assert np.abs(got - want).max() < 100
    assert s["backoff_ratio"] == pytest.approx(2.0, abs=0.1)
    assert attempts["outcome"].astype(str).tolist() == ["no_answer"] * 3 + ["connected"]
    assert attempts["client"].tolist() == [f"192.0.2.10:{51002 + i}" for i in range(4)]
    for (_, a), lg in zip(attempts.iterrows(), logged, strict=True):
        assert abs(a["ts"].value - lg["t_ns"]) < 100e6
    # the client's view of the dead connection: declared dead, then the first attempt
    dead = facts["truth"]["dead"]["t_ns"]
    assert abs(s["first_attempt_ts"].value - dead) < 100e6
    assert s["detect_ms"] > 0 and s["down_ms"] > s["detect_ms"] + sum(want)


def test_no_storm_without_a_second_connection(idle_cap: Capture) -> None:
    assert rt.reconnect_storms(idle_cap).empty and rt.reconnect_attempts(idle_cap).empty


# --------------------------------------------------------------------------- heartbeats

def test_heartbeat_audit_of_the_voice_session(cap: Capture, facts: dict[str, Any]) -> None:
    a = rt.heartbeat_audit(cap)
    rt.HEARTBEAT_AUDIT.check(a)
    assert a["tcp_stream"].tolist() == [0, 4]
    pings = [r["t_ns"] for r in _log(facts, "client", "ping sent")]
    first = [t for t in pings if t < facts["truth"]["dead"]["t_ns"]]
    row = a.iloc[0]
    assert row["client_pings"] == len(first)
    assert abs(row["client_ping_interval_ms"] - float(np.median(np.diff(first))) / 1e6) < 100
    assert row["unanswered_pings"] == 1  # the ping into the black hole
    assert row["verdict"] == "peer_vanished" and not row["died_idle"]
    assert bool(row["survives_nat_30s"]) and bool(row["survives_aws_alb_60s"])
    assert row["longest_idle_ms"] <= row["longest_payload_silence_ms"] + 1e-6
    assert (a["protocol"] == "websocket").all()


def test_a_connection_that_died_idle(idle_cap: Capture) -> None:
    cap = idle_cap
    facts = json.loads((CAPTURES / "ws-idle-reset.pcap.facts.json").read_text())
    assert not rt.heartbeat_audit(cap).iloc[0]["died_idle"]  # 6 s < the 30 s default
    row = rt.heartbeat_audit(cap, idle_gap_s=5).iloc[0]
    assert row["died_idle"] and row["verdict"] == "idle_then_reset"
    assert abs(row["fatal_idle_ms"] - facts["truth"]["idle"]["gap_on_wire_s"] * 1000) < 100
    # it never survived a silence of a second or more: only the upper bound is known
    assert math.isnan(row["keepalive_interval_ms"])
    assert row["client_pings"] == 0 and row["server_pings"] == 0


def test_audit_without_the_packets_table_says_unknown(idle_cap: Capture) -> None:
    cap = Capture(idle_cap.summary, {**idle_cap.tables, "packets": PACKETS.frame([])})
    row = rt.heartbeat_audit(cap).iloc[0]
    assert math.isnan(row["client_longest_silence_ms"])
    assert pd.isna(row["survives_aws_alb_60s"]) and not pd.isna(row["survives_nat_30s"])


# --------------------------------------------------------------------------- summaries

def test_event_summary_rules() -> None:
    assert base64_size("AAAA") == 3 and base64_size("AAA=") == 2 and base64_size("AA==") == 1
    assert base64_size("AAA") is None and base64_size("A-_A") is None and base64_size("") is None
    audio = "A" * 400
    typ, eid, rid, iid, field, nbytes, chars, fields = summarise_event(
        {"type": "response.output_audio.delta", "event_id": "e1",
         "response": {"id": "r9"}, "item": {"id": "i3"}, "delta": audio,
         "client_secret": {"value": "sk-live-abc"}, "api_key": "k" * 10})
    assert (typ, eid, rid, iid, field, nbytes, chars) == (
        "response.output_audio.delta", "e1", "r9", "i3", "delta", 300, None)
    f = json.loads(fields)
    assert "delta" not in f and f["client_secret.value"].startswith("<redacted")
    assert f["api_key"].startswith("<redacted")
    _, _, _, _, field, nbytes, chars, _ = summarise_event(
        {"type": "response.audio_transcript.delta", "delta": "Okay"})
    # a short text delta that happens to be base64: its length is still the text
    assert chars == 4
    shown = json.loads(summarise_event({"token": "abc"}, show_secrets=True)[7])
    assert shown == {"token": "abc"}


def test_session_formats() -> None:
    fmt = rt.session_audio_format({"session.output_audio_format": "g711_ulaw"}, "output",
                          rt.DEFAULT_OUTPUT_FORMAT)
    assert (fmt.name, fmt.rate_hz, fmt.sample_bytes) == ("g711_ulaw", 8000, 1)
    ga = rt.session_audio_format({"session.audio.output.format.type": "audio/pcm",
                          "session.audio.output.format.rate": 16000}, "output",
                         rt.DEFAULT_OUTPUT_FORMAT)
    assert (ga.name, ga.rate_hz) == ("pcm16", 16000)
    opus = rt.session_audio_format({"session.output_audio_format": "opus"}, "output",
                           rt.DEFAULT_OUTPUT_FORMAT)
    assert opus.bytes_per_second is None  # unknown: durations are NaN, not a guess


def test_an_error_answers_the_request(cap: Capture) -> None:
    """A request answered by an ``error`` event (no response.created): a turn of its own."""
    ev = cap.realtime_events
    first = ev[ev["type"] == "response.created"].index[0]
    keep = ev[(ev["tcp_stream"] != 0) | (ev.index < first)].copy()  # conn 0 stops there
    err = keep[keep["tcp_stream"] == 0].iloc[[-1]].copy()
    err["type"] = pd.Series(["error"], dtype="string", index=err.index)
    err["fields"] = json.dumps({"type": "error", "error.type": "invalid_request_error",
                                "error.code": "session_expired"})
    err["frame"] = int(ev.loc[first, "frame"])
    err["ts"] = ev.loc[first, "ts"]
    err["direction"] = pd.Categorical(["server_to_client"],
                                      categories=ev["direction"].cat.categories)
    both = pd.concat([keep, err]).sort_values("frame", kind="stable")
    t = rt.turns(Capture(cap.summary, {**cap.tables, "realtime_events": both}))
    e = t[t["tcp_stream"] == 0].iloc[0]
    assert e["end_reason"] == "error" and e["errors"] == 1
    assert e["error_code"] == "session_expired" and e["request_type"] == "response.create"
    assert e["audio_chunks"] == 0 and math.isnan(e["time_to_first_audio_ms"])
    assert t[t["tcp_stream"] == 4]["errors"].tolist() == [0]


def test_fields_stay_small() -> None:
    obj = {f"k{i}": "v" * 100 for i in range(200)}
    f = json.loads(summarise_event(obj)[7])
    assert 0 < len(f) <= MAX_FIELDS and len(json.dumps(f)) <= MAX_FIELDS_CHARS + 200
    deep: dict[str, Any] = {"type": "x"}
    node = deep
    for _ in range(50):
        node["n"] = {"v": 1}
        node = node["n"]
    assert max(k.count(".") for k in json.loads(summarise_event(deep)[7])) < 6


def test_microphone_audio_of_no_response_is_still_counted(cap: Capture) -> None:
    ev = cap.realtime_events
    server4 = (ev["tcp_stream"] == 4) & (ev["direction"] == "server_to_client")
    other = Capture(cap.summary, {**cap.tables, "realtime_events": ev[~server4]})
    assert rt.turns(other)["tcp_stream"].tolist() == [0, 0]
    c = rt.audio_cadence(other)
    mic4 = c[(c["kind"] == "mic") & (c["tcp_stream"] == 4)]
    assert len(mic4) == 1 and pd.isna(mic4["response_index"].iloc[0])
    assert mic4["chunks"].iloc[0] == 15 and mic4["media_ms"].iloc[0] == pytest.approx(600)
