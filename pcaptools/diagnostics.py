"""Anomalies as data: every oddity in a capture becomes a row, never a crash or a print.

Codes are stable, dotted and snake_case (``layer.what_happened``), like Zeek's weird
names. :data:`CATALOGUE` maps each code to a one-line meaning; ``docs/anomalies.md``
is generated from it (``python -m pcaptools.docs``). Every layer reports through a
:class:`Diagnostics` sink that the pipeline hands down; the sink caps the number of
rows kept per code (a million-packet capture with a million bad checksums must not
hold a million rows) but always keeps the exact count, so nothing is silently lost.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

#: code -> one-line meaning. Add a code here before using it (a test checks this).
CATALOGUE: dict[str, str] = {
    # capture file
    "capture.truncated_record": "the file ends in the middle of a record; everything before it was analysed",
    "capture.bad_record_length": "a record announces a length that cannot be right (larger than the block, the snaplen or 256 MiB); reading stopped there",
    "capture.bad_block": "a pcapng block is malformed (bad length, bad trailer); reading resynchronised or stopped",
    "capture.unknown_block_type": "pcapng blocks of a type pcaptools does not read (not registered, local use, or registered but not needed, e.g. Darwin process events) were skipped: one row per type",
    "capture.bad_option": "a pcapng option overruns its block (tshark calls the file corrupt and stops reading there): the block was kept without the rest of its options and reading went on",
    "capture.unknown_interface": "a packet refers to an interface id that no Interface Description Block defined",
    "capture.unsupported_linktype": "packets of this link type are counted but not decoded",
    "capture.decompression_error": "the compressed stream is corrupt; everything before the error was analysed",
    "capture.decompression_limit": "decompression stopped at the configured size limit",
    "capture.read_error": (
        "reading the capture failed part-way (an I/O error, a pipe or socket reset or "
        "timeout): reading stopped there and everything before it was analysed"),
    "capture.timestamp_out_of_range": "a packet's timestamp (with its interface's if_tsresol and if_tsoffset) is outside years 1677-2262, what int64 nanoseconds hold: the frame gets the previous frame's time",
    "capture.timestamp_out_of_order": "a packet's timestamp is earlier than the previous packet's",
    "capture.secrets_unsupported": "a Decryption Secrets Block of a type other than TLS key log was ignored",
    # network layers
    "net.truncated_link_header": "the packet is shorter than its link-layer header",
    "net.truncated_ip_header": "the packet is cut off inside its IP header",
    "net.bad_ip_version": "the IP version nibble is neither 4 nor 6",
    "net.bad_ip_header_length": "the IPv4 header length field is smaller than 20 bytes or larger than the packet",
    "net.bad_ip_total_length": "the IP total/payload length disagrees with the captured bytes",
    "net.bad_ipv6_extension": "an IPv6 extension header is truncated or loops",
    "net.ip_fragment_incomplete": "IP fragments whose datagram was never completed in the capture",
    "net.ip_fragment_overlap": "IP fragments overlap with different contents",
    "net.truncated_tcp_header": "the packet is cut off inside its TCP header",
    "net.bad_tcp_header_length": "the TCP data offset is smaller than 20 bytes or larger than the segment",
    "net.truncated_udp_header": "the packet is cut off inside its UDP header",
    "net.snaplen_truncated_payload": "the TCP payload was cut off by the capture's snaplen; its bytes are a gap for the layers above",
    "net.decode_error": "a frame could not be decoded because of an unexpected malformation (a pcaptools bug: please report it); it was skipped",
    # tcp
    "tcp.capture_started_mid_stream": "the first packet of a connection is not a SYN: roles are inferred",
    "tcp.reassembly_gap": "bytes of a TCP byte stream were never captured; the layers above resynchronise",
    "tcp.reassembly_limit": "out-of-order data exceeded the reassembly buffer limit: the first hole was given up as a gap",
    "tcp.bad_checksum": "a TCP segment's checksum is wrong (load(check_checksums=True)): tshark analyses it anyway, Zeek drops it (a tcp_events row of kind bad_checksum; analyses.conn_log's C)",
    "tcp.checksum_offloaded": "TCP segments carry a partial checksum (checksumming offloaded to the NIC, or loopback): they were not verified and are not counted as bad",
    "tcp.capture_drop": "bytes the receiver acknowledged were never captured: the capture missed packets (not a network loss; a tcp_losses row of kind capture_drop)",
    "tcp.unresolved_gap": "sequence ranges never captured, neither resent nor acknowledged before the capture ended (tcp_losses rows of kind unresolved)",
    "tcp.loss_holes_limit": "too many uncaptured sequence ranges in one direction: the oldest is given up as unresolved",
    "tcp.unacked_limit": "too many unacknowledged segments in one direction; older ones are no longer tracked (as tshark)",
    "tcp.cold_spill_failed": "load(out=DIR) could not move old one-SYN connections to its temporary database (no writable temporary directory, a full disk): they stay in memory, which then grows with them; every table is still complete",
    "tcp.frozen_spill_failed": "load(out=DIR) could not move the records of ended or idle connections to its temporary database (no writable temporary directory, a full disk): they stay in memory, which then grows with them; every table is still complete",
    "tcp.payload_after_release": (
        "payload came after the end of a connection (both directions ended by a FIN or an RST, "
        "nothing held back) at least 1 s of capture time later, once its parsers had finished "
        "and its state was let go to keep memory to live connections: those bytes (beyond a "
        "FIN: a protocol violation or a reused port without a SYN; after an RST: data long in "
        "flight) are counted in the TCP tables but not parsed (the connection's coverage row: "
        "status partly_analysed)"),
    "tcp.observer_error": "a protocol observer raised an unexpected error on this connection (a pcaptools bug: please report it); the connection's payload is no longer parsed, its TCP rows are unaffected",
    # udp
    "udp.observer_error": "a UDP datagram observer (DNS, ...) or its probe raised an unexpected error on this datagram (a pcaptools bug: please report it); the datagram is skipped, the next ones are still given to it",
    # tls
    "tls.record_overflow": "a TLS record announces more than 2^14 + 2048 bytes; this direction is no longer parsed (bytes still counted)",
    "tls.bad_record_type": "a TLS record header has an unknown content type (not TLS, or garbage); this direction is no longer parsed",
    "tls.bad_record_version": "a TLS record header's version is not 3.x; this direction is no longer parsed",
    "tls.resynchronized": "bytes were skipped to find the next TLS record boundary (capture started mid-record, or after a gap)",
    "tls.resync_failed": "no TLS record boundary was found within 64 KiB, or in the whole direction (not TLS, or too damaged); this direction is no longer parsed",
    "tls.truncated_record": "a direction ended inside a TLS record (connection closed or capture ended)",
    "tls.handshake_parse_error": "a TLS handshake message is malformed; its facts are missing from tls_handshakes",
    "tls.no_key_for_session": "a key log was given but holds no secrets for this TLS session (its client random); records stay encrypted",
    "tls.decrypt_failed": "a TLS record did not decrypt with the logged keys (bad tag, MAC or padding)",
    "tls.decompress_failed": "a TLS record compressed with DEFLATE (RFC 3749) did not decompress; the rest of that direction stays undecoded",
    "tls.unsupported_cipher": "the negotiated cipher suite (or TLS 1.3 draft) cannot be decrypted by pcaptools",
    "tls.keylog_bad_line": "a key log line is neither a comment nor a valid NSS key log entry (line number given; the line is never shown)",
    "tls.internal_error": "the TLS observer hit an unexpected error on this connection and stopped parsing it (please report)",
    # http/1.x
    "http1.bad_message": "an HTTP/1.x start line, header section or body framing could not be parsed; that direction resynchronises at the next message start",
    "http1.header_too_large": "an HTTP/1.x header section grew beyond the parser's limit without ending; that direction resynchronises",
    "http1.resynchronised": "HTTP/1.x parsing resumed at a message start after skipping bytes (capture started mid-connection, a gap, or a bad message)",
    "http1.truncated_message": "the connection closed (or the capture ended) in the middle of an HTTP/1.x message whose length was known",
    "http1.upgrade_not_followed": "an Upgrade/CONNECT hand-off happened but the protocol after it is not parsed (its bytes are only counted)",
    # http/2
    "http2.bad_preface": "the client's first bytes are not the HTTP/2 connection preface; frame alignment was searched for instead",
    "http2.bad_frame": "an HTTP/2 frame breaks RFC 9113 (bad length for its type, padding beyond the payload, CONTINUATION out of place...); it was recorded and parsing continued",
    "http2.frame_too_large": "an HTTP/2 frame is longer than the receiver's SETTINGS_MAX_FRAME_SIZE; it was recorded (bodies over 1 MiB skipped, not buffered)",
    "http2.hpack_decode_failed": "an HPACK header block could not be decoded (mid-connection start, lost bytes, corrupt block); its headers are unknown and the decoder restarts with an empty dynamic table",
    "http2.resynchronised": "HTTP/2 frame alignment was found heuristically after skipping bytes (capture started mid-connection or after a gap)",
    "http2.desynced": "HTTP/2 frame alignment could not be found within the search budget; the rest of that direction is only counted",
    "http2.truncated_frame": "the connection closed (or the capture ended) in the middle of an HTTP/2 frame",
    # http bodies (either version)
    "http.content_decoding_failed": "a response (or DNS over HTTPS request) body's Content-Encoding stream (gzip, deflate, br, zstd) is corrupt, or the body ended before that stream did; what was decoded before is kept (SSE events included), the rest of the body is not decoded",
    "http.content_decoding_limit": "a response (or DNS over HTTPS request) body decoded to more than the per-body limit (64 MiB by default); decoding stopped there (a decompression bomb is reported, not inflated)",
    "http.content_decoding_gap": "bytes of a content-encoded response (or DNS over HTTPS request) body were not captured; a compressed stream cannot resume after a hole, so the rest of the body is not decoded (nor its SSE events)",
    "http.content_encoding_unsupported": "a response body uses a Content-Encoding pcaptools does not decode (not gzip, deflate, br, zstd or identity); its bytes are counted, not parsed (no SSE events)",
    # dns
    "dns.malformed": "a DNS message (UDP or TCP port 53, or a DNS over HTTPS body) could not be decoded (cut short, bad name compression, counts beyond the data); its id and question still take part in matching when readable",
    "dns.tcp_bytes_lost": "bytes of a DNS over TCP connection were not captured: the message they belong to is missing from the dns table; when its length prefix was lost too, parsing resumed at the next offset where a whole DNS message follows a length prefix",
    "dns.tcp_truncated_message": "a DNS over TCP direction closed (or the capture ended) inside a message; that message is missing from the dns table",
    "dns.doh_bad_query": "a DNS over HTTPS GET (answered with application/dns-message) has a dns parameter that is not base64url (RFC 8484 §4.1); the row has the response only",
    # quic
    "quic.malformed_packet": "a UDP datagram of a QUIC flow (port 443, or a QUIC long header on another port) has a packet whose header does not parse (cut short, a connection ID longer than 20 bytes, a Length beyond the datagram, a byte that is not a QUIC packet); the packets before it are kept, the rest of the datagram is not read",
    "quic.initial_decrypt_failed": "a QUIC Initial packet did not decrypt with the keys derived from the client's destination connection ID (RFC 9001 §5.2): corrupted, or its client Initial was not the one captured; it is listed with status decrypt_failed",
    "quic.malformed_frame": "a decrypted QUIC packet has a frame that is cut short, of an unknown type, or (Initial) of a type an Initial may not carry; the frames before it are used, the rest of the packet is not",
    "quic.tls_malformed": "a TLS handshake message (ClientHello, ServerHello) in the CRYPTO frames of QUIC Initial packets does not parse; the connection has no SNI/ALPN/cipher from it (or an EncryptedExtensions: no ALPN; a NewSessionTicket in 1-RTT CRYPTO frames: no ticket lifetime or early_data)",
    "quic.crypto_overflow": "the CRYPTO data of QUIC Initial packets of one direction ran more than the limit ahead of what could be parsed (a hole never filled, or a huge message); the rest of its handshake is not read",
    "quic.too_many_connections": "more QUIC connections than the per-load limit: datagrams that would open another are not analysed",
    "quic.decrypt_failed": "a QUIC Handshake, 0-RTT or 1-RTT packet did not decrypt with the secrets the key log has for its connection (corrupted, a key update not followed, or secrets of another session); it is listed with status decrypt_failed",
    "quic.frame_rows_capped": "more QUIC frames than the quic_frames row limit: later frames are still analysed (streams, ACKs, the close) but not listed",
    "quic.too_many_streams": "a QUIC connection used more streams (in one direction) than the per-connection limit: frames of later streams are neither counted nor handed to the application protocol",
    "quic.app_observer_error": "the application observer of a QUIC connection (HTTP/3...) raised: its streams are counted from there on, not parsed; QUIC itself carries on",
    "quic.packet_rows_capped": "more QUIC packets than the quic_packets row limit: later packets are counted in quic_connections but not listed",
    # http3
    "http3.malformed_frame": (
        "an HTTP/3 frame (or a unidirectional stream header) does not parse: a SETTINGS cut short"
        " or repeated, a GOAWAY/CANCEL_PUSH/MAX_PUSH_ID payload that is not one varint, a "
        "PUSH_PROMISE without its push id; the rest of that stream direction is counted, not "
        "parsed (H3_FRAME_ERROR)"),
    "http3.frame_unexpected": (
        "an HTTP/3 frame type not allowed where it was seen (DATA or HEADERS on the control "
        "stream, SETTINGS on a request stream or twice, an HTTP/2-only type, a control stream not"
        " starting with SETTINGS): H3_FRAME_UNEXPECTED / H3_MISSING_SETTINGS; the frame is "
        "skipped and parsing goes on"),
    "http3.frame_too_long": (
        "a non-DATA HTTP/3 frame (HEADERS, SETTINGS...) longer than the buffering limit: it is "
        "skipped (its field section is not decoded)"),
    "http3.frame_truncated": (
        "an HTTP/3 stream ended (FIN) inside a frame: the frame is incomplete (H3_FRAME_ERROR)"),
    "http3.stream_gap": (
        "bytes of an HTTP/3 stream were not captured (lost packets never retransmitted in the "
        "capture, packets that did not decrypt, or a capture that started late): inside a DATA "
        "payload they are counted and the body parser is told; elsewhere the rest of that stream "
        "direction is counted, not parsed"),
    "http3.unexpected_stream": (
        "a QUIC stream HTTP/3 does not allow: a server-initiated bidirectional stream, a second "
        "control or QPACK stream of one side, a push stream from the client, bytes sent the wrong"
        " way on a unidirectional stream; its bytes are counted"),
    "http3.critical_stream_closed": (
        "an HTTP/3 control or QPACK encoder/decoder stream was closed or reset "
        "(H3_CLOSED_CRITICAL_STREAM)"),
    "http3.qpack_decode_failed": (
        "a QPACK field section (or the encoder stream it depends on) does not decode (pylsqpack "
        "DecompressionFailed / EncoderStreamError): its headers are not known; the stream's "
        "framing is still read"),
    "http3.qpack_blocked": (
        "a QPACK field section refers to dynamic-table entries that were never inserted in what "
        "was captured (encoder-stream bytes lost, or the receiver's SETTINGS not captured): it is"
        " not decoded, never guessed"),
    "http3.qpack_encoder_stream_gap": (
        "bytes of a QPACK encoder stream were not captured: field sections that refer to entries "
        "inserted from there on cannot be decoded (http3.qpack_blocked rows name them)"),
    "http3.qpack_pending_overflow": (
        "more bytes than the limit waited for QPACK (encoder-stream bytes before the peer's "
        "SETTINGS, or response DATA waiting for its blocked field section): they are dropped from"
        " parsing (still counted)"),
    "http3.too_many_streams": (
        "more QUIC streams open at once on one HTTP/3 connection than the limit: the bytes of "
        "further new streams are not parsed"),
    "http3.sse_rows_capped": (
        "more server-sent events on one HTTP/3 connection than the http3_sse_events row "
        "limit: later events are counted (http3_streams.sse_events) but not listed"),
    "http3.frame_rows_capped": (
        "more HTTP/3 frames on one connection than the http3_frames row limit: later frames are "
        "parsed (streams, SSE) but not listed"),
    # server-sent events
    "sse.bad_json": "an SSE event's data starts like JSON but is not valid JSON; the event is kept with json_ok False",
    "sse.unterminated_event": "an SSE line (or one event's data) grew beyond the parser's limit without a terminator; it was dropped and parsing resumed at the next line end",
    "sse.bad_retry": "an SSE retry field has more digits than a 64-bit integer holds; the event is kept with retry_ms NA",
    "sse.incomplete_event": "an SSE stream ended inside an event (no blank line after its last field); the event was discarded, as the WHATWG rules say",
    # websocket
    "ws.accept_mismatch": "the 101 response's Sec-WebSocket-Accept is missing or is not the SHA-1/base64 of the request's Sec-WebSocket-Key and the RFC 6455 GUID",
    "ws.bad_handshake": "the WebSocket handshake is inconsistent (no or malformed Sec-WebSocket-Key, version not 13, a subprotocol or extension the client did not offer, bad permessage-deflate parameters); the frames are still parsed",
    "ws.unmasked_client_frame": "a client frame has no mask (RFC 6455 §5.1: clients MUST mask); reported once per connection, counted in ws_connections.client_mask_errors, parsing continues",
    "ws.masked_server_frame": "a server frame is masked (RFC 6455 §5.1: servers MUST NOT mask); reported once per connection, counted in ws_connections.server_mask_errors, parsing continues",
    "ws.bad_opcode": "a WebSocket frame uses a reserved opcode (3-7, 11-15); it is recorded and skipped by its length",
    "ws.reserved_bits": "a WebSocket frame sets RSV bits no negotiated extension defines (RSV1 is permessage-deflate's, on a message's first frame only)",
    "ws.frame_too_large": "a WebSocket frame announces more payload than the configured limit (64 MiB by default); it is counted and skipped, its payload not inspected",
    "ws.non_minimal_length": "a WebSocket payload length is not encoded in the fewest bytes (RFC 6455 §5.2); reported once per direction",
    "ws.control_frame_too_long": "a WebSocket control frame (Close, Ping, Pong) carries more than 125 payload bytes",
    "ws.fragmented_control_frame": "a WebSocket control frame has FIN clear (control frames must not be fragmented)",
    "ws.bad_fragmentation": "a continuation frame without a message in progress, or a new text/binary frame before the previous message's final fragment",
    "ws.frame_after_close": "a data frame was sent after that side's Close frame; reported once per direction",
    "ws.bad_close_payload": "a Close frame's payload is 1 byte, has a status code that may not be sent (RFC 6455 §7.4), or a reason that is not UTF-8",
    "ws.invalid_utf8": "a text message is not valid UTF-8",
    "ws.bad_json": ("a WebSocket text message starts like a JSON object but is not valid "
                    "JSON; its realtime_events row has status bad_json"),
    "ws.decompression_limit": "a permessage-deflate message inflates beyond the configured limit (64 MiB by default); its decompression stopped (a decompression bomb is reported, not inflated); with context takeover the rest of it still runs through the shared inflater, output discarded, so later messages inflate (a second row if even that exceeds 256 MiB: the context is given up)",
    "ws.decompress_failed": "a permessage-deflate message did not inflate; with context takeover, later messages of that direction are not decompressed either",
    "ws.truncated_frame": "a WebSocket connection direction ended (FIN/RST) in the middle of a frame",
    "ws.resynchronised": "WebSocket parsing resumed at a plausible frame boundary after bytes were lost between frames",
    "ws.desynced": "no WebSocket frame boundary was found within 1 MiB after lost bytes; the rest of that direction is only counted",
    # tables
    "table.events_truncated": "a connection reached load(max_events_per_connection=...): its later TLS records, HTTP/2 frames, SSE events and WebSocket frames/messages are not in those tables (summary.extra['rows_dropped_by_connection'] counts them); its summary rows (handshakes, requests, streams) and TCP analysis are unaffected",
    "table.records_truncated": "a per-record table (tls_records, http2_frames, sse_events, ws_frames, ws_messages) reached load(max_record_rows=...): this row and every later one of that table are not kept; summary.extra['rows_dropped'] counts them, the summary tables and TCP analysis are unaffected",
    "table.icmp_errors_truncated": "the icmp_errors table reached its row cap (tables.icmp_tables.MAX_ICMP_ERROR_ROWS): this ICMP error and later ones have no row; path_mtu still counts the too-big ones",
    "table.packets_truncated": "the packets table reached its row cap (load(max_packet_rows=...)): this frame and every later one have no packets row; every other table covers all frames",
    "table.packets_value_too_large": "a frame's value does not fit its packets column (tcp_len is Int32: only an IPv6 Jumbo Payload claiming more than 2 GiB exceeds it, and no link carries one): that cell is NA, the other tables keep the value",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Anomaly:
    """One row of ``Capture.warnings``."""

    ts_ns: int | None
    """capture time of the packet that showed it, integer ns since the epoch (None: file level)"""
    frame: int | None
    """Wireshark frame number (None: file level)"""
    tcp_stream: int | None
    """Wireshark tcp.stream of the connection, if any"""
    direction: str | None
    """'client_to_server' / 'server_to_client', if it belongs to one direction"""
    layer: str
    """first part of the code: capture, net, tcp, tls, http1, http2, http, sse, ws..."""
    code: str
    """stable dotted code from :data:`CATALOGUE`"""
    detail: str
    """free text: what exactly was seen"""
    nbytes: int | None = None
    """how many bytes it concerns, for the codes that count some (the ``bytes`` column)"""


class Diagnostics:
    """Collects anomalies. Keeps at most ``max_rows_per_code`` rows per code, counts all."""

    __slots__ = ("counts", "last_frame", "max_rows_per_code", "rows")
    _packing_ = "shared"
    """one sink for every connection: a packed parser refers to it (:mod:`pcaptools.tcp.packing`)"""

    def __init__(self, max_rows_per_code: int = 1000) -> None:
        self.rows: list[Anomaly] = []
        self.counts: Counter[str] = Counter()
        self.max_rows_per_code = max_rows_per_code
        self.last_frame: int | None = None
        """frame of the latest anomaly that had one, rows capped or not (coverage uses it)"""

    def add(
        self,
        code: str,
        detail: str,
        *,
        ts_ns: int | None = None,
        frame: int | None = None,
        tcp_stream: int | None = None,
        direction: str | None = None,
        nbytes: int | None = None,
    ) -> None:
        if code not in CATALOGUE:
            raise KeyError(f"anomaly code {code!r} is not in diagnostics.CATALOGUE")
        self.counts[code] += 1
        if frame is not None:
            self.last_frame = frame
        if self.counts[code] <= self.max_rows_per_code:
            self.rows.append(
                Anomaly(
                    ts_ns=ts_ns,
                    frame=frame,
                    tcp_stream=tcp_stream,
                    direction=direction,
                    layer=code.split(".", 1)[0],
                    code=code,
                    detail=detail,
                    nbytes=nbytes,
                )
            )

    def add_in_frame_order(self, code: str, detail: str, *, frame: int,
                           ts_ns: int | None = None) -> None:
        """:meth:`add` for a row made after the pass that names an earlier frame (such as
        ``tcp.checksum_offloaded``): it goes before the first row of a later frame, where a
        row of that frame made while reading would be, and where a parallel load, which puts
        its workers' rows in frame order, puts it too."""
        n = len(self.rows)
        self.add(code, detail, frame=frame, ts_ns=ts_ns)
        if len(self.rows) > n:
            row = self.rows.pop()
            at = next((i for i, r in enumerate(self.rows)
                       if r.frame is not None and r.frame > frame), len(self.rows))
            self.rows.insert(at, row)

    def suppressed(self) -> dict[str, int]:
        """code -> number of occurrences that were counted but not kept as rows."""
        return {c: n - self.max_rows_per_code for c, n in self.counts.items() if n > self.max_rows_per_code}


class ShardDiagnostics(Diagnostics):
    """The Diagnostics of one worker of a parallel ``load()`` (``shard=(k, n)``): keeps and
    counts the anomalies of a connection (only the worker that follows a TCP connection
    reports on it) and, for worker 0, those that belong to no connection (every worker reads
    and decodes the whole file, so every worker meets those). So the workers' rows and
    counts added together are exactly those of a single process."""

    __slots__ = ("k", "n")

    def __init__(self, shard: tuple[int, int], max_rows_per_code: int = 1000) -> None:
        super().__init__(max_rows_per_code)
        self.k, self.n = shard

    def add(
        self,
        code: str,
        detail: str,
        *,
        ts_ns: int | None = None,
        frame: int | None = None,
        tcp_stream: int | None = None,
        direction: str | None = None,
        nbytes: int | None = None,
    ) -> None:
        if tcp_stream is None and self.k != 0:
            if code not in CATALOGUE:
                raise KeyError(f"anomaly code {code!r} is not in diagnostics.CATALOGUE")
            return
        super().add(code, detail, ts_ns=ts_ns, frame=frame, tcp_stream=tcp_stream,
                    direction=direction, nbytes=nbytes)
