"""Realtime voice sessions: turns, audio cadence, reconnect storms and a heartbeat audit.

Pure functions of a Capture's tables (``realtime_events``, ``ws_messages``, ``sse_events``,
``connections``, ``tcp_handshakes``, ``tls_handshakes``, ``packets``, the heartbeats and the
disconnect verdicts); each returns one documented table (``docs/tables.md``)::

    from pcaptools.analyses.realtime import turns, audio_cadence, reconnect_storms
    turns(cap)                  # one row per response: time to first audio, chunks, duration
    audio_cadence(cap)          # per response and direction: jitter, late chunks, underruns
    reconnect_storms(cap)       # series of connection attempts after a failure
    reconnect_attempts(cap)     # the attempts of those storms, one row each
    heartbeat_audit(cap)        # ping interval, pong latency, silences vs idle timeouts

**Events.** The realtime events are the rows of ``realtime_events`` (WebSocket text
messages that are JSON objects). :data:`OPENAI_REALTIME` names the events of the OpenAI
Realtime API (beta and GA names); any other API shaped the same way (a member naming the
event, base64 audio in a member) is read with an :class:`EventNames` of its own and, when its
events are not named by a top-level ``type``, ``type_field`` (a dotted path into
``realtime_events.fields``, e.g. ``"event"`` or ``"header.name"``): the generic mode. Binary
WebSocket messages are audio too (``binary_audio=True``): the server's are the response's
audio, the client's are microphone audio, in the session's input/output format.

**Turns** (:func:`turns`, :data:`TURNS`). Per WebSocket connection, in capture order: a
client event of ``names.request`` (``response.create``; ``input_audio_buffer.commit``,
``conversation.item.create``) is the pending request; a server event of ``names.start``
(``response.created``) opens a response and takes the pending request as the one that
asked for it; a server audio or text event with no open response opens one too (APIs
without a start event; ``start_frame`` is then NA). Server events carrying a
``response_id`` go to that response, others to the latest open one; ``names.end``
(``response.done``) closes it (``status`` is its ``response.status``). ``names.error``
(``error``) events are counted on the open response; with none open, an error answers the
pending request as a response of its own (``end_reason`` error). Time to first audio
is the first audio chunk's packet time minus the request's packet time (NaN when no request
was seen: the capture started later, or the server responded on its own, e.g. server-side
voice activity detection; then ``first_audio_ms`` from the start event still says something).
Both times are taken where the capture was made: at the client they are what the client
experienced, give or take its own scheduling.

**Audio size and duration.** Audio bytes are the decoded size of the base64 member
(``realtime_events.audio_bytes``) or a binary message's payload. The duration needs the
format: pcm16 at 24 kHz (the Realtime default) unless the session says otherwise: a
``session.update`` (client) or ``session.created`` / ``session.updated`` (server) with
``input_audio_format`` / ``output_audio_format`` (``pcm16``: 16-bit at 24 kHz;
``g711_ulaw`` / ``g711_alaw``: 8-bit at 8 kHz) or the GA ``audio.input.format`` /
``audio.output.format`` (``type`` audio/pcm with ``rate``, audio/pcmu, audio/pcma), the
latest one before the chunk (an explicit ``rate`` wins over the format name). A format
pcaptools does not know (opus...) gives NaN durations, never a guess.

**Cadence** (:func:`audio_cadence`, :data:`CADENCE`). For each response's audio (server to
client), each turn's microphone audio (client to server: the chunks sent since the previous
request, attributed to the response that request started; chunks no request took along, e.g.
with server-side turn detection, make a row of their own with response_index NA), and each
SSE token stream (one
row per HTTP request whose response was text/event-stream, so both kinds compare): the
chunks' packet times ``R_i`` and media times ``S_i`` (the audio before chunk i; for SSE,
where no media clock exists, ``i`` times the median inter-arrival, the stream's own nominal
cadence). Then:

- inter-arrival statistics (mean, median, 95th percentile, max);
- ``jitter_ms``: RFC 3550 §6.4.1 interarrival jitter, ``J += (|D(i-1,i)| - J) / 16`` with
  ``D = (R_i - R_{i-1}) - (S_i - S_{i-1})``, its value after the last chunk. A sender that
  bursts faster than real time has a large jitter by this definition;
- ``late_chunks``: chunks whose transit ``R_i - S_i`` exceeds the smallest transit so far by
  more than ``late_ms`` (default 20 ms): later than a real-time sender would have made them;
- playout-buffer underruns for a buffer of ``buffer_ms`` (default 200 ms): playback starts
  ``buffer_ms`` after the first chunk arrives and plays the chunks back to back; a chunk that
  arrives after its playback time stalls playback until it arrives (one underrun; the stall
  is its length) and playback goes on from there without rebuffering.

**Reconnect storms** (:func:`reconnect_storms`, :func:`reconnect_attempts`). Connections
from the same client address to the same server address and port, in the order of their
first packet. A storm is the run of connection attempts that follows a failure: a
connection that ended badly (a :func:`~pcaptools.analyses.disconnects` verdict) or an attempt
that never connected (SYN unanswered or refused, or a TCP connection whose TLS handshake did
not complete), each attempt starting at most ``max_gap_s`` (default 300 s) after the
previous one (or after the failed connection's last packet), up to and including the first
attempt that connected (TCP handshake completed and, on TLS, the handshake too:
``outcome`` connected) or to the end of the capture (``gave_up_or_eof``). Attempts that
never connected count their SYNs (``syn_count``: the retransmissions are the backoff of
TCP itself, 1 s, 2 s... on Linux). ``intervals_ms`` are start to start (SYN to SYN); the
``backoff_ratio`` is the median of the ratios of consecutive intervals (about 2 for
exponential backoff, 1 for a fixed delay). ``down_ms`` is the time without a usable
connection: from the last packet the server sent on the failed connection before the first
attempt (the last sign of life; the attempt's SYN when there is no failed connection) to the
completion of the successful attempt's handshake (TLS Finished when TLS, else the TCP ACK).

**Heartbeat audit** (:func:`heartbeat_audit`, :data:`HEARTBEAT_AUDIT`). One row per TCP
connection that carried a WebSocket or HTTP/2, or any heartbeat (WebSocket Ping/Pong,
HTTP/2 PING, TCP keep-alive: :func:`~pcaptools.analyses.heartbeats.heartbeats`): the pings
each side sent and their median interval, pong latency, and the longest silence per
direction (the longest time a side sent no packet carrying TCP payload, pings included;
from the ``packets`` table: NaN with ``load(packets=False)``) and with no packet at all
either way (``connections.max_idle_ms``). ``survives_*`` compares them with the idle timeouts
of :data:`IDLE_TIMEOUTS`. A connection that died idle (the ``idle_then_reset`` rule of
:func:`~pcaptools.analyses.disconnects` matched: a silence of at least ``idle_gap_s``, 30 s
by default, ended by a reset) gets ``fatal_idle_ms`` (the silence: the path's timeout is at
most that) and ``keepalive_interval_ms``: the longest silence the connection survived
earlier (traffic went on after it), an interval the path is known to tolerate; a heartbeat
at least that often would have kept the connection alive. NaN when it never survived a
silence of a second or more: then only the upper bound is known.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..tables.schema import TS_DTYPE, Column, TableSchema
from .disconnects import disconnects
from .heartbeats import heartbeats

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = [
    "CADENCE",
    "DEFAULT_BUFFER_MS",
    "DEFAULT_LATE_MS",
    "DEFAULT_OUTPUT_FORMAT",
    "HEARTBEAT_AUDIT",
    "IDLE_TIMEOUTS",
    "OPENAI_REALTIME",
    "RECONNECT_ATTEMPTS",
    "RECONNECT_STORMS",
    "TURNS",
    "AudioFormat",
    "EventNames",
    "IdleTimeout",
    "audio_cadence",
    "cadence_stats",
    "heartbeat_audit",
    "playout_stalls",
    "reconnect_attempts",
    "reconnect_storms",
    "session_audio_format",
    "turns",
]

DEFAULT_BUFFER_MS = 200.0
"""playout buffer of the underrun count (``audio_cadence(buffer_ms=...)``)"""
DEFAULT_LATE_MS = 20.0
"""a chunk later than the best transit so far by more than this is late"""


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """An uncompressed audio format: how many bytes make a second."""

    name: str
    """pcm16, g711_ulaw, g711_alaw"""
    rate_hz: int | None
    """samples per second (None: unknown: durations are NaN)"""
    sample_bytes: int
    """bytes per sample (mono)"""

    @property
    def bytes_per_second(self) -> int | None:
        return self.rate_hz * self.sample_bytes if self.rate_hz else None


DEFAULT_OUTPUT_FORMAT = AudioFormat("pcm16", 24000, 2)
"""the OpenAI Realtime default for both directions"""
_NAMED_FORMATS = {
    "pcm16": AudioFormat("pcm16", 24000, 2),
    "g711_ulaw": AudioFormat("g711_ulaw", 8000, 1),
    "g711_alaw": AudioFormat("g711_alaw", 8000, 1),
    "audio/pcm": AudioFormat("pcm16", 24000, 2),
    "audio/pcmu": AudioFormat("g711_ulaw", 8000, 1),
    "audio/pcma": AudioFormat("g711_alaw", 8000, 1),
}


@dataclass(frozen=True, slots=True)
class EventNames:
    """The event names of a realtime API, by role (the generic mode: make your own)."""

    request: frozenset[str]
    """client events that ask for a response"""
    start: frozenset[str]
    """server events that open a response"""
    audio: frozenset[str]
    """server events carrying response audio (base64)"""
    text: frozenset[str]
    """server events carrying transcript / text deltas"""
    end: frozenset[str]
    """server events that close a response"""
    mic: frozenset[str]
    """client events carrying microphone audio (base64)"""
    session: frozenset[str] = field(default_factory=frozenset)
    """events that set the session's audio formats (both directions)"""
    error: frozenset[str] = field(default_factory=frozenset)
    """server events reporting an error (counted on the open response; with none open, they
    answer the pending request as a response of their own, end_reason error)"""


