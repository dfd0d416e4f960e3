"""Network decoding layer: RawFrame -> TcpSegment / UdpDatagram / IpPacket (or None)."""

from __future__ import annotations

from .decode import SUPPORTED_LINKTYPES, PacketDecoder
from .fragments import FragmentReassembler
from .packet import IpPacket, TcpSegment, UdpDatagram

__all__ = [
    "SUPPORTED_LINKTYPES",
    "FragmentReassembler",
    "IpPacket",
    "PacketDecoder",
    "TcpSegment",
    "UdpDatagram",
]
