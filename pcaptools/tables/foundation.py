"""Schemas of the foundation tables: packets, connections, TCP handshakes, TCP events, warnings.

``frame`` and ``tcp_stream`` everywhere are Wireshark's ``frame.number`` and
``tcp.stream``, so an analyst can jump from any row to the packet
(display filter ``frame.number == N`` or ``tcp.stream eq N``).
"""

from __future__ import annotations

from ..net.packet import TCP_FLAGS
from .schema import TS_DTYPE, Column, TableSchema

_TCP_FLAG_BITS = " ".join(f"{name}=0x{bit:02x}" for bit, name in TCP_FLAGS)
_TCP_FLAG_LETTERS = " ".join(name[0] for _, name in reversed(TCP_FLAGS))

_TCP_STREAM = Column("tcp_stream", "int64", None, "Wireshark tcp.stream index of the connection")
_DIRECTION = Column(
    "direction", "category", None,
    "client_to_server or server_to_client; the client is the SYN sender (see connections.client_inferred)",
)

PACKETS = TableSchema(
    name="packets",
    grain="one row per captured frame (every packet record, decoded or not)",
    key=("frame",),
    columns=(
        Column("frame", "int64", None, "Wireshark frame.number"),
        Column("ts", TS_DTYPE, None, "capture time"),
        Column("frame_len", "int64", "bytes", "frame.len: length on the wire"),
        Column("cap_len", "int32", "bytes", "frame.cap_len: bytes captured"),
        Column("interface", "int32", None, "pcapng interface id (0 for pcap)"),
        Column("ip_version", "Int8", None, "4 or 6; NA when the frame carries no IP"),
        Column("ip_proto", "Int16", None, "IP protocol of the transport (6 TCP, 17 UDP...); NA without IP"),
        Column("src", "category", None, "source IP address as text; NA without IP"),
        Column("dst", "category", None, "destination IP address as text"),
        Column("sport", "Int32", None, "TCP/UDP source port"),
        Column("dport", "Int32", None, "TCP/UDP destination port"),
        Column("tcp_stream", "Int64", None, "Wireshark tcp.stream; also set, as tshark does, on ICMP errors quoting a TCP header of the connection; NA for other non-TCP frames"),
        Column("direction", "category", None, "client_to_server / server_to_client for TCP frames"),
        Column("tcp_flags", "Int16", None, f"9-bit TCP flags (tcp.flags): {_TCP_FLAG_BITS}"),
        Column("flags", "category", None, f"TCP flags as letters, Wireshark order: {_TCP_FLAG_LETTERS} (e.g. 'AS' for SYN-ACK)"),
        Column("seq", "Int64", None, "tcp.seq: relative sequence number (as Wireshark shows by default)"),
        Column("ack", "Int64", None, "tcp.ack: relative acknowledgement number; NA without the ACK flag"),
        Column("seq_raw", "Int64", None, "tcp.seq_raw: sequence number as on the wire"),
        Column("ack_raw", "Int64", None, "tcp.ack_raw: acknowledgement number as on the wire"),
        Column("tcp_len", "Int32", "bytes", "tcp.len: TCP payload length (from IP lengths, even if the snaplen cut it)"),
        Column("window", "Int32", "bytes", "tcp.window_size: window after scaling when the scale is known (shift capped at 14, as Wireshark caps it)"),
        Column("resent", "boolean", None, "for segments with payload: were all of its bytes already seen in this direction? (no heuristics)"),
        Column("ack_rtt_ms", "float64", "ms", "tcp.analysis.ack_rtt: time since the segment this ACK acknowledges"),
        Column("acks_frame", "Int64", None, "tcp.analysis.acks_frame: the frame of the segment this ACK acknowledges"),
    ),
)

TCP_SACK_BLOCKS = TableSchema(
    name="tcp_sack_blocks",
    grain="one row per SACK block (RFC 2018) of a TCP segment with the ACK flag; built with "
    "the packets table (empty with packets=False, capped with it by max_packet_rows)",
    key=("frame", "block"),
    columns=(
        Column("frame", "int64", None,
               "Wireshark frame.number of the segment carrying the SACK option"),
        Column("ts", TS_DTYPE, None, "capture time"),
        _TCP_STREAM,
        Column("direction", "category", None,
               "client_to_server / server_to_client: the sender of the SACK (the receiver of the "
               "data it describes)"),
        Column("ack", "int64", None, "tcp.ack: the segment's relative cumulative acknowledgement"),
        Column("block", "int64", None,
               "position of the block in the segment's SACK option(s), from 0"),
        Column("left_edge", "int64", None,
               "tcp.options.sack_le: first sequence number of the block, relative to the data "
               "sender's initial sequence number (as Wireshark shows it)"),
        Column("right_edge", "int64", None,
               "tcp.options.sack_re: sequence number after the last byte of the block (relative)"),
        Column("dsack", "bool", None,
               "a D-SACK block (RFC 2883 §4): the first block, below the cumulative ACK or "
               "inside the second block: bytes received twice, not a hole's far side"),
    ),
)

