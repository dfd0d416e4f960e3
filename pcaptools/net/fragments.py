"""IP fragment reassembly (IPv4 and IPv6) with bounded memory.

A datagram is keyed as Wireshark keys it: IPv4 by (source, destination, protocol,
identification), IPv6 by (source, destination, identification). It completes when the
bytes from 0 to the end announced by the last fragment (MF=0) are all present; the
fragment that completes it is where Wireshark shows the upper layer, so the decoder
reports the TCP segment / UDP datagram with that fragment's frame number.

Limits (all by capture time, never wall-clock time): at most ``max_datagrams`` datagrams
and ``max_bytes`` fragment bytes in flight, and a datagram whose first fragment is older
than ``timeout_ns`` is dropped (checked whenever a fragment arrives, so the per-packet
path of unfragmented traffic costs nothing). Every datagram dropped unfinished (by a limit, a
timeout or
the end of the capture: :meth:`FragmentReassembler.flush`) becomes one
``net.ip_fragment_incomplete`` row; fragments that overlap with different contents
become one ``net.ip_fragment_overlap`` row per datagram.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..diagnostics import Diagnostics

FragmentKey = tuple[object, ...]

#: a datagram can have at most 8192 fragments of 8 bytes (offset field of 13 bits)
MAX_FRAGMENTS_PER_DATAGRAM = 8192


@dataclass(slots=True)
class _Datagram:
    first_frame: int
    first_ts: int
    pieces: list[tuple[int, bytes]] = field(default_factory=list)
    total: int = -1
    """payload length, known once the fragment with MF=0 arrived"""
    held: int = 0
    frame_len_sum: int = 0
    overlap_reported: bool = False
    frames: int = 0


class FragmentReassembler:
    """Collects fragments and returns each datagram's payload once it is complete."""

    __slots__ = ("_diag", "_held", "_inflight", "max_bytes", "max_datagrams", "timeout_ns")

    def __init__(
        self,
        diag: Diagnostics,
        *,
        max_datagrams: int = 1024,
        max_bytes: int = 64 * 1024 * 1024,
        timeout_ns: int = 60_000_000_000,
    ) -> None:
        self._diag = diag
        self.max_datagrams = max_datagrams
        self.max_bytes = max_bytes
        self.timeout_ns = timeout_ns
        self._inflight: OrderedDict[FragmentKey, _Datagram] = OrderedDict()
        self._held = 0

    @property
    def in_flight(self) -> int:
        """Datagrams waiting for more fragments."""
        return len(self._inflight)

    @property
    def bytes_held(self) -> int:
        """Fragment payload bytes held in memory."""
        return self._held

    def add(
        self,
        key: FragmentKey,
        offset: int,
        more: bool,
        payload: bytes,
        *,
        frame: int,
        ts_ns: int,
        frame_len: int,
    ) -> tuple[bytes, int, int] | None:
        """Add one fragment (``offset`` in bytes, ``more`` = MF flag, ``payload`` = its bytes).

        Returns ``(datagram payload, summed frame.len of its fragments, first fragment's
        frame)`` when this fragment completed the datagram, else None. ``key`` is
        ``(4, src, dst, proto, id)`` or ``(6, src, dst, id)`` with packed addresses.
        """
        self._expire(ts_ns)
        dg = self._inflight.get(key)
        if dg is None:
            if len(self._inflight) >= self.max_datagrams:
                self._drop(
                    next(iter(self._inflight)),
                    f"more than {self.max_datagrams} datagrams were waiting for fragments",
                )
            dg = _Datagram(first_frame=frame, first_ts=ts_ns)
            self._inflight[key] = dg
        end = offset + len(payload)
        if not more:
            if dg.total >= 0 and dg.total != end:
                self._overlap(
                    dg, key, frame, ts_ns, f"two last fragments end at {dg.total} and {end}"
                )
            dg.total = end if dg.total < 0 else max(dg.total, end)
        for o, b in dg.pieces:
            lo, hi = max(o, offset), min(o + len(b), end)
            if lo < hi and b[lo - o : hi - o] != payload[lo - offset : hi - offset]:
                self._overlap(dg, key, frame, ts_ns, f"bytes {lo}-{hi} differ between fragments")
                break
        dg.pieces.append((offset, payload))
        dg.held += len(payload)
        dg.frames += 1
        dg.frame_len_sum += frame_len
        self._held += len(payload)
        if dg.total >= 0 and self._complete(dg):
            del self._inflight[key]
            self._held -= dg.held
            buf = bytearray(dg.total)
            for o, b in sorted(dg.pieces, key=lambda p: p[0]):
                if o < dg.total:
                    buf[o : o + len(b)] = b[: dg.total - o]
            return bytes(buf), dg.frame_len_sum, dg.first_frame
        if dg.frames >= MAX_FRAGMENTS_PER_DATAGRAM:
            self._drop(key, f"more than {MAX_FRAGMENTS_PER_DATAGRAM} fragments")
        else:
            while self._held > self.max_bytes and self._inflight:
                self._drop(
                    next(iter(self._inflight)), f"fragments held more than {self.max_bytes} bytes"
                )
        return None

    def flush(self) -> None:
        """End of capture: report every datagram still waiting, and forget them."""
        while self._inflight:
            self._drop(next(iter(self._inflight)), "the capture ended")

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _complete(dg: _Datagram) -> bool:
        covered = 0
        for o, b in sorted(dg.pieces, key=lambda p: p[0]):
            if o > covered:
                return False
            covered = max(covered, o + len(b))
            if covered >= dg.total:
                return True
        return covered >= dg.total

    def _overlap(
        self, dg: _Datagram, key: FragmentKey, frame: int, ts_ns: int, detail: str
    ) -> None:
        if not dg.overlap_reported:
            dg.overlap_reported = True
            self._diag.add(
                "net.ip_fragment_overlap",
                f"{_describe_key(key)}: {detail}",
                frame=frame,
                ts_ns=ts_ns,
            )

    def _expire(self, now_ns: int) -> None:
        limit = now_ns - self.timeout_ns
        while self._inflight:
            key, dg = next(iter(self._inflight.items()))
            if dg.first_ts >= limit:
                return
            self._drop(key, f"no fragment completed it within {self.timeout_ns / 1e9:g} s")

    def _drop(self, key: FragmentKey, why: str) -> None:
        dg = self._inflight.pop(key)
        self._held -= dg.held
        have = sum(len(b) for _, b in dg.pieces)
        size = f"{dg.total} bytes" if dg.total >= 0 else "unknown size (last fragment missing)"
        self._diag.add(
            "net.ip_fragment_incomplete",
            f"{_describe_key(key)}: {dg.frames} fragment(s) with {have} bytes of a datagram of "
            f"{size} "
            f"were never completed ({why})",
            frame=dg.first_frame,
            ts_ns=dg.first_ts,
        )


def _describe_key(key: FragmentKey) -> str:
    import ipaddress

    if key and key[0] == 4 and len(key) == 5:
        _, src, dst, proto, ident = key
        return (
            f"IPv4 datagram {ipaddress.ip_address(src)} -> {ipaddress.ip_address(dst)} "  # type: ignore[arg-type]
            f"id 0x{ident:04x} protocol {proto}"
        )
    if key and key[0] == 6 and len(key) == 4:
        _, src, dst, ident = key
        return (
            f"IPv6 datagram {ipaddress.ip_address(src)} -> {ipaddress.ip_address(dst)} "  # type: ignore[arg-type]
            f"id 0x{ident:08x}"
        )
    return f"datagram {key!r}"
