"""Wireshark's dissectors from a notebook: any tshark field, as a typed pandas DataFrame.

pcaptools' own tables cover TCP, TLS, HTTP/1.1, HTTP/2, SSE, WebSocket and DNS. For anything
else (Wireshark has 3000+ dissectors and 230,000+ fields) ask tshark::

    import pcaptools
    cap = pcaptools.load("captures/h2-sse-chat.pcapng", keylog="captures/h2-sse-chat.keys")
    cap.wireshark(["frame.number", "tcp.stream", "http2.streamid", "http2.header.value"],
                  display_filter="http2.type == 1")
    pcaptools.wireshark("other.pcapng", ["frame.number", "dns.qry.name"], "dns")  # no load()

``pcaptools.wireshark`` is the function below (re-exported by the package); this module is
``sys.modules["pcaptools.wireshark"]``, and ``from pcaptools.wireshark import field_types`` works.

One row per frame that passes ``display_filter`` (all frames without one), one column per field,
named as the field. It runs::

    tshark -n -r FILE -T fields -E header=y -E separator=/t -E occurrence=a|f|l
           -E aggregator=<US> [-o tls.keylog_file:KEYS] [-o NAME:VALUE]... [-2] [-c N]
           [-d CRITERION,PROTO]... [-Y FILTER] -e FIELD...

and reads its output as it comes (one pass, one copy of the values). Key logs embedded in a
pcapng (Decryption Secrets Blocks) are used by tshark on its own; ``keylog=`` adds a key log file.
Your own Wireshark preferences (``~/.config/wireshark``) apply, as in Wireshark; ``prefs=``
overrides single ones.

On a capture with loss, pass ``prefs={"tcp.reassemble_out_of_order": True}`` to see TLS
records, HTTP/1.x messages, HTTP/2 frames and WebSocket frames in the frames where pcaptools'
tables put them. pcaptools reassembles a resent segment that arrives after later ones; tshark
4.0 does only with that preference on (its default is off), and otherwise shows fewer of those
PDUs or shows them in other frames (on the shipped ``h2-sse-lossy.pcapng`` it shows 74 of the
286 HTTP/2 frames). With it on they are the same (``tests/test_lossy_vs_tshark.py``). Not where
the capture itself missed bytes that were never resent (``tcp_losses`` kind ``capture_drop``):
tshark with the preference on waits for them and shows nothing more of that direction of the
connection (``http1-keepalive-drops.pcap``: 15 of the 42 requests, none of the 37 responses),
while pcaptools reports the gap and goes on. The TCP analysis fields do not depend on it.

Column dtypes, from each field's type in ``tshark -G fields`` (cached, see below):

=================================================  ======================================
field type                                         dtype
=================================================  ======================================
FT_UINT8..64, FT_INT8..64, FT_(U)INT24..56,        ``Int64`` (hex and octal output parsed;
FT_FRAMENUM                                        ``UInt64`` if a value is above 2**63-1)
FT_BOOLEAN                                         ``boolean``
FT_NONE, FT_PROTOCOL (e.g. ``tcp.analysis.         ``boolean`` presence flag: True where the
retransmission``, ``http2``)                       frame has it, False elsewhere (never NA)
FT_FLOAT, FT_DOUBLE                                ``float64``
FT_RELATIVE_TIME (``tcp.analysis.ack_rtt``,        ``float64`` seconds
``frame.time_relative``, ``frame.time_delta``)
FT_ABSOLUTE_TIME (``frame.time``), and             ``datetime64[ns, UTC]``, exact to the
``frame.time_epoch``                               nanosecond (``frame.time_epoch`` is an
                                                   FT_RELATIVE_TIME in tshark 4.0: it is read
                                                   as the absolute time it is, so it equals
                                                   ``cap.packets.ts``)
FT_BYTES, FT_UINT_BYTES                            ``string``: lower-case hex, no separators
everything else (FT_STRING, FT_IPv4, FT_IPv6,      ``string`` (``\\n``, ``\\r``, ``\\t``, ``\\b``,
FT_ETHER, FT_GUID, FT_OID...) and fields that      ``\\f`` as tshark escapes them are turned
``-G fields`` does not list (``_ws.col.Info``)     back into the characters)
=================================================  ======================================

Absent values are NA. Several occurrences in one frame (``occurrence="all"``, the default: a
TCP segment carrying three HTTP/2 frames, a header list): a field that has more than one value in
*any* row of the result becomes an ``object`` column holding a Python list of typed values in
every row where it is present (``[1, 3]``, ``[1]``) and ``None`` where it is absent; a field that
never has more than one value stays a typed scalar column. ``df.explode(col)`` gives one row per
value. ``occurrence="first"`` / ``"last"`` always give scalar columns. Presence flags are never
lists. A value tshark prints that does not parse as its type (a dissector printing text in a
number field) keeps the whole column as ``string``, never NA: nothing is silently lost.

Known limits of ``tshark -T fields`` (both engines): a string holding a literal backslash
followed by ``n``/``r``/``t``/``b``/``f`` reads as the control character (tshark writes both
the same way), and the aggregator character (U+001F) inside a value splits it. An empty string
value and an absent field are both NA.

``engine="pyshark"`` gets the same DataFrame through ``pyshark.FileCapture`` (PDML): for
comparison, and for analysts who already use pyshark. It is 4 times slower on a small capture
and ~200 times slower on a large one (below).
Known differences: in string values PDML turns line breaks into spaces (XML attribute
normalisation: ``"Host: x\\r\\n"`` reads ``"Host: x "``) and other control bytes into
``\\xNN`` text; column fields (``_ws.col.*``) are not in PDML (ValueError). Other values are the
same (checked field by field on the shipped captures).

Field types come from ``tshark -G fields`` (0.3 s to 3 s, 230,000 lines), run once per tshark
binary and version and kept as an SQLite table in ``$PCAPTOOLS_CACHE_DIR`` or
``$XDG_CACHE_HOME/pcaptools`` or ``~/.cache/pcaptools/`` (``tshark-fields-<hash of the tshark
version and path>.sqlite``, 13 MB): each call looks up only its own fields (microseconds). A
damaged cache is rebuilt, an unwritable directory means an in-memory table for the session,
and if ``-G fields`` itself fails every column is a ``string``. ``tshark -v`` runs once per
session and binary.

Measured by ``benchmarks/wireshark_fields.py`` (tshark 4.0.17, pyshark 0.6, 2 cores shared with
other jobs: load average 2.2 to 3.5; fields ``frame.number, frame.time_epoch, tcp.stream,
tcp.flags, http2.streamid, http2.type``, TLS decrypted with the key log; median of 3 calls, 1 for
pyshark on base.pcap; CPU s = this process and tshark)::

    capture                                  frames  engine    wall s   CPU s   frames/s (wall)
    captures/h2-sse-chat.pcapng                 225  tshark      0.17    0.16     1,358
    captures/h2-sse-chat.pcapng                 225  pyshark     0.65    0.64       348
    /tmp/pcaptools-bench/base.pcap (41 MB)   37,689  tshark      1.03    1.03    36,520
    /tmp/pcaptools-bench/base.pcap (41 MB)   37,689  pyshark   292.4   189.5        129

Both engines returned identical DataFrames. A call pays ~0.15 s of tshark start-up (the first of
a session ~0.15 s more for ``tshark -v``). pyshark parses tshark's full PDML dissection tree of
every frame (~180 times the CPU here), so it is for comparison and small captures. Under a
heavier load (average 4.5 to 7) the same runs took 4.0 s (tshark) and 568 s (pyshark) on
base.pcap.

Errors (:mod:`pcaptools.errors`): :class:`~pcaptools.errors.TsharkNotFoundError`,
:class:`~pcaptools.errors.WiresharkFieldError` (with close field names),
:class:`~pcaptools.errors.WiresharkFilterError` (tshark's message),
:class:`~pcaptools.errors.WiresharkTimeoutError`, :class:`~pcaptools.errors.WiresharkError`
(tshark crashed or rejected an option), :class:`~pcaptools.errors.CaptureOpenError` /
:class:`~pcaptools.errors.CaptureFormatError` (the file), :class:`~pcaptools.errors.KeylogError`.
A capture cut short or damaged part-way is not an error: the rows tshark read are returned and
tshark's message is in ``df.attrs["wireshark"]["warnings"]``.
"""

