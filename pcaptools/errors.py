"""User-facing exceptions.

Only raised when no analysis can happen at all. Anything wrong *inside* a capture
(truncated record, malformed packet, garbled TLS record) becomes a row in
``Capture.warnings`` instead.

    PcapToolsError
     ├── CaptureFormatError   the file is not a capture we can read (bad magic, empty)
     ├── CaptureOpenError     the path cannot be opened (missing, a directory, no permission)
     └── KeylogError          a key log file was given but cannot be read
"""

from __future__ import annotations


class PcapToolsError(Exception):
    """Base class of every exception pcaptools raises on purpose."""


class CaptureFormatError(PcapToolsError):
    """The file is not a pcap/pcapng capture (or a compressed one)."""


class CaptureOpenError(PcapToolsError):
    """The capture path cannot be opened."""


class KeylogError(PcapToolsError):
    """The key log file cannot be read."""
