"""WebSocket frames (RFC 6455 §5) as pure functions of bytes: opcodes, the frame header, the
masking, Close payloads (§5.5.1, §7.4), and the plausibility test that finds a frame boundary
again after lost bytes. None of these raise on wire data; the observer reports what they find.
"""

from __future__ import annotations

import struct
from typing import Final

try:  # (True in the compiled build only: see unmask)
    import cython

    _COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is not installed: pure Python
    _COMPILED = False

__all__ = [
    "OPCODE_NAMES",
    "header_len",
    "opcode_name",
    "parse_close_payload",
    "parse_frame_header",
    "plausible_frame",
    "unmask",
    "valid_close_code",
]

#: frame opcode -> name (others are ``reserved``)
OPCODE_NAMES: Final = {
    0: "continuation",
    1: "text",
    2: "binary",
    8: "close",
    9: "ping",
    10: "pong",
}

#: a frame announcing more than this is not taken as a boundary found by :func:`plausible_frame`
HUNT_MAX_FRAME: Final = 16 << 20


def opcode_name(opcode: int) -> str:
    """``text``, ``binary``, ``continuation``, ``close``, ``ping``, ``pong`` or ``reserved``."""
    return OPCODE_NAMES.get(opcode, "reserved")


def valid_close_code(code: int) -> bool:
    """A status code an endpoint may send in a Close frame (RFC 6455 §7.4, IANA registry:
    1000-1003, 1007-1014, 3000-4999)."""
    return 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999


# --------------------------------------------------------------------------- frame header


def header_len(buf: bytes | bytearray, i: int = 0) -> int:
    """Header length given at least two header bytes at ``buf[i:]``."""
    b1 = buf[i + 1]
    l7 = b1 & 0x7F
    return 2 + (2 if l7 == 126 else 8 if l7 == 127 else 0) + (4 if b1 & 0x80 else 0)


def parse_frame_header(
    buf: bytes | bytearray, i: int
) -> tuple[int, bool, bytes, int, int, bool]:
    """The complete frame header at ``buf[i:]`` (:func:`header_len` bytes) -> (first byte:
    FIN, RSV and opcode; masked; masking key, ``b""`` when unmasked; header length; payload
    length, up to 2^64 - 1; whether the length was encoded in the fewest bytes)."""
    b0 = buf[i]
    b1 = buf[i + 1]
    l7 = b1 & 0x7F
    j = i + 2
    if l7 == 126:
        length = (buf[j] << 8) | buf[j + 1]
        j += 2
        minimal = length >= 126
    elif l7 == 127:
        (length,) = struct.unpack_from(">Q", buf, j)
        j += 8
        minimal = length > 0xFFFF
    else:
        length = l7
        minimal = True
    masked = bool(b1 & 0x80)
    key = b""
    if masked:
        key = bytes(buf[j : j + 4])
        j += 4
    return b0, masked, key, j - i, length, minimal


def unmask(data: bytes, key: bytes, pos: int) -> bytes:
    """``data`` XOR the masking key, ``data`` starting ``pos`` bytes into the payload.

    Compiled (``frames.pxd``), one C loop over the bytes into a new bytes object; in Python,
    one XOR of two big integers (a Python loop would take a bytecode round per byte)."""
    n = len(data)
    if not n:
        return b""
    if len(key) != 4:  # (the frame header's 4 bytes: both builds refuse anything else)
        raise ValueError("a WebSocket masking key has 4 bytes")
    r = pos & 3
    if _COMPILED:
        out = bytes(n)  # (a new object, written here before any other code holds it)
        sp = data
        dp = out
        kp = key
        # eight bytes at a time: the key, from byte r on, repeated over a 64-bit word, its
        # bytes written in memory order (so the same on any byte order)
        kw = 0
        kb = cython.cast(cython.p_uchar, cython.address(kw))
        for i in range(8):
            kb[i] = kp[(i + r) & 3]
        words = n >> 3
        sw = cython.cast(cython.p_ulonglong, sp)
        dw = cython.cast(cython.p_ulonglong, dp)
        for i in range(words):
            dw[i] = sw[i] ^ kw
        for i in range(words << 3, n):
            dp[i] = sp[i] ^ kp[(i + r) & 3]  # type: ignore[index]  # (dp: a C pointer)
        return out
    if r:
        key = key[r:] + key[:r]
    k = (key * ((n >> 2) + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def plausible_frame(
    buf: bytes | bytearray, i: int, n: int, masked: bool, deflate: bool
) -> int:
    """Length of a plausible frame starting at ``buf[i]`` (header included), 0 if not
    plausible, -1 if the header is incomplete (``n``: bytes buffered). ``masked``: the
    masking this direction uses; ``deflate``: permessage-deflate was negotiated (RSV1 allowed
    on data frames)."""
    if n - i < 2:
        return -1
    b0 = buf[i]
    b1 = buf[i + 1]
    op = b0 & 0x0F
    if op not in OPCODE_NAMES:
        return 0
    rsv = b0 & 0x70
    if rsv and not (rsv == 0x40 and deflate and op in (1, 2)):
        return 0
    if bool(b1 & 0x80) != masked:
        return 0
    need = header_len(buf, i)
    if n - i < need:
        return -1
    l7 = b1 & 0x7F
    if l7 == 126:
        length = (buf[i + 2] << 8) | buf[i + 3]
        if length < 126:
            return 0
    elif l7 == 127:
        (length,) = struct.unpack_from(">Q", buf, i + 2)
        if length <= 0xFFFF or length > HUNT_MAX_FRAME:
            return 0
    else:
        length = l7
    if op >= 8 and (length > 125 or not b0 & 0x80):
        return 0
    return need + length


# --------------------------------------------------------------------------- close payload


def parse_close_payload(
    p: bytes, length: int, lost: int
) -> tuple[int | None, str | None, tuple[str, ...]]:
    """A Close frame's payload -> (status code, reason, problems). ``p``: the payload bytes
    kept, ``length``: the announced payload length, ``lost``: payload bytes never captured.
    Each problem is the detail of a ``ws.bad_close_payload`` row: a 1-byte payload, a code
    that may not be sent, a reason that is not UTF-8 (checked only when wholly captured)."""
    if length == 0:
        return None, None, ()
    if length == 1:
        return None, None, ("Close payload of 1 byte (a status code needs 2)",)
    if len(p) < 2:
        return None, None, ()  # lost
    code = (p[0] << 8) | p[1]
    raw = p[2:]
    reason = raw.decode("utf-8", "replace") if length > 2 else None
    problems: tuple[str, ...] = ()
    if not valid_close_code(code):
        problems += (f"Close status code {code} may not be sent (RFC 6455 §7.4)",)
    if raw and len(p) == length and lost == 0:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            problems += ("Close reason is not valid UTF-8",)
    return code, reason, problems
