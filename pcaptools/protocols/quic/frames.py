"""QUIC frames (RFC 9000 §19, DATAGRAM of RFC 9221) of a decrypted packet payload.

:func:`parse_frames` reads every frame of a payload into :class:`QuicFrame` records; a run of
PADDING bytes is one frame (as tshark shows it). A frame type it does not know, or a frame cut
short, stops the walk: the frames before it are kept and the reason is returned (the observer
makes it a ``quic.malformed_frame`` row).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tls.observer import ALERT_NAMES
from .packets import QuicHeaderError, read_varint

__all__ = ["FRAME_TYPES", "TRANSPORT_ERRORS", "QuicFrame", "frame_type_name", "parse_frames",
           "transport_error_name"]

#: frame type name -> meaning (the vocabulary of ``quic_frames.frame_type``)
FRAME_TYPES: dict[str, str] = {
    "PADDING": "0x00: padding (a run of zero bytes is one frame; length: the run's bytes)",
    "PING": "0x01: ack-eliciting keep-alive",
    "ACK": "0x02/0x03: acknowledged packet number ranges, ack delay (0x03: with ECN counts)",
    "RESET_STREAM": "0x04: the sender abandons a stream (error code, final size)",
    "STOP_SENDING": "0x05: the receiver asks the peer to stop sending on a stream",
    "CRYPTO": "0x06: TLS handshake bytes (offset, length)",
    "NEW_TOKEN": "0x07: a token for a future connection (length: the token's bytes)",
    "STREAM": "0x08-0x0f: stream data (stream id, offset, length, fin)",
    "MAX_DATA": "0x10: connection flow control limit (maximum)",
    "MAX_STREAM_DATA": "0x11: stream flow control limit (stream id, maximum)",
    "MAX_STREAMS": "0x12/0x13: limit on streams the peer may open (bidi / uni, maximum)",
    "DATA_BLOCKED": "0x14: the sender is blocked by the connection limit (maximum: the limit)",
    "STREAM_DATA_BLOCKED": "0x15: the sender is blocked by a stream limit",
    "STREAMS_BLOCKED": "0x16/0x17: the sender is blocked by the stream count limit",
    "NEW_CONNECTION_ID": "0x18: a connection ID the peer may use (sequence, retire prior to)",
    "RETIRE_CONNECTION_ID": "0x19: a connection ID retired (sequence)",
    "PATH_CHALLENGE": "0x1a: path validation challenge (8 bytes)",
    "PATH_RESPONSE": "0x1b: path validation response",
    "CONNECTION_CLOSE": "0x1c (transport error) / 0x1d (application error): the connection "
    "ends (error code, reason)",
    "HANDSHAKE_DONE": "0x1e: the server confirms the handshake",
    "DATAGRAM": "0x30/0x31: unreliable datagram (RFC 9221; length: its bytes)",
}

_NAMES: dict[int, str] = {
    0x00: "PADDING", 0x01: "PING", 0x02: "ACK", 0x03: "ACK", 0x04: "RESET_STREAM",
    0x05: "STOP_SENDING", 0x06: "CRYPTO", 0x07: "NEW_TOKEN",
    **{t: "STREAM" for t in range(0x08, 0x10)},
    0x10: "MAX_DATA", 0x11: "MAX_STREAM_DATA", 0x12: "MAX_STREAMS", 0x13: "MAX_STREAMS",
    0x14: "DATA_BLOCKED", 0x15: "STREAM_DATA_BLOCKED", 0x16: "STREAMS_BLOCKED",
    0x17: "STREAMS_BLOCKED", 0x18: "NEW_CONNECTION_ID", 0x19: "RETIRE_CONNECTION_ID",
    0x1A: "PATH_CHALLENGE", 0x1B: "PATH_RESPONSE", 0x1C: "CONNECTION_CLOSE",
    0x1D: "CONNECTION_CLOSE", 0x1E: "HANDSHAKE_DONE", 0x30: "DATAGRAM", 0x31: "DATAGRAM",
}


TRANSPORT_ERRORS: dict[int, str] = {
    0x00: "NO_ERROR",
    0x01: "INTERNAL_ERROR",
    0x02: "CONNECTION_REFUSED",
    0x03: "FLOW_CONTROL_ERROR",
    0x04: "STREAM_LIMIT_ERROR",
    0x05: "STREAM_STATE_ERROR",
    0x06: "FINAL_SIZE_ERROR",
    0x07: "FRAME_ENCODING_ERROR",
    0x08: "TRANSPORT_PARAMETER_ERROR",
    0x09: "CONNECTION_ID_LIMIT_ERROR",
    0x0A: "PROTOCOL_VIOLATION",
    0x0B: "INVALID_TOKEN",
    0x0C: "APPLICATION_ERROR",
    0x0D: "CRYPTO_BUFFER_EXCEEDED",
    0x0E: "KEY_UPDATE_ERROR",
    0x0F: "AEAD_LIMIT_REACHED",
    0x10: "NO_VIABLE_PATH",
}
"""QUIC transport error codes (RFC 9000 §20.1); 0x0100-0x01ff are CRYPTO_ERROR (a TLS alert)"""


def transport_error_name(code: int) -> str:
    """``0x0a`` -> ``PROTOCOL_VIOLATION``; ``0x0178`` -> ``CRYPTO_ERROR(no_application_protocol)``
    (the TLS alert, RFC 9001 §4.8); others hex."""
    name = TRANSPORT_ERRORS.get(code)
    if name is not None:
        return name
    if 0x100 <= code <= 0x1FF:
        return f"CRYPTO_ERROR({ALERT_NAMES.get(code - 0x100, f'alert {code - 0x100}')})"
    return f"0x{code:x}"


def frame_type_name(ftype: int) -> str | None:
    """The name of frame type ``ftype`` (a key of :data:`FRAME_TYPES`), None if unknown."""
    return _NAMES.get(ftype)


@dataclass(slots=True)
class QuicFrame:
    """One frame of a decrypted QUIC packet; fields a frame type does not have are None."""

    code: int
    """the frame type on the wire (0x08-0x0f for STREAM...)"""
    name: str
    """a key of :data:`FRAME_TYPES`"""
    stream_id: int | None = None
    offset: int | None = None
    """STREAM / CRYPTO: offset of the data in its stream"""
    length: int | None = None
    """bytes of data (STREAM, CRYPTO, DATAGRAM), of the token (NEW_TOKEN), of the run (PADDING)"""
    fin: bool | None = None
    data: bytes = b""
    """STREAM / CRYPTO data"""
    ack_largest: int | None = None
    ack_delay: int | None = None
    """the ACK Delay field as sent (microseconds after scaling by 2**ack_delay_exponent)"""
    ack_ranges: tuple[tuple[int, int], ...] = ()
    """ACK: the acknowledged (smallest, largest) packet number ranges, largest first"""
    ecn: tuple[int, int, int] | None = None
    """ACK 0x03: ECT(0), ECT(1), ECN-CE counts"""
    error_code: int | None = None
    """RESET_STREAM, STOP_SENDING, CONNECTION_CLOSE"""
    error_frame_type: int | None = None
    """CONNECTION_CLOSE 0x1c: the frame type that caused the error"""
    reason: str | None = None
    maximum: int | None = None
    """MAX_*, *_BLOCKED: the limit; RESET_STREAM: the final size"""
    sequence: int | None = None
    """NEW_CONNECTION_ID / RETIRE_CONNECTION_ID sequence number"""
    retire_prior_to: int | None = None
    connection_id: bytes | None = None
    """NEW_CONNECTION_ID: the connection ID"""
    reset_token: bytes | None = None
    """NEW_CONNECTION_ID: the stateless reset token of that connection ID"""
    size: int = 0
    """bytes of the whole frame in the packet payload (type to the end of its data)"""


def parse_frames(payload: bytes) -> tuple[list[QuicFrame], str | None]:
    """The frames of a decrypted packet payload, and None or why the walk stopped early."""
    out: list[QuicFrame] = []
    pos = begin = 0
    n = len(payload)
    try:
        while pos < n:
            if out:
                out[-1].size = pos - begin
            begin = pos
            ftype, pos = read_varint(payload, pos)
            if ftype == 0x00:
                start = pos - 1
                while pos < n and payload[pos] == 0:
                    pos += 1
                out.append(QuicFrame(0, "PADDING", length=pos - start))
            elif 0x08 <= ftype <= 0x0F:
                sid, pos = read_varint(payload, pos)
                off = 0
                if ftype & 0x04:
                    off, pos = read_varint(payload, pos)
                if ftype & 0x02:
                    ln, pos = read_varint(payload, pos)
                else:
                    ln = n - pos
                data = payload[pos:pos + ln]
                if len(data) != ln:
                    return out, f"STREAM frame of {ln} bytes cut short"
                pos += ln
                out.append(QuicFrame(ftype, "STREAM", stream_id=sid, offset=off, length=ln,
                                     fin=bool(ftype & 0x01), data=data))
            elif ftype in (0x02, 0x03):
                largest, pos = read_varint(payload, pos)
                delay, pos = read_varint(payload, pos)
                count, pos = read_varint(payload, pos)
                first, pos = read_varint(payload, pos)
                hi = largest
                lo = hi - first
                if lo < 0:
                    return out, "ACK frame: first range below packet number 0"
                ranges = [(lo, hi)]
                for _ in range(count):
                    gap, pos = read_varint(payload, pos)
                    rlen, pos = read_varint(payload, pos)
                    hi = lo - gap - 2
                    lo = hi - rlen
                    if lo < 0:
                        return out, "ACK frame: a range below packet number 0"
                    ranges.append((lo, hi))
                ecn = None
                if ftype == 0x03:
                    e0, pos = read_varint(payload, pos)
                    e1, pos = read_varint(payload, pos)
                    ce, pos = read_varint(payload, pos)
                    ecn = (e0, e1, ce)
                out.append(QuicFrame(ftype, "ACK", ack_largest=largest, ack_delay=delay,
                                     ack_ranges=tuple(ranges), ecn=ecn))
            elif ftype == 0x01:
                out.append(QuicFrame(1, "PING"))
            elif ftype == 0x06:
                off, pos = read_varint(payload, pos)
                ln, pos = read_varint(payload, pos)
                data = payload[pos:pos + ln]
                if len(data) != ln:
                    return out, f"CRYPTO frame of {ln} bytes cut short"
                pos += ln
                out.append(QuicFrame(6, "CRYPTO", offset=off, length=ln, data=data))
            elif ftype == 0x04:
                sid, pos = read_varint(payload, pos)
                code, pos = read_varint(payload, pos)
                final, pos = read_varint(payload, pos)
                out.append(QuicFrame(4, "RESET_STREAM", stream_id=sid, error_code=code,
                                     maximum=final))
            elif ftype == 0x05:
                sid, pos = read_varint(payload, pos)
                code, pos = read_varint(payload, pos)
                out.append(QuicFrame(5, "STOP_SENDING", stream_id=sid, error_code=code))
            elif ftype == 0x07:
                ln, pos = read_varint(payload, pos)
                if pos + ln > n:
                    return out, f"NEW_TOKEN frame of {ln} bytes cut short"
                pos += ln
                out.append(QuicFrame(7, "NEW_TOKEN", length=ln))
            elif ftype in (0x10, 0x12, 0x13, 0x14, 0x16, 0x17):
                v, pos = read_varint(payload, pos)
                out.append(QuicFrame(ftype, _NAMES[ftype], maximum=v))
            elif ftype in (0x11, 0x15):
                sid, pos = read_varint(payload, pos)
                v, pos = read_varint(payload, pos)
                out.append(QuicFrame(ftype, _NAMES[ftype], stream_id=sid, maximum=v))
            elif ftype == 0x18:
                seq, pos = read_varint(payload, pos)
                rpt, pos = read_varint(payload, pos)
                if pos >= n:
                    return out, "NEW_CONNECTION_ID frame cut short"
                cl = payload[pos]
                pos += 1
                if not 1 <= cl <= 20:
                    return out, f"NEW_CONNECTION_ID with a connection ID of {cl} bytes"
                cid = payload[pos:pos + cl]
                token = payload[pos + cl:pos + cl + 16]
                pos += cl + 16
                if pos > n:
                    return out, "NEW_CONNECTION_ID frame cut short"
                out.append(QuicFrame(0x18, "NEW_CONNECTION_ID", sequence=seq,
                                     retire_prior_to=rpt, connection_id=bytes(cid),
                                     reset_token=bytes(token)))
            elif ftype == 0x19:
                seq, pos = read_varint(payload, pos)
                out.append(QuicFrame(0x19, "RETIRE_CONNECTION_ID", sequence=seq))
            elif ftype in (0x1A, 0x1B):
                if pos + 8 > n:
                    return out, f"{_NAMES[ftype]} frame cut short"
                pos += 8
                out.append(QuicFrame(ftype, _NAMES[ftype], length=8))
            elif ftype in (0x1C, 0x1D):
                code, pos = read_varint(payload, pos)
                eft = None
                if ftype == 0x1C:
                    eft, pos = read_varint(payload, pos)
                rl, pos = read_varint(payload, pos)
                raw = payload[pos:pos + rl]
                if len(raw) != rl:
                    return out, f"CONNECTION_CLOSE reason of {rl} bytes cut short"
                pos += rl
                out.append(QuicFrame(ftype, "CONNECTION_CLOSE", error_code=code,
                                     error_frame_type=eft,
                                     reason=raw.decode("utf-8", "replace")))
            elif ftype == 0x1E:
                out.append(QuicFrame(0x1E, "HANDSHAKE_DONE"))
            elif ftype in (0x30, 0x31):
                if ftype == 0x31:
                    ln, pos = read_varint(payload, pos)
                else:
                    ln = n - pos
                if pos + ln > n:
                    return out, f"DATAGRAM frame of {ln} bytes cut short"
                pos += ln
                out.append(QuicFrame(ftype, "DATAGRAM", length=ln))
            else:
                return out, f"unknown frame type 0x{ftype:x}"
    except QuicHeaderError as exc:
        return out, f"frame cut short: {exc}"
    if out:
        out[-1].size = pos - begin
    return out, None
