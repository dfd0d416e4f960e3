"""User-facing exceptions.

Only raised when no analysis can happen at all. Anything wrong *inside* a capture
(truncated record, malformed packet, garbled TLS record) becomes a row in
``Capture.warnings`` instead.

    PcapToolsError
     ├── CaptureFormatError   the file is not a capture we can read (bad magic, empty)
     ├── CaptureOpenError     the path cannot be opened (missing, a directory, no permission)
     │    └── UnsupportedInputError  a stream cannot do what was asked of it (not binary,
     │                               not readable; read again for workers > 1 or tshark)
     ├── OutputPathError      an output path would destroy data (an input, another output,
     │                        a device) or cannot be written (missing folder); found before
     │                        reading
     ├── KeylogError          a key log file was given but cannot be read
     └── WiresharkError       tshark could not give the table :func:`pcaptools.wireshark` asked for
          ├── TsharkNotFoundError     no tshark binary (install Wireshark's command-line tools)
          ├── WiresharkFieldError     a field name tshark does not know (with close names)
          ├── WiresharkFilterError    a display filter tshark cannot compile
          └── WiresharkTimeoutError   tshark ran longer than ``timeout`` (it was killed)
"""

from __future__ import annotations


class PcapToolsError(Exception):
    """Base class of every exception pcaptools raises on purpose."""


class CaptureFormatError(PcapToolsError):
    """The file is not a pcap/pcapng capture (or a compressed one)."""


class CaptureOpenError(PcapToolsError):
    """The capture path cannot be opened."""


class UnsupportedInputError(CaptureOpenError):
    """The capture is a stream (pipe, FIFO, stdin, file object) and cannot do what was asked:
    it is not a binary stream open for reading, or the operation needs a file it can read a
    second time (``load(workers=N)``, :meth:`Capture.wireshark`). The message says which, and
    what to do instead."""


class OutputPathError(PcapToolsError):
    """An output path would overwrite an input (capture, key log) or another output, or is a
    device pcaptools will not write into (``collision`` True), or its folder does not exist
    or cannot be written (``collision`` False). Found before the capture is read;
    ``pcap-report`` exits 2 for either."""

    def __init__(self, message: str, *, collision: bool = False) -> None:
        super().__init__(message)
        self.collision = collision


class KeylogError(PcapToolsError):
    """The key log file cannot be read."""


class WiresharkError(PcapToolsError):
    """tshark failed (bad option, crash, unreadable output); the message says what tshark said."""


class TsharkNotFoundError(WiresharkError):
    """No tshark binary on PATH (or at the ``tshark_path`` given)."""


class WiresharkFieldError(WiresharkError):
    """tshark does not know one or more field names.

    ``fields``: the unknown names; ``suggestions``: close known names for each of them."""

    def __init__(self, message: str, fields: list[str], suggestions: dict[str, list[str]]) -> None:
        super().__init__(message)
        self.fields = fields
        self.suggestions = suggestions


class WiresharkFilterError(WiresharkError):
    """tshark cannot compile the display filter; the message is tshark's."""


class WiresharkTimeoutError(WiresharkError, TimeoutError):
    """tshark was still running after ``timeout`` seconds and was killed."""
