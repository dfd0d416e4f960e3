"""pcaptools: packet captures of streamed LLM and realtime traffic, as tables and verdicts.

    import pcaptools
    cap = pcaptools.load("captures/demo.pcapng")
    cap.connections, cap.tcp_handshakes, cap.tcp_events, cap.retransmissions, cap.warnings
    cap.tcp_losses                        # segments lost and resent, from any vantage point
    cap.wireshark(["frame.number", "http2.streamid"], "http2")   # any tshark field, typed
"""

from __future__ import annotations

from . import _accel

_accel.install()  # compiled per-frame modules, when built and matching their source

from .capture import TABLES, Capture, CaptureSummary, load
from .errors import (
    CaptureFormatError,
    CaptureOpenError,
    KeylogError,
    PcapToolsError,
    WiresharkError,
)
from .many import ManyCaptures, load_many
from .wireshark import wireshark  # the function; the module is sys.modules["pcaptools.wireshark"]

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
    "WiresharkError",
    "__version__",
    "load",
    "load_many",
    "wireshark",
]