OPENAI_REALTIME = EventNames(
    request=frozenset({"response.create", "input_audio_buffer.commit",
                       "conversation.item.create"}),
    start=frozenset({"response.created"}),
    audio=frozenset({"response.audio.delta", "response.output_audio.delta"}),
    text=frozenset({"response.audio_transcript.delta", "response.output_audio_transcript.delta",
                    "response.text.delta", "response.output_text.delta"}),
    end=frozenset({"response.done"}),
    mic=frozenset({"input_audio_buffer.append"}),
    session=frozenset({"session.update", "session.created", "session.updated"}),
    error=frozenset({"error"}),
)
"""OpenAI Realtime (beta and GA event names)"""

_C2S, _S2C = "client_to_server", "server_to_client"

_KEY = (
    Column("tcp_stream", "int64", None, "Wireshark tcp.stream of the WebSocket connection"),
    Column("stream_id", "Int64", None, "HTTP/2 stream of the WebSocket (RFC 8441); NA over "
                                       "HTTP/1.1"),
)

TURNS = TableSchema(
    name="realtime_turns",
    grain="one row per realtime response (pcaptools.analyses.realtime.turns(cap)): the "
          "request that asked for it, its first event and first audio, its audio and text",
    key=("tcp_stream", "stream_id", "response_index"),
    columns=(
        *_KEY,
        Column("response_index", "int64", None, "0-based number of the response on the "
                                                "connection"),
        Column("response_id", "string", None, "the response's id (response_id / response.id); "
                                              "NA when the events carry none"),
        Column("request_type", "string", None,
               "the client event that asked for it (the last request event before the "
               "response started); NA when none was seen"),
        Column("request_frame", "Int64", None, "packet that completed the request event"),
        Column("request_ts", TS_DTYPE, None, "time of request_frame"),
        Column("start_frame", "Int64", None, "packet of the start event (response.created); "
                                             "NA for APIs without one"),
        Column("first_event_type", "string", None,
               "the server's first event of the response (its start event, or its first "
               "audio/text event)"),
        Column("first_event_frame", "int64", None, "packet that completed that event"),
        Column("first_event_ts", TS_DTYPE, None, "time of first_event_frame"),
        Column("first_event_ms", "float64", "ms", "first_event_ts minus request_ts"),
        Column("first_audio_frame", "Int64", None, "packet of the first audio chunk"),
        Column("first_audio_ts", TS_DTYPE, None, "time of first_audio_frame"),
        Column("time_to_first_audio_ms", "float64", "ms",
               "first_audio_ts minus request_ts; NaN without a request or without audio"),
        Column("first_audio_ms", "float64", "ms", "first_audio_ts minus first_event_ts"),
        Column("audio_chunks", "int64", "chunks", "audio events (or binary messages) of the "
                                                  "response"),
        Column("audio_bytes", "int64", "bytes", "decoded audio bytes of those chunks"),
        Column("audio_format", "string", None,
               "the session's output format at the first chunk (pcm16, g711_ulaw, "
               "g711_alaw; NA when unknown)"),
        Column("sample_rate_hz", "Int64", "Hz", "its sample rate"),
        Column("audio_ms", "float64", "ms",
               "audio duration: audio_bytes over the format's bytes per second; NaN when the "
               "format is unknown"),
        Column("transcript_chars", "int64", "chars", "characters of the text/transcript "
                                                     "deltas"),
        Column("text_events", "int64", "events", "text/transcript delta events"),
        Column("end_type", "string", None, "the event that ended it (response.done); NA when "
                                           "none"),
        Column("end_frame", "Int64", None, "packet of the end event, else of the response's "
                                           "last event"),
        Column("end_ts", TS_DTYPE, None, "time of end_frame"),
        Column("duration_ms", "float64", "ms", "end_ts minus request_ts (else first_event_ts)"),
        Column("status", "string", None,
               "response.status of the end event (completed, cancelled, failed, incomplete); "
               "NA when not said"),
        Column("errors", "int64", "events", "error events during the response"),
        Column("error_code", "string", None,
               "error.code (else error.type) of its first error event; NA when none"),
        Column("end_reason", "category", None,
               "done (end event), error (an error event answered the request and no "
               "response started), superseded (another response started first), "
               "connection_ended (the WebSocket ended first), open_at_eof"),
    ),
)