from __future__ import annotations

import calendar
import contextlib
import functools
import hashlib
import io
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from .errors import (
    CaptureFormatError,
    CaptureOpenError,
    KeylogError,
    TsharkNotFoundError,
    WiresharkError,
    WiresharkFieldError,
    WiresharkFilterError,
    WiresharkTimeoutError,
)

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "FieldType",
    "field_types",
    "find_tshark",
    "suggest_fields",
    "tshark_command",
    "tshark_version",
    "wireshark",
]

Occurrence = Literal["all", "first", "last"]
Engine = Literal["tshark", "pyshark"]

AGGREGATOR = "\x1f"
"""joins several occurrences of a field in tshark's output (ASCII unit separator: never in text)"""

_OCCURRENCE = {"all": "a", "first": "f", "last": "l"}
_INSTALL_HINT = "install tshark (Debian/Ubuntu: apt install tshark; macOS: brew install wireshark)"
_GLOSSARY_TIMEOUT_S = 120.0
_CACHE_FORMAT = "1"

# --------------------------------------------------------------------------------------------
# field types


_INT_TYPES = frozenset(
    [f"FT_UINT{n}" for n in (8, 16, 24, 32, 40, 48, 56, 64)]
    + [f"FT_INT{n}" for n in (8, 16, 24, 32, 40, 48, 56, 64)]
    + ["FT_FRAMENUM"]
)
_KIND_BY_TYPE = {
    **{t: "int" for t in _INT_TYPES},
    "FT_BOOLEAN": "bool",
    "FT_NONE": "presence",
    "FT_PROTOCOL": "presence",
    "FT_FLOAT": "float",
    "FT_DOUBLE": "float",
    "FT_RELATIVE_TIME": "reltime",
    "FT_ABSOLUTE_TIME": "abstime",
    "FT_BYTES": "bytes",
    "FT_UINT_BYTES": "bytes",
}
_KIND_OVERRIDES = {"frame.time_epoch": "abstime"}
"""fields whose tshark type does not say what they are (an epoch printed as a relative time)"""

_DTYPE_BY_KIND = {
    "int": "Int64",
    "bool": "boolean",
    "presence": "boolean",
    "float": "float64",
    "reltime": "float64",
    "abstime": "datetime64[ns, UTC]",
    "bytes": "string",
    "string": "string",
}


@dataclass(frozen=True, slots=True)
class FieldType:
    """A field's type as ``tshark -G fields`` lists it."""

    name: str
    ftype: str
    """FT_UINT16, FT_STRING, ... ("" for fields -G fields does not list, e.g. _ws.col.Info)"""
    base: str
    """display base of integer fields (BASE_DEC, BASE_HEX, BASE_OCT...), else "" """

    @property
    def kind(self) -> str:
        """int, bool, presence, float, reltime, abstime, bytes or string"""
        return _KIND_OVERRIDES.get(self.name) or _KIND_BY_TYPE.get(self.ftype, "string")

    @property
    def dtype(self) -> str:
        """the pandas dtype of this field's column when it has at most one value per frame"""
        return _DTYPE_BY_KIND[self.kind]