CONNECTIONS = TableSchema(
    name="connections",
    grain="one row per TCP connection (Wireshark tcp.stream)",
    key=("tcp_stream",),
    columns=(
        _TCP_STREAM,
        Column("ip_version", "int64", None, "4 or 6"),
        Column("client_addr", "string", None, "client IP address (the SYN sender)"),
        Column("client_port", "int64", None, "client TCP port"),
        Column("server_addr", "string", None, "server IP address"),
        Column("server_port", "int64", None, "server TCP port"),
        Column("client_inferred", "bool", None, "True when no SYN was captured and the roles are a guess (lower port is the server)"),
        Column("first_frame", "int64", None, "frame number of the first packet"),
        Column("last_frame", "int64", None, "frame number of the last packet"),
        Column("first_ts", TS_DTYPE, None, "time of the first packet"),
        Column("last_ts", TS_DTYPE, None, "time of the last packet"),
        Column("duration_ms", "float64", "ms", "last_ts - first_ts"),
        Column("client_packets", "int64", "packets", "packets sent by the client"),
        Column("server_packets", "int64", "packets", "packets sent by the server"),
        Column("client_bytes", "int64", "bytes", "TCP payload bytes sent by the client (sum of tcp.len, retransmissions included)"),
        Column("server_bytes", "int64", "bytes", "TCP payload bytes sent by the server"),
        Column("client_wire_bytes", "int64", "bytes", "frame.len summed over the client's packets"),
        Column("server_wire_bytes", "int64", "bytes", "frame.len summed over the server's packets"),
        Column("client_resent_bytes", "int64", "bytes", "client payload bytes that had already been seen (retransmitted, no heuristics)"),
        Column("server_resent_bytes", "int64", "bytes", "server payload bytes that had already been seen"),
        Column("retransmissions", "int64", "segments", "frames tshark would flag tcp.analysis.retransmission (plain, fast and spurious)"),
        Column("conn_state", "category", None, "Zeek conn_state: S0 S1 SF REJ S2 S3 RSTO RSTR RSTOS0 RSTRH SH SHR OTH"),
        Column("history", "string", None, "Zeek history string (client letters upper case, server lower case)"),
        Column("end_reason", "category", None, "fin (both sides closed), half_closed (FIN from one side only), rst, open_at_eof"),
        Column("end_by", "category", None, "client or server: who sent the FIN/RST that ended it; NA if open"),
        Column("end_frame", "Int64", None, "frame of the first RST, or of the second FIN"),
        Column("end_ts", TS_DTYPE, None, "time of end_frame"),
        # timeline of the ending (analyses.disconnects) and overhead counters (analyses.overhead)
        Column("client_last_frame", "Int64", None, "last packet from the client, RSTs excluded; NA if it sent none"),
        Column("client_last_ts", TS_DTYPE, None, "time of client_last_frame"),
        Column("server_last_frame", "Int64", None, "last packet from the server, RSTs excluded; NA if it sent none"),
        Column("server_last_ts", TS_DTYPE, None, "time of server_last_frame"),
        Column("client_fin_frame", "Int64", None, "first FIN from the client"),
        Column("client_fin_ts", TS_DTYPE, None, "time of client_fin_frame"),
        Column("server_fin_frame", "Int64", None, "first FIN from the server"),
        Column("server_fin_ts", TS_DTYPE, None, "time of server_fin_frame"),
        Column("rst_frame", "Int64", None, "first RST from either side (also when it came after both FINs)"),
        Column("rst_ts", TS_DTYPE, None, "time of rst_frame"),
        Column("rst_by", "category", None, "client or server: who sent rst_frame (by addresses: a middlebox forging it looks the same)"),
        Column("rst_ttl", "Int64", None, "IP TTL (IPv6 hop limit) of rst_frame"),
        Column("rst_ip_id", "Int64", None, "IPv4 identification of rst_frame; NA for IPv6"),
        Column("client_ttl_min", "Int64", None, "smallest IP TTL / hop limit of the client's packets, RSTs excluded"),
        Column("client_ttl_max", "Int64", None, "largest IP TTL / hop limit of the client's packets, RSTs excluded"),
        Column("server_ttl_min", "Int64", None, "smallest IP TTL / hop limit of the server's packets, RSTs excluded"),
        Column("server_ttl_max", "Int64", None, "largest IP TTL / hop limit of the server's packets, RSTs excluded"),
        Column("client_ip_id", "Int64", None, "IPv4 identification of client_last_frame; NA for IPv6"),
        Column("server_ip_id", "Int64", None, "IPv4 identification of server_last_frame; NA for IPv6"),
        Column("client_first_ip_id", "Int64", None, "first non-zero IPv4 identification of the client's packets, RSTs excluded (with client_ip_id and client_packets: does the host number its packets sequentially?)"),
        Column("server_first_ip_id", "Int64", None, "first non-zero IPv4 identification of the server's packets, RSTs excluded"),
        Column("max_idle_ms", "float64", "ms", "longest time without a packet in either direction, up to the first RST"),
        Column("max_idle_start_frame", "Int64", None, "last packet before that silence; NA when max_idle_ms is 0"),
        Column("max_idle_end_frame", "Int64", None, "first packet after that silence"),
        Column("max_idle_end_ts", TS_DTYPE, None, "time of max_idle_end_frame"),
        Column("last_idle_ms", "float64", "ms", "most recent silence (no packet either way) of at least 1 s, up to the first RST; NaN if none"),
        Column("last_idle_start_frame", "Int64", None, "last packet before that silence"),
        Column("last_idle_end_frame", "Int64", None, "first packet after that silence"),
        Column("last_idle_end_ts", TS_DTYPE, None, "time of last_idle_end_frame"),
        Column("client_unacked_frame", "Int64", None, "oldest client segment (data, SYN or FIN) still unacknowledged at the end of the capture (tshark's unacked list); NA if none"),
        Column("client_unacked_ts", TS_DTYPE, None, "time of client_unacked_frame"),
        Column("server_unacked_frame", "Int64", None, "oldest server segment still unacknowledged at the end of the capture; NA if none"),
        Column("server_unacked_ts", TS_DTYPE, None, "time of server_unacked_frame"),
        Column("client_tcp_handshake_bytes", "Int64", "bytes", "frame.len minus tcp.len of the client's SYNs and of its ACK completing the handshake"),
        Column("server_tcp_handshake_bytes", "Int64", "bytes", "frame.len minus tcp.len of the server's SYN-ACKs"),
        Column("client_tcp_teardown_bytes", "Int64", "bytes", "frame.len minus tcp.len of the client's FIN and RST packets, plus its payload-less ACKs sent after the server's FIN"),
        Column("server_tcp_teardown_bytes", "Int64", "bytes", "same for the server"),
        Column("client_pure_ack_packets", "Int64", "packets", "client packets without payload and without SYN, FIN or RST (ACKs, window updates, empty keep-alives), teardown ACKs excluded"),
        Column("server_pure_ack_packets", "Int64", "packets", "same for the server"),
        Column("client_pure_ack_bytes", "Int64", "bytes", "frame.len of client_pure_ack_packets"),
        Column("server_pure_ack_bytes", "Int64", "bytes", "frame.len of server_pure_ack_packets"),
        Column("client_max_seg_bytes", "int64", "bytes", "largest tcp.len the client sent (0: no payload)"),
        Column("server_max_seg_bytes", "int64", "bytes", "largest tcp.len the server sent"),
        Column("client_max_acked_seg_bytes", "int64", "bytes", "largest client segment delivered: its last byte acknowledged by the server, and not re-sent in smaller pieces before that ACK (0: none). Far below client_max_seg_bytes while those larger segments keep being retransmitted points at a path-MTU problem"),
        Column("server_max_acked_seg_bytes", "int64", "bytes", "largest server segment delivered (as client_max_acked_seg_bytes)"),
        Column("client_df", "boolean", None, "True when every client packet with payload had the IPv4 Don't Fragment bit (always True for IPv6, which routers never fragment), False when at least one had not; NA without payload"),
        Column("server_df", "boolean", None, "same for the server's packets with payload"),
        # segments lost and resent, from any vantage point (tcp_losses)
        Column("capture_vantage", "category", None, "where the capture was taken, from the handshake times: client (SYN to SYN-ACK holds the round trip), server (SYN-ACK to ACK does), middle, or unknown (handshake not captured)"),
        Column("client_lost_segments", "int64", "segments", "client segments lost and resent (tcp_losses kind loss: lost before or after the capture point); spurious resends and capture drops not included"),
        Column("server_lost_segments", "int64", "segments", "server segments lost and resent (tcp_losses kind loss)"),
        Column("client_spurious_resends", "int64", "segments", "client resends whose first copy had reached the receiver (tcp_losses kind spurious)"),
        Column("server_spurious_resends", "int64", "segments", "server resends whose first copy had reached the receiver"),
        Column("client_capture_drop_bytes", "int64", "bytes", "client payload bytes the server acknowledged but the capture never saw (tcp_losses kind capture_drop): packets the capture missed"),
        Column("server_capture_drop_bytes", "int64", "bytes", "server payload bytes the client acknowledged but the capture never saw"),
    ),
)

