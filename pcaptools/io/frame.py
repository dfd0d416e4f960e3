"""The unit the reading layer produces: one captured packet record."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RawFrame:
    """One packet record of a capture, numbered as Wireshark numbers it.

    ``frame`` counts every packet record (pcap record, pcapng EPB/SPB/OPB) from 1,
    whatever its link type, so it equals Wireshark's ``frame.number``.
    """

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
    interface: int = 0
    """pcapng interface id (0 for pcap)"""