def _cache_dir() -> Path:
    env = os.environ.get("PCAPTOOLS_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pcaptools"


def _tshark_env() -> dict[str, str]:
    # TZ=UTC: FT_ABSOLUTE_TIME fields print in UTC, whatever the machine's zone
    return dict(os.environ, TZ="UTC")


def find_tshark(tshark_path: str | os.PathLike[str] | None = None) -> str:
    """The tshark binary to run: ``tshark_path`` if given, else ``tshark`` on PATH.
    Raises :class:`~pcaptools.errors.TsharkNotFoundError` if there is none."""
    if tshark_path is not None:
        p = os.fspath(tshark_path)
        found = (
            shutil.which(p)
            if os.sep not in p
            else (p if os.access(p, os.X_OK) and os.path.isfile(p) else None)
        )
        if not found:
            raise TsharkNotFoundError(
                f"tshark not found at {p!r}: {_INSTALL_HINT}, or pass tshark_path= "
                "the path of an executable tshark"
            )
        return found
    found = shutil.which("tshark")
    if not found:
        raise TsharkNotFoundError(
            f"tshark not found on PATH: {_INSTALL_HINT}, or pass tshark_path="
        )
    return found


@functools.lru_cache(maxsize=8)
def _version(real: str, mtime_ns: int, size: int) -> str:
    try:
        out = subprocess.run(
            [real, "-v"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
            stdin=subprocess.DEVNULL,
            env=_tshark_env(),
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise TsharkNotFoundError(f"cannot run {real!r} ({e}): {_INSTALL_HINT}") from e
    return out.splitlines()[0].strip() if out.strip() else f"unknown tshark {size}/{mtime_ns}"


def tshark_version(tshark: str) -> str:
    """First line of ``tshark -v`` (``TShark (Wireshark) 4.0.17 (...)``), cached per binary."""
    real = os.path.realpath(tshark)
    st = os.stat(real)
    return _version(real, st.st_mtime_ns, st.st_size)


def field_types(
    names: Iterable[str] | None = None, tshark_path: str | os.PathLike[str] | None = None
) -> dict[str, FieldType]:
    """The tshark types of ``names`` (every field tshark knows if None: 230,000 of them), from
    ``tshark -G fields`` through the cache. Names tshark does not list are left out; empty if
    ``-G fields`` fails."""
    tshark = find_tshark(tshark_path)
    g = _glossary(os.path.realpath(tshark), tshark_version(tshark))
    return g.lookup(names) if names is not None else g.everything()


class _Glossary:
    """``tshark -G fields`` as an SQLite table (name, ftype, base): a few names are looked up in
    microseconds, without loading 230,000 rows into memory."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._protocols: list[str] | None = None

    def _query(self, sql: str, args: Sequence[object] = ()) -> list[tuple[str, str, str]]:
        with self._lock:
            import sqlite3  # (lazily, as everywhere in this module: only the glossary needs it)

            try:
                return list(self._conn.execute(sql, args))
            except sqlite3.Error:
                return []

    def lookup(self, names: Iterable[str]) -> dict[str, FieldType]:
        wanted = list(dict.fromkeys(names))
        out: dict[str, FieldType] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            rows = self._query(
                "SELECT name, ftype, base FROM fields WHERE name IN "
                f"({','.join('?' * len(chunk))})",
                chunk,
            )
            out.update((n, FieldType(n, t, b)) for n, t, b in rows)
        return out

    def everything(self) -> dict[str, FieldType]:
        return {
            n: FieldType(n, t, b) for n, t, b in self._query("SELECT name, ftype, base FROM fields")
        }

    def protocols(self) -> list[str]:
        if self._protocols is None:
            self._protocols = [
                r[0] for r in self._query("SELECT name FROM fields WHERE ftype = 'FT_PROTOCOL'")
            ]
        return self._protocols

    def names_of(self, proto: str) -> list[str]:
        """``proto`` and every field under it (``proto.*``)."""
        return [
            r[0]
            for r in self._query(
                "SELECT name FROM fields WHERE name = ? OR (name >= ? AND name < ?)",
                (proto, proto + ".", proto + "/"),
            )
        ]

    def names_ending(self, leaf: str) -> list[str]:
        return [
            r[0]
            for r in self._query(
                "SELECT name FROM fields WHERE substr(name, -?) = ?", (len(leaf) + 1, "." + leaf)
            )
        ]


@functools.lru_cache(maxsize=4)
def _glossary(real: str, version: str) -> _Glossary:
    """The field glossary of one tshark binary: the disk cache if it is there and readable,
    else ``tshark -G fields`` (written to the cache when the directory is writable, else kept
    in memory)."""
    key = hashlib.sha256(f"{_CACHE_FORMAT}\n{version}\n{real}".encode()).hexdigest()[:20]
    path = _cache_dir() / f"tshark-fields-{key}.sqlite"
    conn = _open_cache(path, version)
    if conn is None:
        rows = _run_glossary(real)
        conn = _write_cache(path, version, rows) if rows else None
        if conn is None:
            conn = _build_db(":memory:", version, rows)
    return _Glossary(conn)


def _run_glossary(real: str) -> list[tuple[str, str, str]]:
    """(name, type, base) of every protocol and field from ``tshark -G fields``; [] on failure."""
    try:
        res = subprocess.run(
            [real, "-G", "fields"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_GLOSSARY_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            env=_tshark_env(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = []
    for line in res.stdout.splitlines():
        parts = line.split("\t")
        if parts[0] == "F" and len(parts) >= 4:
            rows.append((parts[2], parts[3], parts[5] if len(parts) > 5 else ""))
        elif parts[0] == "P" and len(parts) >= 3:
            rows.append((parts[2], "FT_PROTOCOL", ""))
    return rows


def _open_cache(path: Path, version: str) -> sqlite3.Connection | None:
    import sqlite3

    if not path.is_file():
        return None
    conn = None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        row = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        n = conn.execute("SELECT count(*) FROM fields").fetchone()
        if row and row[0] == version and n and n[0] > 0:
            return conn
    except sqlite3.Error:
        pass
    if conn is not None:
        conn.close()
    return None


def _build_db(target: str, version: str, rows: list[tuple[str, str, str]]) -> sqlite3.Connection:
    import sqlite3

    conn = sqlite3.connect(target, check_same_thread=False)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE fields (name TEXT PRIMARY KEY, ftype TEXT, base TEXT) WITHOUT ROWID")
    conn.execute("INSERT INTO meta VALUES ('version', ?)", (version,))
    conn.executemany("INSERT OR IGNORE INTO fields VALUES (?, ?, ?)", rows)
    conn.commit()
    return conn


def _write_cache(
    path: Path, version: str, rows: list[tuple[str, str, str]]
) -> sqlite3.Connection | None:
    """Build the cache file next to ``path`` and move it into place (atomic: a concurrent reader
    sees the old file or the new one); None if the directory is not writable."""
    import sqlite3

    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tshark-fields-", suffix=".tmp")
        os.close(fd)
        _build_db(tmp, version, rows).close()
        os.replace(tmp, path)
        tmp = None
        return _open_cache(path, version)
    except (OSError, sqlite3.Error):
        return None  # a read-only home: the caller keeps the glossary in memory
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def suggest_fields(name: str, glossary: _Glossary | Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` known field names close to ``name`` (difflib), best first: among the fields of
    the same protocol and of protocols with a close name, else among fields with the same last
    part (a field that moved to another protocol)."""
    import difflib  # (lazily: only a misspelled field needs it)

    g = glossary if isinstance(glossary, _Glossary) else _list_glossary(list(glossary))
    proto = name.split(".", 1)[0]
    near = dict.fromkeys([proto, *difflib.get_close_matches(proto, g.protocols(), n=3, cutoff=0.6)])
    pool = [k for p in near for k in g.names_of(p)]
    found = difflib.get_close_matches(name, pool, n=n, cutoff=0.6)
    if not found and "." in name:
        found = difflib.get_close_matches(
            name, g.names_ending(name.rsplit(".", 1)[1]), n=n, cutoff=0.6
        )
    return found


def _list_glossary(names: list[str]) -> _Glossary:
    rows = [(k, "FT_PROTOCOL" if "." not in k else "", "") for k in names]
    return _Glossary(_build_db(":memory:", "", rows))


# --------------------------------------------------------------------------------------------
# the command


def tshark_command(
    tshark: str,
    path: str,
    fields: Sequence[str],
    display_filter: str | None = None,
    *,
    keylog: str | None = None,
    two_pass: bool = False,
    decode_as: Mapping[str, str] | None = None,
    occurrence: Occurrence = "all",
    max_frames: int | None = None,
    prefs: Mapping[str, object] | None = None,
) -> list[str]:
    """The tshark argument list :func:`wireshark` runs (arguments already validated)."""
    cmd = [
        tshark,
        "-n",
        "-r",
        path,
        "-T",
        "fields",
        "-E",
        "header=y",
        "-E",
        "separator=/t",
        "-E",
        f"occurrence={_OCCURRENCE[occurrence]}",
        "-E",
        f"aggregator={AGGREGATOR}",
    ]
    cmd += _option_args(keylog, prefs)
    if two_pass:
        cmd.append("-2")
    if max_frames is not None:
        cmd += ["-c", str(max_frames)]
    for criterion, proto in (decode_as or {}).items():
        cmd += ["-d", f"{criterion.strip()},{proto.strip()}"]
    if display_filter:
        cmd += ["-Y", display_filter]
    for f in fields:
        cmd += ["-e", f]
    return cmd


def _pref_value(v: object) -> str:
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    return os.fspath(v) if isinstance(v, os.PathLike) else str(v)


def _prefs(keylog: str | None, prefs: Mapping[str, object] | None) -> dict[str, str]:
    out = {str(k): _pref_value(v) for k, v in (prefs or {}).items()}
    if keylog is not None:
        out["tls.keylog_file"] = keylog
    return out


def _option_args(keylog: str | None, prefs: Mapping[str, object] | None) -> list[str]:
    args: list[str] = []
    for k, v in _prefs(keylog, prefs).items():
        args += ["-o", f"{k}:{v}"]
    return args


# --------------------------------------------------------------------------------------------
# public entry point


def wireshark(
    path: str | os.PathLike[str],
    fields: str | Sequence[str],
    display_filter: str | None = None,
    *,
    keylog: str | os.PathLike[str] | None = None,
    two_pass: bool = False,
    decode_as: Mapping[str, str] | None = None,
    occurrence: Occurrence = "all",
    max_frames: int | None = None,
    engine: Engine = "tshark",
    tshark_path: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    prefs: Mapping[str, object] | None = None,
) -> pd.DataFrame:
    """Run Wireshark's dissectors over ``path`` and return ``fields`` as a typed DataFrame.

    One row per frame passing ``display_filter`` (every frame without one), in frame order, one
    column per field named as the field (dtypes: module docstring). ``keylog``: an NSS key log
    file for TLS (keys embedded in a pcapng are used anyway). ``two_pass``: tshark ``-2``, for
    fields that need later frames (``tcp.analysis.*`` reassembly results, ``http2`` bodies,
    ``*.response_in``). ``decode_as``: ``{"tcp.port==8080": "http2"}`` (tshark ``-d``).
    ``occurrence``: all values of a field in a frame (lists, see module docstring), the first
    or the last. ``max_frames``: read only the first N frames of the file (tshark ``-c``; with a
    display filter fewer rows). ``prefs``: more preferences, ``{"tcp.desegment_tcp_streams":
    False}`` (tshark ``-o name:value``). ``timeout``: seconds before tshark is killed and
    :class:`~pcaptools.errors.WiresharkTimeoutError` raised (None: no limit). ``engine``:
    ``"tshark"`` (direct) or ``"pyshark"`` (the same DataFrame through pyshark, much slower).

    ``df.attrs["wireshark"]`` holds the command run, the tshark version, each field's tshark
    type, and tshark's warnings (a capture cut short part-way returns the rows read and says so
    there). Raises the exceptions listed in the module docstring; ValueError for bad arguments.
    """
    field_list = [fields] if isinstance(fields, str) else list(fields)
    _validate(field_list, occurrence, engine, max_frames, timeout, decode_as)
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise CaptureOpenError(f"cannot open capture {p!r}: {e.strerror or e}") from e
    if not os.path.isfile(p):
        raise CaptureOpenError(f"cannot open capture {p!r}: not a regular file")
    if st.st_size == 0:
        raise CaptureFormatError(f"{p!r} is empty: not a capture")
    if not os.access(p, os.R_OK):
        raise CaptureOpenError(f"cannot open capture {p!r}: permission denied")
    key = None
    if keylog is not None:
        key = os.fspath(keylog)
        try:
            with open(key, "rb"):
                pass
        except OSError as e:
            raise KeylogError(f"cannot read key log {key!r}: {e.strerror or e}") from e
    tshark = find_tshark(tshark_path)
    version = tshark_version(tshark)
    glossary = _glossary(os.path.realpath(tshark), version)
    known = glossary.lookup(field_list)
    ftypes = [known.get(f) or FieldType(f, "", "") for f in field_list]
    opts: dict[str, Any] = {"keylog": key, "two_pass": two_pass, "decode_as": decode_as,
                            "occurrence": occurrence, "prefs": prefs}
    cmd = tshark_command(tshark, p, field_list, display_filter, max_frames=max_frames, **opts)
    if engine == "pyshark":
        # run tshark once on 1 frame first: bad fields/filters/options fail with our messages
        probe = tshark_command(tshark, p, field_list, display_filter, max_frames=1, **opts)
        _run_fields(probe, field_list, timeout, display_filter, glossary)
        columns, warnings = _pyshark_columns(
            tshark, p, ftypes, display_filter, key, two_pass, decode_as, max_frames, prefs, timeout
        )
        escaped = False
    else:
        columns, warnings = _run_fields(cmd, field_list, timeout, display_filter, glossary)
        escaped = True
    df = _typed_frame(ftypes, columns, occurrence, escaped=escaped)
    df.attrs["wireshark"] = {
        "engine": engine,
        "command": cmd,
        "tshark_version": version,
        "field_types": {f.name: f.ftype for f in ftypes},
        "warnings": warnings,
    }
    return df


def _validate(
    fields: list[str],
    occurrence: str,
    engine: str,
    max_frames: int | None,
    timeout: float | None,
    decode_as: Mapping[str, str] | None,
) -> None:
    if not fields:
        raise ValueError(
            "fields: give at least one field name, e.g. ['frame.number', 'tcp.stream']"
        )
    for f in fields:
        if not isinstance(f, str) or not f.strip() or any(c.isspace() for c in f):
            raise ValueError(f"fields: {f!r} is not a field name")
    dup = sorted({f for f in fields if fields.count(f) > 1})
    if dup:
        raise ValueError(f"fields: {dup} listed more than once")
    if occurrence not in _OCCURRENCE:
        raise ValueError(f"occurrence must be one of {sorted(_OCCURRENCE)}, not {occurrence!r}")
    if engine not in ("tshark", "pyshark"):
        raise ValueError(f"engine must be 'tshark' or 'pyshark', not {engine!r}")
    if max_frames is not None and (
        isinstance(max_frames, bool) or not isinstance(max_frames, int) or max_frames < 1
    ):
        raise ValueError(f"max_frames must be a positive int or None, not {max_frames!r}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds or None, not {timeout!r}")
    for criterion, proto in (decode_as or {}).items():
        if (
            not isinstance(criterion, str)
            or not isinstance(proto, str)
            or "==" not in criterion
            or not proto.strip()
            or "," in proto
        ):
            raise ValueError(
                f"decode_as: {criterion!r}: {proto!r} should look like "
                "{'tcp.port==8080': 'http2'} (a 'table==value' criterion and a protocol)"
            )


# --------------------------------------------------------------------------------------------
# direct engine: run tshark and read its output


_NOISE = ("Running as user",)
_FILE_READ_ERRORS = (
    "cut short in the middle of a packet",
    "appears to be damaged or corrupt",
    "has a packet larger than",
    "bigger than maximum",
    "unsupported record",
    "encapsulation",
    "isn't a capture file",
    "could not be read",
    "is a directory",
)
_OPTION_ERRORS = (
    "Unknown protocol --",
    "Unknown layer type",
    "Valid protocols for layer type",
    "Valid layer types are",
    "-d flag",
    "decode-as",
    "specifies unknown preference",
    "-o flag",
    "Invalid -d",
    "not a valid field output",
    "Invalid selector",
    "isn't valid for",
)


def _run_fields(
    cmd: list[str],
    fields: list[str],
    timeout: float | None,
    display_filter: str | None,
    glossary: _Glossary,
) -> tuple[list[list[str]], list[str]]:
    """Run ``cmd`` and return (one list of raw value strings per field, tshark's warnings)."""
    n = len(fields)
    columns: list[list[str]] = [[] for _ in range(n)]
    header_seen = False
    timed_out = threading.Event()
    malformed = 0
    with tempfile.TemporaryFile() as err:
        try:
            # its own process group: a timeout or an interrupt kills tshark and anything it started
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=_tshark_env(),
                start_new_session=True,
            )
        except OSError as e:
            raise TsharkNotFoundError(f"cannot run {cmd[0]!r} ({e}): {_INSTALL_HINT}") from e
        timer = None
        if timeout is not None:
            timer = threading.Timer(timeout, _kill_on_timeout, args=(proc, timed_out))
            timer.daemon = True
            timer.start()
        try:
            assert proc.stdout is not None
            # only "\n" ends a row (tshark escapes \n and \r inside values; other line breaks
            # such as \x0b or U+2028 may occur inside strings)
            out = io.TextIOWrapper(proc.stdout, encoding="utf-8", errors="replace", newline="\n")
            first = out.readline()
            if first:
                header_seen = True  # tshark has opened the file and starts writing rows
                if first.rstrip("\n").split("\t") != fields:  # not a header: a row
                    out = _chain(first, out)  # type: ignore[assignment]
            append = [c.append for c in columns]
            for line in out:
                parts = line[:-1].split("\t") if line.endswith("\n") else line.split("\t")
                if len(parts) != n:
                    malformed += 1
                    parts = (parts + [""] * n)[:n]
                for add, v in zip(append, parts, strict=True):
                    add(v)
            rc = proc.wait()
        finally:
            if timer is not None:
                timer.cancel()
            if proc.poll() is None:
                _kill_group(proc)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    if timed_out.is_set():
        raise WiresharkTimeoutError(
            f"tshark did not finish within timeout={timeout} s and was killed "
            f"({len(columns[0])} rows "
            "read): narrow it with display_filter= or max_frames=, or raise timeout="
        )
    messages = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(_NOISE)]
    warnings = _check_status(rc, messages, header_seen, display_filter, cmd, glossary)
    if malformed:
        warnings.append(f"{malformed} output lines did not have {n} fields (padded or cut)")
    return columns, warnings


def _chain(first: str, rest: Iterable[str]) -> Iterable[str]:
    yield first
    yield from rest


def _kill_on_timeout(proc: subprocess.Popen[bytes], flag: threading.Event) -> None:
    if proc.poll() is None:
        flag.set()
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        with contextlib.suppress(OSError):
            proc.kill()


def _short(lines: list[str], limit: int = 8) -> str:
    text = "\n".join(ln.removeprefix("tshark: ") for ln in lines[:limit])
    if len(lines) > limit:
        text += f"\n... ({len(lines) - limit} more lines)"
    return text


def _check_status(
    rc: int,
    messages: list[str],
    header_seen: bool,
    display_filter: str | None,
    cmd: list[str],
    glossary: _Glossary,
) -> list[str]:
    """Raise the right exception for a failed run; return the warnings of a successful one."""
    text = "\n".join(messages)
    if "Some fields aren't valid" in text:
        bad = [ln.strip() for ln in messages if ln.startswith(("\t", " ")) and ln.strip()]
        suggestions = {b: suggest_fields(b, glossary) for b in bad}
        hints = "; ".join(
            f"{b!r}: did you mean {', '.join(map(repr, s))}?" if s else f"{b!r}: no close name"
            for b, s in suggestions.items()
        )
        raise WiresharkFieldError(
            f"tshark does not know field(s) {', '.join(map(repr, bad))} ({hints}). "
            "All field names: `tshark -G fields` or https://www.wireshark.org/docs/dfref/",
            bad,
            suggestions,
        )
    if rc == 0:
        return messages
    if rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = str(-rc)
        raise WiresharkError(
            f"tshark crashed (killed by {sig}){': ' + _short(messages) if messages else ''}"
            f"\ncommand: {_quote(cmd)}"
        )
    if header_seen and any(p in text for p in _FILE_READ_ERRORS):
        return messages  # damaged part-way: keep the rows read, like Wireshark does
    if not header_seen and any(
        p in text for p in (*_FILE_READ_ERRORS, "doesn't exist", "couldn't be opened")
    ):
        cls = (
            CaptureOpenError
            if ("doesn't exist" in text or "couldn't be opened" in text or "is a directory" in text)
            else CaptureFormatError
        )
        raise cls(f"tshark cannot read {cmd[cmd.index('-r') + 1]!r}: {_short(messages)}")
    if display_filter and not header_seen and not any(p in text for p in _OPTION_ERRORS):
        raise WiresharkFilterError(f"bad display filter {display_filter!r}: {_short(messages)}")
    raise WiresharkError(
        f"tshark failed (exit status {rc}): {_short(messages) or 'no message'}"
        f"\ncommand: {_quote(cmd)}"
    )


def _quote(cmd: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(c.replace(AGGREGATOR, "\\x1f")) for c in cmd)


# --------------------------------------------------------------------------------------------
# typing: raw strings -> typed columns

_ESCAPES = {"\\b": "\b", "\\f": "\f", "\\n": "\n", "\\r": "\r", "\\t": "\t"}
_ESCAPE_RE = re.compile(r"\\[bfnrt]")
_BYTES_SEPARATORS = str.maketrans("", "", ":-. ")
_BOOLS = {"1": True, "0": False, "True": True, "False": False, "true": True, "false": False}
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_ABS_RE = re.compile(
    r"([A-Z][a-z]{2}) +(\d{1,2}), (-?\d+) (\d{1,2}):(\d{2}):(\d{2})(?:\.(\d+))?(?: (\S+))?$"
)
_DOY_RE = re.compile(r"(-?\d+)/(\d{1,3}) (\d{1,2}):(\d{2}):(\d{2})(?:\.(\d+))?(?: (\S+))?$")
_ISO_RE = re.compile(
    r"(-?\d{4,})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|UTC|[+-]\d{2}:?\d{2})?$"
)
_EPOCH_RE = re.compile(r"(-?)(\d+)(?:\.(\d+))?$")
_NULL_TIMES = frozenset(["NULL", "Not representable", "(null)"])
_NS = 1_000_000_000
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _unescape(v: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group()], v) if "\\" in v else v