CADENCE = TableSchema(
    name="realtime_cadence",
    grain="one row per audio stream of a response and direction, and per SSE token stream "
          "(pcaptools.analyses.realtime.audio_cadence(cap))",
    key=("kind", "tcp_stream", "stream_id", "direction", "response_index"),
    columns=(
        Column("kind", "category", None,
               "audio (realtime response audio, server_to_client), mic (microphone audio of "
               "the turn, client_to_server), sse (an SSE token stream)"),
        *_KEY,
        Column("direction", "category", None, "client_to_server or server_to_client"),
        Column("response_index", "Int64", None,
               "audio and mic: realtime_turns.response_index (mic: NA for microphone audio "
               "no request took along: server-side turn detection, or the capture ended "
               "first); sse: sse_events.request_index"),
        Column("response_id", "string", None, "audio and mic: the response's id"),
        Column("chunks", "int64", "chunks", "audio chunks or SSE events"),
        Column("first_frame", "int64", None, "packet of the first chunk"),
        Column("first_ts", TS_DTYPE, None, "time of first_frame"),
        Column("last_ts", TS_DTYPE, None, "time of the last chunk"),
        Column("span_ms", "float64", "ms", "last_ts minus first_ts"),
        Column("media_ms", "float64", "ms",
               "audio duration of the chunks (NaN for sse and unknown formats)"),
        Column("nominal_ms", "float64", "ms",
               "media time per chunk the cadence is judged by: the mean audio duration of a "
               "chunk, or (sse) the median inter-arrival"),
        Column("interarrival_mean_ms", "float64", "ms", "mean gap between chunks"),
        Column("interarrival_p50_ms", "float64", "ms", "median gap"),
        Column("interarrival_p95_ms", "float64", "ms", "95th percentile gap (linear)"),
        Column("interarrival_max_ms", "float64", "ms", "largest gap"),
        Column("max_gap_frame", "Int64", None, "packet of the chunk that ended the largest gap"),
        Column("jitter_ms", "float64", "ms", "RFC 3550 interarrival jitter after the last chunk"),
        Column("late_ms", "float64", "ms", "the late threshold used"),
        Column("late_chunks", "int64", "chunks",
               "chunks later than the best transit so far by more than late_ms"),
        Column("buffer_ms", "float64", "ms", "the playout buffer used"),
        Column("underruns", "int64", "stalls",
               "playback stalls with that buffer (NaN-free: 0 when none; sse: by the nominal "
               "cadence)"),
        Column("underrun_ms", "float64", "ms", "total stall time"),
        Column("first_underrun_frame", "Int64", None, "packet of the chunk that ended the "
                                                      "first stall"),
    ),
)

RECONNECT_ATTEMPTS = TableSchema(
    name="reconnect_attempts",
    grain="one row per connection attempt of a reconnect storm "
          "(pcaptools.analyses.realtime.reconnect_attempts(cap))",
    key=("storm", "attempt"),
    columns=(
        Column("storm", "int64", None, "reconnect_storms.storm"),
        Column("attempt", "int64", None, "1-based number of the attempt in its storm"),
        Column("tcp_stream", "int64", None, "Wireshark tcp.stream of the attempt"),
        Column("client", "string", None, "client address:port"),
        Column("server", "string", None, "server address:port"),
        Column("frame", "int64", None, "first packet of the attempt (its SYN)"),
        Column("ts", TS_DTYPE, None, "time of frame"),
        Column("interval_ms", "float64", "ms", "ts minus the previous attempt's ts (start to "
                                               "start); NaN for the first"),
        Column("syn_count", "int64", "packets", "SYNs sent (1 + SYN retransmissions)"),
        Column("outcome", "category", None,
               "no_answer (SYNs unanswered), refused (RST), tls_failed (TCP connected, the "
               "TLS handshake did not complete), connected"),
        Column("connected_ts", TS_DTYPE, None,
               "connected: completion of the handshake (TLS client Finished, else TCP ACK)"),
    ),
)

RECONNECT_STORMS = TableSchema(
    name="reconnect_storms",
    grain="one row per reconnect storm: the connection attempts from one client to one "
          "server after a failure (pcaptools.analyses.realtime.reconnect_storms(cap))",
    key=("storm",),
    columns=(
        Column("storm", "int64", None, "0-based number of the storm"),
        Column("client_addr", "string", None, "client IP address"),
        Column("server", "string", None, "server address:port"),
        Column("previous_tcp_stream", "Int64", None,
               "the failed connection the storm followed; NA when it began with failed "
               "attempts"),
        Column("previous_verdict", "string", None,
               "its disconnects() verdict (what ended it)"),
        Column("previous_last_server_ts", TS_DTYPE, None,
               "the server's last packet on it before the first attempt"),
        Column("attempts", "int64", "connections", "attempts, the successful one included"),
        Column("failed_attempts", "int64", "connections", "attempts that never connected"),
        Column("syn_retransmissions", "int64", "packets", "SYNs beyond the first, over all "
                                                          "attempts"),
        Column("first_attempt_ts", TS_DTYPE, None, "SYN of the first attempt"),
        Column("detect_ms", "float64", "ms",
               "first_attempt_ts minus previous_last_server_ts: how long the client took to "
               "give up on the failed connection"),
        Column("intervals_ms", "string", None, "start-to-start intervals, comma-separated"),
        Column("first_interval_ms", "float64", "ms", "the first of them"),
        Column("max_interval_ms", "float64", "ms", "the largest"),
        Column("backoff_ratio", "float64", None,
               "median ratio of consecutive intervals (2: exponential backoff, 1: fixed); NaN "
               "with fewer than two intervals"),
        Column("outcome", "category", None, "connected, gave_up_or_eof"),
        Column("connected_tcp_stream", "Int64", None, "the attempt that connected"),
        Column("connected_ts", TS_DTYPE, None, "when its handshake completed"),
        Column("down_ms", "float64", "ms",
               "connected_ts minus previous_last_server_ts (else the first attempt): time "
               "without a usable connection; NaN when none connected"),
    ),
)


