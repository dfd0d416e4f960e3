"""TCP checksum validation (``load(check_checksums=True)``; off by default, as in tshark).

tshark does not validate TCP checksums unless ``tcp.check_checksum`` is set; Zeek validates
them and drops bad segments unless run with ``-C``. :class:`ChecksumChecker` verifies the
checksum of a TCP segment over the IPv4 or IPv6 pseudo-header (RFC 9293 §3.1, RFC 8200 §8.1)
and the TCP header and payload found in the frame's bytes, and says one of:

* ``GOOD`` / ``BAD``;
* ``PARTIAL``: the checksum field holds only the pseudo-header's sum. That is what a host
  that offloads checksumming to its NIC (and every Linux loopback packet) hands to the
  capture: the segment is fine, the capture point was before the checksum was computed.
  tshark reports such segments as bad "maybe caused by TCP checksum offload"; they are
  counted, never dropped, here;
* ``UNVERIFIED``: the checksum cannot be computed from this frame: the snaplen cut the
  segment, it was reassembled from IP fragments, an IPv6 extension header precedes it, or its
  header could not be found again in the frame.

The ones' complement sum of 16-bit words is the value of the bytes, read as one big-endian
integer, modulo 0xFFFF (2**16 is 1 modulo 0xFFFF), so one ``int.from_bytes`` and one ``%``
per segment do the arithmetic. Never raises on any input.
"""

from __future__ import annotations

__all__ = ["BAD", "GOOD", "PARTIAL", "STATUS_NAMES", "UNVERIFIED", "ChecksumChecker"]

GOOD, BAD, PARTIAL, UNVERIFIED = range(4)
STATUS_NAMES = ("good", "bad", "partial", "unverified")

_MAX_TRIES = 4
"""occurrences of the address pair tried when looking for the IP header (tunnels repeat them)"""


class ChecksumChecker:
    """Validates TCP checksums; counts each status in :attr:`counts`."""

    __slots__ = ("counts", "first_partial")

    def __init__(self) -> None:
        self.counts = [0, 0, 0, 0]
        """segments per status (index: GOOD, BAD, PARTIAL, UNVERIFIED)"""
        self.first_partial: tuple[int, int] | None = None
        """(frame, ts_ns) of the first PARTIAL segment"""

    def check(self, data: bytes, frame: int, ts_ns: int, ip_version: int, src: bytes,
              dst: bytes, sport: int, dport: int) -> int:
        """Status of the TCP segment from ``src``:``sport`` to ``dst``:``dport`` in ``data``
        (the frame's captured bytes)."""
        try:
            st = _status(data, ip_version, src, dst, sport, dport)
        except (IndexError, ValueError):  # pragma: no cover - safety net
            st = UNVERIFIED
        self.counts[st] += 1
        if st == PARTIAL and self.first_partial is None:
            self.first_partial = (frame, ts_ns)
        return st

    def summary(self) -> dict[str, int]:
        return dict(zip(STATUS_NAMES, self.counts, strict=True))


def _status(data: bytes, ver: int, src: bytes, dst: bytes, sport: int, dport: int) -> int:
    pair = src + dst
    ports = sport.to_bytes(2, "big") + dport.to_bytes(2, "big")
    start = 0
    for _ in range(_MAX_TRIES):
        idx = data.find(pair, start)
        if idx < 0:
            return UNVERIFIED
        start = idx + 1
        if ver == 4:
            ip = idx - 12
            if ip < 0 or data[ip] >> 4 != 4 or data[ip + 9] != 6:
                continue
            ihl = (data[ip] & 0x0F) * 4
            tcp = ip + ihl
            if data[tcp:tcp + 4] != ports:
                continue
            if int.from_bytes(data[ip + 6:ip + 8], "big") & 0x3FFF:
                return UNVERIFIED  # a fragment: the segment spans several frames
            total = int.from_bytes(data[ip + 2:ip + 4], "big")
            if total == 0:  # TSO: the length field left to the NIC
                return UNVERIFIED
            tcp_len = total - ihl
        else:
            ip = idx - 8
            if ip < 0 or data[ip] >> 4 != 6:
                continue
            tcp = ip + 40
            if data[ip + 6] != 6:
                return UNVERIFIED  # extension headers before TCP
            if data[tcp:tcp + 4] != ports:
                continue
            tcp_len = int.from_bytes(data[ip + 4:ip + 6], "big")
        if tcp_len < 20 or tcp + tcp_len > len(data):
            return UNVERIFIED  # cut by the snaplen (or lengths that do not add up)
        seg = data[tcp:tcp + tcp_len]
        pseudo = int.from_bytes(pair, "big") + 6 + tcp_len
        total_sum = (pseudo + int.from_bytes(seg + b"\0" if tcp_len & 1 else seg, "big")) % 0xFFFF
        if total_sum == 0:
            return GOOD
        field = int.from_bytes(seg[16:18], "big")
        if (field - pseudo) % 0xFFFF == 0:
            return PARTIAL
        return BAD
    return UNVERIFIED