def _frac_ns(frac: str | None) -> int:
    return int((frac or "0")[:9].ljust(9, "0"))


def _wall_ns(
    y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None, zone: str | None
) -> int:
    if zone in (None, "UTC", "GMT", "Z", "+00:00", "+0000"):
        secs = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    elif zone and zone[0] in "+-" and zone[1:].replace(":", "").isdigit():
        z = zone[1:].replace(":", "")
        off = (int(z[:2]) * 60 + int(z[2:4])) * 60 * (1 if zone[0] == "+" else -1)
        secs = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) - off
    else:  # a local zone name (pyshark engine without TZ=UTC): this process's zone is tshark's
        secs = int(time.mktime((y, mo, d, h, mi, s, 0, 0, -1)))
    return secs * _NS + _frac_ns(frac)


def parse_abs_time(v: str) -> int | None:
    """Nanoseconds since the epoch of a time as tshark prints it: ``Nov 29, 2026 21:31:02.657599795
    UTC``, ``2026/333 21:31:02.657599795 UTC``, ISO 8601, or decimal epoch seconds (exact).
    None for tshark's "NULL"/"Not representable"; ValueError for anything else."""
    m = _EPOCH_RE.match(v)
    if m:
        ns = int(m.group(2)) * _NS + _frac_ns(m.group(3))
        return -ns if m.group(1) else ns
    m = _ABS_RE.match(v)
    if m and m.group(1) in _MONTHS:
        return _wall_ns(
            int(m.group(3)),
            _MONTHS[m.group(1)],
            int(m.group(2)),
            int(m.group(4)),
            int(m.group(5)),
            int(m.group(6)),
            m.group(7),
            m.group(8),
        )
    m = _DOY_RE.match(v)
    if m:
        y, doy = int(m.group(1)), int(m.group(2))
        base = _wall_ns(
            y, 1, 1, int(m.group(3)), int(m.group(4)), int(m.group(5)), m.group(6), m.group(7)
        )
        return base + (doy - 1) * 86400 * _NS
    m = _ISO_RE.match(v)
    if m:
        return _wall_ns(
            int(m.group(1)),
            int(m.group(2)),
            int(m.group(3)),
            int(m.group(4)),
            int(m.group(5)),
            int(m.group(6)),
            m.group(7),
            m.group(8),
        )
    if v in _NULL_TIMES:
        return None
    raise ValueError(f"not a time: {v!r}")