TCP_LOSSES = TableSchema(
    name="tcp_losses",
    grain="one row per segment its sender had to send again (from any vantage point), per range the capture missed, and per range left unresolved at the end",
    key=("tcp_stream", "direction", "seq", "frame"),
    columns=(
        _TCP_STREAM,
        Column("direction", "category", None, "direction of the data (the sender): client_to_server or server_to_client"),
        Column("kind", "category", None,
               "loss: the sender resent it because a copy was lost (lost_where says where); "
               "spurious: resent although its first copy had reached the receiver (tshark's spurious retransmission, or a capture at the receiver that saw the first copy); "
               "capture_drop: bytes the receiver acknowledged that the capture never saw (packets the capture missed: not a loss); "
               "unresolved: bytes never captured, neither resent nor acknowledged before the capture ended"),
        Column("seq", "Int64", None, "relative sequence number of the first byte (as tcp.seq; counted on past 2**32)"),
        Column("len", "int64", "bytes", "tcp.len of the resend; for capture_drop / unresolved, the bytes never captured"),
        Column("first_frame", "Int64", None, "frame of the first copy; NA when it never reached the capture point (or was already acknowledged)"),
        Column("first_ts", TS_DTYPE, None, "time of first_frame"),
        Column("frame", "Int64", None, "frame of the resend (which filled the gap when the first copy was not captured); NA for capture_drop / unresolved"),
        Column("ts", TS_DTYPE, None, "time of frame"),
        Column("gap_frame", "Int64", None, "the first segment after the missing range, which revealed it; NA when the first copy was captured"),
        Column("gap_ts", TS_DTYPE, None, "time of gap_frame"),
        Column("lost_where", "category", None, "for kind loss: before_capture (a gap that the resend filled) or after_capture (the capture saw both copies); NA otherwise"),
        Column("spurious", "boolean", None, "True for kind spurious, False for loss, NA otherwise"),
        Column("recovery", "category", None,
               "how the sender recovered (loss and spurious rows): fast_retransmit (the peer had sent >= 2 duplicate ACKs), "
               "rto (oldest unacknowledged data resent without duplicate ACKs), tail_loss_probe (highest segment resent without "
               "duplicate ACKs while older data was unacknowledged, or a lone segment resent under 200 ms), unknown; "
               "later resends of one recovery episode take its mechanism"),
        Column("recovery_ms", "float64", "ms", "first copy to resend; when the first copy was not captured, gap_frame to frame (how long the gap was open at the capture point)"),
        Column("dup_acks", "Int64", None, "duplicate ACKs the peer had sent in a row when the resend was captured (tshark's duplicate_ack_num)"),
        Column("tshark_kind", "category", None, "what tshark 4.0 flags the resend frame: retransmission, fast_retransmission, spurious_retransmission, out_of_order, or NA (nothing)"),
    ),
)

