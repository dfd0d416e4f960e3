"""NSS key log files (``SSLKEYLOGFILE``): the secrets that let pcaptools decrypt TLS.

Format (one entry per line, hex, case-insensitive)::

    CLIENT_RANDOM <client_random 32B> <master_secret 48B>          TLS 1.0-1.2
    CLIENT_EARLY_TRAFFIC_SECRET <client_random> <secret>            TLS 1.3
    CLIENT_HANDSHAKE_TRAFFIC_SECRET / SERVER_HANDSHAKE_TRAFFIC_SECRET
    CLIENT_TRAFFIC_SECRET_0 / SERVER_TRAFFIC_SECRET_0 (and _N after key updates)
    EARLY_EXPORTER_SECRET / EXPORTER_SECRET                         ignored (no record keys)

Comments (``#``) and blank lines are skipped; lines may end in LF or CRLF. Anything else
that does not parse is counted and reported as a ``tls.keylog_bad_line`` anomaly naming the
source and the line number, never the line itself (it may hold a secret). ``RSA`` and
``PMS_CLIENT_RANDOM`` lines are recognised but not used (they need the pre-master path) and
counted as ``ignored``. Secrets never appear in a repr, an exception or an anomaly detail.

Files and byte strings are read line by line (:meth:`KeyLog.from_file` streams), so memory
grows with the number of secrets stored, not with the size of the key log: a line longer than
:data:`MAX_LINE_BYTES` (a real entry is under 300 bytes) is read through in pieces and is one
bad line (or one comment, if it starts with ``#``).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, ClassVar

from ...diagnostics import Diagnostics
from ...errors import KeylogError

_TLS13_LABELS = {
    "CLIENT_EARLY_TRAFFIC_SECRET": "client_early",
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET": "client_handshake",
    "SERVER_HANDSHAKE_TRAFFIC_SECRET": "server_handshake",
}
_IGNORED_LABELS = frozenset(
    {
        "EXPORTER_SECRET",
        "EARLY_EXPORTER_SECRET",
        "RSA",
        "PMS_CLIENT_RANDOM",
        "RSA_Session-ID",
        "Session-ID",
    }
)
_HEX = frozenset("0123456789abcdefABCDEF")

MAX_LINE_BYTES = 64 << 10
"""longest key log line parsed; a longer one is a ``tls.keylog_bad_line`` (never held whole)"""
_SKIP_CHUNK = 1 << 20


def _byte_lines(fh: BinaryIO) -> Iterator[str | None]:
    """The lines of a binary stream, decoded as ASCII (other bytes become U+FFFD) and split as
    ``str.splitlines()`` splits the whole text (LF, CRLF, lone CR...), one line at a time.
    A line longer than :data:`MAX_LINE_BYTES` is read through in 1 MiB pieces and given as
    None (``"#"`` if it starts like a comment). Reads never hold more than one line."""
    readline = fh.readline
    while True:
        chunk = readline(MAX_LINE_BYTES + 1)
        if not chunk:
            return
        if len(chunk) > MAX_LINE_BYTES and not chunk.endswith(b"\n"):
            comment = chunk.lstrip().startswith(b"#")
            while chunk and not chunk.endswith(b"\n"):
                chunk = readline(_SKIP_CHUNK)
            yield "#" if comment else None
            continue
        # ends in LF (or is the last line): splitting it alone splits as the whole text would
        yield from chunk.decode("ascii", errors="replace").splitlines()


@dataclass(slots=True, eq=False)
class SessionSecrets:
    """Secrets of one TLS session, keyed by its client random. ``repr`` hides the values."""

    master_secret: bytes | None = field(default=None, repr=False)
    """TLS 1.0-1.2 master secret (48 bytes)"""
    client_early: bytes | None = field(default=None, repr=False)
    client_handshake: bytes | None = field(default=None, repr=False)
    server_handshake: bytes | None = field(default=None, repr=False)
    client_traffic: dict[int, bytes] = field(default_factory=dict, repr=False)
    """application traffic secret generation N -> secret"""
    server_traffic: dict[int, bytes] = field(default_factory=dict, repr=False)
    _packing_: ClassVar[str] = "shared"
    """the key log's: a packed parser refers to it, never copies a secret
    (:mod:`pcaptools.tcp.packing`)"""

    def __repr__(self) -> str:
        have = [
            n
            for n in ("master_secret", "client_early", "client_handshake", "server_handshake")
            if getattr(self, n) is not None
        ]
        if self.client_traffic:
            have.append(f"client_traffic{sorted(self.client_traffic)}")
        if self.server_traffic:
            have.append(f"server_traffic{sorted(self.server_traffic)}")
        return f"SessionSecrets(<{', '.join(have) or 'empty'}>)"

    @property
    def has_tls13(self) -> bool:
        return (
            self.client_handshake is not None
            or self.server_handshake is not None
            or bool(self.client_traffic or self.server_traffic)
        )


class KeyLog:
    """Secrets from NSS key log text, looked up by the 32-byte ClientHello random.

    Build with :meth:`from_file` or ``KeyLog()`` + :meth:`add_text` (the pipeline also
    feeds the key logs found in pcapng Decryption Secrets Blocks). Later lines for the
    same client random and label replace earlier ones.
    """

    __slots__ = ("_by_random", "bad_lines", "ignored_lines", "lines", "read_lines", "sources")
    _packing_ = "shared"
    """one for every connection: a packed parser refers to it (:mod:`pcaptools.tcp.packing`)"""

    def __init__(self) -> None:
        self._by_random: dict[bytes, SessionSecrets] = {}
        self.lines = 0
        """entries stored"""
        self.bad_lines = 0
        """lines that were neither comments, blank nor entries"""
        self.ignored_lines = 0
        """well-formed entries of labels pcaptools does not use (EXPORTER_SECRET, RSA...)"""
        self.read_lines = 0
        """lines read from every source, comments and blank lines included"""
        self.sources: list[str] = []

    def __repr__(self) -> str:
        return (
            f"<KeyLog {len(self._by_random)} sessions, {self.lines} entries, "
            f"{self.bad_lines} bad lines, {self.ignored_lines} ignored>"
        )

    def __len__(self) -> int:
        return len(self._by_random)

    def __bool__(self) -> bool:
        return bool(self._by_random)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], diag: Diagnostics) -> KeyLog:
        """Read a key log file, line by line (memory grows with the secrets found, not with
        the file). Raises :class:`~pcaptools.errors.KeylogError` if it cannot be read
        (missing, a directory, unreadable, a read error); bad lines inside it, binary content
        included, only become anomalies."""
        kl = cls()
        source = os.path.basename(os.fspath(path))
        try:
            with open(path, "rb") as fh:
                kl.sources.append(source)
                kl._add_lines(_byte_lines(fh), diag, source)
        except OSError as exc:
            raise KeylogError(
                f"cannot read key log {os.fspath(path)!r}: {exc.strerror or exc}"
            ) from None
        return kl

    def add_text(self, text: bytes | str, diag: Diagnostics, *, source: str) -> None:
        """Add every entry of ``text`` (a whole key log). ``source`` names it in anomalies
        (a file name, or e.g. ``"pcapng DSB #1"``). Bytes are read line by line as a file is."""
        self.sources.append(source)
        lines = text.splitlines() if isinstance(text, str) else _byte_lines(io.BytesIO(text))
        self._add_lines(lines, diag, source)

    def _add_lines(self, lines: Iterable[str | None], diag: Diagnostics, source: str) -> None:
        """Store the entries of ``lines`` (None: a line too long to parse)."""
        for lineno, raw in enumerate(lines, 1):
            self.read_lines += 1
            if raw is None:
                self.bad_lines += 1
                diag.add(
                    "tls.keylog_bad_line",
                    f"{source} line {lineno}: longer than {MAX_LINE_BYTES:,} bytes",
                )
                continue
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            why = self._add_entry(parts)
            if why is not None:
                self.bad_lines += 1
                diag.add("tls.keylog_bad_line", f"{source} line {lineno}: {why}")

    def _add_entry(self, parts: list[str]) -> str | None:
        """Store one entry; return why it is bad (no secret in the text) or None."""
        label = parts[0]
        if label in _IGNORED_LABELS:
            self.ignored_lines += 1
            return None
        known = (
            label == "CLIENT_RANDOM"
            or label in _TLS13_LABELS
            or label.startswith(("CLIENT_TRAFFIC_SECRET_", "SERVER_TRAFFIC_SECRET_"))
        )
        if not known:
            return (
                "unknown label"
                if label.isupper() and label.replace("_", "").isalnum()
                else "not a key log entry"
            )
        if len(parts) != 3:
            return f"{label}: expected 3 fields, got {len(parts)}"
        cr_hex, secret_hex = parts[1], parts[2]
        if len(cr_hex) != 64 or not _HEX.issuperset(cr_hex):
            return f"{label}: client random is not 32 bytes of hex"
        if not secret_hex or len(secret_hex) % 2 or not _HEX.issuperset(secret_hex):
            return f"{label}: secret is not hex"
        cr = bytes.fromhex(cr_hex)
        secret = bytes.fromhex(secret_hex)
        s = self._by_random.get(cr)
        if s is None:
            s = self._by_random[cr] = SessionSecrets()
        if label == "CLIENT_RANDOM":
            if len(secret) != 48:
                return "CLIENT_RANDOM: master secret is not 48 bytes"
            s.master_secret = secret
        elif label in _TLS13_LABELS:
            setattr(s, _TLS13_LABELS[label], secret)
        else:
            side, _, n = label.rpartition("_")
            if not n.isdigit():
                return f"{side}: generation is not a number"
            (s.client_traffic if side.startswith("CLIENT") else s.server_traffic)[int(n)] = secret
        self.lines += 1
        return None

    def lookup(self, client_random: bytes) -> SessionSecrets | None:
        """The secrets logged for the session whose ClientHello random is ``client_random``."""
        return self._by_random.get(bytes(client_random))
