"""Reading layer: capture files in, :class:`RawFrame` records out.

``open_capture(path, diag)`` sniffs compression (gzip, bzip2, xz, zstd) and format (pcap,
pcapng) from magic bytes and returns a :class:`CaptureReader` whose ``frames()`` streams
the packet records, numbered as Wireshark numbers them.
"""

from __future__ import annotations

from .frame import RawFrame
from .linktypes import InterfaceInfo, linktype_name
from .open import CaptureReader, describe_content, open_capture

__all__ = [
    "CaptureReader",
    "InterfaceInfo",
    "RawFrame",
    "describe_content",
    "linktype_name",
    "open_capture",
]