TCP_HANDSHAKES = TableSchema(
    name="tcp_handshakes",
    grain="one row per connection whose SYN or SYN-ACK was captured",
    key=("tcp_stream",),
    columns=(
        _TCP_STREAM,
        Column("syn_frame", "Int64", None, "first SYN of the connection"),
        Column("syn_ts", TS_DTYPE, None, "time of syn_frame"),
        Column("syn_count", "int64", "packets", "SYNs sent (1 + SYN retransmissions)"),
        Column("synack_frame", "Int64", None, "first SYN-ACK"),
        Column("synack_ts", TS_DTYPE, None, "time of synack_frame"),
        Column("synack_count", "int64", "packets", "SYN-ACKs sent (1 + retransmissions)"),
        Column("ack_frame", "Int64", None, "the client's ACK that completed the handshake"),
        Column("ack_ts", TS_DTYPE, None, "time of ack_frame"),
        Column("irtt_ms", "float64", "ms", "tcp.analysis.initial_rtt, as tshark computes it"),
        Column("syn_to_synack_ms", "float64", "ms", "first SYN-ACK minus first SYN (includes SYN retransmission waits)"),
        Column("result", "category", None, "established, refused (RST answered the SYN), no_answer, no_final_ack"),
        Column("client_mss", "Int64", "bytes", "MSS option in the SYN"),
        Column("server_mss", "Int64", "bytes", "MSS option in the SYN-ACK"),
        Column("client_wscale", "Int64", None, "window scale shift in the SYN; NA when absent"),
        Column("server_wscale", "Int64", None, "window scale shift in the SYN-ACK; NA when absent"),
        Column("client_sack_perm", "boolean", None, "SACK-permitted in the SYN"),
        Column("server_sack_perm", "boolean", None, "SACK-permitted in the SYN-ACK"),
        Column("client_timestamps", "boolean", None, "timestamps option in the SYN"),
        Column("server_timestamps", "boolean", None, "timestamps option in the SYN-ACK"),
        Column("tfo_cookie_request", "boolean", None, "the SYN carried an empty TCP Fast Open option (cookie request)"),
        Column("tfo_cookie_len", "Int64", "bytes", "length of the TFO cookie in the SYN (client) or SYN-ACK (server grant)"),
        Column("syn_data_bytes", "int64", "bytes", "payload carried in the SYN (TCP Fast Open data)"),
    ),
)

