"""TCP options (RFC 9293 §3.1 and the option registry), decoded tolerantly.

:func:`parse_options` is called mainly on SYN and SYN-ACK segments (MSS, window scale,
SACK-permitted, timestamps, TCP Fast Open cookie), and on data segments when SACK blocks
or timestamps are wanted. It never raises: an option that runs past the end of the
bytes, a missing length byte or a length below 2 stops the walk and sets
``truncated``; a known option with a wrong length is skipped and listed in
``malformed``; kinds this module does not decode are listed in ``unknown_kinds``.

Wire layout reminders (kind, length, value):

==========  ======  ===========================================================
kind        length  value
==========  ======  ===========================================================
0 EOL       1       end of the option list; the rest is padding
1 NOP       1       padding between options
2 MSS       4       16-bit maximum segment size
3 WS        3       8-bit window scale shift (RFC 7323)
4 SACK_PERM 2       (none)
5 SACK      2+8n    n (left, right) 32-bit sequence number pairs (RFC 2018)
8 TS        10      32-bit TSval, 32-bit TSecr (RFC 7323)
34 TFO      2+c     Fast Open cookie, c = 0 means "cookie request" (RFC 7413)
254/253     4+c     experimental (RFC 6994); ExID 0xF989 is the pre-RFC TFO form
==========  ======  ===========================================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["NO_OPTIONS", "TFO_EXPERIMENT_ID", "TcpOptions", "parse_options", "sack_blocks"]

_U16 = struct.Struct(">H").unpack_from
_U32X2 = struct.Struct(">II").unpack_from

#: ExID of the experimental (kind 253/254) form of TCP Fast Open (RFC 7413 §4.1.1)
TFO_EXPERIMENT_ID = 0xF989


@dataclass(frozen=True, slots=True)
class TcpOptions:
    """Decoded TCP options of one segment. Scalar fields keep the first occurrence."""

    mss: int | None = None
    """maximum segment size (kind 2), None when absent or malformed"""
    wscale: int | None = None
    """window scale shift count as sent (kind 3; RFC 7323 caps the effective value at 14)"""
    sack_perm: bool = False
    """SACK-permitted option present (kind 4)"""
    timestamps: tuple[int, int] | None = None
    """(TSval, TSecr) (kind 8)"""
    sack_blocks: tuple[tuple[int, int], ...] = ()
    """(left edge, right edge) raw 32-bit sequence numbers, from every SACK option (kind 5)"""
    tfo: bytes | None = None
    """TCP Fast Open: the cookie bytes, ``b""`` for a cookie request, None when absent
    (kind 34, or kind 254/253 with ExID 0xF989)"""
    truncated: bool = False
    """the bytes end inside an option (or a length byte is below 2): the walk stopped there"""
    unknown_kinds: tuple[int, ...] = ()
    """kinds not decoded here, in order of appearance (experimental kinds other than TFO too)"""
    malformed: tuple[int, ...] = ()
    """kinds decoded here but seen with a wrong length; their value was ignored"""


#: the result for an empty option list (shared: instances are immutable)
NO_OPTIONS = TcpOptions()


def parse_options(raw: bytes) -> TcpOptions:
    """Decode the TCP option bytes ``raw`` (the header bytes after the first 20).

    Returns a :class:`TcpOptions`; never raises. Bytes after an EOL option are padding
    and ignored. When ``raw`` was cut by the snaplen exactly at an option boundary
    nothing here can tell: compare ``len(raw)`` with the header length for that.
    """
    n = len(raw)
    if n == 0:
        return NO_OPTIONS
    mss: int | None = None
    wscale: int | None = None
    sack_perm = False
    timestamps: tuple[int, int] | None = None
    sack: list[tuple[int, int]] | None = None
    tfo: bytes | None = None
    truncated = False
    unknown: list[int] | None = None
    malformed: list[int] | None = None
    i = 0
    while i < n:
        kind = raw[i]
        if kind == 1:  # NOP
            i += 1
            continue
        if kind == 0:  # EOL
            break
        if i + 1 >= n:
            truncated = True
            break
        ln = raw[i + 1]
        if ln < 2 or i + ln > n:
            truncated = True
            break
        if kind == 8:
            if ln == 10:
                if timestamps is None:
                    tsval, tsecr = _U32X2(raw, i + 2)
                    timestamps = (tsval, tsecr)
            else:
                malformed = _add(malformed, kind)
        elif kind == 2:
            if ln == 4:
                if mss is None:
                    mss = _U16(raw, i + 2)[0]
            else:
                malformed = _add(malformed, kind)
        elif kind == 3:
            if ln == 3:
                if wscale is None:
                    wscale = raw[i + 2]
            else:
                malformed = _add(malformed, kind)
        elif kind == 4:
            if ln == 2:
                sack_perm = True
            else:
                malformed = _add(malformed, kind)
        elif kind == 5:
            nblocks = (ln - 2) >> 3
            if nblocks == 0 or (ln - 2) & 7:
                malformed = _add(malformed, kind)
            if nblocks:
                if sack is None:
                    sack = []
                for b in range(i + 2, i + 2 + 8 * nblocks, 8):
                    left, right = _U32X2(raw, b)
                    sack.append((left, right))
        elif kind == 34:
            if tfo is None:
                tfo = raw[i + 2 : i + ln]
        elif (kind == 254 or kind == 253) and ln >= 4 and _U16(raw, i + 2)[0] == TFO_EXPERIMENT_ID:
            if tfo is None:
                tfo = raw[i + 4 : i + ln]
        else:
            unknown = _add(unknown, kind)
        i += ln
    return TcpOptions(
        mss=mss,
        wscale=wscale,
        sack_perm=sack_perm,
        timestamps=timestamps,
        sack_blocks=tuple(sack) if sack else (),
        tfo=tfo,
        truncated=truncated,
        unknown_kinds=tuple(unknown) if unknown else (),
        malformed=tuple(malformed) if malformed else (),
    )


def sack_blocks(raw: bytes) -> list[tuple[int, int]]:
    """The SACK blocks of the option bytes ``raw``: :attr:`TcpOptions.sack_blocks` of
    :func:`parse_options` (the same walk, stopping where it stops), without decoding the
    other options: for the per-segment path. Never raises."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(raw)
    while i < n:
        kind = raw[i]
        if kind == 1:
            i += 1
            continue
        if kind == 0 or i + 1 >= n:
            break
        ln = raw[i + 1]
        if ln < 2 or i + ln > n:
            break
        if kind == 5:
            for b in range(i + 2, i + 2 + 8 * ((ln - 2) >> 3), 8):
                out.append(_U32X2(raw, b))
        i += ln
    return out


def _add(lst: list[int] | None, kind: int) -> list[int]:
    if lst is None:
        return [kind]
    lst.append(kind)
    return lst
