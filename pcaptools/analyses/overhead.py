"""Where did the bytes go? Protocol overhead by layer and purpose, per connection.

:func:`overhead` is a pure function of a capture's tables (``connections`` and its counters,
``tls_records``, ``tls_handshakes``, ``http2_frames``, ``http2_connections``, ``http2_streams``,
``http_requests``, ``sse_events``, ``ws_frames``, ``ws_connections``; with ``quic=True`` also
``quic_connections``, ``quic_packets``, ``quic_frames``, ``http3_frames``,
``http3_connections``, ``http3_streams``, ``http3_sse_events``): one row per TCP connection
(or per connection and direction), then one per QUIC connection, and a total row, splitting
the connection's wire bytes (``frame.len`` summed: link, IP and TCP or UDP headers included)
into categories that add up to them exactly. Columns: :data:`OVERHEAD` (``docs/tables.md``).
No per-frame table is needed (``load(packets=False)`` works).

How the bytes are split, layer by layer (per direction):

1. **TCP.** ``frame.len - tcp.len`` of every packet is header: of SYN / SYN-ACK packets and
   the ACK completing the handshake -> ``tcp_handshake_bytes``; of FIN and RST packets and
   payload-less ACKs sent after the peer's FIN -> ``tcp_teardown_bytes``; of other
   payload-less packets (ACKs, window updates) -> ``tcp_ack_bytes``; of packets carrying data
   -> ``tcp_header_bytes``. Payload bytes already seen in that direction ->
   ``tcp_resent_bytes`` (``connections.*_resent_bytes``, no heuristics). What remains is the
   in-order stream, each byte once.
2. **TLS** (connections with ``tls_records``). Handshake, ChangeCipherSpec and alert records,
   header included -> ``tls_handshake_bytes`` (TLS 1.3 encrypted handshake records: by their
   decrypted type, or without keys by position: up to each side's handshake bytes of
   ``tls_handshakes``; post-handshake messages such as NewSessionTicket count as handshake
   only when decrypted). Application data records: header (5 bytes) plus, when decrypted,
   ``length - plaintext_length`` (MAC, tag, padding, explicit IV, TLS 1.3 inner type) ->
   ``tls_record_overhead_bytes``; the plaintext goes on to the next layer; without keys the
   fragment -> ``tls_encrypted_bytes`` ("encrypted application data").
3. **HTTP and WebSocket** (cleartext stream, or decrypted plaintext). HTTP/2: 9 bytes per
   frame header -> ``http2_frame_header_bytes``; the connection preface, control frames
   (SETTINGS, PING, WINDOW_UPDATE, PRIORITY, RST_STREAM, GOAWAY, unknown types) and padding /
   priority fields -> ``http2_control_bytes``; HPACK header blocks -> ``hpack_bytes``; DATA
   payload -> ``app_payload_bytes``. HTTP/1.x: request and final response header sections ->
   ``http1_header_bytes``; chunked-encoding framing (``response_wire_bytes`` minus headers and
   body) -> ``http1_framing_bytes``; bodies -> ``app_payload_bytes``. WebSocket: frame headers
   (2-14 bytes) -> ``ws_frame_header_bytes``; Close/Ping/Pong payloads -> ``ws_control_bytes``;
   data frame payloads (as sent: compressed, masked) -> ``app_payload_bytes``. Server-sent
   events: of a text/event-stream body, the event data (``sse_events.data_bytes``) stays
   ``app_payload_bytes``, the rest (field names, ``data: ``, line ends, comments, ids) ->
   ``sse_framing_bytes``.
4. **QUIC** (``quic=True``; rows with ``transport`` quic, keyed by ``quic_connection``).
   ``frame.len`` minus the UDP payload -> ``udp_header_bytes`` (link, IP, UDP). Per packet
   (``quic_packets``): the header (``header_bytes``: through the packet number when decrypted,
   the bytes before it when not) -> ``quic_header_bytes``; 16 bytes of AEAD tag of every
   protected packet (the Retry integrity tag too) -> ``quic_aead_tag_bytes``; of packets not
   decrypted (no key log, no secret for the epoch...) the packet number and payload ->
   ``quic_undecrypted_bytes`` (their own category, like ``tls_encrypted_bytes``: content
   unknown); Version Negotiation packets whole -> header; stateless resets whole ->
   ``quic_control_bytes``. UDP payload after a datagram's last packet (zeros padding an
   Initial datagram) and PADDING frames -> ``quic_padding_bytes``. Per frame of decrypted
   packets (``quic_frames.frame_bytes``): ACK -> ``quic_ack_bytes``; CRYPTO (the handshake,
   session tickets) -> ``quic_crypto_bytes``; STREAM and DATAGRAM headers ->
   ``quic_stream_header_bytes``; DATAGRAM payloads -> ``app_payload_bytes``; every other
   frame -> ``quic_control_bytes``. STREAM data already sent on its stream
   (``quic_connections.*_resent_stream_bytes``) -> ``quic_resent_bytes``; the distinct stream
   bytes go on to HTTP/3: frame headers (type and length varints) ->
   ``http3_frame_header_bytes``; HEADERS and PUSH_PROMISE field sections and the QPACK encoder
   streams -> ``qpack_bytes``; SETTINGS, GOAWAY, other control frames and the control streams'
   type byte -> ``http3_control_bytes``; DATA payloads -> ``app_payload_bytes``, less the
   text/event-stream framing of ``http3_sse_events`` -> ``sse_framing_bytes``. When frame
   lengths claim more than the stream bytes captured (a hole), the HTTP/3 categories are
   scaled down to them, as with TLS compression.
5. **Residual** ``other_bytes`` = wire bytes minus every category above: TCP payload that no
   parser accounted for. That is the whole stream of a protocol pcaptools does not parse,
   and for parsed ones the bytes a parser skipped or could not place: a capture that started
   mid-connection, lost segments, HTTP/1.x interim (1xx) responses, request chunk framing, a
   record or frame cut off by the end of the capture. QUIC: decrypted stream bytes of an
   application pcaptools does not parse (an ALPN other than h3), the HTTP/3 unidirectional
   stream types of the QPACK streams and the QPACK decoder streams (not in the tables), frames
   past the quic_frames row limit. It is never negative on the test captures; a negative
   value would mean a parser counted bytes the capture does not hold.

``goodput_ratio`` = ``app_payload_bytes / wire_bytes``; ``goodput_max_ratio`` adds the bytes
whose content is invisible (``tls_encrypted_bytes``, ``quic_undecrypted_bytes``,
``other_bytes``): the goodput if all of them were payload, an upper bound.

Which bytes: by default (``quic=False``) every row, the total row included, covers **TCP
frames only** (the ``connections`` counters). With ``quic=True`` the QUIC connections' rows
follow the TCP ones and the total row sums both: each category over every row above it
(TCP rows have zeros in the QUIC categories and QUIC rows in the TCP, TLS, HTTP/1, HTTP/2
and WebSocket ones; the shared
``sse_framing_bytes``, ``app_payload_bytes`` and ``other_bytes`` add up across both), its
``packets`` the TCP packets plus the QUIC datagrams. UDP other than QUIC (DNS...), ICMP and
non-IP frames are in no row, so every ratio and share here is over the bytes of the rows,
not the capture's; ``capture_wire_share`` says how much of the capture that is
(``Capture.coverage`` accounts for the rest).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..tables.schema import Column, TableSchema

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = ["CATEGORIES", "OVERHEAD", "QUIC_CATEGORIES", "overhead", "protocol_stacks"]

#: QUIC's transport categories and HTTP/3's (only QUIC rows use them)
_QUIC_TRANSPORT: tuple[str, ...] = (
    "udp_header_bytes",
    "quic_header_bytes",
    "quic_aead_tag_bytes",
    "quic_undecrypted_bytes",
    "quic_padding_bytes",
    "quic_ack_bytes",
    "quic_control_bytes",
    "quic_crypto_bytes",
    "quic_stream_header_bytes",
    "quic_resent_bytes",
)
_HTTP3: tuple[str, ...] = ("http3_frame_header_bytes", "http3_control_bytes", "qpack_bytes")

#: the byte categories, in layer order; they add up to wire_bytes
CATEGORIES: tuple[str, ...] = (
    "tcp_handshake_bytes",
    "tcp_teardown_bytes",
    "tcp_ack_bytes",
    "tcp_header_bytes",
    "tcp_resent_bytes",
    "tls_handshake_bytes",
    "tls_record_overhead_bytes",
    "tls_encrypted_bytes",
    *_QUIC_TRANSPORT,
    "http2_frame_header_bytes",
    "http2_control_bytes",
    "hpack_bytes",
    "http1_header_bytes",
    "http1_framing_bytes",
    *_HTTP3,
    "ws_frame_header_bytes",
    "ws_control_bytes",
    "sse_framing_bytes",
    "app_payload_bytes",
    "other_bytes",
)

#: the categories only QUIC rows use (TCP rows have 0 in them, and QUIC rows 0 in the TCP,
#: TLS, HTTP/1, HTTP/2 and WebSocket ones; sse_framing, app_payload and other are shared)
QUIC_CATEGORIES: tuple[str, ...] = (*_QUIC_TRANSPORT, *_HTTP3)

_DOCS = {
    "tcp_handshake_bytes": "link+IP+TCP headers of SYN, SYN-ACK and the handshake-completing ACK",
    "tcp_teardown_bytes": (
        "headers of FIN and RST packets, and of payload-less ACKs sent after the peer's FIN"
    ),
    "tcp_ack_bytes": (
        "frame bytes of other payload-less packets: ACKs, window updates, empty keep-alives"
    ),
    "tcp_header_bytes": "link+IP+TCP headers of the packets carrying payload",
    "tcp_resent_bytes": "payload bytes already seen in their direction (retransmitted)",
    "tls_handshake_bytes": (
        "TLS handshake, ChangeCipherSpec and alert records, 5-byte headers included"
    ),
    "tls_record_overhead_bytes": (
        "TLS application data records: 5-byte header, plus (decrypted) length minus plaintext (MAC,"
        " AEAD tag, padding, explicit IV, TLS 1.3 inner type)"
    ),
    "tls_encrypted_bytes": (
        "fragments of application data records that were not decrypted (no keys): encrypted "
        "application data"
    ),
    "udp_header_bytes": "QUIC: link+IP+UDP headers of its datagrams (frame.len minus UDP payload)",
    "quic_header_bytes": (
        "QUIC: long and short packet headers (quic_packets.header_bytes: through the packet "
        "number when decrypted, before it when not), Retry and Version Negotiation packets"
    ),
    "quic_aead_tag_bytes": (
        "QUIC: the 16-byte AEAD tag of every protected packet (decrypted or not) and the "
        "Retry integrity tag"
    ),
    "quic_undecrypted_bytes": (
        "QUIC: packet number and payload of packets not decrypted (no key: quic_packets.status "
        "other than decrypted), whole packets of an unknown version: encrypted, content unknown"
    ),
    "quic_padding_bytes": (
        "QUIC: PADDING frames and the bytes of a datagram after its last packet (padding "
        "datagrams to 1200 bytes)"
    ),
    "quic_ack_bytes": "QUIC: ACK frames (whole frames: type, ranges, delay, ECN counts)",
    "quic_control_bytes": (
        "QUIC: other control frames (PING, MAX_*, *_BLOCKED, NEW_CONNECTION_ID, "
        "RETIRE_CONNECTION_ID, NEW_TOKEN, RESET_STREAM, STOP_SENDING, PATH_*, HANDSHAKE_DONE, "
        "CONNECTION_CLOSE) and stateless reset datagrams"
    ),
    "quic_crypto_bytes": "QUIC: CRYPTO frames, whole (the TLS handshake and session tickets)",
    "quic_stream_header_bytes": (
        "QUIC: STREAM and DATAGRAM frame headers (type, stream id, offset, length)"
    ),
    "quic_resent_bytes": (
        "QUIC: STREAM data bytes already sent on their stream (quic_connections.*_resent_stream"
        "_bytes: QUIC resends frames, not packets)"
    ),
    "http2_frame_header_bytes": "HTTP/2 frame headers, 9 bytes per frame",
    "http2_control_bytes": (
        "HTTP/2 connection preface, payloads of SETTINGS, PING, WINDOW_UPDATE, PRIORITY, "
        "RST_STREAM, GOAWAY and unknown frames, padding and priority fields"
    ),
    "hpack_bytes": "HPACK header blocks (HEADERS, CONTINUATION, PUSH_PROMISE)",
    "http1_header_bytes": (
        "HTTP/1.x request and final response header sections (start line to the blank line)"
    ),
    "http1_framing_bytes": (
        "chunked transfer-encoding framing of responses (chunk sizes, CRLFs, trailers)"
    ),
    "http3_frame_header_bytes": "HTTP/3 frame headers (type and length varints)",
    "http3_control_bytes": (
        "HTTP/3 control: payloads of SETTINGS, GOAWAY, MAX_PUSH_ID, CANCEL_PUSH, reserved and "
        "unknown frames, and the control streams' type byte"
    ),
    "qpack_bytes": (
        "QPACK: field sections of HTTP/3 HEADERS and PUSH_PROMISE frames, and the encoder "
        "streams' bytes"
    ),
    "ws_frame_header_bytes": "WebSocket frame headers (2-14 bytes: length and masking key)",
    "ws_control_bytes": "payloads of WebSocket Close, Ping and Pong frames",
    "sse_framing_bytes": (
        "text/event-stream bytes other than event data (field names, 'data: ', line ends, comments,"
        " ids)"
    ),
    "app_payload_bytes": (
        "application payload: HTTP bodies (SSE: the event data), HTTP/2 and HTTP/3 DATA "
        "payloads, WebSocket data frame payloads, QUIC DATAGRAM payloads"
    ),
    "other_bytes": (
        "residual: TCP payload, or decrypted QUIC stream bytes, no parser accounted for "
        "(unparsed protocols, skipped or lost bytes, 1xx responses, partial records or frames at "
        "the end, HTTP/3 QPACK stream type bytes and decoder streams; module docstring)"
    ),
}

OVERHEAD = TableSchema(
    name="overhead",
    grain="one row per TCP connection (or per connection and direction), with quic=True one per "
    "QUIC connection after them, plus a total row: pcaptools.analyses.overhead(cap), not a "
    "Capture attribute",
    key=("transport", "tcp_stream", "quic_connection", "direction"),
    columns=(
        Column("tcp_stream", "Int64", None,
               "Wireshark tcp.stream; NA on QUIC rows and on the total row"),
        Column("quic_connection", "Int64", None,
               "quic_connections.quic_connection; NA on TCP rows and on the total row"),
        Column("transport", "category", None, "tcp, quic, or total on the total row"),
        Column(
            "direction",
            "category",
            None,
            "both, or client_to_server / server_to_client with by_direction=True",
        ),
        Column("total", "bool", None, "the row sums every connection (and direction) above it"),
        Column("client", "string", None, "client address:port; NA on the total row"),
        Column("server", "string", None, "server address:port; NA on the total row"),
        Column(
            "protocol",
            "category",
            None,
            "layers the tables saw, '/'-joined: tls, http1, http2, websocket; tcp when none; "
            "quic, or quic/http3 when HTTP/3 frames were parsed",
        ),
        Column("packets", "int64", "packets", "TCP packets, or UDP datagrams of QUIC rows"),
        Column(
            "wire_bytes",
            "int64",
            "bytes",
            "frame.len summed (connections.*_wire_bytes, quic_connections.*_wire_bytes): the "
            "sum of the categories",
        ),
        *(Column(c, "int64", "bytes", _DOCS[c]) for c in CATEGORIES),
        Column(
            "goodput_ratio",
            "float64",
            None,
            "app_payload_bytes / wire_bytes (NaN for 0 wire bytes)",
        ),
        Column(
            "goodput_max_ratio",
            "float64",
            None,
            "(app_payload_bytes + tls_encrypted_bytes + quic_undecrypted_bytes + other_bytes) / "
            "wire_bytes: the goodput if every byte whose content is invisible were payload",
        ),
        Column(
            "capture_wire_share",
            "float64",
            None,
            "wire_bytes / summary.wire_bytes: the share of all the capture's frame bytes this row "
            "(and its ratios) is taken over; below 1 on the total row when the capture has UDP "
            "(other than QUIC with quic=True), ICMP or non-IP frames (NaN for an empty capture)",
        ),
    ),
)

_KEY = ["tcp_stream", "d"]
_H2_HEADER_TYPES = frozenset({"HEADERS", "CONTINUATION", "PUSH_PROMISE"})
_WS_CONTROL = frozenset({"close", "ping", "pong"})
_TLS_CONTROL = frozenset({"handshake", "change_cipher_spec", "alert", "heartbeat"})


def overhead(cap: Capture, *, by_direction: bool = False, quic: bool = False,
             tcp: bool = True) -> pd.DataFrame:
    """Bytes by layer and purpose (schema :data:`OVERHEAD`): one row per connection of
    ``cap`` in tcp_stream order (two with ``by_direction=True``), with ``quic=True`` then one
    per QUIC connection in quic_connection order, then the total row (over the rows above
    it: TCP, and QUIC with ``quic=True``). The categories of every row add up to its
    ``wire_bytes``; the rules are in the module docstring. An empty capture gives just the
    total row of zeros. (``quic`` is off by default so that callers that read every row as a
    TCP connection keep doing so; the report's Overhead section takes its TCP part from the
    default call and its QUIC part from ``quic=True, tcp=False``.) ``tcp=False`` leaves the
    TCP connections' rows out (and out of the total row)."""
    rows = _tcp_rows(cap, by_direction) if tcp else []
    totals = [r for r in rows]
    if quic:
        qrows = _quic_rows(cap, by_direction)
        rows += qrows
        totals += qrows
    whole = int(cap.summary.wire_bytes)
    ci = _COL_OF
    cats = [sum(int(r[ci[c]]) for r in totals) for c in CATEGORIES]
    rows.append(
        _out_row(
            None, None, "total", "both", True, None, None, "total",
            sum(int(r[ci["packets"]]) for r in totals),
            sum(int(r[ci["wire_bytes"]]) for r in totals),
            cats, whole,
        )
    )
    return OVERHEAD.frame(rows)


