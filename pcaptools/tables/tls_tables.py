"""TLS tables: ``tls_handshakes`` (one row per TLS session) and ``tls_records`` (one row per record).

:class:`TlsTablesBuilder` takes the events of every :class:`~pcaptools.protocols.tls.TlsObserver`
(other events are ignored, so the pipeline can hand it everything) and builds both tables.
Records are kept in typed column arrays (about 60 bytes per record), sessions as events.
No column ever holds key material.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import pandas as pd

from .._columns import NA32, CodeColumn, Records, categorical, nullable
from ..protocols.tls.events import TlsRecord, TlsSession
from ..protocols.tls.observer import ALERT_NAMES
from ..protocols.tls.records import CONTENT_TYPE_NAMES
from ..protocols.tls.suites import group_name, suite_name, version_name
from .schema import TS_DTYPE, Column, TableSchema

_TCP_STREAM = Column("tcp_stream", "int64", None, "Wireshark tcp.stream of the connection")
_SESSION = Column(
    "session",
    "int64",
    None,
    "TLS session index within the connection: 0, then 1, 2... for each later ClientHello "
    "(renegotiation, or a new handshake on the same connection)",
)

TLS_HANDSHAKES = TableSchema(
    name="tls_handshakes",
    grain="one row per TLS session per TCP connection (a ClientHello and what followed it)",
    key=("tcp_stream", "session"),
    columns=(
        _TCP_STREAM,
        _SESSION,
        Column(
            "client_hello_frame",
            "Int64",
            None,
            "frame that completed the ClientHello; NA when the capture started after it",
        ),
        Column("client_hello_ts", TS_DTYPE, None, "time of client_hello_frame"),
        Column(
            "server_hello_frame",
            "Int64",
            None,
            "frame that completed the ServerHello (not the HelloRetryRequest)",
        ),
        Column("server_hello_ts", TS_DTYPE, None, "time of server_hello_frame"),
        Column("sni", "string", None, "server_name (tls.handshake.extensions_server_name)"),
        Column(
            "alpn_offered",
            "string",
            None,
            "ALPN protocols offered by the client, comma-separated, in order",
        ),
        Column(
            "alpn_selected",
            "string",
            None,
            "ALPN protocol chosen by the server (ServerHello, or EncryptedExtensions in TLS 1.3: needs decryption)",
        ),
        Column(
            "client_version",
            "category",
            None,
            "ClientHello legacy_version (tls.handshake.version of the ClientHello)",
        ),
        Column(
            "offered_versions",
            "string",
            None,
            "supported_versions offered by the client, comma-separated (GREASE removed)",
        ),
        Column(
            "version",
            "category",
            None,
            "negotiated version: TLS 1.3 from supported_versions, else the ServerHello version",
        ),
        Column(
            "cipher_suites_offered",
            "Int64",
            None,
            "number of cipher suites offered (GREASE removed)",
        ),
        Column(
            "cipher_suite",
            "category",
            None,
            "negotiated cipher suite, IANA name (e.g. TLS_AES_128_GCM_SHA256); 0xNNNN if unknown",
        ),
        Column(
            "key_share_group",
            "category",
            None,
            "key exchange group: TLS 1.3 key_share of the ServerHello, TLS 1.2 ECDHE ServerKeyExchange curve",
        ),
        Column("hello_retry_request", "bool", None, "the server answered with a HelloRetryRequest"),
        Column(
            "resumption",
            "category",
            None,
            "session_id, ticket (TLS <= 1.2 abbreviated handshake) or psk (TLS 1.3 pre_shared_key accepted); NA for a full handshake",
        ),
        Column(
            "early_data_offered",
            "bool",
            None,
            "the ClientHello carried the early_data extension (0-RTT)",
        ),
        Column(
            "early_data_accepted",
            "boolean",
            None,
            "EncryptedExtensions carried early_data (needs decryption); False after a HelloRetryRequest or without PSK",
        ),
        Column(
            "new_session_ticket",
            "bool",
            None,
            "the server sent a NewSessionTicket (cleartext in TLS 1.2, decrypted in 1.3)",
        ),
        Column(
            "cert_chain_len",
            "Int64",
            None,
            "certificates in the server's Certificate message (TLS 1.3: needs decryption)",
        ),
        Column("cert_chain_bytes", "Int64", "bytes", "DER bytes of those certificates"),
        Column(
            "client_finished_frame",
            "Int64",
            None,
            "frame of the client's Finished (end of the handshake)",
        ),
        Column("client_finished_ts", TS_DTYPE, None, "time of client_finished_frame"),
        Column(
            "client_finished_inferred",
            "bool",
            None,
            "True when the Finished was not decrypted but taken to be the client's first protected record",
        ),
        Column("handshake_ms", "float64", "ms", "client_finished_ts - client_hello_ts"),
        Column(
            "first_app_data_frame",
            "Int64",
            None,
            "first application data record after the handshake, either direction (early data excluded)",
        ),
        Column("first_app_data_ts", TS_DTYPE, None, "time of first_app_data_frame"),
        Column("time_to_app_data_ms", "float64", "ms", "first_app_data_ts - client_hello_ts"),
        Column(
            "client_handshake_bytes",
            "int64",
            "bytes",
            "record bytes (headers included) the client sent up to and including its Finished",
        ),
        Column(
            "server_handshake_bytes",
            "int64",
            "bytes",
            "record bytes the server sent up to and including its Finished (TLS 1.3 without keys: before the client's Finished)",
        ),
        Column(
            "client_app_bytes",
            "Int64",
            "bytes",
            "decrypted application data bytes sent by the client; NA when not decrypted",
        ),
        Column(
            "server_app_bytes",
            "Int64",
            "bytes",
            "decrypted application data bytes sent by the server; NA when not decrypted",
        ),
        Column(
            "alerts",
            "string",
            None,
            "alerts in order, comma-separated: side:level:description, or side:encrypted when not decrypted",
        ),
        Column(
            "decrypted", "bool", None, "at least one protected record of the session was decrypted"
        ),
        Column(
            "decrypt_status",
            "category",
            None,
            "decrypted, partial (some records failed), failed, no_keys (key log has no secrets for it), no_keylog, unsupported_cipher, not_encrypted, incomplete (hellos not seen)",
        ),
        Column(
            "ja3", "string", None, "JA3 of the ClientHello, as tshark 4.0 tls.handshake.ja3 (MD5)"
        ),
        Column("ja3_full", "string", None, "JA3 string (tls.handshake.ja3_full)"),
        Column("ja3s", "string", None, "JA3S of the ServerHello (tls.handshake.ja3s)"),
        Column("ja3s_full", "string", None, "JA3S string (tls.handshake.ja3s_full)"),
        Column("ja4", "string", None, "JA4 of the ClientHello (FoxIO spec)"),
        Column(
            "ja4_r", "string", None, "JA4_r: sorted raw JA4 (cipher and extension lists unhashed)"
        ),
        Column("ja4s", "string", None, "JA4S of the ServerHello (FoxIO spec)"),
    ),
)

TLS_RECORDS = TableSchema(
    name="tls_records",
    grain="one row per TLS record (frame = the TCP segment that completed it)",
    key=("tcp_stream", "direction", "offset"),
    columns=(
        Column(
            "frame", "int64", None, "frame of the TCP segment that delivered the record's last byte"
        ),
        Column("ts", TS_DTYPE, None, "time of that frame"),
        _TCP_STREAM,
        Column("direction", "category", None, "client_to_server or server_to_client"),
        _SESSION,
        Column("offset", "int64", "bytes", "stream offset of the record header in its direction"),
        Column(
            "content_type",
            "category",
            None,
            "record content type on the wire: handshake, application_data, alert, change_cipher_spec, heartbeat",
        ),
        Column(
            "version",
            "category",
            None,
            "record-layer version (TLS 1.3 records say TLS 1.2; SSL 2.0 for an SSLv2-format ClientHello)",
        ),
        Column("length", "int32", "bytes", "record length (5-byte header excluded)"),
        Column("encrypted", "bool", None, "the record was protected on the wire"),
        Column("decrypted", "bool", None, "it was protected and pcaptools decrypted it"),
        Column(
            "inner_content_type",
            "category",
            None,
            "the real content type: the wire type when cleartext (and in TLS <= 1.2), the decrypted type in TLS 1.3; NA when unknown",
        ),
        Column(
            "plaintext_length",
            "Int32",
            "bytes",
            "content bytes without MAC, padding, tag, inner type (decompressed if TLS compression); NA when not decrypted",
        ),
    ),
)

_REC_FIELDS = (
    ("frame", "q"), ("ts", "q"), ("tcp_stream", "q"), ("session", "q"), ("offset", "q"),
    ("length", "i"), ("plaintext_length", "i"), ("direction", "i"), ("content_type", "i"),
    ("version", "i"), ("inner_content_type", "i"), ("encrypted", "b"), ("decrypted", "b"),
)  # fmt: skip
"""the fields of a tls_records row, widest first (rows are padded to 8 bytes: every field
aligned)"""
_REC_BLANK = bytes(72)
"""a row of zeros (the row's 66 bytes padded to 8)"""

try:  # (True in the compiled build only: see _put_record_row)
    import cython

    _COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is not installed: pure Python
    _COMPILED = False
#: a record's row is written in place by :func:`_put_record_row` (compiled build, on a
#: little-endian machine: the byte order of the rows' format), not packed by struct
_IN_PLACE = _COMPILED and sys.byteorder == "little"
_REC_CODES = ("direction", "content_type", "version", "inner_content_type")


def _ctype_name(t: int) -> str:
    return CONTENT_TYPE_NAMES.get(t, str(t))


def _ms(a: int | None, b: int | None) -> float | None:
    return None if a is None or b is None else (a - b) / 1e6


class TlsTablesBuilder:
    """Collects TLS events (of any number of connections) and builds the two tables.

    Records are packed one struct call each (:class:`~pcaptools._columns.Records`, ~60 bytes
    a record); :meth:`records` hands them over, so it can also be called while reading to
    stream the table out in chunks (:meth:`pending` / :meth:`drain`)."""

    def __init__(self, *, records: bool = True, chunk_rows: int = 65536) -> None:
        self.keep_records = records
        """False: TlsRecord events are ignored (the tls_records table stays empty)"""
        self.sessions: list[TlsSession] = []
        self._rec = Records(_REC_FIELDS, chunk_rows=chunk_rows, align=8)
        self._codes = {n: CodeColumn() for n in _REC_CODES}
        self._names: dict[tuple[str, int], int] = {}
        self._dirs: dict[object, int] = {}
        self._codes_of: dict[tuple[object, int, int, int | None], tuple[int, int, int, int]] = {}
        """(direction, content type, version, inner content type) -> their four codes"""
        self._buf = self._rec.buf
        self._pack = self._rec.pack
        self._limit = self._rec.limit

    def add(self, events: Iterable[object]) -> None:
        """Keep the TlsRecord and TlsSession events of ``events``; ignore the others."""
        buf = self._buf
        pack = self._pack
        codes_of = self._codes_of
        keep = self.keep_records
        for ev in events:
            if type(ev) is TlsRecord:
                if keep:
                    # (a named tuple: its fields in one unpacking, not one attribute lookup
                    # each; the two flags are bools, packed as 0/1 by "b")
                    (ts, frame, dirn, tcp_stream, session, offset, ctype, version, length,
                     encrypted, decrypted, inner, plain) = ev
                    c = codes_of.get((dirn, ctype, version, inner))
                    if c is None:
                        c = codes_of[dirn, ctype, version, inner] = self._new_codes(
                            dirn, ctype, version, inner)
                    if _IN_PLACE:
                        _put_record_row(buf, frame, ts, tcp_stream, session, offset, length,
                                        NA32 if plain is None else plain, c[0], c[1], c[2],
                                        c[3], encrypted, decrypted)
                    else:
                        buf += pack(frame, ts, tcp_stream, session, offset, length,
                                    NA32 if plain is None else plain, *c, encrypted,
                                    decrypted)
            elif type(ev) is TlsSession:
                self.sessions.append(ev)
        if len(buf) >= self._limit:
            self._rec.seal()

    def _new_codes(self, direction: Any, content_type: int, version: int, inner: int | None
                   ) -> tuple[int, int, int, int]:
        """The codes of a record's direction, content type, version and inner content type
        (-1: none), each coded in the order its values first appear."""
        d = self._dirs.get(direction)
        if d is None:
            d = self._dirs[direction] = self._codes["direction"].code(direction.label)
        names = self._names
        ct = names.get(("content_type", content_type))
        if ct is None:
            ct = self._code("content_type", content_type)
        ver = names.get(("version", version))
        if ver is None:
            ver = self._code("version", version)
        if inner is None:
            ic = -1
        else:
            ic = names.get(("inner_content_type", inner), -1)
            if ic < 0:
                ic = self._code("inner_content_type", inner)
        return d, ct, ver, ic

    def _code(self, col: str, value: int) -> int:
        key = (col, value)
        code = self._names.get(key)
        if code is None:
            name = version_name(value) if col == "version" else _ctype_name(value)
            code = self._names[key] = self._codes[col].code(name)
        return code

    def pending(self) -> dict[str, int]:
        """Records held, for :class:`~pcaptools.tables.schema.ChunkPump` (streaming export)."""
        return {"tls_records": len(self._rec)}

    def drain(self, table: str = "tls_records") -> pd.DataFrame:
        """:meth:`records` (the records held, handed over): the streaming hook."""
        return self.records()

    def records(self) -> pd.DataFrame:
        """The ``tls_records`` table of the records added since the last call (all of them
        when called once, at the end); they are handed over (category codes are kept)."""
        rec, c = self._rec, self._codes
        rec.seal()
        cols: dict[str, object] = {
            "frame": rec.column("frame"),
            "ts": rec.column("ts"),
            "tcp_stream": rec.column("tcp_stream"),
            "session": rec.column("session"),
            "offset": rec.column("offset"),
            "length": rec.column("length"),
            "encrypted": rec.column("encrypted").astype(bool),
            "decrypted": rec.column("decrypted").astype(bool),
            "plaintext_length": nullable(rec.column("plaintext_length")),
        }
        for n in _REC_CODES:
            cols[n] = categorical(c[n].codes, rec.column(n))
        return TLS_RECORDS.frame(columns=cols, copy=False)

    def handshakes(self) -> pd.DataFrame:
        """The ``tls_handshakes`` table (sorted by tcp_stream, session)."""
        return tls_handshakes_table(self.sessions)


def tls_handshakes_table(sessions: Iterable[TlsSession]) -> pd.DataFrame:
    """``tls_handshakes`` rows from :class:`TlsSession` events."""
    rows = []
    for s in sorted(sessions, key=lambda s: (s.tcp_stream, s.session)):
        rows.append(
            (
                s.tcp_stream,
                s.session,
                s.client_hello_frame,
                s.client_hello_ts_ns,
                s.server_hello_frame,
                s.server_hello_ts_ns,
                s.sni,
                ",".join(s.alpn_offered) if s.alpn_offered else None,
                s.alpn_selected,
                version_name(s.client_version),
                ",".join(version_name(v) or "" for v in s.offered_versions)
                if s.offered_versions
                else None,
                version_name(s.version),
                s.cipher_suites_offered,
                suite_name(s.cipher_suite) if s.cipher_suite is not None else None,
                group_name(s.key_share_group) if s.key_share_group is not None else None,
                s.hello_retry_request,
                s.resumption,
                s.early_data_offered,
                s.early_data_accepted,
                s.new_session_ticket,
                s.cert_chain_len,
                s.cert_chain_bytes,
                s.client_finished_frame,
                s.client_finished_ts_ns,
                s.client_finished_inferred,
                _ms(s.client_finished_ts_ns, s.client_hello_ts_ns),
                s.first_app_data_frame,
                s.first_app_data_ts_ns,
                _ms(s.first_app_data_ts_ns, s.client_hello_ts_ns),
                s.client_handshake_bytes,
                s.server_handshake_bytes,
                s.client_app_bytes,
                s.server_app_bytes,
                ",".join(s.alerts) if s.alerts else None,
                s.decrypted,
                s.decrypt_status,
                s.ja3,
                s.ja3_full,
                s.ja3s,
                s.ja3s_full,
                s.ja4,
                s.ja4_r,
                s.ja4s,
            )
        )
    return TLS_HANDSHAKES.frame(rows)


def alert_name(description: int) -> str:
    """RFC name of an alert description (``handshake_failure``...)."""
    return ALERT_NAMES.get(description, str(description))


__all__ = [
    "TLS_HANDSHAKES",
    "TLS_RECORDS",
    "TlsTablesBuilder",
    "alert_name",
    "tls_handshakes_table",
]


def _put_record_row(buf: bytearray, frame: int, ts: int, tcp_stream: int, session: int,
                    offset: int, length: int, plaintext_length: int, direction: int,
                    content_type: int, version: int, inner_content_type: int, encrypted: int,
                    decrypted: int) -> int:
    """Append a tls_records row to ``buf`` as ``Records.pack`` would (:data:`_REC_FIELDS` in
    order, little endian; the padding stays zero), written in place through C pointers:
    compiled build only (``_IN_PLACE``; tls_tables.pxd types every argument as its field's C
    type, so a value that does not fit raises OverflowError where struct raises
    struct.error; the two flags are bools, 0 or 1 as "b" packs them). Pure Python packs the
    row with struct; the tables are the same either way (tests/test_accel.py)."""
    n = len(buf)
    buf.extend(_REC_BLANK)
    at = buf  # (a char * to the bytearray's storage in the compiled build)
    q = cython.cast(cython.p_longlong, at + n)  # type: ignore[operator]  # (char * + n)
    q[0] = frame
    q[1] = ts
    q[2] = tcp_stream
    q[3] = session
    q[4] = offset
    i = cython.cast(cython.p_int, q + 5)
    i[0] = length
    i[1] = plaintext_length
    i[2] = direction
    i[3] = content_type
    i[4] = version
    i[5] = inner_content_type
    b = cython.cast(cython.p_schar, i + 6)
    b[0] = encrypted
    b[1] = decrypted
    return 0