def _int_parser(base: str) -> Callable[[str], int]:
    if base in ("BASE_HEX", "BASE_HEX_DEC"):
        return _int_hex
    if base == "BASE_OCT":
        return lambda v: int(v, 8)
    if base == "BASE_OUI":
        return lambda v: int(v.replace(":", "").replace("-", ""), 16)
    return _int_any


def _int_hex(v: str) -> int:
    try:
        return int(v, 16)
    except ValueError:
        return _int_any(v)


def _int_any(v: str) -> int:
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return int(v, 0)
    except ValueError:
        head = v.split(" (", 1)[0]  # "0x0a (10)"
        if head == v:
            raise
        return int(head, 0)


def _bool(v: str) -> bool:
    return _BOOLS[v]


def _bytes(v: str) -> str | None:
    if v.startswith("<"):  # <MISSING>, <none>
        return None
    return v.translate(_BYTES_SEPARATORS).lower()


def _value_parser(ft: FieldType, escaped: bool) -> Callable[[str], Any]:
    kind = ft.kind
    if kind == "int":
        return _int_parser(ft.base)
    if kind == "bool":
        return _bool
    if kind in ("float", "reltime"):
        return float
    if kind == "abstime":
        return parse_abs_time
    if kind == "bytes":
        return _bytes
    return _unescape if escaped else str