def _tcp_rows(cap: Capture, by_direction: bool) -> list[list[Any]]:
    """The rows of the TCP connections."""
    conns = cap.connections
    n = len(conns)
    streams = conns["tcp_stream"].to_numpy(np.int64)
    acc = {c: np.zeros((n, 2), np.int64) for c in CATEGORIES}
    pos = {int(s): i for i, s in enumerate(streams.tolist())}
    wire = _pair(conns, "wire_bytes")
    payload = _pair(conns, "bytes")
    resent = _pair(conns, "resent_bytes")
    packets = _pair(conns, "packets")
    hs = _pair(conns, "tcp_handshake_bytes")
    td = _pair(conns, "tcp_teardown_bytes")
    ack = _pair(conns, "pure_ack_bytes")
    acc["tcp_handshake_bytes"][:] = hs
    acc["tcp_teardown_bytes"][:] = td
    acc["tcp_ack_bytes"][:] = ack
    acc["tcp_header_bytes"][:] = wire - payload - hs - td - ack
    acc["tcp_resent_bytes"][:] = resent

    compressed = _tls(cap, pos, acc)
    _http2(cap, pos, acc)
    _http1(cap, pos, acc)
    _websocket(cap, pos, acc)
    _sse(cap, pos, acc)
    for (i, d), budget in compressed.items():
        _squeeze(acc, i, d, budget)
    acc["other_bytes"][:] = wire - sum(acc[c] for c in CATEGORIES if c != "other_bytes")

    whole = int(cap.summary.wire_bytes)
    stacks = protocol_stacks(cap)
    proto = [stacks.get(int(st), "tcp") for st in streams.tolist()]
    client = [
        _endpoint(a, p)
        for a, p in zip(
            conns["client_addr"].astype(object).tolist(), conns["client_port"].tolist(), strict=True
        )
    ]
    server = [
        _endpoint(a, p)
        for a, p in zip(
            conns["server_addr"].astype(object).tolist(), conns["server_port"].tolist(), strict=True
        )
    ]
    rows: list[list[Any]] = []
    st = streams.tolist()
    if by_direction:
        per_dir = [([col[:, d].tolist() for col in (acc[c] for c in CATEGORIES)],
                    packets[:, d].tolist(), wire[:, d].tolist()) for d in (0, 1)]
        for i in range(n):
            for d, label in enumerate(("client_to_server", "server_to_client")):
                cats, pk, wr = per_dir[d]
                rows.append(_out_row(st[i], None, "tcp", label, False, client[i], server[i],
                                     proto[i], pk[i], wr[i], [c[i] for c in cats], whole))
    else:  # (the sums of both directions, a column at a time)
        cats = [acc[c].sum(axis=1).tolist() for c in CATEGORIES]
        pk, wr = packets.sum(axis=1).tolist(), wire.sum(axis=1).tolist()
        for i in range(n):
            rows.append(_out_row(st[i], None, "tcp", "both", False, client[i], server[i],
                                 proto[i], pk[i], wr[i], [c[i] for c in cats], whole))
    return rows


