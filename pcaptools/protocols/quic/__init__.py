"""QUIC (RFC 9000 v1, RFC 9369 v2) as a datagram protocol of the registry: packet headers
(:mod:`.packets`), Initial protection and CRYPTO frames (:mod:`.initial`) and the per-load
observer that maps packets to connections (:mod:`.observer`). Key-log decryption of
Handshake, 0-RTT and 1-RTT packets and HTTP/3 are not implemented yet (issue #15)."""

from __future__ import annotations

from .initial import initial_keys, open_initial
from .observer import QUIC_PORT, QuicConnection, QuicTracker, looks_like_quic_datagram
from .packets import VERSION_1, VERSION_2, QuicPacket, looks_like_quic, split_datagram

__all__ = [
    "QUIC_PORT",
    "VERSION_1",
    "VERSION_2",
    "QuicConnection",
    "QuicPacket",
    "QuicTracker",
    "initial_keys",
    "looks_like_quic",
    "looks_like_quic_datagram",
    "open_initial",
    "split_datagram",
]