def _typed_frame(
    ftypes: list[FieldType], columns: list[list[str]], occurrence: str, *, escaped: bool
) -> pd.DataFrame:
    """Columns of raw strings (several values joined by AGGREGATOR) -> the typed DataFrame.
    Each raw column is freed once converted."""
    n = len(columns[0]) if columns else 0
    data: dict[str, Any] = {}
    for i, ft in enumerate(ftypes):
        raw = columns[i]
        data[ft.name] = _typed_column(ft, raw, occurrence, escaped)
        columns[i] = []  # the raw strings can go
    return pd.DataFrame(data, index=pd.RangeIndex(n))


def _typed_column(ft: FieldType, raw: list[str], occurrence: str, escaped: bool) -> Any:
    kind = ft.kind
    if kind == "presence":
        return pd.array([v != "" for v in raw], dtype="boolean")
    parse = _value_parser(ft, escaped)
    as_lists = occurrence == "all" and any(AGGREGATOR in v for v in raw)
    if as_lists:
        try:
            return _list_column(raw, parse, kind)
        except (ValueError, KeyError, OverflowError):
            return _list_column(raw, _unescape if escaped else str, "string")
    try:
        return _scalar_column(raw, parse, kind)
    except (ValueError, KeyError, OverflowError, TypeError):
        return pd.array([(_unescape(v) if escaped else v) or None for v in raw], dtype="string")