def _out_row(
    stream: int | None,
    quic_connection: int | None,
    transport: str,
    direction: str,
    total: bool,
    client: str | None,
    server: str | None,
    proto: str,
    packets: int,
    wire: int,
    cats: list[int],
    whole: int,
) -> list[Any]:
    app = cats[CATEGORIES.index("app_payload_bytes")]
    invisible = (
        cats[CATEGORIES.index("tls_encrypted_bytes")]
        + cats[CATEGORIES.index("quic_undecrypted_bytes")]
        + cats[CATEGORIES.index("other_bytes")]
    )
    good = app / wire if wire else float("nan")
    upper = (app + invisible) / wire if wire else float("nan")
    share = wire / whole if whole else float("nan")
    return [stream, quic_connection, transport, direction, total, client, server, proto,
            packets, wire, *cats, good, upper, share]


_COL_OF = {name: i for i, name in enumerate(OVERHEAD.names)}


# ------------------------------------------------------------------------------------ layers


def _pair(conns: pd.DataFrame, suffix: str) -> np.ndarray:
    """client_<suffix> / server_<suffix> as an (n, 2) int64 array."""
    if not len(conns):
        return np.zeros((0, 2), np.int64)
    return np.stack([_nz(conns[f"client_{suffix}"]), _nz(conns[f"server_{suffix}"])], axis=1)