@dataclass(frozen=True, slots=True)
class IdleTimeout:
    """An idle timeout a long-lived connection has to survive."""

    name: str
    """column suffix"""
    seconds: float
    what: str
    """which silence it counts: any (no packet either way), payload (no data either way),
    server_payload (no data from the server: an upstream read timeout)"""
    doc: str


IDLE_TIMEOUTS: tuple[IdleTimeout, ...] = (
    IdleTimeout("nat_30s", 30, "any",
                "NAT / stateful firewall mapping dropped after 30 s without a packet (short "
                "UDP-style and carrier-grade NAT timers; many home routers keep TCP longer)"),
    IdleTimeout("aws_alb_60s", 60, "payload",
                "AWS Application Load Balancer idle_timeout default: 60 s without data either "
                "way (TCP keep-alives do not count)"),
    IdleTimeout("nginx_proxy_read_60s", 60, "server_payload",
                "nginx proxy_read_timeout default: 60 s between two reads from the upstream "
                "(the server here)"),
)
"""the idle timeouts of :func:`heartbeat_audit`, one ``survives_<name>`` column each"""

HEARTBEAT_AUDIT = TableSchema(
    name="heartbeat_audit",
    grain="one row per TCP connection with a WebSocket, HTTP/2 or heartbeats "
          "(pcaptools.analyses.realtime.heartbeat_audit(cap))",
    key=("tcp_stream",),
    columns=(
        Column("tcp_stream", "int64", None, "Wireshark tcp.stream"),
        Column("protocol", "category", None, "websocket, http2 or tcp"),
        Column("duration_ms", "float64", "ms", "connections.duration_ms"),
        Column("client_pings", "int64", "pings", "heartbeats the client sent (any mechanism)"),
        Column("server_pings", "int64", "pings", "heartbeats the server sent"),
        Column("client_ping_interval_ms", "float64", "ms", "median interval of the client's"),
        Column("server_ping_interval_ms", "float64", "ms", "median interval of the server's"),
        Column("pong_latency_p50_ms", "float64", "ms", "median ping-to-pong time"),
        Column("pong_latency_max_ms", "float64", "ms", "largest ping-to-pong time"),
        Column("unanswered_pings", "int64", "pings", "heartbeats with outcome unanswered"),
        Column("client_longest_silence_ms", "float64", "ms",
               "longest time the client sent no packet with TCP payload (from its first to "
               "its last such packet, or to the end of the connection); NaN without the "
               "packets table"),
        Column("server_longest_silence_ms", "float64", "ms", "same for the server"),
        Column("longest_payload_silence_ms", "float64", "ms",
               "longest time without payload either way; NaN without the packets table"),
        Column("longest_idle_ms", "float64", "ms",
               "longest time without any packet either way (connections.max_idle_ms)"),
        *(Column(f"survives_{t.name}", "boolean", None,
                 f"{t.doc}: the relevant silence stayed under {t.seconds:g} s; NA when it "
                 "cannot be measured") for t in IDLE_TIMEOUTS),
        Column("verdict", "string", None, "disconnects() verdict; NA when it ended cleanly or "
                                          "is open"),
        Column("died_idle", "bool", None,
               "a silence of at least idle_gap_s (30 s by default) ended by a reset: the "
               "idle_then_reset rule of disconnects() matched"),
        Column("fatal_idle_ms", "float64", "ms",
               "died idle: the silence that killed it (the path's idle timeout is at most "
               "this)"),
        Column("keepalive_interval_ms", "float64", "ms",
               "died idle: the longest silence it survived before (an interval the path "
               "tolerates: a heartbeat at least that often would have kept it alive); NaN "
               "when it survived none of at least 1 s"),
    ),
)


# --------------------------------------------------------------------------- helpers

def _ns(s: pd.Series) -> np.ndarray:
    """datetime column -> int64 ns (NaT -> min int)."""
    return np.asarray(s.to_numpy(dtype="datetime64[ns]").astype(np.int64))


def _field(fields: str | None, path: str) -> Any:
    if not fields:
        return None
    try:
        return json.loads(fields).get(path)
    except ValueError:
        return None


def session_audio_format(fields: dict[str, Any], side: str, cur: AudioFormat) -> AudioFormat:
    """The audio format a session event (its ``realtime_events.fields``, parsed) sets for
    side ``input`` or ``output``; ``cur`` when it sets none (rules in the module docstring)."""
    fmt = cur
    for path in (f"{side}_audio_format", f"session.{side}_audio_format"):
        v = fields.get(path)
        if isinstance(v, str):
            fmt = _NAMED_FORMATS.get(v, AudioFormat(v, None, 2))
    for base in (f"audio.{side}.format", f"session.audio.{side}.format"):
        t = fields.get(f"{base}.type")
        rate = fields.get(f"{base}.rate")
        if isinstance(t, str):
            fmt = _NAMED_FORMATS.get(t, AudioFormat(t, None, 2))
        if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0:
            fmt = AudioFormat(fmt.name, int(rate), fmt.sample_bytes)
    return fmt


def _audio_ms(nbytes: int, fmt: AudioFormat) -> float:
    bps = fmt.bytes_per_second
    return nbytes * 1000.0 / bps if bps else math.nan


@dataclass(slots=True)
class _Resp:
    index: int
    rid: str | None
    request: tuple[str, int, int] | None  # (type, frame, ts)
    start_frame: int | None
    first: tuple[str, int, int]
    chunks: list[tuple[int, int, int]] = field(default_factory=list)  # (frame, ts, bytes)
    mic: list[tuple[int, int, int]] = field(default_factory=list)
    fmt: AudioFormat | None = None
    mic_fmt: AudioFormat | None = None
    text_chars: int = 0
    text_events: int = 0
    errors: int = 0
    error_code: str | None = None
    last: tuple[int, int] = (0, 0)
    end: tuple[str, int, int] | None = None
    status: str | None = None
    end_reason: str = "open_at_eof"


def _events(cap: Capture, type_field: str, binary_audio: bool) -> pd.DataFrame:
    """realtime events (and binary messages) of every connection, in capture order."""
    ev = cap.realtime_events
    cols = ["frame", "ts", "tcp_stream", "stream_id", "direction", "type", "response_id",
            "audio_bytes", "text_chars", "fields"]
    df = ev[ev["status"] == "ok"][cols].copy()
    df["direction"] = df["direction"].astype(str)
    df["binary"] = False
    if type_field != "type":
        df["type"] = [_str(_field(f, type_field)) for f in df["fields"]]
    if binary_audio:
        m = cap.ws_messages
        b = m[m["type"] == "binary"]
        if len(b):
            size = b["decompressed_bytes"].where(b["compressed"], b["payload_bytes"])
            bdf = pd.DataFrame({
                "frame": b["frame"], "ts": b["ts"], "tcp_stream": b["tcp_stream"],
                "stream_id": b["stream_id"], "direction": b["direction"].astype(str),
                "type": None, "response_id": None, "audio_bytes": size.astype("Int64"),
                "text_chars": pd.NA, "fields": None, "binary": True})
            df = pd.concat([df, bdf], ignore_index=True)
    return df.sort_values(["frame", "ts"], kind="stable").reset_index(drop=True)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _conn_ends(cap: Capture) -> dict[tuple[int, Any], int]:
    ws = cap.ws_connections
    out: dict[tuple[int, Any], int] = {}
    for t, s, r, e in zip(ws["tcp_stream"], ws["stream_id"], ws["end_reason"], ws["end_frame"],
                          strict=True):
        if str(r) != "open_at_eof":
            out[(int(t), None if pd.isna(s) else int(s))] = int(e)
    return out