def _scalar_column(raw: list[str], parse: Callable[[str], Any], kind: str) -> Any:
    if kind == "float" or kind == "reltime":
        return np.array([parse(v) if v else np.nan for v in raw], dtype=np.float64)
    vals = [parse(v) if v else None for v in raw]
    if kind == "int":
        try:
            return pd.array(vals, dtype="Int64")
        except (OverflowError, TypeError, ValueError):
            return pd.array(vals, dtype="UInt64")  # FT_UINT64 above 2**63-1 (or raises: string)
    if kind == "bool":
        return pd.array(vals, dtype="boolean")
    if kind == "abstime":
        ns = np.array(
            [_I64_MIN if x is None or not _I64_MIN < x <= _I64_MAX else x for x in vals],
            dtype=np.int64,
        )
        return pd.DatetimeIndex(ns.view("M8[ns]")).tz_localize("UTC").array
    return pd.array(vals, dtype="string")


def _timestamp_of(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def conv(v: str) -> Any:
        ns = parse(v)
        return None if ns is None else pd.Timestamp(ns, unit="ns", tz="UTC")

    return conv


def _list_column(raw: list[str], parse: Callable[[str], Any], kind: str) -> np.ndarray[Any, Any]:
    out = np.empty(len(raw), dtype=object)
    conv = _timestamp_of(parse) if kind == "abstime" else parse
    for i, v in enumerate(raw):
        if v:
            out[i] = [conv(x) if x else None for x in v.split(AGGREGATOR)]
        else:
            out[i] = None
    return out


# --------------------------------------------------------------------------------------------
# pyshark engine


def _pyshark_columns(
    tshark: str,
    path: str,
    ftypes: list[FieldType],
    display_filter: str | None,
    keylog: str | None,
    two_pass: bool,
    decode_as: Mapping[str, str] | None,
    max_frames: int | None,
    prefs: Mapping[str, object] | None,
    timeout: float | None,
) -> tuple[list[list[str]], list[str]]:
    """The same raw columns as :func:`_run_fields`, read through ``pyshark.FileCapture`` (PDML).

    pyshark drives tshark from an asyncio event loop; it runs here on a worker thread with its
    own loop, so it also works inside Jupyter (whose loop is already running)."""
    try:
        import pyshark  # noqa: F401  (optional dependency)
    except ImportError as e:
        raise WiresharkError("engine='pyshark' needs pyshark: pip install pyshark") from e
    cols = [f.name for f in ftypes if f.name.startswith("_ws.col.")]
    if cols:
        raise ValueError(
            f"engine='pyshark': column fields {cols} are not in PDML; use engine='tshark'"
        )
    custom: list[str] = []
    if two_pass:
        custom.append("-2")
    if max_frames is not None:
        custom += ["-c", str(max_frames)]
    kwargs = dict(
        display_filter=display_filter or None,
        decode_as=dict(decode_as) if decode_as else None,
        tshark_path=tshark,
        override_prefs=_prefs(keylog, prefs) or None,
        custom_parameters=custom or None,
        keep_packets=False,
    )
    state: dict[str, Any] = {}
    worker = threading.Thread(
        target=_pyshark_worker,
        args=(path, kwargs, ftypes, state),
        name="pcaptools-pyshark",
        daemon=True,
    )
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        loop, cap = state.get("loop"), state.get("capture")
        if loop is not None and cap is not None:
            loop.call_soon_threadsafe(_pyshark_kill, cap)
        worker.join(30)
        raise WiresharkTimeoutError(
            f"pyshark did not finish within timeout={timeout} s (tshark killed)"
        )
    if "error" in state:
        err = state["error"]
        raise WiresharkError(f"pyshark failed: {type(err).__name__}: {err}") from err
    return state["columns"], []


def _pyshark_kill(cap: Any) -> None:
    for proc in list(getattr(cap, "_running_processes", ())):
        with contextlib.suppress(ProcessLookupError, OSError):
            proc.kill()


def _pyshark_worker(
    path: str, kwargs: dict[str, Any], ftypes: list[FieldType], state: dict[str, Any]
) -> None:
    import asyncio

    import pyshark

    class _FileCapture(pyshark.FileCapture):  # type: ignore[misc]
        def __del__(self) -> None:
            pass  # closed below, on its loop; pyshark's __del__ would re-run close on a closed loop

    loop = asyncio.new_event_loop()
    cap = None
    columns: list[list[str]] = [[] for _ in ftypes]

    def on_packet(pkt: Any) -> None:
        layers = [pkt.frame_info, *pkt.layers]
        for col, ft in zip(columns, ftypes, strict=True):
            col.append(_pdml_values(layers, ft))

    try:
        cap = _FileCapture(path, eventloop=loop, **kwargs)
        state["loop"], state["capture"] = loop, cap
        # pyshark's async API, not its iterator: the iterator kills tshark once it has read the
        # last packet, and killing a process that has exited but is not reaped yet makes asyncio
        # report exit status 255, which pyshark reports as a crash. Wait for tshark instead.
        loop.run_until_complete(cap.packets_from_tshark(on_packet, close_tshark=False))
        for proc in list(getattr(cap, "_running_processes", ())):
            loop.run_until_complete(asyncio.wait_for(proc.wait(), 60))
        state["columns"] = columns
    except BaseException as e:  # reported to the calling thread
        state["error"] = e
    finally:
        if cap is not None:
            try:
                loop.run_until_complete(cap.close_async())
            except Exception as close_error:  # pyshark's TSharkCrashException
                state.setdefault("error", close_error)
        loop.close()


def _pdml_values(layers: list[Any], ft: FieldType) -> str:
    """One field's values in one packet, as ``tshark -T fields`` prints them (several joined by
    AGGREGATOR)."""
    name, kind = ft.name, ft.kind
    if ft.ftype == "FT_PROTOCOL":
        return "1" if any(_layer_name(layer) == name for layer in layers) else ""
    values: list[str] = []
    for layer in layers:
        fields = getattr(layer, "_all_fields", None)
        container = fields.get(name) if fields is not None else layer.get_field(name)
        if container is None:
            continue
        for f in container.all_fields:
            if kind == "presence":
                values.append("1")
                continue
            v = f.show if f.show is not None else (f.raw_value or "")
            if kind == "bytes" and not v and f.raw_value:
                v = f.raw_value
            values.append(v)
    return AGGREGATOR.join(values)


def _layer_name(layer: Any) -> str:
    n = str(getattr(layer, "_layer_name", "") or getattr(layer, "layer_name", ""))
    return "frame" if n in ("frame_info", "geninfo") else n
