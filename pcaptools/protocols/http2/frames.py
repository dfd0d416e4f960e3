"""The HTTP/2 frame layer (RFC 9113 §4, §6): type codes and names, flags, SETTINGS and error
code names, the 9-byte frame header and the plausibility check that finds frame alignment.

Nothing here keeps state; :mod:`.observer` parses the byte streams with it and :mod:`.events`
names its fields.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = [
    "CONTINUATION",
    "DATA",
    "ERROR_CODES",
    "FRAME_HEADER",
    "FRAME_HEADER_LEN",
    "FRAME_TYPES",
    "F_ACK",
    "F_END_HEADERS",
    "F_END_STREAM",
    "F_PADDED",
    "F_PRIORITY",
    "GOAWAY",
    "HEADERS",
    "PING",
    "PREFACE",
    "PRIORITY",
    "PUSH_PROMISE",
    "RST_STREAM",
    "SETTINGS",
    "SETTINGS_NAMES",
    "WINDOW_UPDATE",
    "flags_text",
    "parse_frame_header",
    "parse_settings_payload",
    "plausible_frame_header",
]

PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

#: frame type code -> RFC 9113 name
FRAME_TYPES: Final = (
    "DATA",
    "HEADERS",
    "PRIORITY",
    "RST_STREAM",
    "SETTINGS",
    "PUSH_PROMISE",
    "PING",
    "GOAWAY",
    "WINDOW_UPDATE",
    "CONTINUATION",
)
(
    DATA,
    HEADERS,
    PRIORITY,
    RST_STREAM,
    SETTINGS,
    PUSH_PROMISE,
    PING,
    GOAWAY,
    WINDOW_UPDATE,
    CONTINUATION,
) = range(10)

#: SETTINGS identifier -> name (RFC 9113 §6.5.2, RFC 8441, RFC 9218)
SETTINGS_NAMES: Final = {
    1: "HEADER_TABLE_SIZE",
    2: "ENABLE_PUSH",
    3: "MAX_CONCURRENT_STREAMS",
    4: "INITIAL_WINDOW_SIZE",
    5: "MAX_FRAME_SIZE",
    6: "MAX_HEADER_LIST_SIZE",
    8: "ENABLE_CONNECT_PROTOCOL",
    9: "NO_RFC7540_PRIORITIES",
}

#: error code -> name (RFC 9113 §7)
ERROR_CODES: Final = {
    0x0: "NO_ERROR",
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT",
    0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR",
    0x7: "REFUSED_STREAM",
    0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR",
    0xA: "CONNECT_ERROR",
    0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY",
    0xD: "HTTP_1_1_REQUIRED",
}

F_END_STREAM = 0x01
F_ACK = 0x01
F_END_HEADERS = 0x04
F_PADDED = 0x08
F_PRIORITY = 0x20

#: flags each type defines (RFC 9113 §6); others must be zero when sent
_DEFINED_FLAGS = (0x09, 0x2D, 0x00, 0x00, 0x01, 0x0C, 0x01, 0x00, 0x00, 0x04)

_DEFAULT_WINDOW = 65535
_DEFAULT_MAX_FRAME = 16384

FRAME_HEADER_LEN: Final = 9
#: the frame header: length high byte, length low 16 bits, type, flags, stream id (with the
#: reserved bit)
FRAME_HEADER: Final = struct.Struct(">BHBBI")
_HDR = FRAME_HEADER
_U32 = struct.Struct(">I")
_U16_U32 = struct.Struct(">HI")


def parse_frame_header(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[int, int, int, int]:
    """The frame header at ``buf[pos:pos + 9]`` -> ``(length, type, flags, stream_id_raw)``
    (``stream_id_raw`` still has the reserved bit; the stream id is ``& 0x7FFFFFFF``)."""
    hi, lo, typ, flags, sid_raw = _HDR.unpack_from(buf, pos)
    return (hi << 16) | lo, typ, flags, sid_raw


def flags_text(frame_type: int, flags: int) -> str:
    """Names of the flags set, '|'-joined (e.g. ``END_STREAM|END_HEADERS``); unknown bits in hex."""
    names = []
    rest = flags
    if frame_type in (DATA, HEADERS):
        if flags & F_END_STREAM:
            names.append("END_STREAM")
            rest &= ~F_END_STREAM
    elif frame_type in (SETTINGS, PING) and flags & F_ACK:
        names.append("ACK")
        rest &= ~F_ACK
    if frame_type in (HEADERS, PUSH_PROMISE, CONTINUATION) and flags & F_END_HEADERS:
        names.append("END_HEADERS")
        rest &= ~F_END_HEADERS
    if frame_type in (DATA, HEADERS, PUSH_PROMISE) and flags & F_PADDED:
        names.append("PADDED")
        rest &= ~F_PADDED
    if frame_type == HEADERS and flags & F_PRIORITY:
        names.append("PRIORITY")
        rest &= ~F_PRIORITY
    if rest:
        names.append(f"0x{rest:02x}")
    return "|".join(names)


def parse_settings_payload(payload: bytes) -> tuple[tuple[int, int], ...]:
    """SETTINGS payload -> ((identifier, value), ...); a trailing partial entry is ignored."""
    return tuple(_U16_U32.unpack_from(payload, i) for i in range(0, len(payload) - 5, 6))


def plausible_frame_header(length: int, typ: int, flags: int, sid_raw: int, max_len: int) -> bool:
    """Is this frame header plausible for its type (used to find frame alignment)?"""
    if length > max_len or typ > 9 or sid_raw & 0x80000000 or flags & ~_DEFINED_FLAGS[typ]:
        return False
    if typ in (SETTINGS, PING, GOAWAY):
        if sid_raw:
            return False
        if typ == SETTINGS:
            return length == 0 if flags & F_ACK else length % 6 == 0
        return length == 8 if typ == PING else length >= 8
    if typ == WINDOW_UPDATE:
        return length == 4
    if not sid_raw:
        return False
    if typ == PRIORITY:
        return length == 5
    if typ == RST_STREAM:
        return length == 4
    if typ == PUSH_PROMISE:
        return length >= 4
    return True


#: the name :mod:`pcaptools.protocols.detect` imports (kept for it)
_plausible = plausible_frame_header
