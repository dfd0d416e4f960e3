"""Every resource limit of pcaptools in one place: what it bounds, its default, where it lives
and the anomaly code (a ``Capture.warnings`` row) it gives when a capture hits it.

The defaults are not copied here: each :class:`Limit` names its home (a module constant or a
parameter of a function or class) and :attr:`Limit.default` reads it, so this table cannot
go stale; ``tests/robustness/test_robustness_limits.py`` checks that every home resolves and
that ``docs/robustness.md`` shows the table :func:`limits_markdown` makes
(``python -m pcaptools.limits`` prints it, ``--write`` updates the docs).

Why limits: a capture is untrusted input. Every buffer an attacker (or a broken capture) can
grow is bounded, and hitting a bound is reported, never silent: the rows of the code named
here, and exact counts in ``Capture.summary.extra["warning_counts"]`` even beyond the
per-code row cap.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

__all__ = ["LIMITS", "Limit", "limits_markdown"]


@dataclass(frozen=True, slots=True)
class Limit:
    """One resource limit."""

    name: str
    """what it is called in the docs (the parameter name when it is one)"""
    home: str
    """``module:CONSTANT`` or ``module:Callable(parameter)``"""
    unit: str
    """bytes, count, seconds, ..."""
    code: str | None
    """the anomaly code written when it is hit (None: silent by design, see ``meaning``)"""
    meaning: str
    """what it bounds and what happens at the bound"""
    settable: str = ""
    """how a user changes it (empty: a module constant, not a public knob)"""

    @property
    def default(self) -> object:
        """The current default, read from :attr:`home`."""
        module, _, attr = self.home.partition(":")
        mod = importlib.import_module(module)
        if "(" not in attr:
            return getattr(mod, attr)
        func_name, _, param = attr.rstrip(")").partition("(")
        obj = mod
        for part in func_name.split("."):
            obj = getattr(obj, part)
        return inspect.signature(obj).parameters[param].default  # type: ignore[arg-type]


def _fmt(value: object, unit: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and unit == "bytes":
        for shift, suffix in ((30, " GiB"), (20, " MiB"), (10, " KiB")):
            if value >= 1 << shift and value % (1 << shift) == 0:
                return f"{value >> shift}{suffix}"
        return f"{value:,} B"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


_IO = "pcaptools.io"
_TLS = "pcaptools.protocols.tls"

#: every limit, in pipeline order
LIMITS: tuple[Limit, ...] = (
    Limit(
        "max_decompressed_bytes",
        "pcaptools.capture:load(max_decompressed_bytes)",
        "bytes",
        "capture.decompression_limit",
        "bytes read after decompression (and from an uncompressed file); reading stops there "
        "and everything before is analysed. None: no limit. A guard against decompression "
        "bombs (2 GB of zeros gzip to 2 MB)",
        "load(max_decompressed_bytes=...), pcap-report --max-decompressed-bytes",
    ),
    Limit(
        "largest record",
        f"{_IO}.linktypes:MAX_PACKET_STANDARD",
        "bytes",
        "capture.bad_record_length",
        "largest pcap/pcapng record accepted for ordinary link types, as Wireshark "
        "(USB and a few others: larger); a longer record stops reading",
    ),
    Limit(
        "largest pcapng block",
        f"{_IO}.pcapng:MAX_BLOCK_LEN",
        "bytes",
        "capture.bad_block",
        "a block announcing more stops reading (the file is not trusted to resynchronise)",
    ),
    Limit(
        "max_warnings_per_code",
        "pcaptools.capture:load(max_warnings_per_code)",
        "rows",
        None,
        "rows of Capture.warnings kept per anomaly code; further occurrences are only "
        "counted (summary.extra['warning_counts'] is exact)",
        "load(max_warnings_per_code=...)",
    ),
    Limit(
        "IP fragment datagrams in flight",
        "pcaptools.net.decode:MAX_FRAGMENT_DATAGRAMS",
        "datagrams",
        "net.ip_fragment_incomplete",
        "the oldest incomplete datagram is dropped to make room",
    ),
    Limit(
        "IP fragment bytes in flight",
        "pcaptools.net.decode:MAX_FRAGMENT_BYTES",
        "bytes",
        "net.ip_fragment_incomplete",
        "bytes held by incomplete datagrams, all together",
    ),
    Limit(
        "fragments per datagram",
        "pcaptools.net.fragments:MAX_FRAGMENTS_PER_DATAGRAM",
        "count",
        "net.ip_fragment_incomplete",
        "a datagram cut in more pieces is given up",
    ),
    Limit(
        "fragment reassembly timeout",
        "pcaptools.net.decode:FRAGMENT_TIMEOUT_NS",
        "ns",
        "net.ip_fragment_incomplete",
        "an incomplete datagram older than this (capture time) is dropped",
    ),
    Limit(
        "IPv6 extension headers",
        "pcaptools.net.decode:_MAX_IP6_EXT",
        "count",
        "net.bad_ipv6_extension",
        "a longer chain is reported and the packet not decoded",
    ),
    Limit(
        "VLAN / MPLS stack depth",
        "pcaptools.net.decode:_MAX_ETHER_DEPTH",
        "count",
        None,
        "deeper stacks are not decoded further (counted as non-IP)",
    ),
    Limit(
        "tunnel depth",
        "pcaptools.net.decode:_MAX_TUNNEL_DEPTH",
        "count",
        None,
        "IP-in-IP / GRE nesting decoded; the innermost packet beyond is reported as IP",
    ),
    Limit(
        "unacknowledged segments",
        "pcaptools.tcp.analysis:MAX_UNACKED_SEGMENTS",
        "count",
        "tcp.unacked_limit",
        "per direction, for retransmission analysis (as tshark); older ones are forgotten",
    ),
    Limit(
        "uncaptured ranges per direction",
        "pcaptools.tcp.losses:MAX_LOSS_HOLES",
        "count",
        "tcp.loss_holes_limit",
        "sequence ranges not captured yet, waiting to be filled or acknowledged (tcp_losses); "
        "beyond it the oldest becomes an unresolved row",
    ),
    Limit(
        "resends waiting for a D-SACK per direction",
        "pcaptools.tcp.losses:MAX_DSACK_PENDING",
        "count",
        None,
        "resends seen twice that a later D-SACK may still show spurious; older ones stay "
        "counted as losses",
    ),
    Limit(
        "reassembly buffer per direction",
        "pcaptools.tcp.tracker:MAX_BUFFER_BYTES",
        "bytes",
        "tcp.reassembly_limit",
        "out-of-order bytes waiting for a hole to fill; beyond it the first hole becomes a "
        "gap for the protocol observers",
    ),
    Limit(
        "reassembly pieces per direction",
        "pcaptools.tcp.reassembly:_MAX_PIECES",
        "count",
        "tcp.reassembly_limit",
        "out-of-order segments held (many tiny segments)",
    ),
    Limit(
        "retransmission history per direction",
        "pcaptools.tcp.reassembly:MAX_HISTORY_BYTES",
        "bytes",
        None,
        "delivered bytes remembered to compare retransmitted copies with; older ones are "
        "not compared",
    ),
    Limit(
        "key log line",
        f"{_TLS}.keylog:MAX_LINE_BYTES",
        "bytes",
        "tls.keylog_bad_line",
        "longest key log line parsed (a real entry is under 300 bytes); a longer one is read "
        "through in pieces, never held, and is one bad line. Key logs are read line by line: "
        "memory grows with the secrets stored, not the file",
    ),
    Limit(
        "TLS record length",
        f"{_TLS}.records:MAX_RECORD_LENGTH",
        "bytes",
        "tls.record_overflow",
        "a record header announcing more: that direction is no longer parsed (bytes counted)",
    ),
    Limit(
        "TLS resynchronisation search",
        f"{_TLS}.records:RESYNC_BUDGET",
        "bytes",
        "tls.resync_failed",
        "bytes searched for a record boundary after a gap",
    ),
    Limit(
        "TLS handshake message",
        f"{_TLS}.observer:MAX_HANDSHAKE_MESSAGE",
        "bytes",
        "tls.handshake_parse_error",
        "a handshake message reassembled across records may not be longer",
    ),
    Limit(
        "HTTP/1 header section",
        "pcaptools.protocols.http1:Http1Observer(max_head_bytes)",
        "bytes",
        "http1.header_too_large",
        "start line + headers without an end",
    ),
    Limit(
        "HTTP/1 chunk-size line",
        "pcaptools.protocols.http1:_MAX_CHUNK_LINE",
        "bytes",
        "http1.bad_message",
        "a chunk-size line without an end",
    ),
    Limit(
        "HTTP/1 requests awaiting a response",
        "pcaptools.protocols.http1:_MAX_AWAITING",
        "count",
        None,
        "pipelined requests held; the oldest is emitted as evicted",
    ),
    Limit(
        "protocol detection probe",
        "pcaptools.protocols.detect:HttpDetector(max_probe_bytes)",
        "bytes",
        None,
        "bytes looked at to recognise HTTP; then the connection is left alone",
    ),
    Limit(
        "HTTP/2 frame body buffered",
        "pcaptools.protocols.http2.observer:_MAX_BUFFERED_FRAME",
        "bytes",
        "http2.frame_too_large",
        "bodies of larger frames are counted and skipped, not held",
    ),
    Limit(
        "HTTP/2 header block",
        "pcaptools.protocols.http2.observer:_MAX_HEADER_BLOCK",
        "bytes",
        "http2.bad_frame",
        "HEADERS + CONTINUATION bytes of one block",
    ),
    Limit(
        "HPACK dynamic table",
        "pcaptools.protocols.http2.observer:_HPACK_MAX_TABLE",
        "bytes",
        "http2.hpack_decode_failed",
        "largest table size update accepted",
    ),
    Limit(
        "HPACK decoded header list",
        "pcaptools.protocols.http2.observer:_HPACK_MAX_HEADER_LIST",
        "bytes",
        "http2.hpack_decode_failed",
        "RFC 7541 size of the decoded headers of one block (stops reference bombs)",
    ),
    Limit(
        "HTTP/2 open streams",
        "pcaptools.protocols.http2.observer:_MAX_OPEN_STREAMS",
        "count",
        None,
        "streams tracked per connection; the oldest is emitted as evicted",
    ),
    Limit(
        "HTTP/2 pending PINGs",
        "pcaptools.protocols.http2.observer:_MAX_PENDING_PINGS",
        "count",
        None,
        "PINGs awaiting their ACK for RTT measurement",
    ),
    Limit(
        "HTTP/2 frame search",
        "pcaptools.protocols.http2.observer:Http2Observer(hunt_budget)",
        "bytes",
        "http2.desynced",
        "bytes searched for frame alignment after a gap",
    ),
    Limit(
        "decoded HTTP body",
        "pcaptools.protocols.content_coding:DEFAULT_MAX_DECODED_BYTES",
        "bytes",
        "http.content_decoding_limit",
        "bytes one content-encoded (gzip, deflate, br, zstd) response body (or DoH request "
        "body) may decode to, and each stage of a stacked coding; decoding of that body stops "
        "there (what was decoded, SSE events included, is kept) and response_decoded_bytes "
        "stops counting",
        "Http1Observer(max_decoded_body_bytes=...), Http2Observer(max_decoded_body_bytes=...)",
    ),
    Limit(
        "zstd window of an HTTP body",
        "pcaptools.protocols.content_coding:_ZSTD_MAX_WINDOW",
        "bytes",
        "http.content_decoding_failed",
        "largest zstd window accepted in a Content-Encoding: zstd body (RFC 9659 §3); a frame "
        "asking for more is not decoded",
    ),
    Limit(
        "HTTP body handed over whole",
        "pcaptools.protocols.body:MAX_COLLECTED_BODY_BYTES",
        "bytes",
        None,
        "an application/dns-message body (DoH) that decodes to more than this is not kept: its "
        "DNS message is unknown and the dns row has the other side only",
    ),
    Limit(
        "DNS over TCP resynchronisation",
        "pcaptools.protocols.dns:_RESYNC_SCAN_BYTES",
        "bytes",
        "dns.tcp_bytes_lost",
        "bytes held while looking for the next message after a lost length prefix (one "
        "largest message and its prefix); older bytes are dropped one at a time",
    ),
    Limit(
        "QUIC packets listed",
        "pcaptools.protocols.quic.observer:MAX_QUIC_PACKET_ROWS",
        "rows",
        "quic.packet_rows_capped",
        "quic_packets rows per load; later packets are still counted in quic_connections",
    ),
    Limit(
        "QUIC connections",
        "pcaptools.protocols.quic.observer:MAX_QUIC_CONNECTIONS",
        "connections",
        "quic.too_many_connections",
        "QUIC connections tracked per load; datagrams that would open another are not analysed",
    ),
    Limit(
        "QUIC frames listed",
        "pcaptools.protocols.quic.observer:MAX_QUIC_FRAME_ROWS",
        "rows",
        "quic.frame_rows_capped",
        "quic_frames rows per load; later frames are still analysed (streams, ACKs, the close)",
    ),
    Limit(
        "ACKs checked per QUIC PING",
        "pcaptools.tables.heartbeats:MAX_ACKS_PER_QUIC_PING",
        "ACK frames",
        None,
        "heartbeats' quic_ping matching: a PING not covered by the peer's next this many ACK "
        "frames (of its packet number space) stays unanswered; keeps the matching linear",
    ),
    Limit(
        "QUIC stream reassembly",
        "pcaptools.protocols.quic.reassembly:MAX_QUIC_STREAM_BUFFER",
        "bytes",
        None,
        "bytes of one stream and direction held behind a hole; beyond it the hole is handed to "
        "the application observer as a gap (quic_connections.stream_gaps) and the bytes after it "
        "are delivered",
    ),
    Limit(
        "QUIC streams per connection",
        "pcaptools.protocols.quic.reassembly:MAX_QUIC_STREAMS",
        "streams",
        "quic.too_many_streams",
        "streams per direction tracked per QUIC connection; frames of more are not delivered",
    ),
    Limit(
        "QUIC RTT send times",
        "pcaptools.protocols.quic.observer:MAX_RTT_PENDING",
        "packets",
        None,
        "send times kept per direction and packet number space for RTT samples (the most "
        "recent): an ACK of an older packet gives no sample",
    ),
    Limit(
        "QUIC packet number ranges",
        "pcaptools.protocols.quic.ranges:MAX_RANGES",
        "ranges",
        None,
        "ranges of one set of packet numbers seen or acknowledged (or of one stream's offsets "
        "sent); a set stops growing there and the connection's lost-packet columns are NA",
    ),
    Limit(
        "QUIC Initial CRYPTO data",
        "pcaptools.protocols.quic.observer:MAX_CRYPTO_BYTES",
        "bytes",
        "quic.crypto_overflow",
        "CRYPTO bytes of one direction's Initial packets held ahead of the parsed point (a "
        "hole, or a ClientHello longer than this); the rest of that handshake is not read",
    ),
    Limit(
        "HTTP/3 buffered frame",
        "pcaptools.protocols.http3.observer:MAX_HTTP3_FRAME_BYTES",
        "bytes",
        "http3.frame_too_long",
        "payload of a non-DATA HTTP/3 frame (HEADERS, SETTINGS...) held until complete; a "
        "longer frame is skipped (DATA payloads are streamed, never held)",
    ),
    Limit(
        "HTTP/3 frames listed",
        "pcaptools.protocols.http3.observer:MAX_HTTP3_FRAME_ROWS",
        "rows",
        "http3.frame_rows_capped",
        "http3_frames rows per QUIC connection; later frames are still parsed",
    ),
    Limit(
        "HTTP/3 server-sent events listed",
        "pcaptools.protocols.http3.observer:MAX_HTTP3_SSE_ROWS",
        "rows",
        "http3.sse_rows_capped",
        "http3_sse_events rows per QUIC connection; later events are still counted",
    ),
    Limit(
        "HTTP/3 open streams",
        "pcaptools.protocols.http3.observer:MAX_HTTP3_OPEN_STREAMS",
        "streams",
        "http3.too_many_streams",
        "QUIC streams of one HTTP/3 connection tracked at once; bytes of further new streams "
        "are not parsed",
    ),
    Limit(
        "QPACK pending bytes",
        "pcaptools.protocols.http3.observer:MAX_QPACK_PENDING_BYTES",
        "bytes",
        "http3.qpack_pending_overflow",
        "bytes held per direction while QPACK cannot proceed (encoder-stream bytes before the "
        "peer's SETTINGS; response DATA waiting for a blocked field section)",
    ),
    Limit(
        "SSE line / event data",
        "pcaptools.protocols.sse:DEFAULT_MAX_LINE_BYTES",
        "bytes",
        "sse.unterminated_event",
        "a longer line (or event) is dropped; parsing resumes at the next line end",
    ),
    Limit(
        "WebSocket frame inspected",
        "pcaptools.protocols.websocket:DEFAULT_MAX_FRAME_BYTES",
        "bytes",
        "ws.frame_too_large",
        "larger payloads are counted and skipped (no unmasking, preview or inflating)",
    ),
    Limit(
        "WebSocket decompressed message",
        "pcaptools.protocols.websocket:DEFAULT_MAX_DECOMPRESSED_BYTES",
        "bytes",
        "ws.decompression_limit",
        "inflated bytes of one message (deflate bombs)",
    ),
    Limit(
        "WebSocket inflate past the limit",
        "pcaptools.protocols.websocket:INFLATE_DRAIN_BYTES",
        "bytes",
        "ws.decompression_limit",
        "with context takeover, output of a message past its decompression limit still "
        "inflated (and discarded) so the direction's later messages inflate; beyond it the "
        "shared context is given up (later messages: skipped) and a second row says so",
    ),
    Limit(
        "WebSocket control payload kept",
        "pcaptools.protocols.websocket:CONTROL_KEEP_BYTES",
        "bytes",
        None,
        "of a control frame (the legal maximum is 125)",
    ),
    Limit(
        "WebSocket frame search",
        "pcaptools.protocols.websocket:HUNT_BUDGET_BYTES",
        "bytes",
        "ws.desynced",
        "bytes searched for a frame boundary after a gap",
    ),
    Limit(
        "WebSocket text preview",
        "pcaptools.protocols.websocket:DEFAULT_PREVIEW_CHARS",
        "characters",
        None,
        "kept per text message",
    ),
    Limit(
        "WebSocket JSON message parsed",
        "pcaptools.protocols.websocket:DEFAULT_MAX_JSON_BYTES",
        "bytes",
        None,
        "a text message starting like a JSON object is kept whole (one per direction at a "
        "time) up to this and parsed into realtime_events; a longer one gets a row with "
        "status too_large (its preview's type only)",
    ),
    Limit(
        "realtime_events fields",
        "pcaptools.tables.realtime_tables:MAX_FIELDS",
        "count",
        None,
        "short scalar members kept per event in realtime_events.fields (strings up to "
        "MAX_FIELD_CHARS characters, MAX_FIELD_DEPTH levels of nesting, MAX_FIELDS_CHARS "
        "characters in all); the rest are not kept",
    ),
    Limit(
        "max_packet_rows",
        "pcaptools.capture:load(max_packet_rows)",
        "rows",
        "table.packets_truncated",
        "rows of the packets table, the one table that grows with the frame count: frames "
        "numbered above it get no row (one warning at the first), every other table still "
        "covers every frame. ~140 bytes a row of peak memory while the table is built, so "
        "the default bounds it to ~0.3 GB; a pcap costs as little as 16 bytes a frame on disk "
        "(a 66 KB gzip file can hold 4 million frames). None: no cap",
        "load(max_packet_rows=...), pcap-report --max-packet-rows",
    ),
    Limit(
        "MAX_ICMP_ERROR_ROWS",
        "pcaptools.tables.icmp_tables:MAX_ICMP_ERROR_ROWS",
        "rows",
        "table.icmp_errors_truncated",
        "rows of the icmp_errors table (an ICMP flood must not fill memory): later ICMP errors "
        "get no row, one warning says so; path_mtu still counts the too-big ones",
    ),
    Limit(
        "max_events_per_connection",
        "pcaptools.capture:load(max_events_per_connection)",
        "rows",
        "table.events_truncated",
        "per-record rows one connection adds to tls_records, http2_frames, sse_events, "
        "ws_frames and ws_messages (a flood of 9-byte HTTP/2 frames or empty SSE events makes "
        "millions): past it that connection's later ones are dropped (one warning), its summary "
        "rows and TCP analysis are kept; summary.extra['rows_dropped_by_connection'] counts the "
        "dropped rows exactly. The largest real connection seen (shipped captures, corpus) has "
        "under 2,000. None: no cap",
        "load(max_events_per_connection=...), pcap-report --max-events-per-connection",
    ),
    Limit(
        "max_record_rows",
        "pcaptools.capture:load(max_record_rows)",
        "rows",
        "table.records_truncated",
        "rows each per-record table (tls_records, http2_frames, sse_events, ws_frames, "
        "ws_messages) keeps in all: past it that table's later rows are dropped (one warning "
        "per table; summary.extra['rows_dropped'] counts them exactly), every other table is "
        "complete. ~200 bytes a row of sse_events / http2_frames (~65 for tls_records), so "
        "~0.4 GB a table at the cap; the 300 MB benchmark capture has 185,108 sse_events. "
        "Not applied with load(out=...) (rows streamed to Parquet). None: no cap",
        "load(max_record_rows=...), pcap-report --max-record-rows",
    ),
    Limit(
        "report table rows",
        "pcaptools.report.html:MAX_TABLE_ROWS",
        "rows",
        None,
        "rows shown per report table (the page says how many were left out)",
        "write_report(max_table_rows=...), pcap-report --max-table-rows",
    ),
    Limit(
        "report timeline bars",
        "pcaptools.report.html:MAX_TIMELINE_BARS",
        "bars",
        None,
        "connections drawn in the timeline",
        "write_report(max_timeline_bars=...)",
    ),
    Limit(
        "report slowest requests",
        "pcaptools.report.slow_section:MAX_SLOW_REQUESTS",
        "requests",
        None,
        "requests shown with their time split in 'Why was it slow' (the slowest by total "
        "time; the section says how many there are, analyses.slow.request_timing has all)",
    ),
    Limit(
        "report time-sequence connections",
        "pcaptools.report.slow_section:MAX_SEQUENCE_CONNECTIONS",
        "connections",
        None,
        "connections given a time-sequence chart in 'Why was it slow' (those that stalled "
        "longest; the note says of how many)",
    ),
    Limit(
        "report time-sequence points",
        "pcaptools.report.slow_section:MAX_SEQUENCE_POINTS",
        "points",
        None,
        "data segments (and as many ACKs and SACK blocks) per time-sequence chart; beyond, "
        "evenly thinned with every retransmission kept, and the note says so",
    ),
    Limit(
        "bytes-in-flight segments",
        "pcaptools.analyses.slow:MAX_UNACKED_SEGMENTS",
        "segments",
        None,
        "unacknowledged segments connection_series keeps per direction for bytes_in_flight "
        "(tshark's TCP_MAX_UNACKED_SEGMENTS: past it, as in tshark, later segments are not "
        "counted until ACKs free room)",
    ),
)


def limits_markdown() -> str:
    """The table of :data:`LIMITS` for docs/robustness.md (limits whose home is missing,
    e.g. a module not written yet, say so instead of failing)."""
    lines = [
        "| limit | default | where | when hit | what it bounds |",
        "|---|---|---|---|---|",
    ]
    for lim in LIMITS:
        try:
            default = _fmt(lim.default, lim.unit)
        except (ImportError, AttributeError, KeyError):
            default = "(missing)"
        where = f"`{lim.home}`" + (f"; {lim.settable}" if lim.settable else "")
        code = f"`{lim.code}`" if lim.code else "no row"
        lines.append(f"| {lim.name} | {default} | {where} | {code} | {lim.meaning} |")
    return "\n".join(lines) + "\n"


def _write_docs() -> None:
    """Replace the table between the markers of docs/robustness.md."""
    from pathlib import Path

    doc = Path(__file__).resolve().parent.parent / "docs" / "robustness.md"
    text = doc.read_text(encoding="utf-8")
    begin, end = "<!-- limits:begin -->\n", "<!-- limits:end -->"
    head, rest = text.split(begin, 1)
    doc.write_text(head + begin + limits_markdown() + end + rest.split(end, 1)[1], encoding="utf-8")


if __name__ == "__main__":  # python -m pcaptools.limits [--write]
    import sys

    if "--write" in sys.argv:
        _write_docs()
    else:
        print(limits_markdown(), end="")
