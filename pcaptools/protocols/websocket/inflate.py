"""permessage-deflate (RFC 7692) for :class:`~.observer.WebSocketObserver`: one zlib raw
inflater per message, or one per direction shared by its messages (context takeover).

Bounded work and memory: output is inflated in 64 KiB steps, handed to the message (counted,
preview and UTF-8 check) and dropped; past ``max_out`` bytes of one message decompression
stops (``ws.decompression_limit``). With context takeover the rest of that message still runs
through the shared inflater, output discarded, up to :data:`INFLATE_DRAIN_BYTES`, so that the
direction's later messages still inflate; beyond that, or when the data does not inflate,
the shared context is given up (later compressed messages: ``skipped``).

The functions change the message's and direction's state and return the anomalies found,
``(code, detail)`` in order (``()`` when none); the observer reports them.
"""

from __future__ import annotations

import zlib
from typing import Final

from .state import _Dir, _Msg

__all__ = ["INFLATE_DRAIN_BYTES", "end_inflate", "inflate", "start_inflate", "stop_inflating"]

INFLATE_DRAIN_BYTES: Final = 256 << 20
"""with context takeover, output of a message past its decompression limit that is still
inflated (and discarded) to keep the shared context for the later messages; beyond it the
context is given up (the later compressed messages of that direction are ``skipped``)"""

#: the four bytes a sender strips from the end of each compressed message (RFC 7692 §7.2.1)
_TAIL: Final = b"\x00\x00\xff\xff"
_INFLATE_STEP: Final = 1 << 16

Problems = tuple[tuple[str, str], ...]


def start_inflate(st: _Dir, m: _Msg, no_takeover: bool) -> None:
    """Message ``m`` of direction ``st`` is compressed (RSV1 on its first frame): give it an
    inflater (its own with ``no_takeover``, else the direction's shared one), or mark it
    ``skipped`` when the shared context was given up."""
    m.compressed = True
    if no_takeover:
        m.z = zlib.decompressobj(-15)
    elif st.z_broken:
        m.decompress = "skipped"
    else:
        if st.z is None:
            st.z = zlib.decompressobj(-15)
        m.z = st.z


def stop_inflating(st: _Dir, m: _Msg, status: str, no_takeover: bool) -> None:
    """Message ``m`` is not decompressed further (``status``: limit / failed); with context
    takeover the direction's shared context is lost too, so later compressed messages of
    that direction are not decompressed either. A message already past its limit stays
    ``limit``."""
    m.decompress = status if m.zdrain < 0 else "limit"
    m.z = None
    if not no_takeover:
        st.z = None
        st.z_broken = True


def _drain(st: _Dir, m: _Msg, z: zlib._Decompress, data: bytes, max_out: int,
           no_takeover: bool) -> Problems:
    """Message ``m`` is past its decompression limit: inflate ``data`` through the shared
    context and discard the output (bounded memory: 64 KiB steps), so the context stays
    right for the direction's next message; past :data:`INFLATE_DRAIN_BYTES` of output
    the context is given up."""
    buf = data
    try:
        while buf or not z.eof:
            got = z.decompress(buf, _INFLATE_STEP)
            m.zdrain += len(got)
            if m.zdrain > INFLATE_DRAIN_BYTES:
                stop_inflating(st, m, "limit", no_takeover)
                return ((
                    "ws.decompression_limit",
                    f"message {m.index} inflates beyond {max_out + INFLATE_DRAIN_BYTES}"
                    " bytes; the shared context is given up: later compressed messages of "
                    "this direction are not decompressed",
                ),)
            buf = z.unconsumed_tail
            if z.eof:
                if z is st.z:
                    st.z = None
                return ()
            if len(got) < _INFLATE_STEP and not buf:
                return ()
            if not got and buf:
                return ()  # no progress possible (should not happen)
    except zlib.error:
        stop_inflating(st, m, "limit", no_takeover)  # (the message's status stays limit)
        return ((
            "ws.decompress_failed",
            f"message {m.index} (past its decompression limit) does not inflate; later "
            "compressed messages of this direction are not decompressed",
        ),)
    return ()


def inflate(st: _Dir, m: _Msg, data: bytes, max_out: int, no_takeover: bool) -> Problems:
    """The next compressed payload bytes of message ``m`` (unmasked): inflated into
    :meth:`~.state._Msg.add_content`, up to ``max_out`` bytes of output for the message."""
    z = m.z
    if z is None:
        return ()
    if m.zdrain >= 0:
        return _drain(st, m, z, data, max_out, no_takeover)
    buf = data
    try:
        while True:
            budget = max_out + 1 - m.zout
            step = min(budget, _INFLATE_STEP)
            got = z.decompress(buf, step)
            if got:
                m.zout += len(got)
                m.add_content(got)
            if m.zout > max_out:
                shared = not no_takeover
                limit = (
                    "ws.decompression_limit",
                    f"message {m.index} inflates beyond {max_out} bytes "
                    f"({m.payload} compressed bytes so far); decompression stopped"
                    + ("; the rest still runs through the shared context (output "
                       "discarded) so later messages are inflated" if shared else ""),
                )
                if not shared:
                    stop_inflating(st, m, "limit", no_takeover)
                    return (limit,)
                m.decompress = "limit"
                m.zdrain = 0
                return (limit, *_drain(st, m, z, z.unconsumed_tail, max_out, no_takeover))
            buf = z.unconsumed_tail
            if z.eof:
                # a final deflate block (BFINAL): the next message needs a new context
                if z is st.z:
                    st.z = None
                return ()
            if len(got) < step and not buf:
                return ()
            if not got and buf:
                return ()  # no progress possible (should not happen)
    except zlib.error as exc:
        stop_inflating(st, m, "failed", no_takeover)
        return ((
            "ws.decompress_failed",
            f"message {m.index} does not inflate: {exc}"
            + ("" if no_takeover else
               "; later compressed messages of this direction are not decompressed"),
        ),)


def end_inflate(st: _Dir, m: _Msg, complete: bool, max_out: int, no_takeover: bool) -> Problems:
    """Message ``m`` ended (``complete``: its final fragment arrived): the stripped tail is
    inflated and a message that inflated throughout is ``ok``; an incomplete one is
    ``incomplete``. Its inflater is released."""
    problems: Problems = ()
    if m.z is not None:
        if complete:
            problems = inflate(st, m, _TAIL, max_out, no_takeover)
            if m.decompress is None:
                m.decompress = "ok"
        else:
            stop_inflating(st, m, "incomplete", no_takeover)
    m.z = None
    return problems
