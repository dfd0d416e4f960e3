"""Why was it slow: every request's time split into its parts, every stall given its cause.

Three pure functions of a capture's tables (no capture is read again):

- :func:`request_timing` (schema :data:`REQUEST_TIMING`): one row per ``stream_latency``
  row, keyed like it, with the request's time cut into parts that add up to its total
  (``total_ms``): DNS, TCP connect, TLS, client time between them, request upload, one
  network round trip, server wait before the response headers, model wait before the first
  token, streaming, and the time lost to stalls; and a plain sentence.
- :func:`stalls` (schema :data:`STALLS`): one row per stall of a stream or connection, with
  its cause found in the same time window on the same connection, and the frames that show it.
- :func:`connection_series` (schema :data:`CONNECTION_SERIES`): RTT samples, bytes in
  flight, receive window and throughput over time of TCP connections (needs the ``packets``
  table: a capture loaded with ``packets=False`` raises :class:`NeedsPacketsError`).

How a stall is found (the thresholds are keyword parameters of :func:`stalls`):

- Every request's *deliveries* are the times its response bytes became readable at the
  capture point: HTTP/2 response frames of its stream (HEADERS, DATA...: ``http2_frames``;
  a frame behind a lost segment is delivered by the resend that fills the hole), HTTP/3
  frames of its stream (``http3_frames``), HTTP/1.x server-sent events, the response start
  and end and (with the packets table) the server's data packets, those that arrived
  behind a hole moved to the resend that filled it. Deliveries at the same time count once.
- A gap between two deliveries (or between the request's end and its first delivery) is a
  stall when it lasts at least ``min_stall_ms`` and, once the first token (first body byte)
  was delivered, at least ``cadence_factor`` times the request's median gap between
  deliveries (its cadence). A gap before the first token is the server's and the model's
  time (``request_timing.server_wait_ms`` / ``model_wait_ms``), not a stall, unless a
  transport or flow-control cause is found in it.
- If the whole connection delivered nothing for at least half the gap, the stall is the
  connection's (``scope`` connection, its window the connection's silence); otherwise only
  that stream stopped (``scope`` stream). Stalls with the same cause and evidence on one
  connection (a lost segment blocking three streams) are one row listing every stream.
- HTTP/3: every server STREAM frame that resends a response stream's bytes (an offset
  below the highest byte seen on it, ``quic_frames``) is a stall of that stream alone. Its
  ``mechanism`` is how RFC 9002 had the server find the packet lost, from the client's 1-RTT
  ACK frames before the resend: one acknowledging a packet 3 or more numbers later
  (packet_threshold, §6.1.1), only a later one (time_threshold, §6.1.2), none (pto, §6.2:
  the resent data was the probe). At the receiver (the lost packet is the number missing
  below the next one) an ACK counts when it was sent one RTT (the least sample) before the
  resend arrived; NA when an ACK within 1 ms of that edge would change the answer.
- Every lost server segment (``tcp_losses`` kind loss) while a response was in progress is
  a stall whatever its length, its cause certain: seen at the sender (the capture saw the
  first copy) from the first copy to the resend, seen at the receiver from the connection's
  last delivery before the hole to the resend. Losses of one recovery episode (overlapping
  in time, one direction) are one row.

The cause, first that matches (``cause``): ``pmtu_blackhole`` (a ``path_mtu`` row of the
connection whose too-big segment waited in the window; without one, because the sender never
re-sent smaller, a ``pmtu_black_hole`` verdict of :func:`~.disconnects.disconnects` whose
span, first too-big segment to the endpoint's reaction, covers the window),
``loss_recovery`` (a ``tcp_losses`` resend in the window; ``mechanism`` is its ``recovery``:
fast_retransmit, rto, tail_loss_probe; on HTTP/2 the streams with frames behind the lost
segment are ``hol_blocked_streams``: head-of-line blocking), ``receive_window``
(``tcp_events`` zero_window or window_full in the window: the receiver did not read),
``h2_flow_control`` (the server's HTTP/2 send window of the stream or of the connection,
computed from the DATA lengths, SETTINGS_INITIAL_WINDOW_SIZE and WINDOW_UPDATE frames, was
smaller than the next DATA frame until a WINDOW_UPDATE in the window), ``quic_flow_control``
(HTTP/3: the client raised, with MAX_STREAM_DATA or MAX_DATA in the window, a limit it had
announced in an earlier such frame and that the server's STREAM data of the stream, or of
all streams, had reached; mechanism stream_data_blocked / data_blocked when the server said
so with a BLOCKED frame at that limit, else max_stream_data_late / max_data_late; a limit
reached before the client's first such frame is a transport parameter, not checked),
``server_pause`` (the
server sent nothing: on a stream, while the connection carried other streams; on a
connection, no server payload in the window and its data acknowledged: nothing in flight),
``client_pause`` (a request started at least ``client_pause_ms`` after every earlier
response on its connection had ended), and ``unknown`` (none of these: the row says so, no
guess).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import PcapToolsError
from ..tables.schema import TS_DTYPE, Column, TableSchema
from .latency import stream_latency

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = [
    "CONNECTION_SERIES",
    "QUIC_RESENDS",
    "REQUEST_TIMING",
    "STALLS",
    "NeedsPacketsError",
    "connection_series",
    "quic_resends",
    "request_timing",
    "stalls",
]

#: default of :func:`stalls`'s ``min_stall_ms``: shortest gap in delivery that is a stall
MIN_STALL_MS = 100.0
#: default of ``cadence_factor``: once streaming, a gap must also be this many times the
#: request's median gap between deliveries
CADENCE_FACTOR = 3.0
#: default of ``client_pause_ms``: a request that started this long after every earlier
#: response on its connection had ended
CLIENT_PAUSE_MS = 500.0

#: the RTT of a request: the least server ACK sample in this long before it was sent
RTT_WINDOW_NS = 1_000_000_000
_NA = np.iinfo(np.int64).min
_C2S, _S2C = "client_to_server", "server_to_client"


class NeedsPacketsError(PcapToolsError, ValueError):
    """The analysis needs the ``packets`` table, and the capture was loaded with
    ``packets=False`` (load it again with ``packets=True``, the default)."""


REQUEST_TIMING = TableSchema(
    name="request_timing",
    grain="one row per stream_latency row (HTTP/1.x exchange, HTTP/2 or HTTP/3 stream), keyed "
    "like it: pcaptools.analyses.slow.request_timing(cap), not a Capture attribute",
    key=("tcp_stream", "quic_connection", "request_index", "stream_id"),
    columns=(
        Column("tcp_stream", "Int64", None, "stream_latency.tcp_stream; NA for HTTP/3"),
        Column("quic_connection", "Int64", None, "stream_latency.quic_connection"),
        Column("protocol", "category", None, "HTTP/1.0, HTTP/1.1, HTTP/2 or HTTP/3"),
        Column("request_index", "Int64", None, "HTTP/1.x: http_requests.request_index"),
        Column("stream_id", "Int64", None, "HTTP/2 / HTTP/3 stream id"),
        Column("method", "string", None, "request method"),
        Column("path", "string", None, "request target / :path"),
        Column("status", "Int64", None, "final response status"),
        Column("start_ts", TS_DTYPE, None,
               "where the request's timeline starts: its DNS lookup (dns_start_ts) when one "
               "was captured, else its connection's first packet, for the first request on a "
               "connection whose start was captured; request_ts otherwise (reused connection, "
               "or a capture that started inside the connection)"),
        Column("end_ts", TS_DTYPE, None, "response complete (stream_latency.end_ts)"),
        Column("total_ms", "float64", "ms",
               "end_ts - start_ts; the parts below add up to it (NaN when the response did "
               "not end in the capture)"),
        Column("setup", "category", None,
               "how dns/connect/tls were attributed: new_connection, reused (0.0: the "
               "connection was already open), mid_connection (NaN: the capture started inside "
               "the connection)"),
        Column("dns_ms", "float64", "ms",
               "stream_latency.dns_ms: 0.0 when reused or the host is an address; NaN when "
               "no lookup was captured (start_ts is then the connection's first packet)"),
        Column("connect_ms", "float64", "ms",
               "TCP handshake (tshark's initial RTT); 0.0 when reused and for HTTP/3 (QUIC "
               "has no separate transport handshake: it is in tls_ms)"),
        Column("tls_ms", "float64", "ms",
               "TLS handshake (ClientHello to the client's Finished; HTTP/3: the QUIC "
               "handshake, up to the request); 0.0 when reused or cleartext"),
        Column("client_ms", "float64", "ms",
               "first requests: the rest of start_ts..request_ts: the client's time between "
               "the lookup, the handshakes and the request; 0.0 when reused; negative when "
               "a phase overlaps the request (TCP Fast Open, TLS early data: the request left "
               "before the handshake ended)"),
        Column("upload_ms", "float64", "ms",
               "request_ts to request_sent_ts: sending the request (body included)"),
        Column("network_rtt_ms", "float64", "ms",
               "one round trip from the capture point to the server and back, at the "
               "request's time (rtt_ms, at most ttfb_ms): the part of the time to the "
               "headers that is the network's"),
        Column("server_wait_ms", "float64", "ms",
               "ttfb_ms - network_rtt_ms - stall time in it: the server's time before the "
               "response headers"),
        Column("model_wait_ms", "float64", "ms",
               "response headers to the first token, less stall time in it (the model's "
               "wait after the headers); NaN when the response streamed no token"),
        Column("streaming_ms", "float64", "ms",
               "first token (response start when no token) to end_ts, less stall time in it"),
        Column("stall_ms", "float64", "ms",
               "time of this request's stalls (stalls rows naming its stream) between "
               "request_sent_ts and end_ts"),
        Column("stalls", "int64", "stalls", "stalls rows naming this request"),
        Column("worst_stall_cause", "category", None, "cause of its longest stall; NA if none"),
        Column("ttfb_ms", "float64", "ms", "stream_latency.ttfb_ms"),
        Column("ttft_ms", "float64", "ms", "stream_latency.ttft_ms"),
        Column("rtt_ms", "float64", "ms", "the round-trip time used for network_rtt_ms"),
        Column("rtt_source", "category", None,
               "where rtt_ms comes from: ack_rtt (the least packets.ack_rtt_ms of the "
               "server's ACKs of client data in the second before the request was sent, or "
               "the last one before it: a sample inflated by a loss or a delayed ACK does not "
               "count; rtt_frame), handshake (no such ACK: SYN to SYN-ACK, "
               "tcp_handshakes.syn_to_synack_ms), quic_ack_rtt (HTTP/3: the least sample of "
               "the server's ACK frames in the second before, RFC 9002 §5.1: the ACK's time "
               "minus the acknowledged client packet's, the server's ACK delay not "
               "subtracted; rtt_frame), quic_smoothed_rtt / "
               "quic_min_rtt (HTTP/3 without such a sample: quic_connections."
               "client_smoothed_rtt_ms / client_min_rtt_ms, one value for the whole "
               "connection, not a sample at the request's time), or NA "
               "(none: network_rtt_ms is NaN and server_wait_ms holds the whole ttfb_ms)"),
        Column("rtt_frame", "Int64", None, "the ACK that gave rtt_ms (rtt_source ack_rtt)"),
        Column("sentence", "string", None,
               "the split in words, e.g. 'HTTP/2 stream 7 on tcp.stream 0: TTFT 362 ms: 105 ms "
               "network round trip, 257 ms model wait after the headers; no stall'"),
        Column("wireshark_filter", "string", None, "stream_latency.wireshark_filter"),
    ),
)

STALLS = TableSchema(
    name="stalls",
    grain="one row per stall of a stream or a connection, with its cause: "
    "pcaptools.analyses.slow.stalls(cap), not a Capture attribute",
    key=("tcp_stream", "quic_connection", "start_ts", "cause"),
    columns=(
        Column("tcp_stream", "Int64", None, "Wireshark tcp.stream; NA for HTTP/3"),
        Column("quic_connection", "Int64", None, "HTTP/3: quic_connections.quic_connection"),
        Column("protocol", "category", None, "HTTP/1.x, HTTP/2 or HTTP/3"),
        Column("scope", "category", None,
               "connection (the whole connection delivered nothing) or stream (only the "
               "streams listed stopped while the connection carried others)"),
        Column("streams", "string", None,
               "the HTTP/2 / HTTP/3 stream ids affected, comma-separated (for a loss: every "
               "stream with data behind the lost segment, and every stream that waited); "
               "HTTP/1.x: empty"),
        Column("stream_count", "int64", "streams", "how many streams are listed"),
        Column("request_index", "Int64", None, "HTTP/1.x: the exchange affected"),
        Column("start_ts", TS_DTYPE, None,
               "when delivery stopped at the capture point: the last delivery before the "
               "silence (receive_window, with the packets table: the server's last new data "
               "segment before it; a lost segment seen at the sender: its first copy)"),
        Column("end_ts", TS_DTYPE, None,
               "when delivery resumed: the first delivery after it (receive_window: the "
               "server's next new data segment; loss_recovery: the last resend)"),
        Column("duration_ms", "float64", "ms", "end_ts - start_ts"),
        Column("start_frame", "Int64", None, "the packet of the last delivery before"),
        Column("end_frame", "Int64", None, "the packet of the first delivery after"),
        Column("phase", "category", None,
               "waiting (before the request's first token or body byte) or streaming"),
        Column("cadence_ms", "float64", "ms",
               "median gap between the deliveries of the stream that stalled longest, after "
               "its first token; NaN with fewer than 3 such gaps"),
        Column("threshold_ms", "float64", "ms",
               "the gap a stall had to exceed there: max(min_stall_ms, cadence_factor x "
               "cadence_ms) while streaming, min_stall_ms while waiting"),
        Column("cause", "category", None,
               "pmtu_blackhole, loss_recovery, receive_window, h2_flow_control, "
               "quic_flow_control, server_pause, client_pause or unknown (see the module)"),
        Column("mechanism", "category", None,
               "loss_recovery: tcp_losses.recovery of the resend that ended it "
               "(fast_retransmit, rto, tail_loss_probe, unknown); over HTTP/3 the RFC 9002 "
               "rule that declared the packet lost, from the client's ACK frames before the "
               "resend: packet_threshold, time_threshold or pto (NA when the capture cannot "
               "tell, the detail says why); receive_window: zero_window "
               "or window_full; h2_flow_control: stream_window or connection_window; "
               "quic_flow_control: stream_data_blocked, data_blocked (the server sent a "
               "BLOCKED frame), max_stream_data_late, max_data_late (it had reached the "
               "limit and said nothing); "
               "pmtu_blackhole: path_mtu.outcome (no_icmp / icmp_ignored: a black hole; "
               "discovered: an ICMP too-big error came back, path-MTU discovery), or without "
               "a path_mtu row disconnects()' pmtu_black_hole verdict (no_icmp, icmp_ignored "
               "when an ICMP too-big error about the connection was captured); NA otherwise"),
        Column("lost_frame", "Int64", None,
               "loss_recovery: the lost segment's first copy (tcp_losses.first_frame) when "
               "the capture saw it, else its resend"),
        Column("resend_frame", "Int64", None,
               "loss_recovery: the resend (tcp_losses.frame; HTTP/3: the datagram whose "
               "STREAM frame resent the stream's bytes)"),
        Column("hol_blocked_streams", "string", None,
               "loss_recovery on HTTP/2: streams whose frames waited behind the lost segment "
               "(delivered by the resend), comma-separated: head-of-line blocking (NA over "
               "HTTP/3, whose streams do not wait for each other)"),
        Column("hol_blocked_count", "Int64", "streams", "how many (NA when not HTTP/2 loss)"),
        Column("evidence_frames", "string", None,
               "frames that show the cause, comma-separated: resends, first copies and the "
               "segment that revealed the hole; zero-window / window-full / probe / window "
               "update frames; the DATA that used up the HTTP/2 window and the WINDOW_UPDATE; "
               "path-MTU frames"),
        Column("detail", "string", None, "the stall and its cause in words"),
        Column("wireshark_filter", "string", None,
               "display filter for the stall's packets (connection and frame range)"),
    ),
)

QUIC_RESENDS = TableSchema(
    name="quic_resends",
    grain="one row per STREAM frame (decrypted QUIC) that resent bytes its stream had already "
    "carried, either direction: pcaptools.analyses.slow.quic_resends(cap)",
    key=("frame", "quic_connection", "stream_id"),
    columns=(
        Column("quic_connection", "int64", None, "quic_connections.quic_connection"),
        Column("direction", "category", None, "the sender: client_to_server or server_to_client"),
        Column("stream_id", "int64", None, "the stream whose bytes were resent"),
        Column("frame", "int64", None, "the datagram carrying the resend"),
        Column("ts", TS_DTYPE, None, "its time"),
        Column("packet_number", "Int64", None, "the resend's packet number"),
        Column("first_frame", "Int64", None,
               "the first copy's datagram; NA when it was not captured (lost before the "
               "capture point)"),
        Column("lost_packet_number", "Int64", None,
               "the packet the sender found lost: the latest earlier copy's, else (no copy "
               "captured) the number missing below the sender's first later packet; NA when "
               "not known"),
        Column("mechanism", "category", None,
               "how the sender found that packet lost (RFC 9002), from the peer's 1-RTT ACK "
               "frames before the resend (at the receiver: sent one RTT before it arrived): "
               "packet_threshold (an ACK of a packet 3 or more numbers later, §6.1.1), "
               "time_threshold (of a later packet only, §6.1.2), pto (none: the probe "
               "timeout fired and the data went out as the probe, §6.2); NA when the capture "
               "cannot tell or the peer had acknowledged the packet (a spurious resend)"),
        Column("ack_frame", "Int64", None, "the peer's ACK that decided it (NA for pto)"),
        Column("detail", "string", None, "the rule in words, or why it cannot be told"),
    ),
)

CONNECTION_SERIES = TableSchema(
    name="connection_series",
    grain="one row per sample of one series of one TCP connection direction: "
    "pcaptools.analyses.slow.connection_series(cap), not a Capture attribute (needs packets)",
    key=("tcp_stream", "direction", "series", "frame", "ts"),
    columns=(
        Column("tcp_stream", "int64", None, "Wireshark tcp.stream"),
        Column("direction", "category", None,
               "the data direction the sample is about: client_to_server or server_to_client "
               "(the sender of the data)"),
        Column("series", "category", None,
               "rtt_ms (an ACK of that data: packets.ack_rtt_ms, tshark tcp.analysis.ack_rtt), "
               "bytes_in_flight (after each data segment: tshark's "
               "tcp.analysis.bytes_in_flight, computed as tshark 4.0 does: from the first to "
               "the last byte of the segments sent and not yet acknowledged, less the bytes "
               "of the SACK blocks (tcp_sack_blocks) of the peer's last packet; no sample "
               "where tshark shows none: a segment sent past a hole at the capture point, "
               "until the peer's next ACK), receive_window (the window "
               "the receiver advertised, packets.window of its packets), throughput_bps "
               "(payload bits the sender sent per second, per bin of bin_ms, resends included)"),
        Column("ts", TS_DTYPE, None, "time of the packet (throughput: start of the bin)"),
        Column("frame", "Int64", None, "the packet (NA for throughput bins)"),
        Column("value", "float64", None, "the sample: ms, bytes, bytes or bit/s by series"),
    ),
)


# -- stalls ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Req:
    """One request and its deliveries (ns, frames), in time order."""

    row: int
    conn: tuple[int, int]  # (0, tcp_stream) or (1, quic_connection)
    protocol: str
    stream_id: int | None
    request_index: int | None
    sent: int
    first: int  # first token, else first body byte, else response start (_NA: none)
    end: int
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    frames: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass(slots=True)
class _Candidate:
    conn: tuple[int, int]
    protocol: str
    scope: str
    phase: str
    start: int
    end: int
    start_frame: int | None
    end_frame: int | None
    streams: set[int]
    request_index: int | None
    cadence: float
    threshold: float
    cause: str
    mechanism: str | None = None
    key: Any = None
    lost_frame: int | None = None
    resend_frame: int | None = None
    resend_ts: int = _NA
    """loss_recovery: time of resend_frame"""
    hol: list[int] | None = None
    evidence: list[int] = field(default_factory=list)
    detail: str = ""
    losses: int = 1
    """lost segments of one recovery episode merged into this stall"""
    direction: str | None = None
    """loss_recovery: the direction of the lost data"""


def stalls(
    cap: Capture,
    *,
    min_stall_ms: float = MIN_STALL_MS,
    cadence_factor: float = CADENCE_FACTOR,
    client_pause_ms: float | None = CLIENT_PAUSE_MS,
    verdicts: pd.DataFrame | None = None,
    latency: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per stall of ``cap`` (schema :data:`STALLS`), in time order; empty (with its
    columns) when nothing stalled. ``verdicts``: ``disconnects(cap)`` when the caller has it
    already (the report), else it is computed on the first stall that needs its
    pmtu_black_hole verdicts; ``latency``: ``stream_latency(cap)``, likewise. ``min_stall_ms``: the shortest gap in delivery that
    counts; ``cadence_factor``: once a response streams, a gap must also be this many times
    its median gap between deliveries; ``client_pause_ms``: a request starting this long
    after every earlier response on its connection ended is a client_pause stall (None: not
    looked for). Never raises on the tables' content; without the packets table (or with
    one cut at ``max_packet_rows``) the server_pause test (nothing in flight) cannot be made
    and such connection stalls are ``unknown``."""
    lat = stream_latency(cap) if latency is None else latency
    ctx = _Context(cap, lat, verdicts)
    cands: list[_Candidate] = []
    reqs = list(ctx.requests())
    for req in reqs:
        cands += _request_stalls(ctx, req, reqs, min_stall_ms * 1e6, cadence_factor)
    cands += _loss_stalls(ctx, reqs)
    cands += _quic_loss_stalls(ctx, reqs)
    merged = _merge(cands)
    if client_pause_ms is not None:
        merged += _client_pauses(ctx, lat, client_pause_ms * 1e6)
    merged.sort(key=lambda c: (c.start, c.conn))
    return STALLS.frame([_stall_row(ctx, c) for c in merged])