def _add(
    acc: dict[str, np.ndarray],
    pos: dict[int, int],
    cat: str,
    keys: pd.DataFrame | None,
    values: Iterable[Any] | None = None,
) -> None:
    """Add per-(tcp_stream, d) sums to ``acc[cat]``; ``keys`` has columns tcp_stream, d, v."""
    if keys is None or not len(keys):
        return
    g = keys.groupby(_KEY, sort=False)["v"].sum()
    target = acc[cat]
    for (st, d), v in zip(g.index.tolist(), g.to_numpy(np.int64).tolist(), strict=True):
        i = pos.get(int(st))
        if i is not None:
            target[i, int(d)] += v


def _frame(stream: Any, d: Any, v: Any) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "tcp_stream": np.asarray(stream, np.int64),
            "d": np.asarray(d, np.int64),
            "v": np.asarray(v, np.int64),
        }
    )


def _dir(s: pd.Series) -> np.ndarray:
    """direction column -> 0 client_to_server / 1 server_to_client."""
    return (s.astype("string") == "server_to_client").fillna(False).to_numpy(bool).astype(np.int64)


def _nz(s: pd.Series) -> np.ndarray:
    """nullable int column -> int64 with NA as 0."""
    return s.astype("Int64").fillna(0).to_numpy(np.int64)


