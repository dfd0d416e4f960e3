"""The unit the reading layer produces: one captured packet record."""

from __future__ import annotations

from typing import Any

from .._slots import slots_eq, slots_repr


class RawFrame:
    """One packet record of a capture, numbered as Wireshark numbers it.

    ``frame`` counts every packet record (pcap record, pcapng EPB/SPB/OPB) from 1,
    whatever its link type, so it equals Wireshark's ``frame.number``.

    (A class with ``__slots__``, not a dataclass: the compiled build makes it an extension type,
    ``frame.pxd``, one per frame; ``repr`` and ``==`` are a dataclass's.)
    """

    __slots__ = ("frame", "ts_ns", "linktype", "data", "orig_len", "interface")

    frame: int
    """Wireshark frame.number (1-based, every packet record)"""
    ts_ns: int
    """capture time, integer nanoseconds since the Unix epoch"""
    linktype: int
    """LINKTYPE_* value of the interface that captured it (pcap header or pcapng IDB)"""
    data: bytes
    """the captured bytes (caplen of them)"""
    orig_len: int
    """length of the packet on the wire (frame.len)"""
    interface: int
    """pcapng interface id (0 for pcap)"""

    def __init__(self, frame: int, ts_ns: int, linktype: int, data: bytes, orig_len: int,
                 interface: int = 0) -> None:
        self.frame = frame
        self.ts_ns = ts_ns
        self.linktype = linktype
        self.data = data
        self.orig_len = orig_len
        self.interface = interface

    def __repr__(self) -> str:
        return slots_repr(self)

    def __eq__(self, other: Any) -> Any:
        return slots_eq(self, other)

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as the dataclass)