def _responses(cap: Capture, names: EventNames, type_field: str, binary_audio: bool,
               default_format: AudioFormat
               ) -> dict[tuple[int, int | None], list[_Resp]]:
    df = _events(cap, type_field, binary_audio)
    ends = _conn_ends(cap)
    out: dict[tuple[int, int | None], list[_Resp]] = {}
    state: dict[tuple[int, int | None], dict[str, Any]] = {}
    ts_ns = _ns(df["ts"]) if len(df) else np.empty(0, np.int64)
    rows = zip(df["frame"].tolist(), ts_ns.tolist(), df["tcp_stream"].tolist(),
               df["stream_id"].tolist(), df["direction"].tolist(), df["type"].tolist(),
               df["response_id"].tolist(), df["audio_bytes"].tolist(),
               df["text_chars"].tolist(), df["fields"].tolist(), df["binary"].tolist(),
               strict=True)
    for frame, ts, tcp, sid, direction, typ, rid, abytes, tchars, fields, binary in rows:
        key = (int(tcp), None if sid is None or sid is pd.NA else int(sid))
        st = state.get(key)
        if st is None:
            st = state[key] = {"pending": None, "open": [], "in": default_format,
                               "out": default_format, "mic": [], "all": out.setdefault(key, [])}
        typ = None if typ is None or typ is pd.NA else str(typ)
        rid = None if rid is None or rid is pd.NA else str(rid)
        if typ is not None and typ in names.session and fields:
            try:
                f = json.loads(fields)
            except ValueError:
                f = {}
            st["in"] = session_audio_format(f, "input", st["in"])
            st["out"] = session_audio_format(f, "output", st["out"])
        if direction == _C2S:
            if binary or (typ is not None and typ in names.mic):
                if abytes is not None and abytes is not pd.NA:
                    st["mic"].append((int(frame), int(ts), int(abytes)))
                    st.setdefault("mic_fmt", st["in"])
                continue
            if typ is not None and typ in names.request:
                st["pending"] = (typ, int(frame), int(ts))
                if st["mic"]:  # (commit then response.create: the audio goes with both)
                    st["pending_mic"] = st["mic"]
                    st["pending_mic_fmt"] = st.pop("mic_fmt", st["in"])
                    st["mic"] = []
            continue
        # server to client
        is_audio = binary or (typ is not None and typ in names.audio)
        is_text = typ is not None and typ in names.text
        is_start = typ is not None and typ in names.start
        is_end = typ is not None and typ in names.end
        is_error = typ is not None and typ in names.error
        opened: list[_Resp] = st["open"]
        resp: _Resp | None = None
        if is_error and not opened and st["pending"] is not None:
            resp = _Resp(index=len(st["all"]), rid=rid, request=st["pending"], start_frame=None,
                         first=(typ or "", int(frame), int(ts)))
            resp.end = (typ or "", int(frame), int(ts))
            resp.end_reason = "error"
            st["pending"] = None
            st["all"].append(resp)
        elif is_start or ((is_audio or is_text) and not opened):
            for r in opened:
                r.end_reason = "superseded"
            pend = st["pending"]
            resp = _Resp(index=len(st["all"]), rid=rid, request=pend,
                         start_frame=int(frame) if is_start else None,
                         first=(typ or "binary", int(frame), int(ts)))
            if pend is not None:
                resp.mic = st.pop("pending_mic", [])
                resp.mic_fmt = st.pop("pending_mic_fmt", None)
            st["pending"] = None
            st["all"].append(resp)
            st["open"] = opened = [resp]
        elif rid is not None:
            resp = next((r for r in reversed(st["all"]) if r.rid == rid), None)
        if resp is None:
            resp = opened[-1] if opened else None
        if resp is None:
            continue
        resp.last = (int(frame), int(ts))
        if is_audio and abytes is not None and abytes is not pd.NA:
            if resp.fmt is None:
                resp.fmt = st["out"]
            resp.chunks.append((int(frame), int(ts), int(abytes)))
        if is_text and tchars is not None and tchars is not pd.NA:
            resp.text_chars += int(tchars)
            resp.text_events += 1
        if is_error:
            resp.errors += 1
            if resp.error_code is None:
                resp.error_code = (_str(_field(fields, "error.code"))
                                   or _str(_field(fields, "error.type")))
        if is_end:
            resp.end = (typ or "", int(frame), int(ts))
            resp.end_reason = "done"
            resp.status = _str(_field(fields, "response.status"))
            if resp in opened:
                opened.remove(resp)
    for key, resps in out.items():
        end_frame = ends.get(key)
        for r in resps:
            if r.end_reason == "open_at_eof" and end_frame is not None:
                r.end_reason = "connection_ended"
        # microphone audio no request took along (server-side turn detection, or the capture
        # ended first): a stream of its own, so no chunk goes uncounted
        st = state[key]
        rest = st.get("pending_mic", []) + st["mic"]
        if rest:
            resps.append(_Resp(index=-1, rid=None, request=None, start_frame=None,
                               first=("", rest[0][0], rest[0][1]), mic=rest,
                               mic_fmt=st.get("pending_mic_fmt") or st.get("mic_fmt")
                               or st["in"]))
    return out


# --------------------------------------------------------------------------- turns

