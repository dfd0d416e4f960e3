"""QUIC transport parameters (RFC 9000 §18) in the TLS ``quic_transport_parameters``
extension (0x39) of the ClientHello (the client's) and of EncryptedExtensions (the server's).
"""

from __future__ import annotations

from .packets import QuicHeaderError, read_varint

__all__ = ["EXT_QUIC_TRANSPORT_PARAMETERS", "INTEGER_PARAMS", "find_extension",
           "parse_transport_parameters"]

EXT_QUIC_TRANSPORT_PARAMETERS = 0x39

#: integer transport parameters kept, by id (RFC 9000 §18.2, RFC 9221)
INTEGER_PARAMS: dict[int, str] = {
    0x01: "max_idle_timeout",
    0x03: "max_udp_payload_size",
    0x04: "initial_max_data",
    0x05: "initial_max_stream_data_bidi_local",
    0x06: "initial_max_stream_data_bidi_remote",
    0x07: "initial_max_stream_data_uni",
    0x08: "initial_max_streams_bidi",
    0x09: "initial_max_streams_uni",
    0x0A: "ack_delay_exponent",
    0x0B: "max_ack_delay",
    0x0E: "active_connection_id_limit",
    0x20: "max_datagram_frame_size",
}


def find_extension(body: bytes, etype: int, *, client_hello: bool) -> bytes | None:
    """The data of extension ``etype`` in a ClientHello body (``client_hello``) or an
    EncryptedExtensions body; None when absent or the message does not parse."""
    try:
        p = 0
        if client_hello:
            p = 2 + 32
            p += 1 + body[p]  # legacy_session_id
            p += 2 + int.from_bytes(body[p:p + 2], "big")  # cipher_suites
            p += 1 + body[p]  # compression methods
        end = p + 2 + int.from_bytes(body[p:p + 2], "big")
        p += 2
        if end > len(body):
            return None
        while p + 4 <= end:
            t = int.from_bytes(body[p:p + 2], "big")
            ln = int.from_bytes(body[p + 2:p + 4], "big")
            p += 4
            if t == etype:
                return body[p:p + ln] if p + ln <= end else None
            p += ln
    except IndexError:
        return None
    return None


def parse_transport_parameters(data: bytes) -> dict[str, int]:
    """The integer transport parameters of an extension's data, by name (the ones of
    :data:`INTEGER_PARAMS`; others and a parameter that does not parse are left out)."""
    out: dict[str, int] = {}
    pos = 0
    n = len(data)
    try:
        while pos < n:
            pid, pos = read_varint(data, pos)
            ln, pos = read_varint(data, pos)
            value = data[pos:pos + ln]
            pos += ln
            name = INTEGER_PARAMS.get(pid)
            if name is not None and len(value) == ln and ln:
                v, end = read_varint(value, 0)
                if end == ln:
                    out[name] = v
    except QuicHeaderError:
        pass
    return out