_INNER = (
    "http2_frame_header_bytes",
    "http2_control_bytes",
    "hpack_bytes",
    "http1_header_bytes",
    "http1_framing_bytes",
    "ws_frame_header_bytes",
    "ws_control_bytes",
    "sse_framing_bytes",
    "app_payload_bytes",
)


def _squeeze(
    acc: dict[str, np.ndarray], i: int, d: int, budget: int, inner: tuple[str, ...] = _INNER
) -> None:
    """TLS compression: the inner layers counted decompressed bytes; share the ``budget``
    of compressed fragment bytes among them in proportion (rounded down; the rest is left
    to other_bytes). QUIC: the HTTP/3 layers counted frame lengths that include bytes never
    captured; the budget is the distinct stream bytes."""
    total = sum(int(acc[c][i, d]) for c in inner)
    if total <= budget or total <= 0:
        return
    for c in inner:
        acc[c][i, d] = int(acc[c][i, d]) * budget // total


def _tls(
    cap: Capture, pos: dict[int, int], acc: dict[str, np.ndarray]
) -> dict[tuple[int, int], int]:
    """TLS categories; returns {(row, d): fragment bytes} of directions that used TLS
    compression (a decrypted record longer than its fragment), for :func:`_squeeze`."""
    rec = cap.tls_records
    if not len(rec):
        return {}
    st = rec["tcp_stream"].to_numpy(np.int64)
    d = _dir(rec["direction"])
    hdr = np.where(rec["version"].astype("string").eq("SSL 2.0").fillna(False).to_numpy(bool), 2, 5)
    length = rec["length"].to_numpy(np.int64)
    size = hdr + length
    wire_type = rec["content_type"].astype("string").fillna("").to_numpy(object)
    inner = rec["inner_content_type"].astype("string").fillna("").to_numpy(object)
    decrypted = rec["decrypted"].to_numpy(bool)
    plain = _nz(rec["plaintext_length"])
    control = np.array(
        [w in _TLS_CONTROL or i in _TLS_CONTROL for w, i in zip(wire_type, inner, strict=True)],
        dtype=bool,
    )
    app = ~control
    # TLS 1.3 without keys: encrypted handshake records before each side's Finished
    hs_limit = _tls_handshake_limits(cap.tls_handshakes)
    if hs_limit:
        session = rec["session"].to_numpy(np.int64)
        offset = rec["offset"].to_numpy(np.int64)
        start = (
            pd.DataFrame(
                {
                    "k": list(zip(st.tolist(), session.tolist(), d.tolist(), strict=True)),
                    "o": offset,
                }
            )
            .groupby("k")["o"]
            .transform("min")
            .to_numpy(np.int64)
        )
        for i in np.flatnonzero(app & ~decrypted):
            lim = hs_limit.get((int(st[i]), int(session[i]), int(d[i])))
            if lim is not None and offset[i] + size[i] - start[i] <= lim:
                control[i] = True
        app = ~control
    inner_app = app & decrypted
    # TLS compression (TLS <= 1.2 DEFLATE): plaintext is the decompressed size
    grown = inner_app & (plain > length)
    squeezed: set[tuple[int, int]] = {
        (int(a), int(b)) for a, b in zip(st[grown], d[grown], strict=True)
    }
    comp = (
        np.array([(int(a), int(b)) in squeezed for a, b in zip(st, d, strict=True)], dtype=bool)
        if squeezed
        else np.zeros(len(rec), bool)
    )
    _add(acc, pos, "tls_handshake_bytes", _frame(st[control], d[control], size[control]))
    overhead_v = np.where(inner_app & ~comp, size - plain, hdr)
    _add(acc, pos, "tls_record_overhead_bytes", _frame(st[app], d[app], overhead_v[app]))
    enc = app & ~decrypted
    _add(acc, pos, "tls_encrypted_bytes", _frame(st[enc], d[enc], length[enc]))
    budget: dict[tuple[int, int], int] = {}
    for a, b, v in zip(
        st[inner_app & comp].tolist(),
        d[inner_app & comp].tolist(),
        length[inner_app & comp].tolist(),
        strict=True,
    ):
        row = pos.get(int(a))
        if row is not None:
            budget[(row, int(b))] = budget.get((row, int(b)), 0) + int(v)
    return budget


def _tls_handshake_limits(hs: pd.DataFrame) -> dict[tuple[int, int, int], int]:
    """{(tcp_stream, session, d): handshake record bytes of that side} for sessions whose
    protected handshake was not decrypted (otherwise the records' inner types tell)."""
    if not len(hs):
        return {}
    out: dict[tuple[int, int, int], int] = {}
    sel = hs[~hs["decrypted"].to_numpy(bool)]
    for st, se, c, s in zip(
        sel["tcp_stream"].tolist(),
        sel["session"].tolist(),
        sel["client_handshake_bytes"].tolist(),
        sel["server_handshake_bytes"].tolist(),
        strict=True,
    ):
        out[(int(st), int(se), 0)] = int(c)
        out[(int(st), int(se), 1)] = int(s)
    return out


