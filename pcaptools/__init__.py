"""pcaptools: packet captures of streamed LLM and realtime traffic, as tables and verdicts.

    import pcaptools
    cap = pcaptools.load("captures/demo.pcapng")
    cap.connections, cap.tcp_handshakes, cap.tcp_events, cap.retransmissions, cap.warnings
"""

from __future__ import annotations

from .capture import TABLES, Capture, CaptureSummary, load
from .errors import CaptureFormatError, CaptureOpenError, KeylogError, PcapToolsError
from .many import ManyCaptures, load_many

__version__ = "0.1.0"

__all__ = [
    "TABLES",
    "Capture",
    "CaptureFormatError",
    "CaptureOpenError",
    "CaptureSummary",
    "KeylogError",
    "ManyCaptures",
    "PcapToolsError",
    "__version__",
    "load",
    "load_many",
]