TCP_EVENTS = TableSchema(
    name="tcp_events",
    grain="one row per (frame, kind): every TCP analysis flag tshark 4.0 sets, plus 'resent'",
    key=("frame", "kind"),
    columns=(
        Column("frame", "int64", None, "Wireshark frame.number"),
        Column("ts", TS_DTYPE, None, "capture time"),
        _TCP_STREAM,
        _DIRECTION,
        Column("kind", "category", None,
               "retransmission, fast_retransmission, spurious_retransmission, out_of_order (mutually exclusive, as tshark's expert info); "
               "lost_segment (tshark: previous segment not captured), ack_lost_segment (ACKed unseen segment), duplicate_ack, keep_alive, "
               "keep_alive_ack, zero_window, zero_window_probe, zero_window_probe_ack, window_full, window_update, reused_ports; "
               "resent (every byte of the payload was already seen in this direction: the plain fact, no heuristic); "
               "bad_checksum (only with load(check_checksums=True): tshark's tcp.checksum.bad with tcp.check_checksum on). "
               "Per-ACK RTTs (tcp.analysis.ack_rtt) are in packets.ack_rtt_ms / packets.acks_frame, "
               "so that this table grows with problems, not with packets"),
        Column("seq", "Int64", None, "relative sequence number of the frame"),
        Column("len", "Int64", "bytes", "tcp.len of the frame"),
        Column("ack", "Int64", None, "relative acknowledgement number of the frame"),
        Column("dup_ack_num", "Int64", None, "for duplicate_ack: tcp.analysis.duplicate_ack_num"),
        Column("dup_ack_frame", "Int64", None, "for duplicate_ack: tcp.analysis.duplicate_ack_frame (the original ACK)"),
    ),
)

WARNINGS = TableSchema(
    name="warnings",
    grain="one row per anomaly seen while reading (codes in docs/anomalies.md)",
    key=("code", "frame"),
    columns=(
        Column("ts", TS_DTYPE, None, "time of the packet that showed it; NaT for file-level problems"),
        Column("frame", "Int64", None, "Wireshark frame.number; NA for file-level problems"),
        Column("tcp_stream", "Int64", None, "Wireshark tcp.stream, if it belongs to a connection"),
        Column("direction", "category", None, "direction, if it belongs to one"),
        Column("layer", "category", None, "capture, net, tcp, tls, http1, http2, http, sse, ws"),
        Column("code", "category", None, "stable dotted code (see docs/anomalies.md)"),
        Column("detail", "string", None, "what exactly was seen", secret="text"),
        Column("bytes", "Int64", "bytes",
               "how many bytes it concerns, for the codes that count them; NA otherwise"),
    ),
)