def _http2(cap: Capture, pos: dict[int, int], acc: dict[str, np.ndarray]) -> None:
    fr = cap.http2_frames
    if len(fr):
        st = fr["tcp_stream"].to_numpy(np.int64)
        d = _dir(fr["direction"])
        typ = fr["type"].astype("string").fillna("").to_numpy(object)
        length = fr["length"].to_numpy(np.int64)
        is_data = typ == "DATA"
        is_hdr = np.isin(typ, list(_H2_HEADER_TYPES))
        data = np.where(is_data, _nz(fr["data_bytes"]), 0)
        block = np.where(is_hdr, _nz(fr["header_block_bytes"]), 0)
        _add(acc, pos, "http2_frame_header_bytes", _frame(st, d, np.full(len(fr), 9)))
        _add(acc, pos, "hpack_bytes", _frame(st, d, block))
        _add(acc, pos, "app_payload_bytes", _frame(st, d, data))
        _add(acc, pos, "http2_control_bytes", _frame(st, d, length - data - block))
    h2c = cap.http2_connections
    if len(h2c):  # the client connection preface: its h2 bytes that are not frames nor skipped
        framed: dict[int, int] = {}
        if len(fr):
            c2s = fr[_dir(fr["direction"]) == 0]
            framed = (
                c2s.groupby("tcp_stream")["length"].sum() + 9 * c2s.groupby("tcp_stream").size()
            ).to_dict()
        st = h2c["tcp_stream"].to_numpy(np.int64)
        rest = (
            h2c["client_bytes"].to_numpy(np.int64)
            - h2c["client_skipped_bytes"].to_numpy(np.int64)
            - np.array([framed.get(int(x), 0) for x in st], np.int64)
        )
        _add(acc, pos, "http2_control_bytes", _frame(st, np.zeros(len(st)), np.clip(rest, 0, 24)))


def _http1(cap: Capture, pos: dict[int, int], acc: dict[str, np.ndarray]) -> None:
    req = cap.http_requests
    if not len(req):
        return
    st = req["tcp_stream"].to_numpy(np.int64)
    zeros, ones = np.zeros(len(req), np.int64), np.ones(len(req), np.int64)
    rh, rb = _nz(req["request_header_bytes"]), _nz(req["request_body_bytes"])
    sh, sb = _nz(req["response_header_bytes"]), _nz(req["response_body_bytes"])
    sw = req["response_wire_bytes"].astype("Int64")
    framing = np.where(sw.notna().to_numpy(bool), _nz(sw) - sh - sb, 0)
    framing = np.maximum(framing, 0)
    _add(acc, pos, "http1_header_bytes", _frame(st, zeros, rh))
    _add(acc, pos, "http1_header_bytes", _frame(st, ones, sh))
    _add(acc, pos, "app_payload_bytes", _frame(st, zeros, rb))
    _add(acc, pos, "app_payload_bytes", _frame(st, ones, sb))
    _add(acc, pos, "http1_framing_bytes", _frame(st, ones, framing))


def _websocket(cap: Capture, pos: dict[int, int], acc: dict[str, np.ndarray]) -> None:
    wf = getattr(cap, "ws_frames", None)
    if not isinstance(wf, pd.DataFrame) or not len(wf) or "header_bytes" not in wf.columns:
        return
    st = wf["tcp_stream"].to_numpy(np.int64)
    d = _dir(wf["direction"])
    hdr = wf["header_bytes"].to_numpy(np.int64)
    body = _nz(wf["payload_len"]) - wf["lost_bytes"].to_numpy(np.int64)
    body = np.maximum(body, 0)
    control = (
        wf["opcode_name"].astype("string").isin(list(_WS_CONTROL)).fillna(False).to_numpy(bool)
    )
    over_h2 = wf["stream_id"].notna().to_numpy(bool)
    _add(acc, pos, "ws_frame_header_bytes", _frame(st, d, hdr))
    _add(acc, pos, "ws_control_bytes", _frame(st[control], d[control], body[control]))
    _add(acc, pos, "app_payload_bytes", _frame(st[~control], d[~control], body[~control]))
    if over_h2.any():  # RFC 8441: the frames travel inside HTTP/2 DATA, counted there already
        moved = np.where(control, body, 0) + hdr
        _add(acc, pos, "app_payload_bytes", _frame(st[over_h2], d[over_h2], -moved[over_h2]))


def _sse(cap: Capture, pos: dict[int, int], acc: dict[str, np.ndarray]) -> None:
    """Move the non-data part of text/event-stream bodies from app payload to SSE framing."""
    ev = cap.sse_events
    if not len(ev):
        return
    data = ev.assign(v=ev["data_bytes"].to_numpy(np.int64))
    body: list[tuple[int, int]] = []
    h1 = data[data["request_index"].notna().to_numpy(bool)]
    if len(h1):
        ev_sum = h1.groupby(["tcp_stream", "request_index"])["v"].sum()
        req = cap.http_requests.set_index(["tcp_stream", "request_index"])["response_body_bytes"]
        for key, v in zip(ev_sum.index.tolist(), ev_sum.to_numpy(np.int64).tolist(), strict=True):
            b = req.get(key)
            if b is not None and b is not pd.NA:
                body.append((int(key[0]), max(int(b) - v, 0)))
    h2 = data[data["stream_id"].notna().to_numpy(bool)]
    if len(h2):
        ev_sum = h2.groupby(["tcp_stream", "stream_id"])["v"].sum()
        sd = cap.http2_streams.set_index(["tcp_stream", "stream_id"])["server_data_bytes"]
        for key, v in zip(ev_sum.index.tolist(), ev_sum.to_numpy(np.int64).tolist(), strict=True):
            b = sd.get(key)
            if b is not None:
                body.append((int(key[0]), max(int(b) - v, 0)))
    if body:
        st = np.array([b[0] for b in body], np.int64)
        v = np.array([b[1] for b in body], np.int64)
        ones = np.ones(len(body), np.int64)
        _add(acc, pos, "sse_framing_bytes", _frame(st, ones, v))
        _add(acc, pos, "app_payload_bytes", _frame(st, ones, -v))


