"""The HTTP/3 frame layer (RFC 9114 §7) and the vocabulary of its streams: variable-length
integers (RFC 9000 §16), frame and unidirectional stream type codes, SETTINGS identifiers
and error codes (RFC 9114 §8.1, RFC 9204 §6), and the parsers of the small frames.

Every function here takes bytes and returns values or raises :class:`Http3FrameError`
(the observer turns it into an ``http3.malformed_frame`` row); nothing is kept between
calls.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CANCEL_PUSH",
    "DATA",
    "ERROR_CODES",
    "FRAME_TYPES",
    "GOAWAY",
    "HEADERS",
    "HTTP2_ONLY_TYPES",
    "MAX_PUSH_ID",
    "PUSH_PROMISE",
    "SETTINGS",
    "SETTINGS_NAMES",
    "STREAM_CONTROL",
    "STREAM_PUSH",
    "STREAM_QPACK_DECODER",
    "STREAM_QPACK_ENCODER",
    "STREAM_TYPES",
    "Http3FrameError",
    "error_name",
    "frame_type_name",
    "is_reserved",
    "parse_settings",
    "parse_single_varint",
    "read_varint",
    "settings_text",
]

DATA: Final = 0x00
HEADERS: Final = 0x01
CANCEL_PUSH: Final = 0x03
SETTINGS: Final = 0x04
PUSH_PROMISE: Final = 0x05
GOAWAY: Final = 0x07
MAX_PUSH_ID: Final = 0x0D

FRAME_TYPES: dict[int, str] = {
    DATA: "DATA",
    HEADERS: "HEADERS",
    CANCEL_PUSH: "CANCEL_PUSH",
    SETTINGS: "SETTINGS",
    PUSH_PROMISE: "PUSH_PROMISE",
    GOAWAY: "GOAWAY",
    MAX_PUSH_ID: "MAX_PUSH_ID",
}
"""frame type code -> name (RFC 9114 §7.2)"""

HTTP2_ONLY_TYPES: frozenset[int] = frozenset({0x02, 0x06, 0x08, 0x09})
"""HTTP/2 frame types reserved in HTTP/3 (PRIORITY, PING, WINDOW_UPDATE, CONTINUATION): their
receipt is a connection error of type H3_FRAME_UNEXPECTED (RFC 9114 §7.2.8)"""

STREAM_CONTROL: Final = 0x00
STREAM_PUSH: Final = 0x01
STREAM_QPACK_ENCODER: Final = 0x02
STREAM_QPACK_DECODER: Final = 0x03

STREAM_TYPES: dict[int, str] = {
    STREAM_CONTROL: "control",
    STREAM_PUSH: "push",
    STREAM_QPACK_ENCODER: "qpack_encoder",
    STREAM_QPACK_DECODER: "qpack_decoder",
}
"""unidirectional stream type -> the ``stream_kind`` name (RFC 9114 §6.2, RFC 9204 §4.2)"""

SETTINGS_NAMES: dict[int, str] = {
    0x01: "QPACK_MAX_TABLE_CAPACITY",
    0x06: "MAX_FIELD_SECTION_SIZE",
    0x07: "QPACK_BLOCKED_STREAMS",
    0x08: "ENABLE_CONNECT_PROTOCOL",
    0x33: "H3_DATAGRAM",
}
"""SETTINGS identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5, RFC 9220, RFC 9297)"""

ERROR_CODES: dict[int, str] = {
    0x100: "H3_NO_ERROR",
    0x101: "H3_GENERAL_PROTOCOL_ERROR",
    0x102: "H3_INTERNAL_ERROR",
    0x103: "H3_STREAM_CREATION_ERROR",
    0x104: "H3_CLOSED_CRITICAL_STREAM",
    0x105: "H3_FRAME_UNEXPECTED",
    0x106: "H3_FRAME_ERROR",
    0x107: "H3_EXCESSIVE_LOAD",
    0x108: "H3_ID_ERROR",
    0x109: "H3_SETTINGS_ERROR",
    0x10A: "H3_MISSING_SETTINGS",
    0x10B: "H3_REQUEST_REJECTED",
    0x10C: "H3_REQUEST_CANCELLED",
    0x10D: "H3_REQUEST_INCOMPLETE",
    0x10E: "H3_MESSAGE_ERROR",
    0x10F: "H3_CONNECT_ERROR",
    0x110: "H3_VERSION_FALLBACK",
    0x200: "QPACK_DECOMPRESSION_FAILED",
    0x201: "QPACK_ENCODER_STREAM_ERROR",
    0x202: "QPACK_DECODER_STREAM_ERROR",
}
"""HTTP/3 and QPACK application error codes (RFC 9114 §8.1, RFC 9204 §6)"""

MAX_VARINT: Final = (1 << 62) - 1


class Http3FrameError(Exception):
    """A frame or stream header that does not parse (the message says what was found)."""


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int] | None:
    """The QUIC variable-length integer at ``buf[pos]`` -> (value, position after it), or
    None when ``buf`` ends before it does (more bytes are needed)."""
    n = len(buf)
    if pos >= n:
        return None
    first = buf[pos]
    size = 1 << (first >> 6)
    if pos + size > n:
        return None
    value = first & 0x3F
    for i in range(pos + 1, pos + size):
        value = (value << 8) | buf[i]
    return value, pos + size


def parse_single_varint(payload: bytes, what: str) -> int:
    """The payload of CANCEL_PUSH, GOAWAY and MAX_PUSH_ID: exactly one varint."""
    got = read_varint(payload, 0)
    if got is None:
        raise Http3FrameError(f"{what}: payload of {len(payload)} bytes holds no whole varint")
    value, end = got
    if end != len(payload):
        raise Http3FrameError(
            f"{what}: {len(payload) - end} bytes after the varint (length {len(payload)})"
        )
    return value


def parse_settings(payload: bytes) -> tuple[tuple[int, int], ...]:
    """SETTINGS payload -> ((identifier, value), ...) in wire order. A setting cut short,
    a repeated identifier or an HTTP/2 setting identifier (0x02-0x05) is malformed
    (H3_SETTINGS_ERROR, RFC 9114 §7.2.4)."""
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    pos = 0
    n = len(payload)
    while pos < n:
        ident = read_varint(payload, pos)
        if ident is None:
            raise Http3FrameError(f"SETTINGS: identifier cut short at byte {pos} of {n}")
        value = read_varint(payload, ident[1])
        if value is None:
            raise Http3FrameError(
                f"SETTINGS: value of setting 0x{ident[0]:x} cut short at byte {ident[1]} of {n}"
            )
        if ident[0] in seen:
            raise Http3FrameError(f"SETTINGS: setting 0x{ident[0]:x} sent twice")
        if 0x02 <= ident[0] <= 0x05:
            raise Http3FrameError(f"SETTINGS: HTTP/2 setting 0x{ident[0]:x} is not allowed")
        seen.add(ident[0])
        out.append((ident[0], value[0]))
        pos = value[1]
    return tuple(out)


def is_reserved(code: int) -> bool:
    """A reserved (grease) frame, stream or setting type: 0x1f * N + 0x21 (RFC 9114 §7.2.8,
    §6.2.3, §7.2.4.1)."""
    return code >= 0x21 and (code - 0x21) % 0x1F == 0


def frame_type_name(code: int) -> str:
    """``1`` -> ``HEADERS``; reserved types ``reserved``, HTTP/2-only ones ``http2_only``,
    any other ``unknown``."""
    name = FRAME_TYPES.get(code)
    if name is not None:
        return name
    if is_reserved(code):
        return "reserved"
    if code in HTTP2_ONLY_TYPES:
        return "http2_only"
    return "unknown"


def error_name(code: int | None) -> str | None:
    """``0x10c`` -> ``H3_REQUEST_CANCELLED``; reserved codes ``reserved``; others hex."""
    if code is None:
        return None
    name = ERROR_CODES.get(code)
    if name is not None:
        return name
    return "reserved" if is_reserved(code) else f"0x{code:x}"


def settings_text(settings: tuple[tuple[int, int], ...]) -> str:
    """``((1, 4096), (7, 16))`` -> ``QPACK_MAX_TABLE_CAPACITY=4096;QPACK_BLOCKED_STREAMS=16``
    (reserved identifiers as ``reserved_0x..``, unknown ones as ``0x..``)."""
    parts = []
    for k, v in settings:
        name = SETTINGS_NAMES.get(k)
        if name is None:
            name = f"reserved_0x{k:x}" if is_reserved(k) else f"0x{k:x}"
        parts.append(f"{name}={v}")
    return ";".join(parts)