def turns(cap: Capture, *, names: EventNames = OPENAI_REALTIME, type_field: str = "type",
          binary_audio: bool = True,
          default_format: AudioFormat = DEFAULT_OUTPUT_FORMAT) -> pd.DataFrame:
    """One row per realtime response (:data:`TURNS`; rules in the module docstring).

    ``names`` / ``type_field``: the API's event names and the member that names an event (a
    dotted path into ``realtime_events.fields``); ``binary_audio``: binary WebSocket messages
    are audio; ``default_format``: the format until a session event says otherwise. An
    empty table (with its columns) when the capture has no realtime events.
    """
    rows = []
    for (tcp, sid), resps in _responses(cap, names, type_field, binary_audio,
                                        default_format).items():
        for r in resps:
            if r.index < 0:  # (microphone audio of no response: audio_cadence only)
                continue
            req = r.request
            req_ts = req[2] if req else None
            first_audio = r.chunks[0] if r.chunks else None
            fmt = r.fmt or default_format
            nbytes = sum(c[2] for c in r.chunks)
            end_frame, end_ts = (r.end[1], r.end[2]) if r.end else r.last
            base = req_ts if req_ts is not None else r.first[2]
            rows.append((
                tcp, sid, r.index, r.rid, req[0] if req else None, req[1] if req else None,
                req_ts, r.start_frame, r.first[0], r.first[1], r.first[2],
                (r.first[2] - req_ts) / 1e6 if req_ts is not None else math.nan,
                first_audio[0] if first_audio else None,
                first_audio[1] if first_audio else None,
                (first_audio[1] - req_ts) / 1e6 if first_audio and req_ts is not None
                else math.nan,
                (first_audio[1] - r.first[2]) / 1e6 if first_audio else math.nan,
                len(r.chunks), nbytes,
                fmt.name if fmt.rate_hz else None, fmt.rate_hz,
                _audio_ms(nbytes, fmt) if r.chunks else 0.0,
                r.text_chars, r.text_events, r.end[0] if r.end else None, end_frame, end_ts,
                (end_ts - base) / 1e6, r.status, r.errors, r.error_code, r.end_reason,
            ))
    return TURNS.frame(rows)


# --------------------------------------------------------------------------- cadence

def cadence_stats(arrivals_ns: Sequence[int], media_ms: Sequence[float] | None, *,
                  buffer_ms: float = DEFAULT_BUFFER_MS, late_ms: float = DEFAULT_LATE_MS
                  ) -> dict[str, Any]:
    """The cadence of one stream of chunks: their arrival times (ns, in order) and audio
    durations (ms each; None: no media clock, each chunk lasts the median inter-arrival).
    Returns the statistics of :data:`CADENCE` by column name (``max_gap_index`` and
    ``first_underrun_index`` are chunk indexes)."""
    r = np.asarray(arrivals_ns, dtype=np.int64)
    n = len(r)
    gaps = np.diff(r).astype(np.float64) / 1e6 if n > 1 else np.empty(0)
    if media_ms is None:
        nominal = float(np.median(gaps)) if len(gaps) else math.nan
        dur = np.full(n, 0.0 if math.isnan(nominal) else nominal)
    else:
        dur = np.asarray(media_ms, dtype=np.float64)
        nominal = float(dur.mean()) if n else math.nan
    out: dict[str, Any] = {
        "chunks": n, "span_ms": float(r[-1] - r[0]) / 1e6 if n else math.nan,
        "nominal_ms": nominal,
        "interarrival_mean_ms": float(gaps.mean()) if len(gaps) else math.nan,
        "interarrival_p50_ms": float(np.median(gaps)) if len(gaps) else math.nan,
        "interarrival_p95_ms": float(np.percentile(gaps, 95)) if len(gaps) else math.nan,
        "interarrival_max_ms": float(gaps.max()) if len(gaps) else math.nan,
        "max_gap_index": int(gaps.argmax()) + 1 if len(gaps) else None,
    }
    if n == 0 or np.isnan(dur).any():
        out.update(jitter_ms=math.nan, late_chunks=0, underruns=0, underrun_ms=0.0,
                   first_underrun_index=None)
        return out
    media_before = np.concatenate(([0.0], np.cumsum(dur)[:-1]))  # S_i, ms
    arr_ms = (r - r[0]).astype(np.float64) / 1e6
    transit = arr_ms - media_before
    j = 0.0
    for i in range(1, n):
        d = transit[i] - transit[i - 1]
        j += (abs(d) - j) / 16.0
    best = np.minimum.accumulate(transit)
    late = int(((transit - best) > late_ms).sum())
    stalls = playout_stalls(r, dur, buffer_ms=buffer_ms)
    out.update(jitter_ms=j, late_chunks=late, underruns=len(stalls),
               underrun_ms=sum(ms for _, ms in stalls),
               first_underrun_index=stalls[0][0] if stalls else None)
    return out


def playout_stalls(arrivals_ns: Sequence[int] | np.ndarray,
                   media_ms: Sequence[float] | np.ndarray, *,
                   buffer_ms: float = DEFAULT_BUFFER_MS) -> list[tuple[int, float]]:
    """The playout-buffer underruns of one stream of chunks (the rule of the module
    docstring: playback starts ``buffer_ms`` after the first chunk arrives and plays the
    chunks back to back; a chunk arriving after its playback time stalls playback until it
    arrives): ``(chunk index, stall ms)`` per underrun, in order. ``media_ms``: each chunk's
    audio duration (no NaN)."""
    r = np.asarray(arrivals_ns, dtype=np.int64)
    dur = np.asarray(media_ms, dtype=np.float64)
    if not len(r):
        return []
    arr_ms = (r - r[0]).astype(np.float64) / 1e6
    play = buffer_ms
    out: list[tuple[int, float]] = []
    for i in range(len(r)):
        if i and arr_ms[i] > play:
            out.append((i, float(arr_ms[i] - play)))
            play = arr_ms[i]
        play += dur[i]
    return out


def audio_cadence(cap: Capture, *, buffer_ms: float = DEFAULT_BUFFER_MS,
                  late_ms: float = DEFAULT_LATE_MS, names: EventNames = OPENAI_REALTIME,
                  type_field: str = "type", binary_audio: bool = True,
                  default_format: AudioFormat = DEFAULT_OUTPUT_FORMAT,
                  sse: bool = True) -> pd.DataFrame:
    """Cadence, jitter, late chunks and playout underruns (:data:`CADENCE`) of every
    response's audio, every turn's microphone audio and (``sse``) every SSE token stream.
    Rules in the module docstring; the other arguments as for :func:`turns`."""
    rows = []

    def add(kind: str, tcp: int, sid: int | None, direction: str, idx: int | None,
            rid: str | None, chunks: list[tuple[int, int, int]], fmt: AudioFormat | None
            ) -> None:
        if not chunks:
            return
        arr = [c[1] for c in chunks]
        media = None if fmt is None else [_audio_ms(c[2], fmt) for c in chunks]
        s = cadence_stats(arr, media, buffer_ms=buffer_ms, late_ms=late_ms)
        gi, ui = s["max_gap_index"], s["first_underrun_index"]
        rows.append((
            kind, tcp, sid, direction, idx, rid, s["chunks"], chunks[0][0], arr[0], arr[-1],
            s["span_ms"], sum(media) if media is not None else math.nan, s["nominal_ms"],
            s["interarrival_mean_ms"], s["interarrival_p50_ms"], s["interarrival_p95_ms"],
            s["interarrival_max_ms"], chunks[gi][0] if gi is not None else None,
            s["jitter_ms"], late_ms, s["late_chunks"], buffer_ms, s["underruns"],
            s["underrun_ms"], chunks[ui][0] if ui is not None else None))

    for (tcp, sid), resps in _responses(cap, names, type_field, binary_audio,
                                        default_format).items():
        for r in resps:
            idx = r.index if r.index >= 0 else None
            add("audio", tcp, sid, _S2C, idx, r.rid, r.chunks, r.fmt or default_format)
            add("mic", tcp, sid, _C2S, idx, r.rid, r.mic, r.mic_fmt or default_format)
    if sse:
        ev = cap.sse_events
        ev = ev[~ev["done"]]
        if len(ev):
            ts = _ns(ev["ts"])
            groups: dict[tuple[int, Any, Any], list[tuple[int, int, int]]] = {}
            for f, t, tcp, sid, ri in zip(ev["frame"].tolist(), ts.tolist(),
                                          ev["tcp_stream"].tolist(), ev["stream_id"].tolist(),
                                          ev["request_index"].tolist(), strict=True):
                groups.setdefault((int(tcp), sid, ri), []).append((int(f), int(t), 0))
            for (tcp, sid, ri), chunks in groups.items():
                add("sse", tcp, None if sid is pd.NA or sid is None else int(sid), _S2C,
                    None if ri is pd.NA or ri is None else int(ri), None, chunks, None)
    return CADENCE.frame(rows)