def protocol_stacks(cap: Capture) -> dict[int, str]:
    """{tcp_stream: the layers the tables saw on it, '/'-joined in stack order: tls, http1,
    http2, websocket}; connections not listed carry none of them (plain "tcp")."""
    layers: dict[int, list[str]] = {}
    named = (
        ("tls", cap.tls_records),
        ("tls", cap.tls_handshakes),
        ("http1", cap.http_requests),
        ("http2", cap.http2_connections),
        ("websocket", getattr(cap, "ws_connections", None)),
    )
    for name, df in named:
        if not isinstance(df, pd.DataFrame) or not len(df):
            continue
        for st in set(df["tcp_stream"].to_numpy(np.int64).tolist()):
            mine = layers.setdefault(st, [])
            if name not in mine:
                mine.append(name)
    return {st: "/".join(x) for st, x in layers.items()}


def _endpoint(addr: Any, port: Any) -> str:
    a = str(addr)
    return f"[{a}]:{port}" if ":" in a else f"{a}:{port}"


# ------------------------------------------------------------------------------------ QUIC

_QUIC_NOT_DECRYPTED = frozenset(
    {"no_key", "no_epoch_key", "unknown_cid", "no_client_initial", "decrypt_failed"}
)
_QUIC_TAG = 16
_QUIC_CONTROL_H3 = frozenset({"HEADERS", "PUSH_PROMISE"})
_QUIC_INNER = (
    "http3_frame_header_bytes",
    "http3_control_bytes",
    "qpack_bytes",
    "sse_framing_bytes",
    "app_payload_bytes",
)


def _varint_len(v: np.ndarray) -> np.ndarray:
    """Bytes of the QUIC variable-length integer encoding of each value (RFC 9000 §16)."""
    return np.where(v < 64, 1, np.where(v < 16384, 2, np.where(v < 1 << 30, 4, 8)))


def _quic_rows(cap: Capture, by_direction: bool) -> list[list[Any]]:
    """The rows of the QUIC connections (module docstring, layer 5)."""
    qc = _table(cap, "quic_connections")
    if qc is None or not len(qc):
        return []
    n = len(qc)
    index = qc["quic_connection"].to_numpy(np.int64)
    pos = {int(q): i for i, q in enumerate(index.tolist())}
    acc = {c: np.zeros((n, 2), np.int64) for c in CATEGORIES}
    wire = _pair(qc, "wire_bytes")
    payload = _pair(qc, "bytes")
    packets = _pair(qc, "datagrams")
    acc["udp_header_bytes"][:] = wire - payload
    in_packets = np.zeros((n, 2), np.int64)
    qp = _table(cap, "quic_packets")
    if qp is not None and len(qp):
        conn = qp["quic_connection"].to_numpy(np.int64)
        rows = _rows(pos, conn)
        d = _dir(qp["direction"])
        length = qp["length"].to_numpy(np.int64)
        status = qp["status"].astype("string").fillna("").to_numpy(object)
        hdr_na = qp["header_bytes"].isna().to_numpy(bool)
        hdr = np.minimum(_nz(qp["header_bytes"]), length)
        decrypted = status == "decrypted"
        hidden = np.isin(status, list(_QUIC_NOT_DECRYPTED))
        retry = (qp["packet_type"].astype("string") == "retry").fillna(False).to_numpy(bool)
        reset = status == "stateless_reset"
        tagged = decrypted | hidden | retry
        tag = np.where(tagged, np.minimum(_QUIC_TAG, length - hdr), 0)
        _at(acc["quic_header_bytes"], rows, d, np.where(hdr_na, 0, hdr))
        _at(acc["quic_aead_tag_bytes"], rows, d, tag)
        undecrypted = np.where(hidden, length - hdr - tag, 0)
        undecrypted = np.where(hdr_na & ~reset, length, undecrypted)
        _at(acc["quic_undecrypted_bytes"], rows, d, undecrypted)
        _at(acc["quic_control_bytes"], rows, d, np.where(reset, length, 0))
        _at(in_packets, rows, d, length)
    # a datagram's bytes after its last packet: padding (the zeros of a padded Initial)
    acc["quic_padding_bytes"][:] = np.maximum(payload - in_packets, 0)
    stream_data = np.zeros((n, 2), np.int64)
    datagrams = {"app_payload_bytes": np.zeros((n, 2), np.int64)}
    qf = _table(cap, "quic_frames")
    if qf is not None and len(qf):
        conn = qf["quic_connection"].to_numpy(np.int64)
        rows = _rows(pos, conn)
        d = _dir(qf["direction"])
        size = qf["frame_bytes"].to_numpy(np.int64)
        data = _nz(qf["length"])
        typ = qf["frame_type"].astype("string").fillna("").to_numpy(object)
        is_pad, is_ack = typ == "PADDING", typ == "ACK"
        is_crypto, is_stream, is_dgram = typ == "CRYPTO", typ == "STREAM", typ == "DATAGRAM"
        control = ~(is_pad | is_ack | is_crypto | is_stream | is_dgram)
        carrying = is_stream | is_dgram
        _at(acc["quic_padding_bytes"], rows, d, np.where(is_pad, size, 0))
        _at(acc["quic_ack_bytes"], rows, d, np.where(is_ack, size, 0))
        _at(acc["quic_crypto_bytes"], rows, d, np.where(is_crypto, size, 0))
        _at(acc["quic_control_bytes"], rows, d, np.where(control, size, 0))
        _at(acc["quic_stream_header_bytes"], rows, d, np.where(carrying, size - data, 0))
        _at(datagrams["app_payload_bytes"], rows, d, np.where(is_dgram, data, 0))
        _at(stream_data, rows, d, np.where(is_stream, data, 0))
    resent = np.minimum(_pair(qc, "resent_stream_bytes"), stream_data)
    acc["quic_resent_bytes"][:] = resent
    distinct = stream_data - resent
    _http3(cap, pos, acc)
    for i in range(n):  # bytes lost inside HTTP/3 frames: the layers stay within the stream
        for side in (0, 1):
            _squeeze(acc, i, side, int(distinct[i, side]), _QUIC_INNER)
    acc["app_payload_bytes"] += datagrams["app_payload_bytes"]
    acc["other_bytes"][:] = wire - sum(acc[c] for c in CATEGORIES if c != "other_bytes")
    whole = int(cap.summary.wire_bytes)
    h3 = _table(cap, "http3_frames")
    with_h3 = set() if h3 is None else set(h3["quic_connection"].to_numpy(np.int64).tolist())
    client = [_endpoint(a, p) for a, p in zip(qc["client_addr"].astype(object).tolist(),
                                                qc["client_port"].tolist(), strict=True)]
    server = [_endpoint(a, p) for a, p in zip(qc["server_addr"].astype(object).tolist(),
                                                qc["server_port"].tolist(), strict=True)]
    out: list[list[Any]] = []
    for i in range(n):
        q = int(index[i])
        proto = "quic/http3" if q in with_h3 else "quic"
        sides = (
            [(0, "client_to_server"), (1, "server_to_client")] if by_direction else [(-1, "both")]
        )
        for side, label in sides:
            if side < 0:
                out.append(_out_row(None, q, "quic", label, False, client[i], server[i], proto,
                                    int(packets[i].sum()), int(wire[i].sum()),
                                     [int(acc[c][i].sum()) for c in CATEGORIES], whole))
            else:
                out.append(_out_row(None, q, "quic", label, False, client[i], server[i], proto,
                                    int(packets[i, side]), int(wire[i, side]),
                                     [int(acc[c][i, side]) for c in CATEGORIES], whole))
    return out