class _Context:
    """The tables of one capture, indexed once for the stall search."""

    def __init__(self, cap: Capture, lat: pd.DataFrame,
                 verdicts: pd.DataFrame | None = None) -> None:
        self.cap = cap
        self.lat = lat
        self.verdicts = verdicts
        self.end_of_capture = cap.summary.last_ts_ns if cap.summary.last_ts_ns else _NA
        f = cap.http2_frames
        self.h2 = f
        s2c = f[f["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool)]
        self.h2_conn = _groups(s2c, ["tcp_stream"])  # any frame: the transport delivered
        resp = s2c[s2c["type"].astype("string").isin(_RESPONSE_FRAMES).fillna(False)
                   .to_numpy(bool)]
        self.h2_stream = _groups(resp, ["tcp_stream", "stream_id"])
        f3 = _table(cap, "http3_frames")
        s3 = f3[f3["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool)]
        self.h3_conn = _groups(s3, ["quic_connection"])
        self.h3_stream = _groups(s3, ["quic_connection", "stream_id"])
        ev = cap.sse_events
        self.sse_h1 = _groups(ev[ev["request_index"].notna()], ["tcp_stream", "request_index"])
        p = cap.packets
        w = cap.warnings
        cut = len(w) > 0 and bool(w["code"].astype("string").eq("table.packets_truncated")
                                  .fillna(False).any())
        # a packets table cut at its row cap cannot say that nothing was in flight
        self.has_packets = len(p) > 0 and not cut
        # (the columns it reads, not a copy of every column of the TCP rows)
        self.pk = _PacketIndex(p[list(_PacketIndex.COLUMNS)][p["tcp_stream"].notna()],
                               cap.tcp_losses) if self.has_packets else None
        self.losses = cap.tcp_losses
        ev2 = cap.tcp_events
        self.events = ev2
        self.path_mtu = cap.path_mtu
        self._windows: dict[int, _H2Windows] = {}
        self._h2_response: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._split: dict[str, dict[int, pd.DataFrame]] = {}
        self._quic: dict[tuple[int, int], list[_QuicResend]] | None = None
        self._h1_conn: dict[int, np.ndarray] = {}
        self._black_holes: dict[int, _BlackHole] | None = None
        self._quic_acks: dict[int, _QuicAcks] = {}
        self._quic_flow: dict[int, _QuicFlow] = {}

    def black_holes(self) -> dict[int, _BlackHole]:
        """The pmtu_black_hole findings of :func:`~.disconnects.disconnects` by tcp_stream
        (computed once, on the first stall that needs it)."""
        if self._black_holes is None:
            self._black_holes = _black_holes(self.cap, self.verdicts)
        return self._black_holes

    def requests(self) -> Iterable[_Req]:
        lat = self.lat
        t_sent, t_req = _ns(lat["request_sent_ts"]), _ns(lat["request_ts"])
        t_end, t_resp = _ns(lat["end_ts"]), _ns(lat["response_start_ts"])
        t_tok = _ns(lat["first_token_ts"])
        recs = lat[["protocol", "tcp_stream", "quic_connection", "stream_id", "request_index",
                    "response_frame"]].astype(object).to_dict("records")
        for i, r in enumerate(recs):
            sent = int(t_sent[i]) if t_sent[i] != _NA else int(t_req[i])
            if sent == _NA:
                continue
            end, resp, tok = int(t_end[i]), int(t_resp[i]), int(t_tok[i])
            proto = str(r["protocol"])
            if proto == "HTTP/3":
                q = int(r["quic_connection"])
                sid = int(r["stream_id"])
                ts, fr = self.h3_stream.get((q, sid), _EMPTY)
                conn = (1, q)
                idx = None
            elif proto == "HTTP/2":
                s = int(r["tcp_stream"])
                sid = int(r["stream_id"])
                ts, fr = self.h2_stream.get((s, sid), _EMPTY)
                conn = (0, s)
                idx = None
            else:
                s = int(r["tcp_stream"])
                idx = int(r["request_index"])
                sid = None
                ts, fr = self._h1_deliveries(s, idx, resp, end, int(_na_int(r["response_frame"])))
                conn = (0, s)
            hi = end if end != _NA else self.end_of_capture
            keep = (ts >= sent) & (ts <= hi) if hi != _NA else ts >= sent
            ts, fr = ts[keep], fr[keep]
            if ts.size > 1:  # one delivery per packet time (an event and its packet are one)
                ts, first_i = np.unique(ts, return_index=True)
                fr = fr[first_i]
            first = tok if tok != _NA else (int(ts[1]) if len(ts) > 1 and resp != _NA else resp)
            yield _Req(i, conn, proto, sid, idx, sent, first, end if end != _NA else hi, ts, fr)

    def _h1_deliveries(self, s: int, idx: int, resp: int, end: int,
                       resp_frame: int) -> tuple[np.ndarray, np.ndarray]:
        ts_l: list[np.ndarray] = []
        fr_l: list[np.ndarray] = []
        t, f = self.sse_h1.get((s, idx), _EMPTY)
        ts_l.append(t)
        fr_l.append(f)
        if resp != _NA:
            ts_l.append(np.array([resp], np.int64))
            fr_l.append(np.array([resp_frame], np.int64))
        if self.pk is not None and resp != _NA:
            t, f = self.pk.deliveries(s, resp, end)
            ts_l.append(t)
            fr_l.append(f)
        ts = np.concatenate(ts_l)
        fr = np.concatenate(fr_l)
        o = np.argsort(ts, kind="stable")
        return ts[o], fr[o]

    def conn_deliveries(self, conn: tuple[int, int], reqs: Sequence[_Req]) -> np.ndarray:
        if conn[0] == 1:
            return self.h3_conn.get((conn[1],), _EMPTY)[0]
        got = self.h2_conn.get((conn[1],))
        if got is not None:
            return got[0]
        if conn[1] not in self._h1_conn:
            parts = [r.ts for r in reqs if r.conn == conn]
            self._h1_conn[conn[1]] = (np.sort(np.concatenate(parts)) if parts
                                      else np.zeros(0, np.int64))
        return self._h1_conn[conn[1]]

    def of(self, name: str, s: int) -> pd.DataFrame:
        """the rows of table ``name`` (tcp_losses, tcp_events, path_mtu, http2_frames) of
        connection s, split once per table"""
        if name not in self._split:
            df = {"tcp_losses": self.losses, "tcp_events": self.events,
                  "path_mtu": self.path_mtu, "http2_frames": self.h2}[name]
            self._split[name] = {_na_int(k): g for k, g in df.groupby(
                df["tcp_stream"].to_numpy(np.int64), sort=False)} if len(df) else {}
        split = self._split[name]
        got = split.get(s)
        if got is None:  # (none of its rows: the table's empty slice, made once)
            got = split.get(_NO_ROWS)
            if got is None:
                got = split[_NO_ROWS] = {
                    "tcp_losses": self.losses, "tcp_events": self.events,
                    "path_mtu": self.path_mtu, "http2_frames": self.h2}[name].iloc[0:0]
        return got

    def quic_resends(self, q: int, sid: int) -> list[_QuicResend]:
        """the server's STREAM frames on QUIC connection q, stream sid, that resent bytes (an
        offset below the highest byte already seen on the stream), in capture order"""
        if self._quic is None:
            self._quic = _quic_resends(_table(self.cap, "quic_frames"))
        return self._quic.get((q, sid), [])

    def quic_flow(self, q: int) -> _QuicFlow:
        """QUIC connection q's server send limits (once)"""
        got = self._quic_flow.get(q)
        if got is None:
            f = _table(self.cap, "quic_frames")
            got = self._quic_flow[q] = _QuicFlow(f[(f["quic_connection"] == q).to_numpy(bool)])
        return got

    def quic_acks(self, q: int) -> _QuicAcks:
        """QUIC connection q's server packet numbers and client ACK frames (once)"""
        got = self._quic_acks.get(q)
        if got is None:
            got = self._quic_acks[q] = _quic_acks(self.cap, q)
        return got

    def h2_stream_frames(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """(stream ids, frames) of the server's HTTP/2 frames on connection s"""
        f = self.of("http2_frames", s)
        m = f["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool)
        return f["stream_id"].to_numpy(np.int64)[m], f["frame"].to_numpy(np.int64)[m]

    def h2_response_frames(self, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(stream ids, frames, types) of the server's HTTP/2 response frames on connection s
        (once per connection: every loss stall on it asks)"""
        got = self._h2_response.get(s)
        if got is None:
            f = self.of("http2_frames", s)
            kind = f["type"].astype("string")
            m = f["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool) \
                & kind.isin(_RESPONSE_FRAMES).fillna(False).to_numpy(bool)
            got = self._h2_response[s] = (f["stream_id"].to_numpy(np.int64)[m],
                                          f["frame"].to_numpy(np.int64)[m],
                                          kind.to_numpy(dtype=object)[m])
        return got

    def windows(self, tcp_stream: int) -> _H2Windows:
        if tcp_stream not in self._windows:
            self._windows[tcp_stream] = _H2Windows(self.of("http2_frames", tcp_stream))
        return self._windows[tcp_stream]


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64))
_NO_ROWS = -(2**63)
"""the key of a table's empty slice in ``_Context._split`` (no tcp_stream is negative)"""
#: the frames that deliver a stream's response (not its WINDOW_UPDATE or PRIORITY frames)
_RESPONSE_FRAMES = ("HEADERS", "CONTINUATION", "DATA", "RST_STREAM", "PUSH_PROMISE")


def _groups(df: pd.DataFrame, keys: list[str]) -> dict[tuple[int, ...], tuple[np.ndarray,
                                                                            np.ndarray]]:
    """key tuple -> (ts ns sorted, frames) of the rows of ``df``"""
    out: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    if len(df) == 0:
        return out
    ts = _ns(df["ts"])
    fr = df["frame"].to_numpy(np.int64)
    kcols = [df[k].to_numpy(np.int64) for k in keys]
    order = np.lexsort((fr, ts, *reversed(kcols)))
    ts, fr = ts[order], fr[order]
    kcols = [k[order] for k in kcols]
    n = len(ts)
    change = np.ones(n, bool)
    change[1:] = np.zeros(n - 1, bool)
    for k in kcols:
        change[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(change)
    ends = np.r_[starts[1:], n]
    for a, b in zip(starts, ends, strict=True):
        out[tuple(int(k[a]) for k in kcols)] = (ts[a:b], fr[a:b])
    return out


class _PacketIndex:
    """Per connection: the server's data packets (their delivery times: a packet that
    arrived behind a hole is delivered by the resend that filled it), both directions' bytes
    sent and acknowledged over time (for 'nothing in flight')."""

    COLUMNS = ("tcp_stream", "ts", "frame", "direction", "tcp_len", "seq", "ack")
    """the columns of the packets table it reads"""

    def __init__(self, p: pd.DataFrame, losses: pd.DataFrame) -> None:
        self.by: dict[int, dict[str, np.ndarray]] = {}
        if len(p) == 0:
            return
        stream = p["tcp_stream"].to_numpy(np.int64)
        ts = _ns(p["ts"])
        frame = p["frame"].to_numpy(np.int64)
        s2c = p["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool)
        length = p["tcp_len"].fillna(0).to_numpy(np.int64)
        seq = p["seq"].fillna(-1).to_numpy(np.int64)
        ack = p["ack"].fillna(-1).to_numpy(np.int64)
        order = np.argsort(stream, kind="stable")
        bounds = np.flatnonzero(np.r_[True, stream[order][1:] != stream[order][:-1]])
        ends = np.r_[bounds[1:], len(order)]
        holes: dict[int, list[tuple[int, int, int, int]]] = {}
        lo = losses[losses["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool)
                    & losses["gap_ts"].notna().to_numpy(bool)
                    & losses["ts"].notna().to_numpy(bool)]
        for s, sq, g, t, f in zip(lo["tcp_stream"], lo["seq"], _ns(lo["gap_ts"]), _ns(lo["ts"]),
                                  lo["frame"], strict=True):
            holes.setdefault(int(s), []).append((int(sq) if not pd.isna(sq) else -1, int(g),
                                                  int(t), int(f)))
        for a, b in zip(bounds, ends, strict=True):
            idx = order[a:b]
            s = int(stream[idx[0]])
            d = s2c[idx]
            data = d & (length[idx] > 0)
            dts = ts[idx][data].copy()
            dfr = frame[idx][data].copy()
            dseq = seq[idx][data]
            for sq, g, t, f in holes.get(s, ()):
                behind = (dts >= g) & (dts < t) & (dseq > sq)
                dts[behind] = t
                dfr[behind] = f
            o = np.argsort(dts, kind="stable")
            self.by[s] = {
                "dts": dts[o], "dfr": dfr[o],
                "s2c_ts": ts[idx][d], "s2c_end": np.maximum.accumulate(
                    np.where(length[idx][d] > 0, seq[idx][d] + length[idx][d], 0))
                if d.any() else np.zeros(0, np.int64),
                "s2c_len": length[idx][d], "s2c_fr": frame[idx][d],
                "c2s_ts": ts[idx][~d], "c2s_ack": np.maximum.accumulate(ack[idx][~d])
                if (~d).any() else np.zeros(0, np.int64),
            }

    def deliveries(self, s: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        d = self.by.get(s)
        if d is None:
            return _EMPTY
        t = d["dts"]
        keep = (t >= lo) & ((t <= hi) if hi != _NA else True)
        return t[keep], d["dfr"][keep]

    def server_idle(self, s: int, a: int, b: int) -> bool | None:
        """True when the server sent no payload strictly inside (a, b) and everything it had
        sent by a was acknowledged before b (nothing in flight); None without packets."""
        d = self.by.get(s)
        if d is None:
            return None
        st, sl = d["s2c_ts"], d["s2c_len"]
        inside = (st > a) & (st < b) & (sl > 0)
        if inside.any():
            return False
        sent = d["s2c_end"][st <= a]
        top = int(sent[-1]) if len(sent) else 0
        ct = d["c2s_ts"]
        acked = d["c2s_ack"][ct < b]
        return (int(acked[-1]) if len(acked) else 0) >= top


class _H2Windows:
    """The server's HTTP/2 send windows over one connection's frames (RFC 9113 §6.9): each
    s2c DATA's length (padding included) is taken from its stream's and the connection's
    window, each client WINDOW_UPDATE adds, a client SETTINGS_INITIAL_WINDOW_SIZE moves every
    stream's window by the change. ``updates``: (frame, ts, stream id, window before) of
    each client WINDOW_UPDATE; ``data``: (frame, ts, stream id, length, stream window,
    connection window after it) of each server DATA frame."""

    def __init__(self, f: pd.DataFrame) -> None:
        self.updates: list[tuple[int, int, int, int]] = []
        self.data: list[tuple[int, int, int, int, int, int]] = []  # frame ts sid len sw cw
        conn = 65535
        initial = 65535
        win: dict[int, int] = {}
        kinds = f["type"].astype("string").to_numpy(dtype=object)
        dirs = f["direction"].astype("string").to_numpy(dtype=object)
        sids = f["stream_id"].to_numpy(np.int64)
        lens = f["length"].to_numpy(np.int64)
        incs = f["window_increment"].to_numpy(dtype=object)
        sets = f["settings"].to_numpy(dtype=object)
        acks = f["ack"].to_numpy(bool)
        frames = f["frame"].to_numpy(np.int64)
        ts = _ns(f["ts"])
        for k, d, sid, ln, inc, st, ack, fr, t in zip(kinds, dirs, sids, lens, incs, sets, acks,
                                                      frames, ts, strict=True):
            if k == "DATA" and d == _S2C:
                w = win.get(int(sid), initial) - int(ln)
                win[int(sid)] = w
                conn -= int(ln)
                self.data.append((int(fr), int(t), int(sid), int(ln), w, conn))
            elif k == "WINDOW_UPDATE" and d == _C2S and not _isna(inc):
                if int(sid) == 0:
                    self.updates.append((int(fr), int(t), 0, conn))
                    conn += int(inc)
                else:
                    w = win.get(int(sid), initial)
                    self.updates.append((int(fr), int(t), int(sid), w))
                    win[int(sid)] = w + int(inc)
            elif k == "SETTINGS" and d == _C2S and not ack and isinstance(st, str):
                for part in st.split(";"):
                    name, _, val = part.partition("=")
                    if name.strip() == "INITIAL_WINDOW_SIZE" and val.strip().isdigit():
                        new = int(val)
                        for s in list(win):
                            win[s] += new - initial
                        initial = new

    def blocked(self, sid: int, a: int, b: int) -> tuple[str, int, int] | None:
        """(stream_window | connection_window, the DATA frame that used it up, the
        WINDOW_UPDATE frame) when a client WINDOW_UPDATE of stream ``sid`` or of the
        connection came in [a, b] while that window was smaller than the stream's next DATA
        frame after it; None otherwise."""
        for fr, t, usid, before in self.updates:
            if t < a or t > b or usid not in (0, sid):
                continue
            nxt = next((d for d in self.data if d[2] == sid and d[1] >= t), None)
            need = nxt[3] if nxt is not None else 1
            if before < max(need, 1):
                last = [d for d in self.data if (usid == 0 or d[2] == sid) and d[1] <= t]
                used = last[-1][0] if last else fr
                return ("connection_window" if usid == 0 else "stream_window", used, fr)
        return None


class _QuicFlow:
    """The server's QUIC send limits over one connection's decrypted frames (RFC 9000 §4):
    the highest offset it sent on each stream (STREAM frames) and their sum, its
    STREAM_DATA_BLOCKED / DATA_BLOCKED frames, and the client's MAX_STREAM_DATA / MAX_DATA
    frames with the limit they replaced (the largest one the client announced before;
    None before the first: the initial limit is a transport parameter, not in the tables)
    and what the server had sent by then."""

    def __init__(self, f: pd.DataFrame) -> None:
        # (frame, ts, stream id (-1 for the connection: stream 0 is a stream), limit)
        self.blocked_frames: list[tuple[int, int, int, int]] = []
        # (frame, ts, stream id (-1: connection), old limit or None, new limit, sent by then,
        #  the server STREAM frame that reached the old limit or None)
        self.updates: list[tuple[int, int, int, int | None, int, int, int | None]] = []
        top: dict[int, int] = {}
        top_frame: dict[int, int] = {}
        sent = 0
        last_frame = -1
        limit: dict[int, int] = {}
        kinds = f["frame_type"].astype("string").fillna("").to_numpy(dtype=object)
        dirs = f["direction"].astype("string").fillna("").to_numpy(dtype=object)
        sids = f["stream_id"].fillna(-1).to_numpy(np.int64)
        offs = f["offset"].fillna(0).to_numpy(np.int64)
        lens = f["length"].fillna(0).to_numpy(np.int64)
        maxs = f["maximum"].fillna(-1).to_numpy(np.int64)
        frames = f["frame"].to_numpy(np.int64)
        ts = _ns(f["ts"])
        for k, d, sid, off, ln, mx, fr, t in zip(kinds, dirs, sids, offs, lens, maxs, frames,
                                                 ts, strict=True):
            if d == _S2C:
                if k == "STREAM" and sid >= 0:
                    end = int(off) + int(ln)
                    if end > top.get(int(sid), 0):
                        sent += end - top.get(int(sid), 0)
                        top[int(sid)], top_frame[int(sid)] = end, int(fr)
                        last_frame = int(fr)
                elif k == "STREAM_DATA_BLOCKED" and sid >= 0 and mx >= 0:
                    self.blocked_frames.append((int(fr), int(t), int(sid), int(mx)))
                elif k == "DATA_BLOCKED" and mx >= 0:
                    self.blocked_frames.append((int(fr), int(t), -1, int(mx)))
            elif d == _C2S and mx >= 0 and k in ("MAX_STREAM_DATA", "MAX_DATA"):
                if k == "MAX_STREAM_DATA" and sid < 0:
                    continue
                key = int(sid) if k == "MAX_STREAM_DATA" else -1
                old = limit.get(key)
                have = top.get(key, 0) if key >= 0 else sent
                reached = top_frame.get(key) if key >= 0 else last_frame
                self.updates.append((int(fr), int(t), key, old, int(mx), have,
                                     reached if reached is not None and reached >= 0 else None))
                if old is None or int(mx) > old:
                    limit[key] = int(mx)

    def blocked(self, sid: int, a: int, b: int) -> tuple[str, int, int] | None:
        """(mechanism, the frame that shows the server blocked, the client's frame that
        raised the limit) when a client MAX_STREAM_DATA of stream ``sid`` or MAX_DATA came
        in [a, b] raising a limit the server had reached: stream_data_blocked /
        data_blocked when the server said so with a BLOCKED frame at that limit in [a, b],
        else max_stream_data_late / max_data_late when the server's data (of the stream,
        or of every stream) had reached the old limit; None otherwise."""
        for fr, t, usid, old, new, have, reached in self.updates:
            if t < a or t > b or usid not in (-1, sid) or old is None or new <= old:
                continue
            level = "stream" if usid >= 0 else "connection"
            said = next((bf for bf, bt, bs, lim in self.blocked_frames
                         if bs == usid and lim == old and a <= bt <= t), None)
            if said is not None:
                return ("stream_data_blocked" if usid >= 0 else "data_blocked", said, fr)
            if have >= old and reached is not None:
                return (f"max_{'stream_' if level == 'stream' else ''}data_late", reached, fr)
        return None


def _request_stalls(ctx: _Context, req: _Req, reqs: list[_Req], min_ns: float,
                    factor: float) -> list[_Candidate]:
    ts = req.ts
    if req.end == _NA:
        return []
    pts = np.r_[req.sent, ts]
    frs = np.r_[-1, req.frames]
    # (a stream still open at the end of the capture: its last silence never ended, so it is
    # not a stall: nothing resumed)
    gaps = np.diff(pts)
    if gaps.size == 0:
        return []
    first = req.first
    after = pts[1:][:-1] >= first if first != _NA else np.zeros(max(len(pts) - 2, 0), bool)
    stream_gaps = np.diff(ts)[after] if ts.size > 1 else np.zeros(0, np.int64)
    cadence = float(np.median(stream_gaps)) if stream_gaps.size >= 3 else math.nan
    out: list[_Candidate] = []
    conn_ts: np.ndarray | None = None
    for j in np.flatnonzero(gaps >= min_ns):
        a, b = int(pts[j]), int(pts[j + 1])
        streaming = first != _NA and a >= first
        threshold = max(min_ns, factor * cadence) if streaming and not math.isnan(cadence) \
            else min_ns
        if b - a < threshold:
            continue
        if conn_ts is None:
            conn_ts = ctx.conn_deliveries(req.conn, reqs)
        c = conn_ts[(conn_ts >= a) & (conn_ts <= b)]
        c = np.unique(np.r_[a, c, b])
        k = int(np.argmax(np.diff(c))) if c.size > 1 else 0
        cs, ce = (int(c[k]), int(c[k + 1])) if c.size > 1 else (a, b)
        conn_level = (ce - cs) >= 0.5 * (b - a)
        cand = _Candidate(
            conn=req.conn, protocol=req.protocol, scope="connection" if conn_level else "stream",
            phase="streaming" if streaming else "waiting",
            start=cs if conn_level else a, end=ce if conn_level else b,
            start_frame=_frame_at(ctx, req, cs if conn_level else a, frs, pts),
            end_frame=_frame_at(ctx, req, ce if conn_level else b, frs, pts),
            streams={req.stream_id} if req.stream_id is not None else set(),
            request_index=req.request_index, cadence=cadence / 1e6,
            threshold=threshold / 1e6, cause="unknown")
        _find_cause(ctx, req, cand)
        if not streaming and cand.cause in ("server_pause", "unknown") \
                and not _request_loss(ctx, req, a, b, cand):
            continue  # the server's or the model's time before the first token
        out.append(cand)
    return out


def _frame_at(ctx: _Context, req: _Req, t: int, frs: np.ndarray, pts: np.ndarray) -> int | None:
    """the frame of a delivery at time t (of this request, else of its connection)"""
    hit = np.flatnonzero(pts == t)
    if hit.size and frs[hit[0]] >= 0:
        return int(frs[hit[0]])
    if req.conn[0] == 1:
        ts, fr = ctx.h3_conn.get((req.conn[1],), _EMPTY)
    else:
        ts, fr = ctx.h2_conn.get((req.conn[1],), _EMPTY)
    hit = np.flatnonzero(ts == t)
    return int(fr[hit[0]]) if hit.size else None


def _find_cause(ctx: _Context, req: _Req, c: _Candidate) -> None:
    a, b = c.start, c.end
    if req.conn[0] == 1:  # HTTP/3: QUIC resends of the stream's own data, else a pause
        if req.stream_id is not None:
            for q in ctx.quic_resends(req.conn[1], req.stream_id):
                if a < q.ts <= b + 1_000_000:
                    _quic_loss_fill(ctx, c, req.conn[1], req.stream_id, q)
                    return
            got = ctx.quic_flow(req.conn[1]).blocked(req.stream_id, a, b + 10_000_000)
            if got is not None:
                kind, used, upd = got
                c.cause, c.mechanism, c.key = "quic_flow_control", kind, ("qfc", upd)
                c.evidence = sorted({used, upd})
                what = ("stream's" if kind.startswith(("stream", "max_stream")) else
                        "connection's")
                how = ("the server said so (a BLOCKED frame in frame "
                       f"{used})" if kind.endswith("blocked") else
                       f"its data reached the limit in frame {used}")
                c.detail = (f"the client's QUIC {what} flow-control limit held the server "
                            f"back: {how} until the client raised it in frame {upd}")
                return
        if c.scope == "stream":
            c.cause, c.key = "server_pause", ("stream", req.stream_id, a)
            c.detail = "the server sent nothing on this stream while the connection carried others"
        else:
            c.cause, c.key = "unknown", ("window", a)
            c.detail = ("nothing delivered on the QUIC connection, no resent STREAM data of "
                        "this stream and no flow-control limit raised in the window (limits "
                        "the server reached before the client's first MAX_STREAM_DATA / "
                        "MAX_DATA are transport parameters, not checked)")
        return
    s = req.conn[1]
    tol = 10_000_000  # 10 ms: an event right at the edge of the window belongs to it
    if c.scope == "connection" and (
            _pmtu(ctx, s, a, b, c) or _loss(ctx, s, a, b, c) or _rwnd(ctx, s, a, b, tol, c)):
        return
    if req.protocol == "HTTP/2" and req.stream_id is not None:
        got = ctx.windows(s).blocked(req.stream_id, a, b + tol)
        if got is not None and (c.scope == "connection" or got[0] == "stream_window"):
            kind, used, upd = got
            c.cause, c.mechanism, c.key = "h2_flow_control", kind, ("fc", upd)
            c.evidence = [used, upd]
            c.detail = (f"the server's HTTP/2 {kind.replace('_', ' ')} was used up (DATA in "
                        f"frame {used}) until the client's WINDOW_UPDATE in frame {upd}")
            return
    if c.scope == "stream":
        c.cause, c.key = "server_pause", ("stream", req.stream_id, req.request_index, a)
        c.detail = ("the server sent nothing on this stream while the connection carried "
                    "other streams")
        return
    idle = ctx.pk.server_idle(s, a, b) if ctx.pk is not None else None
    if idle:
        c.cause, c.key = "server_pause", ("conn", a)
        c.detail = ("the server sent nothing and had nothing unacknowledged: nothing in flight, "
                    "the sender did not send")
    elif idle is None:
        c.key = ("conn", a)
        c.detail = ("no cause found: no loss, window or flow-control event in the window; "
                    "without the packets table 'nothing in flight' cannot be checked")
    else:
        c.key = ("conn", a)
        c.detail = ("no cause found: no loss, window or flow-control event in the window, yet "
                    "the server had data in flight or sent some (not delivered here)")


@dataclass(slots=True)
class _BlackHole:
    """A path-MTU black hole as disconnects() found it on one connection."""

    start: int
    """first_unanswered_ts: the first segment too big for the path"""
    end: int
    """noticed_ts: when an endpoint acted on it (reset, close, give-up), else the end"""
    evidence: list[int]
    mechanism: str
    """no_icmp, or icmp_ignored when an ICMP too-big error about the connection was seen"""
    summary: str


def _black_holes(cap: Capture, d: pd.DataFrame | None) -> dict[int, _BlackHole]:
    from .disconnects import disconnects  # (the verdicts of #15; imported on use)

    out: dict[int, _BlackHole] = {}
    if not len(cap.connections) or not len(cap.tcp_events):
        return out
    if d is None:
        d = disconnects(cap)
    if not len(d):
        return out
    ie = cap.icmp_errors
    too_big = set()
    if len(ie):
        k = ie["kind"].astype("string").isin(("frag_needed", "packet_too_big")).fillna(False)
        too_big = {int(x) for x in ie.loc[k.to_numpy(bool), "tcp_stream"].dropna()}
    for r in d.to_dict("records"):
        sig = str(r["signals"]) if not _isna(r["signals"]) else ""
        if "pmtu_black_hole" not in sig.split(",") or _isna(r["tcp_stream"]):
            continue
        s = int(r["tcp_stream"])
        start = _ns1(r["first_unanswered_ts"])
        if start == _NA:
            continue
        end = _ns1(r["noticed_ts"])
        noticed = None if _isna(r["noticed_frame"]) else int(r["noticed_frame"])
        ev = [int(x) for x in (r["evidence_frames"] or []) if int(x) != noticed]
        out[s] = _BlackHole(start=start, end=end, evidence=ev,
                            mechanism="icmp_ignored" if s in too_big else "no_icmp",
                            summary=str(r["summary"]).split(". Then")[0])
    return out


def _pmtu(ctx: _Context, s: int, a: int, b: int, c: _Candidate) -> bool:
    if _pmtu_row(ctx, s, a, b, c):
        return True
    # no smaller resend (no path_mtu row): disconnects' black-hole verdict, when the stall
    # lies in the black hole (from the first segment too big to the endpoint's reaction)
    bh = ctx.black_holes().get(s)
    if bh is None or bh.start > b or (bh.end != _NA and bh.end < a):
        return False
    c.cause, c.mechanism, c.key = "pmtu_blackhole", bh.mechanism, ("pmtu", bh.start)
    c.evidence = list(bh.evidence)
    c.detail = (f"{bh.summary} (disconnects: pmtu_black_hole); the resends were of the same "
                "size, so they were lost too: not an ordinary loss")
    return True


def _pmtu_row(ctx: _Context, s: int, a: int, b: int, c: _Candidate) -> bool:
    pm = ctx.of("path_mtu", s)
    if not len(pm):  # (most connections: itertuples would make its row class all the same)
        return False
    for r in pm.itertuples(index=False):
        lo = _ns1(r.big_ts)
        hi = _ns1(r.delivered_ts)
        if hi == _NA:
            hi = _ns1(r.resend_ts)
        if lo == _NA or lo > b or (hi != _NA and hi < a):
            continue
        c.cause, c.mechanism, c.key = "pmtu_blackhole", str(r.outcome), ("pmtu", lo)
        c.evidence = [_na_int(x) for x in (r.big_frame, r.icmp_frame, r.resend_frame,
                                           r.delivered_frame) if not _isna(x)]
        how = ("an ICMP too-big error came back and the sender re-sent smaller: path-MTU "
               "discovery" if str(r.outcome) == "discovered" else
               "no ICMP too-big error reached the sender: a path-MTU black hole")
        c.detail = (f"a segment too big for the path (frame {_txt(r.big_frame)}) did not get "
                    f"through; {how} (path MTU {_txt(r.mtu)} bytes, smaller resend in frame "
                    f"{_txt(r.resend_frame)})")
        return True
    return False


def _loss(ctx: _Context, s: int, a: int, b: int, c: _Candidate) -> bool:
    lo = ctx.of("tcp_losses", s)
    if len(lo) == 0:
        return False
    m = lo["frame"].notna().to_numpy(bool) \
        & lo["kind"].astype("string").isin(("loss", "spurious")).fillna(False).to_numpy(bool)
    sub = lo[m]
    if len(sub) == 0:
        return False
    t = _ns(sub["ts"])
    hit = (t > a) & (t <= b + 1_000_000)
    if not hit.any():
        return False
    rows = sub[hit]
    tt = t[hit]
    # the resend that ended the stall: the last in the window (a server one first)
    s2c = rows["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool)
    pick = int(np.flatnonzero(s2c)[np.argmax(tt[s2c])]) if s2c.any() else int(np.argmax(tt))
    r = rows.iloc[pick]
    resend = int(r["frame"])
    lost = int(r["first_frame"]) if not _isna(r["first_frame"]) else resend
    mech = str(r["recovery"]) if not _isna(r["recovery"]) else "unknown"
    c.cause, c.mechanism, c.key = "loss_recovery", mech, ("loss", resend)
    c.direction = _S2C if s2c[pick] else _C2S
    c.resend_ts = int(tt[pick])
    c.resend_frame, c.lost_frame = resend, lost
    ev: list[int] = []
    for _, x in rows.iterrows():
        ev += [int(v) for v in (x["frame"], x["first_frame"], x["gap_frame"]) if not _isna(v)]
    c.evidence = sorted(set(ev))
    if c.protocol == "HTTP/2":
        sids, frs = ctx.h2_stream_frames(s)
        c.hol = sorted({int(x) for x in sids[frs == resend] if x != 0})
    who = "server" if s2c[pick] else "client"
    where = (f"after the capture point (first copy: frame {lost})" if lost != resend
             else "before the capture point")
    c.detail = (f"a {who} segment was lost {where} and resent in frame {resend} "
                f"({mech.replace('_', ' ')})")
    if c.hol:
        c.detail += (f"; {len(c.hol)} HTTP/2 stream{'s' if len(c.hol) != 1 else ''} waited "
                     "behind it (head-of-line blocking)")
    return True


def _request_loss(ctx: _Context, req: _Req, a: int, b: int, c: _Candidate) -> bool:
    """A wait before the first token ended by a client resend: the request (or the ACKs the
    server waited for) was lost on the way. The stall runs from the first copy (or the
    start of the wait) to the resend."""
    if req.conn[0] == 1:
        return False
    s = req.conn[1]
    lo = ctx.of("tcp_losses", s)
    m = lo["frame"].notna().to_numpy(bool) \
        & lo["direction"].astype("string").eq(_C2S).fillna(False).to_numpy(bool) \
        & lo["kind"].astype("string").eq("loss").fillna(False).to_numpy(bool)
    sub = lo[m]
    if len(sub) == 0:
        return False
    t = _ns(sub["ts"])
    hit = np.flatnonzero((t > a) & (t <= b))
    if hit.size == 0:
        return False
    r = sub.iloc[int(hit[-1])]
    first = _ns1(r["first_ts"])
    resend = int(r["frame"])
    lost = int(r["first_frame"]) if not _isna(r["first_frame"]) else resend
    mech = str(r["recovery"]) if not _isna(r["recovery"]) else "unknown"
    c.scope, c.cause, c.mechanism, c.key = "stream", "loss_recovery", mech, ("loss", resend)
    c.direction = _C2S
    c.start = max(a, first) if first != _NA else a
    c.end = int(t[hit[-1]])
    c.start_frame = lost if first != _NA and first >= a else c.start_frame
    c.resend_ts = c.end
    c.end_frame = resend
    c.lost_frame, c.resend_frame = lost, resend
    c.evidence = sorted({int(v) for v in (r["frame"], r["first_frame"], r["gap_frame"])
                         if not _isna(v)})
    c.detail = (f"a client segment was lost (frame {lost}) and resent in frame {resend} "
                f"({mech.replace('_', ' ')}): the server could not answer before it")
    return True


def _rwnd(ctx: _Context, s: int, a: int, b: int, tol: int, c: _Candidate) -> bool:
    sub = ctx.of("tcp_events", s)
    if len(sub) == 0:
        return False
    t = _ns(sub["ts"])
    kind = sub["kind"].astype("string").to_numpy(dtype=object)
    win = (t >= a - tol) & (t <= b)
    zero = win & (kind == "zero_window")
    full = win & (kind == "window_full")
    if not (zero.any() or full.any()):
        return False
    after = (t >= a) & (t <= b + tol)
    probes = after & np.isin(kind, ("zero_window_probe", "zero_window_probe_ack",
                                    "window_update"))
    frames = sub["frame"].to_numpy(np.int64)
    mech = "zero_window" if zero.any() else "window_full"
    c.cause, c.mechanism = "receive_window", mech
    first = int(frames[zero][0] if zero.any() else frames[full][0])
    c.key = ("rwnd", first)
    c.evidence = sorted({int(x) for x in frames[zero | full | probes]})
    c.detail = (f"the receiver's window was full ({mech.replace('_', ' ')} from frame {first}): "
                "the client did not read")
    if ctx.pk is not None:
        _transport_edges(ctx.pk, s, a, b + tol, c)
    return True


def _transport_edges(pk: _PacketIndex, s: int, a: int, b: int, c: _Candidate) -> None:
    """A window stall runs from the server's last new data segment to its next one: the
    longest silence of new server data in the window (a HTTP/2 frame completes only when its
    last byte arrives, up to a frame's worth later)."""
    d = pk.by.get(s)
    if d is None or len(d["s2c_ts"]) == 0:
        return
    ts, ln, end, fr = d["s2c_ts"], d["s2c_len"], d["s2c_end"], d["s2c_fr"]
    prev = np.r_[0, end[:-1]]
    new = (ln > 1) & (end > prev)  # new bytes (not a resend, not a 1-byte probe)
    inside = np.flatnonzero(new & (ts >= a) & (ts <= b))
    if inside.size < 2:
        return
    g = int(np.argmax(np.diff(ts[inside])))  # the longest silence of new data in the window
    k, j = int(inside[g]), int(inside[g + 1])
    c.start, c.start_frame, c.end, c.end_frame = int(ts[k]), int(fr[k]), int(ts[j]), int(fr[j])


def _loss_stalls(ctx: _Context, reqs: list[_Req]) -> list[_Candidate]:
    """Every lost server segment (tcp_losses kind loss) while a response was in progress is a
    stall, whatever its length: the receiver could read nothing behind it until the resend.
    Seen at the sender (the first copy captured) it runs from the first copy to the resend;
    seen at the receiver, from the connection's last delivery before the hole to the resend."""
    lo = ctx.losses
    out: list[_Candidate] = []
    if len(lo) == 0:
        return out
    m = lo["kind"].astype("string").eq("loss").fillna(False).to_numpy(bool) \
        & lo["frame"].notna().to_numpy(bool) \
        & lo["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool)
    by_conn: dict[tuple[int, int], list[_Req]] = {}
    for q in reqs:
        by_conn.setdefault(q.conn, []).append(q)
    for r in lo[m].itertuples(index=False):
        conn = (0, _na_int(r.tcp_stream))
        mine = by_conn.get(conn)
        if not mine:
            continue
        resend, end = _na_int(r.frame), _ns1(r.ts)
        sender_side = not _isna(r.first_frame)
        if sender_side:
            start, start_frame = _ns1(r.first_ts), _na_int(r.first_frame)
        elif not _isna(r.gap_ts):
            gap = _ns1(r.gap_ts)
            ts = ctx.conn_deliveries(conn, reqs)
            before = ts[ts < gap]
            start = int(before[-1]) if before.size else gap
            start_frame = _frame_at(ctx, mine[0], start, np.zeros(0, np.int64),
                                    np.zeros(0, np.int64)) or _na_int(r.gap_frame)
        else:
            continue  # a lost last segment seen at the receiver: its resend looks like new data
        hit = [q for q in mine if q.sent <= end and (q.end == _NA or q.end >= start - 1_000_000)]
        if not hit or end <= start:
            continue
        streams: set[int] = set()
        hol: list[int] | None = None
        proto = hit[0].protocol
        if proto == "HTTP/2":
            sids, frs, _kinds = ctx.h2_response_frames(conn[1])
            k = (frs >= start_frame) & (frs <= resend) if sender_side else frs == resend
            hol = sorted({int(x) for x in sids[k] if x != 0})
            streams = set(hol)
        mech = "unknown" if _isna(r.recovery) else str(r.recovery)
        lost = start_frame if sender_side else resend
        pm = _Candidate(conn=conn, protocol=proto, scope="connection", phase="waiting",
                        start=start, end=end, start_frame=start_frame, end_frame=resend,
                        streams=streams, request_index=None, cadence=math.nan,
                        threshold=math.nan, cause="unknown")
        if _pmtu(ctx, conn[1], start, end, pm):  # a segment too big for the path, not a loss
            pm.phase = "streaming" if any(q.first != _NA and q.first <= start for q in hit) \
                else "waiting"
            pm.request_index = hit[0].request_index if proto != "HTTP/2" else None
            out.append(pm)
            continue
        ev = sorted({_na_int(v) for v in (r.first_frame, r.gap_frame, r.frame) if not _isna(v)})
        streaming = any(q.first != _NA and q.first <= start for q in hit)
        where = (f"after the capture point (first copy: frame {lost})" if sender_side else
                 f"before the capture point (the hole seen at frame {_txt(r.gap_frame)})")
        detail = (f"a server segment was lost {where} and resent in frame {resend} "
                  f"({mech.replace('_', ' ')})")
        if mech == "unknown" and _na_int(r.dup_acks) == 0:
            detail += (f": resent {_f(r.recovery_ms):.0f} ms later without duplicate ACKs, a "
                       "tail-loss probe or a retransmission timeout (when both fire at about "
                       "the same time the capture cannot tell them apart)")
        if hol:
            detail += (f"; {len(hol)} HTTP/2 stream{'s' if len(hol) != 1 else ''} had data "
                       "behind it (head-of-line blocking)")
        out.append(_Candidate(
            conn=conn, protocol=proto, scope="connection",
            phase="streaming" if streaming else "waiting", start=start, end=end,
            start_frame=start_frame, end_frame=resend, streams=streams,
            request_index=hit[0].request_index if proto != "HTTP/2" else None,
            cadence=math.nan, threshold=math.nan, cause="loss_recovery", mechanism=mech,
            key=("loss", resend), lost_frame=lost, resend_frame=resend, hol=hol, evidence=ev,
            detail=detail, direction=_S2C, resend_ts=end))
    return out


@dataclass(slots=True)
class _QuicResend:
    ts: int
    frame: int
    first_ts: int  # _NA: the first copy was not captured (lost before the capture point)
    first_frame: int | None
    reveal_ts: int  # the first later byte seen (when the first copy was not captured)
    reveal_frame: int | None
    pn: int = -1
    """packet number of the resend's packet (-1: not known)"""
    first_pn: int = -1
    """packet number of the latest earlier copy's packet, the one the sender found lost
    (-1: no earlier copy captured)"""
    prev_ts: int = _NA
    """time of that copy"""
    reveal_pn: int = -1
    """packet number of the packet with the first later byte"""


def _quic_resends(f: pd.DataFrame, direction: str = _S2C
                  ) -> dict[tuple[int, int], list[_QuicResend]]:
    """The STREAM frames of ``direction`` that resent bytes of their stream, by (QUIC
    connection, stream id), in capture order."""
    out: dict[tuple[int, int], list[_QuicResend]] = {}
    if len(f) == 0:
        return out
    m = f["frame_type"].astype("string").eq("STREAM").fillna(False).to_numpy(bool) \
        & f["direction"].astype("string").eq(direction).fillna(False).to_numpy(bool) \
        & f["stream_id"].notna().to_numpy(bool) & f["length"].fillna(0).gt(0).to_numpy(bool)
    sub = f[m]
    # off, end, ts, frame, packet number
    seen: dict[tuple[int, int], list[tuple[int, int, int, int, int]]] = {}
    for q, sid, off, ln, t, fr, pn in zip(sub["quic_connection"].to_numpy(np.int64),
                                          sub["stream_id"].to_numpy(np.int64),
                                          sub["offset"].fillna(0).to_numpy(np.int64),
                                          sub["length"].to_numpy(np.int64), _ns(sub["ts"]),
                                          sub["frame"].to_numpy(np.int64),
                                          sub["packet_number"].to_numpy(np.int64), strict=True):
        key = (int(q), int(sid))
        got = seen.setdefault(key, [])
        end = int(off) + int(ln)
        top = max((e for _o, e, _t, _f, _p in got), default=0)
        if got and int(off) < top:
            copies = [(tt, ff, pp) for o, e, tt, ff, pp in got if o < end and e > int(off)]
            first = copies[0] if copies else None
            prev = copies[-1] if copies else None
            later = next(((tt, ff, pp) for o, _e, tt, ff, pp in got if o >= end), None)
            out.setdefault(key, []).append(_QuicResend(
                ts=int(t), frame=int(fr),
                first_ts=first[0] if first else _NA, first_frame=first[1] if first else None,
                reveal_ts=later[0] if later else int(t), reveal_frame=later[1] if later
                else None, pn=int(pn), first_pn=prev[2] if prev else -1,
                prev_ts=prev[0] if prev else _NA, reveal_pn=later[2] if later else -1))
        got.append((int(off), end, int(t), int(fr), int(pn)))
    return out


#: RFC 9002 §6.1.1 kPacketThreshold: a packet is lost once a packet this many numbers
#: later was acknowledged
_K_PACKET_THRESHOLD = 3
#: receiver vantage: an ACK sent within this of (resend - one RTT) may or may not have
#: reached the sender before it resent: the mechanism is then unknown
_ACK_EDGE_NS = 1_000_000


@dataclass(slots=True)
class _QuicAcks:
    """One QUIC connection's application-space packets of one sender and the peer's 1-RTT
    ACK frames, for RFC 9002 loss detection (§6.1 packet and time thresholds, §6.2 probe
    timeout)."""

    pns: set[int]
    """the sender's 0-RTT and 1-RTT packet numbers seen"""
    ack_ts: np.ndarray
    ack_frame: np.ndarray
    ack_largest: np.ndarray
    ack_ranges: list[list[tuple[int, int]]]
    rtt_ns: float
    """least RTT sample of the peer's packets (the path RTT at the peer's vantage)"""
    sender: str = "server"
    peer: str = "client"


def _quic_acks(cap: Capture, q: int, direction: str = _S2C) -> _QuicAcks:
    """the packets of ``direction``'s sender on QUIC connection q, the peer's ACK frames"""
    back = _C2S if direction == _S2C else _S2C
    p = _table(cap, "quic_packets")
    p = p[(p["quic_connection"] == q).to_numpy(bool)
          & p["direction"].astype("string").eq(direction).fillna(False).to_numpy(bool)
          & p["packet_type"].astype("string").isin(("0rtt", "1rtt")).fillna(False)
          .to_numpy(bool)]
    pns = {int(x) for x in p["packet_number"].dropna()}
    f = _table(cap, "quic_frames")
    a = f[(f["quic_connection"] == q).to_numpy(bool)
          & f["direction"].astype("string").eq(back).fillna(False).to_numpy(bool)
          & f["frame_type"].astype("string").eq("ACK").fillna(False).to_numpy(bool)
          & f["packet_type"].astype("string").eq("1rtt").fillna(False).to_numpy(bool)
          & f["ack_largest"].notna().to_numpy(bool)]
    ranges: list[list[tuple[int, int]]] = []
    for txt in a["ack_ranges"].astype("string").fillna("").tolist():
        rs = []
        for part in str(txt).split(","):
            if part:
                lo, _, hi = part.partition("-")
                rs.append((int(lo), int(hi or lo)))
        ranges.append(rs)
    qc = _table(cap, "quic_connections")
    row = qc[(qc["quic_connection"] == q).to_numpy(bool)]
    sender, peer = ("server", "client") if direction == _S2C else ("client", "server")
    rtt = float(row[f"{peer}_min_rtt_ms"].iloc[0]) * 1e6 if len(row) else math.nan
    return _QuicAcks(pns=pns, ack_ts=_ns(a["ts"]), ack_frame=a["frame"].to_numpy(np.int64),
                     ack_largest=a["ack_largest"].to_numpy(np.int64), ack_ranges=ranges,
                     rtt_ns=rtt, sender=sender, peer=peer)


def _quic_mechanism(acks: _QuicAcks, r: _QuicResend
                    ) -> tuple[str | None, str, int | None, int | None]:
    """How the sender found the packet behind resend ``r`` lost (RFC 9002), why, the peer's
    ACK that decided it (None for pto or unknown) and the lost packet's number (None when
    not known).

    At the sender's vantage (the first copy captured) the peer's ACKs count as they
    arrive; at the receiver's (the first copy lost before the capture point: the lost
    packet is the number missing below the first later packet) an ACK counts when it was
    sent at least one RTT (the least sample) before the resend arrived, and the mechanism
    is None when an ACK that would change it lies within 1 ms of that edge, or when the
    RTT or the lost packet number is not known. Then: the ACKs before the resend
    acknowledged a packet ``_K_PACKET_THRESHOLD`` or more numbers after the lost one:
    packet_threshold (§6.1.1); a later packet only: time_threshold (§6.1.2, lost 9/8 RTT
    after it was sent); none: pto (§6.2, the probe timeout fired with no ACK of anything
    later; the resent data is the probe)."""
    sender = r.first_pn >= 0
    lost = r.first_pn
    if not sender:
        if r.reveal_pn < 0:
            return None, "the lost packet's number is not known (no later packet decrypted)", \
                None, None
        below = [n for n in range(r.reveal_pn - 1, max(-1, r.reveal_pn - 64), -1)
                 if n not in acks.pns]
        if not below:
            return None, "no packet number is missing below the first later packet", None, None
        lost = below[0]
    if sender:
        edge = r.ts
    else:
        if math.isnan(acks.rtt_ns):
            return None, (f"no RTT sample of the {acks.peer}'s packets: which ACKs reached "
                          f"the {acks.sender} before it resent cannot be told"), None, lost
        edge = int(r.ts - acks.rtt_ns)

    def verdict(upto: int) -> tuple[str, int | None]:
        top, frame = -1, None
        k = acks.ack_ts <= upto
        if sender:
            k &= acks.ack_ts >= r.prev_ts
        for i in np.flatnonzero(k):
            if any(lo <= lost <= hi for lo, hi in acks.ack_ranges[i]):
                return "acked", int(acks.ack_frame[i])
            if acks.ack_largest[i] > top:
                top, frame = int(acks.ack_largest[i]), int(acks.ack_frame[i])
        if top >= lost + _K_PACKET_THRESHOLD:
            return "packet_threshold", frame
        if top > lost:
            return "time_threshold", frame
        return "pto", None

    mech, frame = verdict(edge)
    if not sender and verdict(edge - _ACK_EDGE_NS)[0] != verdict(edge + _ACK_EDGE_NS)[0]:
        return None, (f"the {acks.peer}'s ACK frames around one RTT before the resend would "
                      f"give different answers: lost packet {lost}, the capture is at the "
                      "receiver"), None, lost
    if mech == "acked":
        return None, (f"the {acks.peer} acknowledged packet {lost} (frame {frame}) before the "
                      "resend: a spurious resend"), frame, lost
    where = "" if sender else " (seen at the receiver: ACKs sent one RTT before the resend)"
    if mech == "packet_threshold":
        return mech, (f"packet {lost} declared lost by the packet threshold: the {acks.peer}'s "
                      f"ACK in frame {frame} acknowledged a packet {_K_PACKET_THRESHOLD} or "
                      f"more numbers later (RFC 9002 §6.1.1){where}"), frame, lost
    if mech == "time_threshold":
        return mech, (f"packet {lost} declared lost by the time threshold: the {acks.peer}'s "
                      f"ACK in frame {frame} acknowledged a later packet, fewer than "
                      f"{_K_PACKET_THRESHOLD} after it, so the {acks.sender} waited 9/8 of an "
                      f"RTT (RFC 9002 §6.1.2){where}"), frame, lost
    return mech, (f"packet {lost}: no ACK of a later packet reached the {acks.sender} before "
                  f"the resend: its probe timeout fired and the data went out again as the "
                  f"probe (RFC 9002 §6.2){where}"), None, lost


def _quic_loss_fill(ctx: _Context, c: _Candidate, q: int, sid: int, r: _QuicResend) -> None:
    mech, why, ack, _lost = _quic_mechanism(ctx.quic_acks(q), r)
    c.cause, c.mechanism, c.key = "loss_recovery", mech, ("qloss", q, sid, r.frame)
    c.direction = f"{_S2C}:{sid}"
    c.resend_frame, c.resend_ts = r.frame, r.ts
    c.lost_frame = r.first_frame if r.first_frame is not None else r.frame
    c.evidence = sorted({x for x in (r.first_frame, r.reveal_frame, r.frame, ack)
                         if x is not None})
    where = (f"after the capture point (first copy: frame {r.first_frame})"
             if r.first_frame is not None else
             f"before the capture point (later data seen at frame {r.reveal_frame})")
    c.detail = (f"a QUIC packet with this stream's data was lost {where} and its data resent "
                f"in frame {r.frame} ({why if mech else 'mechanism unknown: ' + why}); QUIC "
                "streams do not wait for each other (no head-of-line blocking across streams)")


def _quic_loss_stalls(ctx: _Context, reqs: list[_Req]) -> list[_Candidate]:
    """Every resend of an HTTP/3 response stream's data is a stall of that stream alone, from
    the first copy (or the stream's last delivery before the hole) to the resend."""
    out: list[_Candidate] = []
    for req in reqs:
        if req.conn[0] != 1 or req.stream_id is None:
            continue
        for r in ctx.quic_resends(req.conn[1], req.stream_id):
            if not (req.sent <= r.ts <= req.end + 1_000_000):
                continue
            if r.first_ts != _NA:
                start, start_frame = r.first_ts, r.first_frame
            else:
                before = req.ts[req.ts < r.reveal_ts]
                start = int(before[-1]) if before.size else r.reveal_ts
                k = np.flatnonzero(req.ts == start)
                start_frame = int(req.frames[k[0]]) if k.size else r.reveal_frame
            if r.ts <= start:
                continue
            c = _Candidate(
                conn=req.conn, protocol=req.protocol, scope="stream",
                phase="streaming" if req.first != _NA and req.first <= start else "waiting",
                start=start, end=r.ts, start_frame=start_frame, end_frame=r.frame,
                streams={req.stream_id}, request_index=None, cadence=math.nan,
                threshold=math.nan, cause="unknown")
            _quic_loss_fill(ctx, c, req.conn[1], req.stream_id, r)
            out.append(c)
    return out


def quic_resends(cap: Capture) -> pd.DataFrame:
    """One row per STREAM frame that resent bytes of its stream, either direction, with
    the RFC 9002 rule by which its sender found the packet lost (schema
    :data:`QUIC_RESENDS`), in capture order; empty without decrypted QUIC. The stalls of
    HTTP/3 responses take their ``mechanism`` from the same rule. Never raises on the
    tables' content."""
    f = _table(cap, "quic_frames")
    rows: list[tuple[Any, ...]] = []
    for d in (_C2S, _S2C):
        acks: dict[int, _QuicAcks] = {}
        for (q, sid), lst in _quic_resends(f, d).items():
            if q not in acks:
                acks[q] = _quic_acks(cap, q, d)
            for r in lst:
                mech, why, ack, lost = _quic_mechanism(acks[q], r)
                rows.append((q, d, sid, r.frame, r.ts, r.pn if r.pn >= 0 else None,
                             r.first_frame, lost, mech, ack, why))
    rows.sort(key=lambda x: (x[4], x[3], x[2]))
    return QUIC_RESENDS.frame(rows)


def _merge(cands: list[_Candidate]) -> list[_Candidate]:
    """one candidate per (connection, cause, evidence): the streams of a shared stall"""
    out: dict[Any, _Candidate] = {}
    for c in cands:
        k: Any = (c.conn, c.cause, c.key) if c.key is not None else (c.conn, c.cause, c.start)
        if c.cause == "server_pause" and c.scope == "stream":
            k = (c.conn, c.cause, c.key, id(c))  # each stream's own pause
        have = out.get(k)
        if have is None:
            out[k] = c
            continue
        if c.end - c.start > have.end - have.start:
            have.cadence, have.threshold = c.cadence, c.threshold
        if c.start < have.start:
            have.start, have.start_frame = c.start, c.start_frame
        if c.end > have.end:
            have.end, have.end_frame = c.end, c.end_frame
        have.streams |= c.streams
        if c.phase == "streaming":
            have.phase = "streaming"
    for c in out.values():
        if c.hol:
            c.streams |= set(c.hol)
    return _merge_loss_episodes(list(out.values()))


def _merge_loss_episodes(cands: list[_Candidate]) -> list[_Candidate]:
    """Losses of one recovery episode (windows that overlap on one connection, one
    direction) are one stall: the receiver waited from the first stop to the last resend.
    The row names the resend that began the recovery (its mechanism: a tail-loss probe
    that led to a fast retransmit is a tail-loss probe) and lists the others."""
    rest = [c for c in cands if c.cause != "loss_recovery"]
    loss = sorted((c for c in cands if c.cause == "loss_recovery"),
                  key=lambda c: (c.conn, c.direction or "", c.start, c.end))
    out: list[_Candidate] = []
    members: dict[int, list[_Candidate]] = {}
    for c in loss:
        last = out[-1] if out else None
        if last is not None and last.conn == c.conn and c.direction == last.direction \
                and c.start < last.end:
            members[id(last)].append(c)
            last.losses += c.losses
            if c.end > last.end:
                last.end, last.end_frame = c.end, c.end_frame
            if c.start < last.start:
                last.start, last.start_frame = c.start, c.start_frame
            last.streams |= c.streams
            if c.hol is not None:
                last.hol = sorted(set(last.hol or []) | set(c.hol))
            last.evidence = sorted(set(last.evidence) | set(c.evidence))
            if c.phase == "streaming":
                last.phase = "streaming"
            continue
        out.append(c)
        members[id(c)] = [c]
    for c in out:
        group = members[id(c)]
        if len(group) < 2:
            continue
        got = sorted((g.resend_ts, g.resend_frame or 0, g.mechanism, g.lost_frame, g.detail)
                     for g in group)
        ts0, fr0, mech0, lost0, detail0 = got[0]
        c.mechanism, c.resend_frame, c.resend_ts, c.lost_frame = mech0, fr0, ts0, lost0
        first_copies = sorted({g[3] for g in got if g[3] is not None and g[3] != g[1]})
        seen = (f"first copies: frames {', '.join(map(str, first_copies))}" if first_copies
                else "lost before the capture point")

        def _m(m: str | None) -> str:
            return (m or "unknown").replace("_", " ")

        c.detail = (
            f"{len(got)} lost segments of one recovery episode ({seen}): resent first in "
            f"frame {fr0} ({_m(mech0)}), "
            "then in " + ", ".join(f"frame {g[1]} ({_m(g[2])})" for g in got[1:])
            + ("; " + detail0.split("; ", 1)[1] if "; " in detail0 else ""))
    return rest + out


def _client_pauses(ctx: _Context, lat: pd.DataFrame, min_ns: float) -> list[_Candidate]:
    out: list[_Candidate] = []
    if len(lat) < 2:
        return out
    tcp = lat["tcp_stream"].fillna(-1).to_numpy(np.int64)
    quic = lat["quic_connection"].fillna(-1).to_numpy(np.int64)
    req, end = _ns(lat["request_ts"]), _ns(lat["end_ts"])
    order = np.lexsort((req, quic, tcp))
    recs = lat[["protocol", "stream_id", "request_index", "request_frame"]].astype(
        object).to_dict("records")
    prev: tuple[int, int] | None = None
    latest = _NA
    dead: set[tuple[int, int]] = set()  # a response did not end: later requests overlap it
    for i in order:
        key = (int(tcp[i]), int(quic[i]))
        if key in dead:
            continue
        if key != prev:
            prev, latest = key, _NA
        elif latest != _NA and req[i] != _NA and req[i] - latest >= min_ns:
            r = recs[i]
            conn = (1, int(quic[i])) if quic[i] >= 0 else (0, int(tcp[i]))
            sid = None if _isna(r["stream_id"]) else int(r["stream_id"])
            idx = None if _isna(r["request_index"]) else int(r["request_index"])
            out.append(_Candidate(
                conn=conn, protocol=str(r["protocol"]), scope="connection", phase="waiting",
                start=int(latest), end=int(req[i]),
                start_frame=_conn_frame_at(ctx, conn, int(latest)),
                end_frame=None if _isna(r["request_frame"]) else int(r["request_frame"]),
                streams={sid} if sid is not None else set(), request_index=idx,
                cadence=math.nan, threshold=min_ns / 1e6, cause="client_pause",
                detail=("every earlier response on the connection had ended; the client "
                        f"sent its next request {(req[i] - latest) / 1e6:.0f} ms later")))
        if end[i] == _NA:
            dead.add(key)
            continue
        latest = int(end[i]) if latest == _NA else max(latest, int(end[i]))
    return out


def _conn_frame_at(ctx: _Context, conn: tuple[int, int], t: int) -> int | None:
    """the frame of a delivery at time t on a connection (HTTP/2, HTTP/3 or, with the
    packets table, an HTTP/1.x data packet)"""
    if conn[0] == 1:
        ts, fr = ctx.h3_conn.get((conn[1],), _EMPTY)
    elif (conn[1],) in ctx.h2_conn:
        ts, fr = ctx.h2_conn[(conn[1],)]
    elif ctx.pk is not None and conn[1] in ctx.pk.by:
        ts, fr = ctx.pk.by[conn[1]]["dts"], ctx.pk.by[conn[1]]["dfr"]
    else:
        return None
    hit = np.flatnonzero(ts == t)
    return int(fr[hit[-1]]) if hit.size else None


def _stall_row(ctx: _Context, c: _Candidate) -> tuple[Any, ...]:
    tcp = c.conn[1] if c.conn[0] == 0 else None
    quic = c.conn[1] if c.conn[0] == 1 else None
    streams = sorted(s for s in c.streams if s is not None)
    lo = min(x for x in (c.start_frame, c.end_frame, *c.evidence) if x is not None) \
        if (c.start_frame is not None or c.evidence) else None
    hi = max(x for x in (c.start_frame, c.end_frame, *c.evidence) if x is not None) \
        if (c.end_frame is not None or c.evidence) else None
    filt = f"tcp.stream eq {tcp}" if tcp is not None else f"quic.connection.number eq {quic}"
    if lo is not None and hi is not None:
        filt += f" && frame.number >= {lo} && frame.number <= {hi}"
    dur = (c.end - c.start) / 1e6
    where = (f"stream{'s' if len(streams) != 1 else ''} {','.join(map(str, streams))}"
             if streams else f"exchange {c.request_index}" if c.request_index is not None
             else "the connection")
    conn_txt = f"tcp.stream {tcp}" if tcp is not None else f"QUIC connection {quic}"
    detail = f"{where} on {conn_txt}: nothing delivered for {dur:.0f} ms; {c.detail}"
    if c.cause == "unknown":
        detail += " (cause unknown)"
    return (
        tcp, quic, c.protocol, c.scope, ",".join(map(str, streams)), len(streams),
        c.request_index, c.start, c.end, dur, c.start_frame, c.end_frame, c.phase,
        c.cadence if not math.isnan(c.cadence) else None, c.threshold, c.cause, c.mechanism,
        c.lost_frame, c.resend_frame,
        ",".join(map(str, c.hol)) if c.hol is not None else None,
        len(c.hol) if c.hol is not None else None,
        ",".join(map(str, sorted(set(c.evidence)))), detail, filt,
    )


# -- the time split -------------------------------------------------------------------------


def request_timing(
    cap: Capture,
    *,
    min_stall_ms: float = MIN_STALL_MS,
    cadence_factor: float = CADENCE_FACTOR,
    client_pause_ms: float | None = CLIENT_PAUSE_MS,
    stall_table: pd.DataFrame | None = None,
    latency: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per request of ``cap`` (schema :data:`REQUEST_TIMING`), in the order of
    :func:`~pcaptools.analyses.latency.stream_latency`: its time split into parts that add
    up to ``total_ms``. The stall options are those of :func:`stalls` (``stall_table``: its
    result, when already computed; ``latency``: ``stream_latency(cap)``, likewise). Missing
    facts are NaN / NA, never an exception."""
    lat = stream_latency(cap) if latency is None else latency
    if len(lat) == 0:
        return REQUEST_TIMING.frame([])
    st = stall_table if stall_table is not None else stalls(
        cap, min_stall_ms=min_stall_ms, cadence_factor=cadence_factor,
        client_pause_ms=client_pause_ms, latency=lat)
    rtt = _rtts(cap, lat)
    by_conn: dict[tuple[int, int], list[tuple[int, int, str, set[int], int | None]]] = {}
    for r in st.itertuples(index=False):
        if r.cause == "client_pause":
            continue  # before the request: not in its time
        conn = (1, _na_int(r.quic_connection)) if not _isna(r.quic_connection) else (
            0, _na_int(r.tcp_stream))
        ids = {int(x) for x in str(r.streams).split(",") if x} if isinstance(r.streams, str) \
            else set()
        by_conn.setdefault(conn, []).append((_ns1(r.start_ts), _ns1(r.end_ts), str(r.cause),
                                             ids, None if _isna(r.request_index)
                                             else _na_int(r.request_index)))
    recs = lat.astype(object).to_dict("records")
    rows = [_timing_row(r, rtt[i], by_conn) for i, r in enumerate(recs)]
    return REQUEST_TIMING.frame(rows)


def _timing_row(r: dict[Any, Any], rtt: tuple[float, str | None, int | None],
                by_conn: dict[tuple[int, int], list[tuple[int, int, str, set[int],
                                                          int | None]]]) -> tuple[Any, ...]:
    proto = str(r["protocol"])
    h3 = proto == "HTTP/3"
    conn = (1, int(r["quic_connection"])) if h3 else (0, int(r["tcp_stream"]))
    sid = None if _isna(r["stream_id"]) else int(r["stream_id"])
    idx = None if _isna(r["request_index"]) else int(r["request_index"])
    req, sent = _ns1(r["request_ts"]), _ns1(r["request_sent_ts"])
    resp, tok, end = _ns1(r["response_start_ts"]), _ns1(r["first_token_ts"]), _ns1(r["end_ts"])
    if sent == _NA:
        sent = req
    conn_start, dns_start = _ns1(r["connection_start_ts"]), _ns1(r["dns_start_ts"])
    reused = None if _isna(r["reused"]) else bool(r["reused"])
    dns, connect, tls = _f(r["dns_ms"]), _f(r["connect_ms"]), _f(r["tls_ms"])
    if reused:
        setup, start = "reused", req
        dns = connect = tls = client = 0.0
    elif reused is False and conn_start != _NA:
        setup = "new_connection"
        start = dns_start if dns_start != _NA else conn_start
        if dns_start == _NA:
            dns = math.nan
        if h3:
            connect = 0.0
            if not math.isnan(tls) and req != _NA:
                tls = min(tls, (req - conn_start) / 1e6)
        before = (req - start) / 1e6 if req != _NA else math.nan
        known = sum(x for x in (dns, connect, tls) if not math.isnan(x))
        client = before - known if not math.isnan(before) else math.nan
    else:
        setup, start = "mid_connection", req
        dns = connect = tls = client = math.nan
    upload = _d(sent, req)
    ttfb = _d(resp, sent)
    rtt_ms, source, rframe = rtt
    net = math.nan if math.isnan(rtt_ms) or math.isnan(ttfb) else min(rtt_ms, ttfb)
    mine = [x for x in by_conn.get(conn, ()) if (sid is not None and sid in x[3])
            or (sid is None and (x[4] == idx or (x[4] is None and not x[3])))]
    body_from = tok if tok != _NA else resp
    spans = _union([(a, b) for a, b, *_ in mine])
    stall_total = sum(_overlap(a, b, sent, end) for a, b in spans) if end != _NA else math.nan
    wait_stall = sum(_overlap(a, b, sent, resp) for a, b in spans) if resp != _NA else 0.0
    model_stall = sum(_overlap(a, b, resp, tok) for a, b in spans) \
        if resp != _NA and tok != _NA else 0.0
    stream_stall = sum(_overlap(a, b, body_from, end) for a, b in spans) \
        if body_from != _NA and end != _NA else 0.0
    if math.isnan(ttfb):
        server = math.nan
    else:
        server = ttfb - (0.0 if math.isnan(net) else net) - wait_stall
        if server < 0:  # the round trip overlapped the stall: the network part gives way
            net = max(0.0, (0.0 if math.isnan(net) else net) + server)
            server = 0.0
    model = _d(tok, resp) - model_stall if tok != _NA and resp != _NA else math.nan
    streaming = _d(end, body_from) - stream_stall if body_from != _NA else math.nan
    total = _d(end, start)
    worst = max(mine, key=lambda x: x[1] - x[0])[2] if mine else None
    label = (f"{proto} stream {sid}" if sid is not None else f"{proto} exchange {idx}") + (
        f" on QUIC connection {conn[1]}" if h3 else f" on tcp.stream {conn[1]}")
    sentence = _sentence(label, r, dns, connect, tls, client, upload, net, server, model,
                         streaming, stall_total, mine, total, tok != _NA)
    return (
        None if h3 else conn[1], conn[1] if h3 else None, proto, idx, sid, r["method"],
        r["path"], r["status"], start, None if end == _NA else end, total, setup,
        dns, connect, tls, client, upload, net, server, model, streaming, stall_total,
        len(mine), worst, r["ttfb_ms"], r["ttft_ms"], rtt_ms, source, rframe, sentence,
        r["wireshark_filter"],
    )


def _sentence(label: str, r: dict[Any, Any], dns: float, connect: float, tls: float, client: float,
              upload: float, net: float, server: float, model: float, streaming: float,
              stall: float, mine: list[tuple[int, int, str, set[int], int | None]],
              total: float, tokens: bool) -> str:
    ttft, ttfb = _f(r["ttft_ms"]), _f(r["ttfb_ms"])
    if not math.isnan(ttft):
        head = f"{label}: TTFT {ttft:.0f} ms"
    elif not math.isnan(ttfb):
        head = f"{label}: TTFB {ttfb:.0f} ms"
    else:
        head = f"{label}: no response seen"
    parts = []
    setup = sum(x for x in (dns, connect, tls, client) if not math.isnan(x))
    if setup >= 0.5:
        parts.append(f"{setup:.0f} ms connection setup")
    for v, what in ((upload, "request upload"), (net, "network round trip"),
                    (server, "server wait before the headers"),
                    (model, "model wait after the headers")):
        if not math.isnan(v) and v >= 0.5:
            parts.append(f"{v:.0f} ms {what}")
    if math.isnan(net) and not math.isnan(ttfb):
        parts.append("no RTT measured")
    text = head + (": " + ", ".join(parts) if parts else "")
    if not math.isnan(streaming) and not math.isnan(total):
        text += (f"; {'streaming' if tokens else 'body transfer'} {streaming:.0f} ms, "
                 f"total {total:.0f} ms")
    if mine:
        causes: dict[str, float] = {}
        for a, b, cause, *_ in mine:
            causes[cause] = causes.get(cause, 0.0) + (b - a) / 1e6
        text += "; stalled " + ", ".join(f"{v:.0f} ms ({k.replace('_', ' ')})"
                                         for k, v in sorted(causes.items(),
                                                            key=lambda kv: -kv[1]))
    else:
        text += "; no stall"
    return text


_SPACE = {"initial": 0, "handshake": 1, "0rtt": 2, "1rtt": 2}


def _quic_rtt_samples(cap: Capture) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """QUIC connection -> (ts, rtt ms, frame) of the server's ACK frames that newly
    acknowledged a larger packet number of a client packet seen here (RFC 9002 §5.1, as
    quic_connections.client_rtt_samples counts them): ACK time minus that packet's time."""
    pk, fr = _table(cap, "quic_packets"), _table(cap, "quic_frames")
    out: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if len(pk) == 0 or len(fr) == 0:
        return out
    cp = pk[pk["direction"].astype("string").eq(_C2S).fillna(False).to_numpy(bool)
            & pk["packet_number"].notna().to_numpy(bool)]
    sent: dict[tuple[int, int, int], int] = {}
    for q, kind, pn, t in zip(cp["quic_connection"].to_numpy(np.int64),
                              cp["packet_type"].astype(str), cp["packet_number"].to_numpy(
                                  np.int64), _ns(cp["ts"]), strict=True):
        sent.setdefault((int(q), _SPACE.get(kind, -1), int(pn)), int(t))
    acks = fr[fr["frame_type"].astype("string").eq("ACK").fillna(False).to_numpy(bool)
              & fr["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool)
              & fr["ack_largest"].notna().to_numpy(bool)]
    largest: dict[tuple[int, int], int] = {}
    rows: dict[int, list[tuple[int, float, int]]] = {}
    for q, kind, big, t, f in zip(acks["quic_connection"].to_numpy(np.int64),
                                  acks["packet_type"].astype(str),
                                  acks["ack_largest"].to_numpy(np.int64), _ns(acks["ts"]),
                                  acks["frame"].to_numpy(np.int64), strict=True):
        key = (int(q), _SPACE.get(kind, -1))
        if int(big) <= largest.get(key, -1):
            continue
        largest[key] = int(big)
        t0 = sent.get((key[0], key[1], int(big)))
        if t0 is not None and int(t) >= t0:
            rows.setdefault(int(q), []).append((int(t), (int(t) - t0) / 1e6, int(f)))
    for q, r in rows.items():
        arr = np.array(r, dtype=object)
        out[q] = (arr[:, 0].astype(np.int64), arr[:, 1].astype(np.float64),
                  arr[:, 2].astype(np.int64))
    return out


def _rtts(cap: Capture, lat: pd.DataFrame) -> list[tuple[float, str | None, int | None]]:
    """(rtt ms, source, frame) per stream_latency row"""
    p = cap.packets
    samples: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if len(p):
        m = p["ack_rtt_ms"].notna().to_numpy(bool) \
            & p["direction"].astype("string").eq(_S2C).fillna(False).to_numpy(bool) \
            & p["tcp_stream"].notna().to_numpy(bool)
        sp = p[m]
        st = sp["tcp_stream"].to_numpy(np.int64)
        ts = _ns(sp["ts"])
        v = sp["ack_rtt_ms"].to_numpy(np.float64)
        fr = sp["frame"].to_numpy(np.int64)
        for s in np.unique(st):
            k = st == s
            samples[int(s)] = (ts[k], v[k], fr[k])
    hs = cap.tcp_handshakes
    hrtt: dict[int, float] = {}
    for s, v, n1, n2 in zip(hs["tcp_stream"], hs["syn_to_synack_ms"], hs["syn_count"],
                            hs["synack_count"], strict=True):
        if not _isna(v) and int(n1) == 1 and int(n2) == 1:
            hrtt[int(s)] = float(v)
    q = _table(cap, "quic_connections")
    qrtt: dict[int, tuple[float, str]] = {}
    for c, sm, mn in zip(q["quic_connection"], q["client_smoothed_rtt_ms"],
                         q["client_min_rtt_ms"], strict=True):
        if not _isna(sm):
            qrtt[int(c)] = (float(sm), "quic_smoothed_rtt")
        elif not _isna(mn):
            qrtt[int(c)] = (float(mn), "quic_min_rtt")
    qsamples = _quic_rtt_samples(cap) if (lat["protocol"].astype(str) == "HTTP/3").any() \
        else {}
    out: list[tuple[float, str | None, int | None]] = []
    for proto, s, qc, sent, req in zip(lat["protocol"], lat["tcp_stream"], lat["quic_connection"],
                                       _ns(lat["request_sent_ts"]), _ns(lat["request_ts"]),
                                       strict=True):
        t = sent if sent != _NA else req
        if str(proto) == "HTTP/3":
            smp = qsamples.get(int(qc))
            if smp is not None and t != _NA:
                k = int(np.searchsorted(smp[0], t, side="right")) - 1
                if k >= 0:
                    lo = min(k, int(np.searchsorted(smp[0], t - RTT_WINDOW_NS, side="left")))
                    j = lo + int(np.argmin(smp[1][lo:k + 1]))
                    out.append((float(smp[1][j]), "quic_ack_rtt", int(smp[2][j])))
                    continue
            got = qrtt.get(int(qc))
            out.append((got[0], got[1], None) if got else (math.nan, None, None))
            continue
        smp = samples.get(int(s))
        if smp is not None and t != _NA:
            k = int(np.searchsorted(smp[0], t, side="right")) - 1
            if k >= 0:  # the least sample of the second before (a loss inflates one sample)
                lo = min(k, int(np.searchsorted(smp[0], t - RTT_WINDOW_NS, side="left")))
                j = lo + int(np.argmin(smp[1][lo:k + 1]))
                out.append((float(smp[1][j]), "ack_rtt", int(smp[2][j])))
                continue
        h = hrtt.get(int(s))
        out.append((h, "handshake", None) if h is not None else (math.nan, None, None))
    return out


# -- per-connection series ------------------------------------------------------------------


def connection_series(cap: Capture, tcp_stream: int | Sequence[int] | None = None, *,
                      bin_ms: float | None = None) -> pd.DataFrame:
    """RTT samples, bytes in flight, receive window and throughput over time of the TCP
    connections ``tcp_stream`` (one index, several, or None: all), schema
    :data:`CONNECTION_SERIES`, ordered by connection, direction, series and time.
    ``bin_ms``: width of the throughput bins (None: the connection's duration / 100, at
    least 1 ms). Raises :class:`NeedsPacketsError` when the capture has TCP frames but no
    packets table (loaded with ``packets=False``)."""
    p = cap.packets
    if len(p) == 0:
        if cap.summary.tcp_frames > 0:
            raise NeedsPacketsError(
                "connection_series needs the packets table: this capture was loaded with "
                "packets=False; load it again with packets=True (the default)")
        return CONNECTION_SERIES.frame([])
    p = p[list(_SERIES_COLUMNS)]  # (the columns it reads, not a copy of every column)
    p = p[p["tcp_stream"].notna()]
    if tcp_stream is not None:
        want = [tcp_stream] if isinstance(tcp_stream, int) else list(tcp_stream)
        p = p[p["tcp_stream"].isin(want)]
    sb = _table(cap, "tcp_sack_blocks")
    sacks: dict[int, list[tuple[int, int]]] = {}
    for fr, le, re_ in zip(sb["frame"].tolist(), sb["left_edge"].tolist(),
                           sb["right_edge"].tolist(), strict=True):
        sacks.setdefault(int(fr), []).append((int(le), int(re_)))
    parts: list[pd.DataFrame] = []
    for s, g in p.groupby(p["tcp_stream"].astype(np.int64), sort=True):
        parts += _series_of(int(s), g, bin_ms, sacks)
    if not parts:
        return CONNECTION_SERIES.frame([])
    df = pd.concat(parts, ignore_index=True)
    return CONNECTION_SERIES.frame(columns={c: df[c].to_numpy(dtype=object) if c in (
        "direction", "series", "frame") else df[c].to_numpy() for c in df.columns})


_SERIES_COLUMNS = ("tcp_stream", "ts", "frame", "direction", "tcp_flags", "tcp_len", "seq",
                   "ack", "window", "ack_rtt_ms")
"""the columns of the packets table :func:`connection_series` reads"""


def _series_of(s: int, g: pd.DataFrame, bin_ms: float | None,
               sacks: dict[int, list[tuple[int, int]]]) -> list[pd.DataFrame]:
    out = []
    ts = _ns(g["ts"])
    fr = g["frame"].to_numpy(np.int64)
    d = g["direction"].astype("string").fillna("").to_numpy(dtype=object)
    length = g["tcp_len"].fillna(0).to_numpy(np.int64)
    ack = g["ack"].to_numpy(dtype=object)
    win = g["window"].to_numpy(dtype=object)
    rtt = g["ack_rtt_ms"].to_numpy(np.float64)
    span = (ts.max() - ts.min()) if len(ts) else 0
    width = int((bin_ms * 1e6) if bin_ms else max(1_000_000, span // 100))
    flight = _tshark_flight(d, g["seq"].to_numpy(dtype=object), length,
                            g["tcp_flags"].fillna(0).to_numpy(np.int64), ack, fr, sacks)
    for sender, peer in ((_C2S, _S2C), (_S2C, _C2S)):
        mine, theirs = d == sender, d == peer
        # rtt: the peer's ACKs of this direction's data
        k = theirs & ~np.isnan(rtt)
        out.append(_frame(s, sender, "rtt_ms", ts[k], fr[k], rtt[k]))
        # receive window: what the peer advertised
        kw = theirs & np.array([not _isna(w) for w in win], bool)
        out.append(_frame(s, sender, "receive_window", ts[kw], fr[kw],
                          np.array([float(w) for w in win[kw]])))
        data = mine & (length > 0)
        if data.any():
            k = ~np.isnan(flight[sender])
            out.append(_frame(s, sender, "bytes_in_flight", ts[k], fr[k], flight[sender][k]))
            b = (ts[data] - ts.min()) // width
            sums = pd.Series(length[data]).groupby(b).sum()
            out.append(_frame(s, sender, "throughput_bps",
                              ts.min() + sums.index.to_numpy(np.int64) * width,
                              np.full(len(sums), -1, np.int64),
                              sums.to_numpy(np.float64) * 8 / (width / 1e9)))
    return [x for x in out if len(x)]


#: tshark's TCP_MAX_UNACKED_SEGMENTS: segments it keeps per direction for bytes in flight
#: (listed in pcaptools.limits)
MAX_UNACKED_SEGMENTS = 10000
_M32, _HALF = 0xFFFFFFFF, 0x80000000


def _tshark_flight(d: np.ndarray, seq: np.ndarray, length: np.ndarray, flags: np.ndarray,
                   ack: np.ndarray, fr: np.ndarray,
                   sacks: dict[int, list[tuple[int, int]]]) -> dict[str, np.ndarray]:
    """tcp.analysis.bytes_in_flight of every packet of one connection (NaN where tshark
    shows none), per data direction, as tshark 4.0 computes it (packet-tcp.c, the default
    payload-based method): each segment with payload, SYN or FIN joins its direction's list
    of unacknowledged segments (at most 10 000); an ACK of the peer drops the segments it
    covers and trims the one it cuts; after a data segment, the bytes in flight are the
    last byte minus the first byte of the list, less the sum of the SACK blocks of the
    peer's last packet (none when that packet had no SACK option), minus 1 with SYN or FIN,
    shown only when above 0. A segment past the highest byte seen in its direction (a hole
    at the capture point) shows none, nor does any later one of its direction until the
    peer sends an ACK. Sequence numbers compare modulo 2**32 (the first and last byte as
    relative numbers, unsigned, as tshark)."""
    n = len(d)
    out = {_C2S: np.full(n, np.nan), _S2C: np.full(n, np.nan)}
    lists: dict[str, list[list[int]]] = {_C2S: [], _S2C: []}
    nxt: dict[str, int | None] = {_C2S: None, _S2C: None}
    valid = {_C2S: True, _S2C: True}
    sack: dict[str, list[tuple[int, int]]] = {_C2S: [], _S2C: []}
    for i in range(n):
        di = d[i]
        if di not in lists or _isna(seq[i]):
            continue
        other = _S2C if di == _C2S else _C2S
        sq, ln, fl = int(seq[i]), int(length[i]), int(flags[i])
        syn_fin = 1 if fl & 0x03 else 0
        if fl & 0x10:
            valid[other] = True
        top = nxt[di]
        if top is not None and 0 < ((sq - top) & _M32) < _HALF and not fl & 0x04:
            valid[di] = False  # "previous segment not captured": no bytes in flight
        end = (sq + ln + syn_fin) & _M32
        mine = lists[di]
        if (ln or syn_fin) and len(mine) < MAX_UNACKED_SEGMENTS:
            mine.append([sq, end])
        if top is None or 0 < ((end - top) & _M32) < _HALF:
            nxt[di] = end
        sack[di] = sacks.get(int(fr[i]), [])
        if fl & 0x10 and not _isna(ack[i]):
            a = int(ack[i])
            keep = []
            for e in lists[other]:
                if a == e[1]:
                    continue
                if 0 < ((a - e[0]) & _M32) < _HALF and ((e[1] - a) & _M32) < _HALF:
                    e[0] = a  # partly acknowledged
                if 0 < ((e[1] - a) & _M32) < _HALF:
                    keep.append(e)
            lists[other] = keep
        if ln and mine and valid[di]:
            # (relative numbers compared unsigned, as tshark does)
            first = min(e[0] for e in mine)
            last = max(e[1] for e in mine)
            f = ((last - first) & _M32) - sum((r - le) & _M32 for le, r in sack[other])
            if 0 < f < 2_000_000_000:
                out[di][i] = f - syn_fin
    return out


def _frame(s: int, d: str, series: str, ts: np.ndarray, fr: np.ndarray,
           v: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"tcp_stream": np.full(len(ts), s, np.int64), "direction": d,
                         "series": series, "ts": ts,
                         "frame": [None if x < 0 else int(x) for x in fr], "value": v})


# -- helpers --------------------------------------------------------------------------------


def _table(cap: Capture, name: str) -> pd.DataFrame:
    df = getattr(cap, name, None)
    if isinstance(df, pd.DataFrame):
        return df
    from ..tables.registry import TABLES

    return TABLES[name].frame([])


def _ns(col: pd.Series | np.ndarray) -> np.ndarray:
    arr = np.asarray(pd.Series(col).to_numpy(dtype="datetime64[ns]"))
    return arr.view(np.int64).copy()


def _ns1(v: Any) -> int:
    if v is None or v is pd.NaT or (not isinstance(v, str) and pd.isna(v)):
        return _NA
    return int(pd.Timestamp(v).value)


def _isna(v: Any) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v))


def _na_int(v: Any) -> int:
    return -1 if _isna(v) else int(v)


def _f(v: Any) -> float:
    return math.nan if _isna(v) else float(v)


def _d(a: int, b: int) -> float:
    return math.nan if a == _NA or b == _NA else (a - b) / 1e6


def _overlap(a: int, b: int, lo: int, hi: int) -> float:
    if lo == _NA or hi == _NA:
        return 0.0
    return max(0, min(b, hi) - max(a, lo)) / 1e6


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """overlapping (start, end) spans joined (a stream in two stalls at once waits once)"""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _txt(v: Any) -> str:
    return "?" if _isna(v) else str(int(v))
