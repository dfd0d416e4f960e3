"""QUIC (RFC 9000 v1, RFC 9369 v2) as a datagram protocol of the registry: packet headers
(:mod:`.packets`), Initial protection (:mod:`.initial`), key-log packet protection of the
Handshake, 0-RTT and 1-RTT epochs with key updates (:mod:`.protection`), frames
(:mod:`.frames`), transport parameters (:mod:`.tparams`), stream reassembly for the
application observer (:mod:`.reassembly`, contract in :mod:`.streams`) and the per-load
observer that maps packets to connections (:mod:`.observer`)."""

from __future__ import annotations

from .frames import FRAME_TYPES, QuicFrame, parse_frames
from .initial import initial_keys, open_initial
from .observer import QUIC_PORT, QuicConnection, QuicTracker, looks_like_quic_datagram
from .packets import VERSION_1, VERSION_2, QuicPacket, looks_like_quic, split_datagram
from .protection import PacketProtection
from .reassembly import QuicStreamAssembler

__all__ = [
    "FRAME_TYPES",
    "QUIC_PORT",
    "VERSION_1",
    "VERSION_2",
    "PacketProtection",
    "QuicConnection",
    "QuicFrame",
    "QuicPacket",
    "QuicStreamAssembler",
    "QuicTracker",
    "initial_keys",
    "looks_like_quic",
    "looks_like_quic_datagram",
    "open_initial",
    "parse_frames",
    "split_datagram",
]