def _rows(pos: dict[int, int], keys: np.ndarray) -> np.ndarray:
    """Row of each key (-1 for keys not in ``pos``)."""
    return np.array([pos.get(k, -1) for k in keys.tolist()], np.int64)


def _at(target: np.ndarray, rows: np.ndarray, d: np.ndarray, v: Any) -> None:
    """``target[rows, d] += v`` for the rows that exist (repeated rows add up)."""
    ok = rows >= 0
    vals = np.broadcast_to(np.asarray(v, np.int64), rows.shape)
    np.add.at(target, (rows[ok], d[ok]), vals[ok])


def _http3(cap: Capture, pos: dict[int, int], acc: dict[str, np.ndarray]) -> None:
    """HTTP/3 frames, QPACK and SSE framing inside the decrypted stream bytes."""
    fr = _table(cap, "http3_frames")
    if fr is not None and len(fr):
        conn = fr["quic_connection"].to_numpy(np.int64)
        rows = _rows(pos, conn)
        d = _dir(fr["direction"])
        code = fr["type_code"].to_numpy(np.int64)
        length = fr["length"].to_numpy(np.int64)
        typ = fr["type"].astype("string").fillna("").to_numpy(object)
        is_data = typ == "DATA"
        is_block = np.isin(typ, list(_QUIC_CONTROL_H3))
        _at(acc["http3_frame_header_bytes"], rows, d, _varint_len(code) + _varint_len(length))
        _at(acc["app_payload_bytes"], rows, d, np.where(is_data, length, 0))
        _at(acc["qpack_bytes"], rows, d, np.where(is_block, length, 0))
        _at(acc["http3_control_bytes"], rows, d, np.where(is_data | is_block, 0, length))
    hc = _table(cap, "http3_connections")
    if hc is not None and len(hc):
        conn = hc["quic_connection"].to_numpy(np.int64)
        for side, who in ((0, "client"), (1, "server")):
            dd = np.full(len(hc), side)
            _add(acc, pos, "qpack_bytes", _frame(conn, dd, _nz(hc[f"{who}_encoder_stream_bytes"])))
            ctl = hc[f"{who}_control_stream"].notna().to_numpy(bool).astype(np.int64)
            _add(acc, pos, "http3_control_bytes", _frame(conn, dd, ctl))  # stream type 0x00
    ev = _table(cap, "http3_sse_events")
    st = _table(cap, "http3_streams")
    if ev is None or st is None or not len(ev) or not len(st):
        return
    ev_sum = ev.assign(v=ev["data_bytes"].to_numpy(np.int64)).groupby(
        ["quic_connection", "stream_id"])["v"].sum()
    body = st.set_index(["quic_connection", "stream_id"])["server_data_bytes"]
    conns: list[int] = []
    vals: list[int] = []
    for key, v in zip(ev_sum.index.tolist(), ev_sum.to_numpy(np.int64).tolist(), strict=True):
        b = body.get(key)
        if b is not None:
            conns.append(int(key[0]))
            vals.append(max(int(b) - v, 0))
    if conns:
        c = np.array(conns, np.int64)
        v = np.array(vals, np.int64)
        ones = np.ones(len(c), np.int64)
        _add(acc, pos, "sse_framing_bytes", _frame(c, ones, v))
        _add(acc, pos, "app_payload_bytes", _frame(c, ones, -v))


def _table(cap: Capture, name: str) -> pd.DataFrame | None:
    df = getattr(cap, name, None)
    return df if isinstance(df, pd.DataFrame) else None