# --------------------------------------------------------------------------- reconnects

def _attempt_table(cap: Capture, max_gap_s: float, verdicts: pd.DataFrame | None = None
                   ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    conns = cap.connections
    if not len(conns):
        return [], []
    hs = cap.tcp_handshakes.set_index("tcp_stream")
    tls = cap.tls_handshakes
    tls_done: dict[int, int | None] = {}
    if len(tls):
        fin = _ns(tls["client_finished_ts"])
        for t, f, ok in zip(tls["tcp_stream"].tolist(), fin.tolist(),
                            tls["client_finished_ts"].notna().tolist(), strict=True):
            tls_done.setdefault(int(t), int(f) if ok else None)
    if verdicts is None:
        verdicts = disconnects(cap)
    verdict = dict(zip(verdicts["tcp_stream"].tolist(), verdicts["verdict"].astype(str),
                       strict=True))
    c = conns.sort_values(["first_ts", "tcp_stream"], kind="stable")
    first_ts = dict(zip(c["tcp_stream"].tolist(), _ns(c["first_ts"]).tolist(), strict=True))
    last_ts = dict(zip(c["tcp_stream"].tolist(), _ns(c["last_ts"]).tolist(), strict=True))
    pkts = cap.packets
    groups: dict[tuple[str, str, int], list[int]] = {}
    for t, ca, sa, sp in zip(c["tcp_stream"].tolist(), c["client_addr"].astype(str),
                             c["server_addr"].astype(str), c["server_port"].tolist(),
                             strict=True):
        groups.setdefault((ca, sa, int(sp)), []).append(int(t))
    syn_count = dict(zip(hs.index.tolist(), hs["syn_count"].tolist(), strict=True))
    info: dict[int, dict[str, Any]] = {
        int(t): {"client_port": port, "first_frame": ff, "server_last_ts": last,
                 "syn_count": syn_count.get(t, 1)}
        for t, port, ff, last in zip(c["tcp_stream"].tolist(), c["client_port"].tolist(),
                                     c["first_frame"].tolist(), c["server_last_ts"].tolist(),
                                     strict=True)}

    def outcome(t: int) -> tuple[str, int | None]:
        h = hs.loc[t] if t in hs.index else None
        if h is None or pd.isna(h["synack_frame"]):
            res = str(h["result"]) if h is not None else ""
            return ("refused" if "refus" in res or "rst" in res else "no_answer"), None
        if pd.isna(h["ack_ts"]):
            return "no_answer", None
        tcp_ok = int(pd.Timestamp(h["ack_ts"]).value)
        if t in tls_done:
            done = tls_done[t]
            return ("connected", done) if done is not None else ("tls_failed", None)
        return "connected", tcp_ok

    def last_server_before(t: int, before: int) -> int | None:
        if len(pkts):
            p = pkts[(pkts["tcp_stream"] == t) & (pkts["direction"] == _S2C)]
            pts = _ns(p["ts"])
            pts = pts[pts < before]
            return int(pts.max()) if len(pts) else None
        v = info[t]["server_last_ts"]
        if v is None or pd.isna(v):
            return None
        last = int(pd.Timestamp(v).value)
        return last if last < before else None

    storms: list[tuple[Any, ...]] = []
    attempts: list[tuple[Any, ...]] = []
    gap_ns = int(max_gap_s * 1e9)
    for (ca, sa, sp), ts_list in groups.items():
        server = f"[{sa}]:{sp}" if ":" in sa else f"{sa}:{sp}"
        i = 0
        prev_failed: int | None = None  # an established connection that ended badly
        while i < len(ts_list):
            t = ts_list[i]
            oc, _ = outcome(t)
            if oc == "connected":
                prev_failed = t if t in verdict else None
                i += 1
                continue
            # a failed attempt: a storm starts here (after prev_failed, when it is recent)
            prev = prev_failed
            if prev is not None and first_ts[t] - last_ts[prev] > gap_ns and \
                    first_ts[t] - first_ts[prev] > gap_ns:
                prev = None
            run = [t]
            j = i + 1
            while j < len(ts_list) and first_ts[ts_list[j]] - first_ts[run[-1]] <= gap_ns:
                run.append(ts_list[j])
                if outcome(ts_list[j])[0] == "connected":
                    break
                j += 1
            storms.append(_storm(len(storms), ca, server, prev, verdict, run, first_ts,
                                 outcome, last_server_before, attempts, info))
            last_oc = outcome(run[-1])[0]
            prev_failed = run[-1] if last_oc == "connected" and run[-1] in verdict else None
            i = i + len(run)
    return storms, attempts


def _storm(n: int, ca: str, server: str, prev: int | None, verdict: dict[int, str],
           run: list[int], first_ts: dict[int, int], outcome: Any, last_server_before: Any,
           attempts: list[tuple[Any, ...]], info: dict[int, dict[str, Any]]
           ) -> tuple[Any, ...]:
    starts = [first_ts[t] for t in run]
    intervals = [(b - a) / 1e6 for a, b in pairwise(starts)]
    ratios = [b / a for a, b in pairwise(intervals) if a > 0]
    syns_total = 0
    failed = 0
    connected: tuple[int, int] | None = None
    for k, t in enumerate(run):
        oc, done = outcome(t)
        sc = info[t]["syn_count"]
        syns = 1 if sc is None or pd.isna(sc) else int(sc)
        syns_total += syns - 1
        if oc != "connected":
            failed += 1
        elif done is not None:
            connected = (t, done)
        port = int(info[t]["client_port"])
        attempts.append((n, k + 1, t, f"[{ca}]:{port}" if ":" in ca else f"{ca}:{port}",
                         server, int(info[t]["first_frame"]), starts[k],
                         intervals[k - 1] if k else math.nan, syns, oc,
                         done if oc == "connected" else None))
    prev_last = last_server_before(prev, starts[0]) if prev is not None else None
    base = prev_last if prev_last is not None else starts[0]
    return (n, ca, server, prev, verdict.get(prev) if prev is not None else None, prev_last,
            len(run), failed, syns_total, starts[0],
            (starts[0] - prev_last) / 1e6 if prev_last is not None else math.nan,
            ",".join(f"{v:.1f}" for v in intervals),
            intervals[0] if intervals else math.nan,
            max(intervals) if intervals else math.nan,
            float(np.median(ratios)) if ratios else math.nan,
            "connected" if connected else "gave_up_or_eof",
            connected[0] if connected else None, connected[1] if connected else None,
            (connected[1] - base) / 1e6 if connected else math.nan)


def reconnect_storms(cap: Capture, *, max_gap_s: float = 300.0,
                     verdicts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Series of connection attempts after a failure (:data:`RECONNECT_STORMS`; rules in the
    module docstring). Works with ``load(packets=False)`` (then the failed connection's last
    server packet is ``connections.server_last_ts``, which may be after the first attempt;
    such a time is not used). ``verdicts``: ``disconnects(cap)`` when the caller has it
    already (computed here otherwise)."""
    storms, _ = _attempt_table(cap, max_gap_s, verdicts)
    return RECONNECT_STORMS.frame(storms)


def reconnect_attempts(cap: Capture, *, max_gap_s: float = 300.0,
                       verdicts: pd.DataFrame | None = None) -> pd.DataFrame:
    """The attempts of :func:`reconnect_storms`, one row each (:data:`RECONNECT_ATTEMPTS`;
    ``verdicts`` as there)."""
    _, attempts = _attempt_table(cap, max_gap_s, verdicts)
    return RECONNECT_ATTEMPTS.frame(attempts)


# --------------------------------------------------------------------------- heartbeats

def _silences(times: np.ndarray, end: int | None) -> tuple[float, list[tuple[int, int]]]:
    """Longest gap (ms) between sorted times (and to ``end``), and every gap (start, end)."""
    if not len(times):
        return math.nan, []
    t = np.sort(times)
    if end is not None and end > t[-1]:
        t = np.append(t, end)
    if len(t) < 2:
        return 0.0, []
    g = np.diff(t)
    return float(g.max()) / 1e6, list(zip(t[:-1].tolist(), t[1:].tolist(), strict=True))


def heartbeat_audit(cap: Capture, *, idle_gap_s: float = 30.0,
                    verdicts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Heartbeat settings against idle timeouts, per long-lived connection
    (:data:`HEARTBEAT_AUDIT`; rules in the module docstring). ``idle_gap_s``: the silence
    before a reset that makes a connection one that died idle (``disconnects(idle_gap_s=)``:
    its ``idle_then_reset`` rule). ``verdicts``: ``disconnects(cap, idle_gap_s=idle_gap_s)``
    when the caller has it already (computed here otherwise)."""
    conns = cap.connections
    hb = heartbeats(cap.ws_frames, cap.http2_frames, cap.tcp_events,
                    connections=conns, capture_end=cap.summary.last_ts_ns)
    ws = set(cap.ws_connections["tcp_stream"].tolist())
    h2 = set(cap.http2_connections["tcp_stream"].tolist()) if "tcp_stream" in \
        cap.http2_connections.columns else set()
    streams = sorted(ws | h2 | set(hb["tcp_stream"].tolist()))
    if not streams:
        return HEARTBEAT_AUDIT.frame([])
    d = disconnects(cap, idle_gap_s=idle_gap_s) if verdicts is None else verdicts
    verdict = dict(zip(d["tcp_stream"].tolist(), d["verdict"].astype(str), strict=True))
    idle_death = {t for t, sig in zip(d["tcp_stream"].tolist(), d["signals"].astype(str),
                                      strict=True) if "idle_then_reset" in sig.split(",")}
    idle_gap = dict(zip(d["tcp_stream"].tolist(), d["idle_gap_ms"].tolist(), strict=True))
    pk = cap.packets
    have_packets = len(pk) > 0
    if have_packets:
        pk = pk[pk["tcp_stream"].isin(streams) & (pk["tcp_len"].fillna(0) > 0)]
        pk_ts = _ns(pk["ts"])
        pk_stream = pk["tcp_stream"].to_numpy()
        pk_dir = pk["direction"].astype(str).to_numpy()
    info = conns.set_index("tcp_stream")
    rows = []
    for t in streams:
        if t not in info.index:
            continue
        c = info.loc[t]
        proto = "websocket" if t in ws else "http2" if t in h2 else "tcp"
        h = hb[hb["tcp_stream"] == t]
        cp, sp = h[h["sender"] == "client"], h[h["sender"] == "server"]
        rtt = h["rtt_ms"].dropna()
        end_ns = int(pd.Timestamp(c["last_ts"]).value)
        sil: dict[str, float] = {}
        gaps_all: list[tuple[int, int]] = []
        if have_packets:
            m = pk_stream == t
            for side, dname in (("client", _C2S), ("server", _S2C)):
                sil[side], _ = _silences(pk_ts[m & (pk_dir == dname)], end_ns)
            sil["payload"], gaps_all = _silences(pk_ts[m], end_ns)
        else:
            sil = {"client": math.nan, "server": math.nan, "payload": math.nan}
        idle = float(c["max_idle_ms"]) if pd.notna(c["max_idle_ms"]) else math.nan
        survive: list[bool | None] = []
        for to in IDLE_TIMEOUTS:
            v = {"any": idle, "payload": sil["payload"], "server_payload": sil["server"]}[to.what]
            survive.append(None if math.isnan(v) else v < to.seconds * 1000)
        vd = verdict.get(t)
        died = t in idle_death
        fatal = float(idle_gap.get(t, math.nan)) if died else math.nan
        keep = math.nan
        if died and gaps_all and not math.isnan(fatal):
            # the silences traffic survived: the payload gaps before the fatal one (the last
            # gap about as long as the idle gap of the verdict)
            lens = [(b - a) / 1e6 for a, b in gaps_all]
            k = max((i for i, g in enumerate(lens) if g >= 0.9 * fatal), default=None)
            best = max(lens[:k], default=0.0) if k is not None else 0.0
            keep = best if best >= 1000 else math.nan
        rows.append((
            t, proto, float(c["duration_ms"]), len(cp), len(sp),
            float(cp["interval_ms"].median()) if cp["interval_ms"].notna().any() else math.nan,
            float(sp["interval_ms"].median()) if sp["interval_ms"].notna().any() else math.nan,
            float(rtt.median()) if len(rtt) else math.nan,
            float(rtt.max()) if len(rtt) else math.nan,
            int((h["outcome"].astype(str) == "unanswered").sum()),
            sil["client"], sil["server"], sil["payload"], idle, *survive, vd, died, fatal,
            keep,
        ))
    return HEARTBEAT_AUDIT.frame(rows)

