"""dpkt's DNS message, tolerant of the record types dpkt does not decode.

Kept apart from :mod:`.dns` so that dpkt is imported by the first DNS message a load decodes
(``dns._wire()``), not by ``import pcaptools``: most captures have none.
"""

from __future__ import annotations

import dpkt

__all__ = ["Message", "NeedData", "Record", "unpack_name"]

# rdata types whose fields dpkt decodes; others keep their raw rdata (dpkt would raise)
_DPKT_RDATA = frozenset({1, 2, 5, 6, 12, 15, 28, 33})

NeedData = dpkt.NeedData
"""dpkt's "the buffer is cut short" exception"""
unpack_name = dpkt.dns.unpack_name
"""``unpack_name(buf, off)`` -> (name, offset after it)"""


class Record(dpkt.dns.DNS.RR):  # type: ignore[misc]
    def unpack_rdata(self, buf: bytes, off: int) -> None:
        if self.type in _DPKT_RDATA:
            super().unpack_rdata(buf, off)


class Message(dpkt.dns.DNS):  # type: ignore[misc]
    """dpkt's DNS message that tolerates record types dpkt does not decode (HTTPS, SVCB,
    DNSSEC...): their rdata is kept raw instead of raising UnpackError."""

    RR = Record
