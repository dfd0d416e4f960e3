"""Per-direction and per-message state of :class:`~.observer.WebSocketObserver` (mutable,
slotted; never leaves the package: events are built from it)."""

from __future__ import annotations

import zlib
from codecs import utf_8_decode as _utf_8_decode

from ...tcp.stream import Direction, StreamCursor

# parser modes of one direction
_HEADER, _PAYLOAD, _HUNT, _DESYNCED = range(4)


class _Msg:
    """One data message of one direction, while it lasts: counters, the preview, UTF-8 and
    permessage-deflate state."""

    __slots__ = (
        "body",
        "body_cap",
        "compressed",
        "content_bytes",
        "decompress",
        "first_frame",
        "first_ts",
        "fragments",
        "index",
        "lost",
        "opcode",
        "payload",
        "preview",
        "preview_cap",
        "uninspected",
        "utf8",
        "utf8_ok",
        "wire",
        "z",
        "zdrain",
        "zout",
    )

    def __init__(self, index: int, opcode: int, first: tuple[int, int], preview_cap: int,
                 body_cap: int = 0) -> None:
        self.index = index
        self.opcode = opcode
        self.first_ts, self.first_frame = first
        self.fragments = 0
        self.wire = 0
        self.payload = 0
        self.lost = 0
        self.compressed = False
        self.decompress: str | None = None
        self.z: zlib._Decompress | None = None
        self.zout = 0
        self.zdrain = -1
        """past the decompression limit with a shared context: output inflated and discarded
        (-1: not draining)"""
        self.content_bytes = 0
        self.uninspected = False
        self.preview = bytearray()
        self.preview_cap = preview_cap if opcode == 1 else 0
        self.utf8: bytes | None = b"" if opcode == 1 else None
        """text checked as UTF-8 so far: the bytes of a character not yet complete (None:
        not checked, not text or already invalid); what the buffer of an incremental UTF-8
        decoder would hold, without the decoder (:meth:`utf8_final`)"""
        self.utf8_ok: bool | None = None
        self.body_cap = body_cap
        self.body: bytearray | None = bytearray() if opcode == 1 and body_cap > 0 else None
        """text that starts like a JSON object, kept whole up to body_cap bytes (None: not
        JSON-like, too long, or not kept)"""

    def wants_content(self) -> bool:
        if self.compressed:
            return self.z is not None
        return self.utf8 is not None or len(self.preview) < self.preview_cap

    def add_content(self, data: bytes) -> None:
        """Message content (unmasked; inflated when compressed): counted, the start kept as
        the preview, text checked as UTF-8 incrementally."""
        self.content_bytes += len(data)
        room = self.preview_cap - len(self.preview)
        if room > 0:
            self.preview += data[:room]
        body = self.body
        if body is not None:
            if self.content_bytes > self.body_cap:
                self.body = None
            elif body:  # (decided: it starts with "{"; leading whitespace is not kept)
                body += data
            else:
                head = data.lstrip()
                if head[:1] == b"{":
                    body += head
                elif head:
                    self.body = None
        tail = self.utf8
        if tail is not None and (tail or not data.isascii()):  # (ASCII is UTF-8, whole)
            buf = tail + data if tail else data
            try:
                # (an incremental UTF-8 decoder's decode(data): what it leaves unconsumed is
                # the start of a character whose next bytes come with the next piece)
                used = _utf_8_decode(buf, "strict", False)[1]
            except UnicodeDecodeError:
                self.utf8 = None
                self.utf8_ok = False
            else:
                self.utf8 = bytes(buf[used:])

    def utf8_final(self) -> bool:
        """The text ended here: was it all valid UTF-8 (no character left incomplete)? (An
        incremental decoder's final ``decode(b"", True)`` not raising.) Only while
        :attr:`utf8` is not None."""
        try:
            _utf_8_decode(self.utf8 or b"", "strict", True)
        except UnicodeDecodeError:
            return False
        return True


class _Dir:
    """Parser state and counters of one direction: its cursor (:attr:`next_offset`, the next
    stream offset expected), the frame in progress, the message in progress, close facts,
    the shared permessage-deflate context, the frame search.

    Its cursor is a :class:`~pcaptools.tcp.stream.StreamCursor`'s, whose methods it borrows
    (:meth:`align`, :meth:`skip`) rather than inherits: compiled (``state.pxd``) it is an
    extension type, which cannot subclass a Python class."""

    __slots__ = (
        "b0",
        "close_code",
        "close_frame",
        "close_reason",
        "close_ts",
        "closed",
        "ctrl",
        "d",
        "frames",
        "hbuf",
        "hlen",
        "hstart",
        "hunt_skipped",
        "hunt_total",
        "key",
        "length",
        "lost",
        "lost_bytes",
        "mask_errors",
        "masked",
        "messages",
        "mode",
        "msg",
        "next_offset",
        "payload_bytes",
        "pings",
        "pongs",
        "pos",
        "remaining",
        "reported",
        "scan_from",
        "sent_close",
        "skip_payload",
        "skipped",
        "start",
        "wire_bytes",
        "z",
        "z_broken",
    )

    def __init__(self, d: Direction) -> None:
        self.d = d
        self.mode = _HEADER
        self.hbuf = bytearray()
        self.hstart: tuple[int, int] | None = None
        self.closed = False
        self.next_offset = -1
        # current frame
        self.b0 = 0
        self.masked = False
        self.key = b""
        self.length = 0
        self.hlen = 0
        self.remaining = 0
        self.pos = 0
        self.lost = 0
        self.skip_payload = False
        """the current frame's payload is counted, not parsed (longer than the frame limit)"""
        self.start = (0, 0)
        self.ctrl: bytearray | None = None
        self.msg: _Msg | None = None
        # counters
        self.frames = 0
        self.messages = 0
        self.payload_bytes = 0
        self.wire_bytes = 0
        self.pings = 0
        self.pongs = 0
        self.mask_errors = 0
        self.lost_bytes = 0
        self.skipped = 0
        self.reported: set[str] = set()
        """anomaly codes reported once per direction"""
        # close
        self.sent_close = False
        self.close_code: int | None = None
        self.close_reason: str | None = None
        self.close_frame: int | None = None
        self.close_ts: int | None = None
        # permessage-deflate context (context takeover)
        self.z: zlib._Decompress | None = None
        self.z_broken = False
        # hunting
        self.scan_from = 0
        self.hunt_skipped = 0
        self.hunt_total = 0

    def align(self, offset: int, data: bytes) -> tuple[int, bytes]:
        """:meth:`StreamCursor.align <pcaptools.tcp.stream.StreamCursor.align>` on this cursor
        (it reads and moves only :attr:`next_offset`)."""
        return StreamCursor.align(self, offset, data)  # type: ignore[arg-type]

    def skip(self, offset: int, nbytes: int) -> int:
        """:meth:`StreamCursor.skip <pcaptools.tcp.stream.StreamCursor.skip>` on this cursor."""
        return StreamCursor.skip(self, offset, nbytes)  # type: ignore[arg-type]
