"""TlsObserver: watches both directions of one TCP connection carrying TLS.

Sans-IO: :meth:`TlsObserver.feed` takes in-order bytes of one direction and returns
events (:mod:`.events`), plus the events of the *inner* observer (HTTP/1.1, HTTP/2,
WebSocket...) that it creates once application data starts and feeds with decrypted
bytes. It never raises on wire data: what it cannot parse becomes a Diagnostics row
(``tls.*`` codes) and the direction resynchronises or is marked desynced (its bytes
still counted) while the other direction carries on.

Key epochs, per direction:

- TLS <= 1.2: cleartext until that direction's ChangeCipherSpec, then the key block of
  the master secret logged under the ClientHello random.
- TLS 1.3: early data (client, when offered), handshake traffic keys from the
  ServerHello, application traffic keys after that side's Finished, the next generation
  after each KeyUpdate. A record that fails under the current key is tried under the
  next expected one (early -> handshake, handshake -> application), so a missing
  EndOfEarlyData or an undecryptable Finished does not stop decryption.

Also: DEFLATE record compression (TLS <= 1.2), SSLv2-format ClientHellos, renegotiation
and later ClientHellos (each starts a new *session*, a new ``tls_handshakes`` row). After
a gap the direction resynchronises on the next record boundary and, for AEAD and
explicit-IV CBC suites, finds the record sequence number again by trial (up to
:data:`MAX_SEQ_SEARCH`); the inner observer is told about the lost plaintext with ``gap()``.

Without keys the handshake facts visible in clear are still collected; for TLS 1.3 the
client Finished is then *inferred* (the client's first protected record after the
ServerHello, the second with accepted 0-RTT) and so is the start of application data.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from ...diagnostics import Diagnostics
from ...tcp.chunk import StreamChunk  # (its home: the compiled build cimports its type)
from ...tcp.stream import Direction, StreamCursor, StreamObserver, new_chunk
from . import handshake as hs
from .decrypt import (
    DecryptError,
    RecordDecryptor,
    StreamDecryptor,
    Tls13Decryptor,
    tls12_decryptors,
)
from .events import (
    TlsAlert,
    TlsHandshakeCompleted,
    TlsHandshakeMessage,
    TlsRecord,
    TlsSession,
    new_record,
)
from .fingerprint import ja3_full, ja3s_full, ja4, ja4_r, ja4s, md5_hex
from .keylog import KeyLog, SessionSecrets
from .keyschedule import next_traffic_secret
from .records import (
    ALERT,
    APPLICATION_DATA,
    CHANGE_CIPHER_SPEC,
    DESYNCED,
    HANDSHAKE,
    SSL2_VERSION,
    SYNCED,
    RecordReader,
)
from .suites import CipherSuite, effective_version, is_grease, suite_info

C2S = Direction.CLIENT_TO_SERVER
S2C = Direction.SERVER_TO_CLIENT

ALERT_LEVELS = {1: "warning", 2: "fatal"}
ALERT_NAMES = {
    0: "close_notify",
    1: "end_of_early_data",
    10: "unexpected_message",
    20: "bad_record_mac",
    21: "decryption_failed",
    22: "record_overflow",
    30: "decompression_failure",
    40: "handshake_failure",
    41: "no_certificate",
    42: "bad_certificate",
    43: "unsupported_certificate",
    44: "certificate_revoked",
    45: "certificate_expired",
    46: "certificate_unknown",
    47: "illegal_parameter",
    48: "unknown_ca",
    49: "access_denied",
    50: "decode_error",
    51: "decrypt_error",
    60: "export_restriction",
    70: "protocol_version",
    71: "insufficient_security",
    80: "internal_error",
    86: "inappropriate_fallback",
    90: "user_canceled",
    100: "no_renegotiation",
    109: "missing_extension",
    110: "unsupported_extension",
    111: "certificate_unobtainable",
    112: "unrecognized_name",
    113: "bad_certificate_status_response",
    114: "bad_certificate_hash_value",
    115: "unknown_psk_identity",
    116: "certificate_required",
    120: "no_application_protocol",
    121: "ech_required",
}

MAX_HANDSHAKE_MESSAGE = 1 << 20
"""larger handshake messages are treated as garbage (tls.handshake_parse_error)"""
MAX_PLAINTEXT = 2**14 + 1024
"""a compressed record may not expand beyond this (RFC 5246 6.2.2)"""
MAX_SEQ_SEARCH = 1024
"""after a gap, at most this many record sequence numbers are tried"""

_PROTECT_NONE = 0
_PROTECT_ALL = 1  # TLS <= 1.2 after ChangeCipherSpec: every record
_PROTECT_APPDATA = 2  # TLS 1.3: only records of type 23 are protected

InnerFactory = Callable[[str | None], StreamObserver | None]
"""ALPN (None if none) -> the observer of the decrypted application data (None: not parsed)"""

# TlsRecord is built from its field values in this order (one per record:
# ``new_record(TlsRecord, values)``, one C call); checked at import
_RECORD_FIELDS = (
    "ts_ns", "frame", "direction", "tcp_stream", "session", "offset", "content_type",
    "version", "length", "encrypted", "decrypted", "inner_content_type", "plaintext_length",
)
if TlsRecord._fields != _RECORD_FIELDS:
    raise TypeError("TlsRecord fields changed: update observer.py")  # pragma: no cover

class _Dir:
    """State of one direction, and its cursor (:attr:`next_offset`: the next stream offset
    expected). Holds key material: never printed (no dataclass repr).

    The cursor is a :class:`~pcaptools.tcp.stream.StreamCursor`'s, whose methods it borrows
    (:meth:`align`, :meth:`skip`) rather than inherits: compiled (``observer.pxd``) it is an
    extension type, which cannot subclass a Python class."""

    __slots__ = (
        "app_dec",
        "app_gen",
        "app_secret",
        "closed",
        "dec",
        "decomp",
        "early",
        "hs_buf",
        "hs_dec",
        "next_dec",
        "next_offset",
        "nrec",
        "protect",
        "pt_offset",
        "reader",
        "seq_search",
    )

    def __init__(self) -> None:
        self.next_offset = -1
        self.reader = RecordReader()
        self.protect = _PROTECT_NONE
        self.dec: RecordDecryptor | None = None
        self.next_dec: list[RecordDecryptor] = []
        """decryptors to try, in order, when ``dec`` fails (the next expected epochs)"""
        self.hs_dec: RecordDecryptor | None = None
        self.app_dec: RecordDecryptor | None = None
        self.app_secret: bytes | None = None
        self.app_gen = 0
        self.early = False
        """client, TLS 1.3: protected records are early data until the handshake keys take over"""
        self.hs_buf = bytearray()
        self.decomp: zlib._Decompress | None = None
        """TLS <= 1.2 DEFLATE compression (RFC 3749) state, after ChangeCipherSpec"""
        self.pt_offset = 0
        self.nrec = 0
        """records seen in this direction"""
        self.seq_search = 0
        self.closed = False

    def __repr__(self) -> str:
        return f"<_Dir protect={self.protect} dec={self.dec!r}>"

    def align(self, offset: int, data: bytes) -> tuple[int, bytes]:
        """:meth:`StreamCursor.align <pcaptools.tcp.stream.StreamCursor.align>` on this cursor
        (it reads and moves only :attr:`next_offset`)."""
        return StreamCursor.align(self, offset, data)  # type: ignore[arg-type]

    def skip(self, offset: int, nbytes: int) -> int:
        """:meth:`StreamCursor.skip <pcaptools.tcp.stream.StreamCursor.skip>` on this cursor."""
        return StreamCursor.skip(self, offset, nbytes)  # type: ignore[arg-type]


class _Session:
    """Mutable facts of one TLS session; becomes a :class:`TlsSession` event at the end."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.ch: hs.ClientHello | None = None
        self.ch_frame: int | None = None
        self.ch_ts: int | None = None
        self.ch_dir = C2S
        self.ch_count = 0
        self.sh: hs.ServerHello | None = None
        self.hrr_sh: hs.ServerHello | None = None
        self.sh_frame: int | None = None
        self.sh_ts: int | None = None
        self.hrr = False
        self.version: int | None = None
        self.tls13 = False
        self.suite: CipherSuite | None = None
        self.secrets: SessionSecrets | None = None
        self.alpn_selected: str | None = None
        self.early_accepted: bool | None = None
        self.cert_len: int | None = None
        self.cert_bytes: int | None = None
        self.key_share_group: int | None = None
        self.nst = False
        self.server_cert_seen = False
        self.abbreviated = False
        self.server_ccs = False
        self.client_ccs = False
        self.client_opaque_after_sh = 0
        self.fin_frame: int | None = None
        self.fin_ts: int | None = None
        self.fin_inferred = False
        self.app_frame: int | None = None
        self.app_ts: int | None = None
        self.hs_bytes = [0, 0]
        self.hs_done = [False, False]
        self.app_bytes = [0, 0]
        self.alerts: list[str] = []
        self.protected_records = 0
        self.decrypted_records = 0
        self.failed_records = 0
        self.reason: str | None = None
        self.pending12: tuple[RecordDecryptor, RecordDecryptor] | None = None
        self.emitted = False
        self.first_ts = 0
        self.first_frame = 0


class TlsObserver:
    """One TLS connection (both directions). See the module docstring.

    ``inner_factory(alpn)`` is called once, when the first decrypted application data
    arrives, with the negotiated ALPN (``None`` if none); the observer it returns (or None)
    receives the plaintext of both directions as :class:`StreamChunk` objects whose
    offsets count plaintext bytes, and its events are returned with the TLS events.
    """

    _packing_ = "secret"
    """its state holds traffic keys: packed while idle, never written to disk
    (:mod:`pcaptools.tcp.packing`)"""

    def __init__(
        self,
        *,
        tcp_stream: int,
        diag: Diagnostics,
        keylog: KeyLog | None,
        inner_factory: InnerFactory | None = None,
    ) -> None:
        self.tcp_stream = tcp_stream
        self._diag = diag
        self._keylog = keylog
        """consulted when a session needs keys (so secrets added later, e.g. from a pcapng DSB,
        count)"""
        self._inner_factory = inner_factory
        self._inner: StreamObserver | None = None
        self._inner_started = False
        self._dirs = (_Dir(), _Dir())
        self._sessions: list[_Session] = []
        self._broken = False

    def __repr__(self) -> str:
        return f"<TlsObserver tcp_stream={self.tcp_stream} sessions={len(self._sessions)}>"

    # ------------------------------------------------------------------ public API

    @property
    def wants_bytes(self) -> bool:
        """Always True: every byte of a TLS connection is counted (records, handshake bytes,
        bytes skipped while desynchronised), even once nothing above TLS is parsed."""
        return True

    @property
    def done(self) -> bool:
        """both directions closed, every session's :class:`TlsSession` emitted and the inner
        observer (if any) done: ``finish`` returns nothing (the stream contract's ``done``;
        records beyond a FIN would still be parsed)"""
        inner = self._inner
        return (all(d.closed for d in self._dirs) and all(s.emitted for s in self._sessions)
                and (inner is None or bool(getattr(inner, "done", False))))

    @property
    def inner(self) -> StreamObserver | None:
        """the observer of the decrypted application data, once created"""
        return self._inner

    def bytes_skipped(self, direction: Direction) -> int:
        """bytes of ``direction`` not parsed as records (desynchronised or resynchronising)"""
        return self._dirs[direction].reader.skipped

    def feed(self, chunk: StreamChunk) -> list[object]:
        """Records completed by ``chunk`` and everything they caused."""
        d = self._dirs[chunk.direction]
        if chunk.offset != d.next_offset:
            return self._realign(d, chunk)
        reader = d.reader
        data = chunk.data
        n = len(data)
        d.next_offset += n
        need = reader.need
        if need > n and type(data) is bytes and not self._broken:
            # the middle of a record: nothing completes (RecordReader.take, inlined)
            reader.need = need - n
            reader.bytes_seen += n
            reader.parts.append(data)
            return []
        out: list[object] = []
        if self._broken:
            reader.bytes_seen += len(data)
            reader.skipped += len(data)
            return out
        records, notes = reader.feed(data, chunk.offset)
        if not records and not notes:
            return out
        for code, detail in notes:
            if code == "tls.resynchronized":
                self._add(code, detail, chunk.ts_ns, chunk.frame, chunk.direction)
        try:
            for off, ctype, version, frag in records:
                self._record(
                    d, chunk.direction, off, ctype, version, frag, chunk.ts_ns, chunk.frame, out
                )
        except Exception as exc:
            self._internal_error(exc, chunk.direction, chunk.ts_ns, chunk.frame)
        for code, detail in notes:
            if code != "tls.resynchronized":
                self._add(code, detail, chunk.ts_ns, chunk.frame, chunk.direction)
        return out

    def _realign(self, d: _Dir, chunk: StreamChunk) -> list[object]:
        """``feed`` of a chunk that does not start where this direction's last one ended (its
        first chunk, or bytes missing or overlapping before it): a gap for the bytes missing,
        then the bytes not seen yet."""
        hole, data = d.align(chunk.offset, chunk.data)
        out: list[object] = []
        if hole:
            out += self.gap(chunk.direction, chunk.offset - hole, hole, chunk.ts_ns, chunk.frame)
        if data:
            if data is not chunk.data:
                chunk = new_chunk(
                    chunk.direction, data, chunk.ts_ns, chunk.frame, d.next_offset
                )
            out += self.feed(chunk)
        return out

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        """``nbytes`` at ``offset`` were never captured: resynchronise this direction."""
        out: list[object] = []
        d = self._dirs[direction]
        d.skip(offset, nbytes)
        d.reader.gap(offset, nbytes)
        d.hs_buf.clear()
        d.seq_search = min(MAX_SEQ_SEARCH, nbytes // 21 + 2)
        if self._inner is not None:
            out += self._inner.gap(direction, d.pt_offset, nbytes, ts_ns, frame)
            d.pt_offset += nbytes
        return out

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        """``direction`` ended (``at_eof``: the capture ended, not the connection). Once both
        have, the last session's :class:`TlsSession` is emitted."""
        out: list[object] = []
        d = self._dirs[direction]
        if d.closed:
            return out
        d.closed = True
        r = d.reader
        if r.mode != SYNCED and r.pending:  # bytes held while looking for a record boundary
            r.skipped += r.pending
            r.buf.clear()
        if r.records == 0 and r.bytes_seen and r.mode not in (SYNCED, DESYNCED):
            self._add(
                "tls.resync_failed",
                f"no TLS record found in the {r.bytes_seen} bytes of this direction (not TLS?)",
                ts_ns,
                frame,
                direction,
            )
        elif d.reader.pending and d.reader.mode == SYNCED:
            self._add(
                "tls.truncated_record",
                f"the stream ended {d.reader.pending} bytes into an incomplete record",
                ts_ns,
                frame,
                direction,
            )
        inner = self._inner
        if inner is not None:
            out += inner.close(direction, ts_ns, frame, at_eof=at_eof)
        if all(x.closed for x in self._dirs):
            out += self._summaries()
        return out

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        """End of capture: the inner observer's last events, then :class:`TlsSession` events of
        the sessions not yet reported (idempotent)."""
        out: list[object] = []
        if self._inner is not None:
            out += self._inner.finish(ts_ns, frame)
        out += self._summaries()
        return out

    def _summaries(self) -> list[object]:
        """:class:`TlsSession` events of the sessions not yet reported (once both directions
        closed, and at :meth:`finish`)."""
        return [self._summary(s) for s in self._sessions if not s.emitted]

    # ------------------------------------------------------------------ helpers

    def _add(
        self,
        code: str,
        detail: str,
        ts_ns: int | None,
        frame: int | None,
        direction: Direction | None,
    ) -> None:
        self._diag.add(
            code,
            detail,
            ts_ns=ts_ns,
            frame=frame,
            tcp_stream=self.tcp_stream,
            direction=direction.label if direction is not None else None,
        )

    def _internal_error(self, exc: Exception, direction: Direction, ts_ns: int, frame: int) -> None:
        self._broken = True
        self._add(
            "tls.internal_error",
            f"{type(exc).__name__} in the TLS observer; connection no longer parsed",
            ts_ns,
            frame,
            direction,
        )

    def _session(self, ts_ns: int, frame: int) -> _Session:
        if not self._sessions:
            s = _Session(0)
            s.first_ts, s.first_frame = ts_ns, frame
            self._sessions.append(s)
        return self._sessions[-1]

    # ------------------------------------------------------------------ records

    def _record(
        self,
        d: _Dir,
        dirn: Direction,
        off: int,
        ctype: int,
        version: int,
        frag: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        s = self._sessions[-1] if self._sessions else self._session(ts, frame)
        length = len(frag)
        d.nrec += 1
        if version == SSL2_VERSION:
            self._sslv2_hello(s, d, dirn, off, frag, ts, frame, out)
            return
        if d.nrec == 1 and ctype in (ALERT, APPLICATION_DATA) and s.ch is None and s.sh is None:
            # the first record of this direction is not a handshake: the capture started after the
            # handshake, and everything but change_cipher_spec is protected with unknown keys
            d.protect = _PROTECT_ALL
        protected = d.protect == _PROTECT_ALL or (
            d.protect == _PROTECT_APPDATA and ctype == APPLICATION_DATA
        )
        inner_type: int | None = ctype
        pt: bytes | None = frag
        decrypted = False
        early_unknown = False
        early = False
        if protected:
            s.protected_records += 1
            pt = None
            inner_type = ctype if d.protect == _PROTECT_ALL else None
            dec = d.dec
            if dec is not None or d.next_dec:
                if dec is not None and not d.next_dec and not d.seq_search:
                    # the usual case, what _decrypt does with one candidate and one try
                    try:
                        res = dec.decrypt(ctype, version, frag)
                    except DecryptError:
                        res = None
                else:
                    res = self._decrypt(d, ctype, version, frag)
                lost = False
                if res is not None and d.decomp is not None:
                    res = self._decompress(d, res, dirn, off, ts, frame)
                    lost = res is None  # already reported; the direction stays undecoded
                if res is not None:
                    inner_type, pt = res
                    decrypted = True
                    s.decrypted_records += 1
                    early = d.early
                elif lost:
                    s.failed_records += 1
                elif d.dec is None:
                    early_unknown = True  # early data without an early secret: not a failure
                else:
                    s.failed_records += 1
                    self._add(
                        "tls.decrypt_failed",
                        f"{_type_name(ctype)} record of {length} bytes at stream offset {off} "
                        f"(session {s.index}, record {d.dec.seq})",
                        ts,
                        frame,
                        dirn,
                    )
                    d.dec.skip()
                    if self._inner is not None and (inner_type in (None, APPLICATION_DATA)):
                        n = d.dec.plaintext_bound(length)
                        out += self._inner.gap(dirn, d.pt_offset, n, ts, frame)
                        d.pt_offset += n
        out.append(new_record(TlsRecord, (
            ts, frame, dirn, self.tcp_stream, s.index, off, ctype, version, length,
            protected, decrypted, inner_type, len(pt) if pt is not None else None,
        )))
        # handshake byte accounting (before the dispatch: the Finished record itself counts)
        if early_unknown or (protected and d.early and not decrypted and s.sh is None):
            early = True
        counted = not s.hs_done[dirn] and inner_type != APPLICATION_DATA and not early
        if counted:
            s.hs_bytes[dirn] += 5 + length
        if inner_type is None:
            self._tls13_opaque(s, d, dirn, ts, frame, length, counted, out)
            return
        if inner_type == CHANGE_CIPHER_SPEC:
            self._ccs(s, d, dirn)
        elif inner_type == ALERT:
            self._alert(s, dirn, pt, protected, ts, frame, out)
        elif inner_type == HANDSHAKE:
            if pt is not None:
                self._handshake_data(s, d, dirn, pt, ts, frame, protected, out)
            elif protected and not s.hs_done[dirn]:
                # TLS <= 1.2, not decrypted: the first protected handshake record is Finished
                self._finished(s, dirn, ts, frame, inferred=True, out=out)
        elif inner_type == APPLICATION_DATA:
            self._app_data(s, d, dirn, pt, early, ts, frame, out)

    def _decrypt(self, d: _Dir, ctype: int, version: int, frag: bytes) -> tuple[int, bytes] | None:
        cands = ([d.dec] if d.dec is not None else []) + d.next_dec
        for i, dec in enumerate(cands):
            tries = 1 if (i or isinstance(dec, StreamDecryptor)) else d.seq_search + 1
            base = dec.seq
            for k in range(tries):
                dec.seq = base + k
                try:
                    res = dec.decrypt(ctype, version, frag)
                except DecryptError:
                    continue
                if i or d.dec is None:
                    j = i - (1 if d.dec is not None else 0)
                    d.dec = dec
                    d.next_dec = d.next_dec[j + 1 :]
                    if dec is d.hs_dec or dec is d.app_dec:
                        d.early = False
                d.seq_search = 0
                return res
            dec.seq = base
        return None

    def _tls13_opaque(
        self,
        s: _Session,
        d: _Dir,
        dirn: Direction,
        ts: int,
        frame: int,
        length: int,
        counted: bool,
        out: list[object],
    ) -> None:
        """A TLS 1.3 protected record that was not decrypted: infer what the handshake did."""
        if s.sh is None:
            return  # early data before the ServerHello
        if dirn == C2S:
            s.client_opaque_after_sh += 1
            if not s.hs_done[C2S]:
                # with accepted 0-RTT (early data offered, PSK taken) EndOfEarlyData comes first
                skip = 1 if (s.ch is not None and s.ch.early_data and s.sh.psk_selected) else 0
                if s.client_opaque_after_sh > skip:
                    self._finished(s, C2S, ts, frame, inferred=True, out=out)
            elif not counted:
                self._first_app(s, ts, frame)
        elif s.hs_done[C2S]:
            self._first_app(s, ts, frame)

    def _ccs(self, s: _Session, d: _Dir, dirn: Direction) -> None:
        if s.sh is None or s.tls13 or d.protect == _PROTECT_APPDATA:
            return  # TLS 1.3 middlebox compatibility CCS, or before any ServerHello
        if dirn == S2C:
            s.server_ccs = True
            if not s.server_cert_seen and not s.hs_done[C2S] and not s.client_ccs:
                s.abbreviated = True
        else:
            s.client_ccs = True
        d.protect = _PROTECT_ALL
        d.dec = s.pending12[dirn] if s.pending12 is not None else None
        d.next_dec = []
        d.decomp = None
        if d.dec is not None:
            d.dec.seq = 0
            if s.sh.compression_method == 1:
                d.decomp = zlib.decompressobj()

    def _alert(
        self,
        s: _Session,
        dirn: Direction,
        pt: bytes | None,
        protected: bool,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        side = "client" if dirn == C2S else "server"
        if pt is None:
            s.alerts.append(f"{side}:encrypted")
            out.append(
                TlsAlert(
                    ts_ns=ts,
                    frame=frame,
                    direction=dirn,
                    tcp_stream=self.tcp_stream,
                    session=s.index,
                    level=None,
                    description=None,
                    encrypted=True,
                )
            )
            return
        for i in range(0, len(pt) - 1, 2):
            level, desc = pt[i], pt[i + 1]
            s.alerts.append(
                f"{side}:{ALERT_LEVELS.get(level, str(level))}:{ALERT_NAMES.get(desc, str(desc))}"
            )
            out.append(
                TlsAlert(
                    ts_ns=ts,
                    frame=frame,
                    direction=dirn,
                    tcp_stream=self.tcp_stream,
                    session=s.index,
                    level=level,
                    description=desc,
                    encrypted=protected,
                )
            )

    def _app_data(
        self,
        s: _Session,
        d: _Dir,
        dirn: Direction,
        pt: bytes | None,
        early: bool,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        if not early and s.app_frame is None:
            # (_first_app, inlined) early data is not the start of the application data proper
            s.app_frame, s.app_ts = frame, ts
        if pt is None or d.protect == _PROTECT_NONE:
            return  # cleartext application data (mid-stream start) or not decrypted
        s.app_bytes[dirn] += len(pt)
        if not self._inner_started:
            self._inner_started = True
            if self._inner_factory is not None:
                self._inner = self._inner_factory(self._alpn())
        if self._inner is not None and pt:
            out += self._inner.feed(new_chunk(dirn, pt, ts, frame, d.pt_offset))
        d.pt_offset += len(pt)

    def _alpn(self) -> str | None:
        for s in reversed(self._sessions):
            if s.alpn_selected is not None:
                return s.alpn_selected
        return None

    def _first_app(self, s: _Session, ts: int, frame: int) -> None:
        if s.app_frame is None:
            s.app_frame, s.app_ts = frame, ts

    # ------------------------------------------------------------------ handshake

    def _handshake_data(
        self,
        s: _Session,
        d: _Dir,
        dirn: Direction,
        pt: bytes,
        ts: int,
        frame: int,
        encrypted: bool,
        out: list[object],
    ) -> None:
        buf = d.hs_buf
        buf += pt
        pos = 0
        while len(buf) - pos >= 4:
            mtype = buf[pos]
            mlen = int.from_bytes(buf[pos + 1 : pos + 4], "big")
            if mlen > MAX_HANDSHAKE_MESSAGE:
                self._add(
                    "tls.handshake_parse_error",
                    f"handshake message type {mtype} announces {mlen} bytes; "
                    "handshake data dropped",
                    ts,
                    frame,
                    dirn,
                )
                buf.clear()
                return
            if len(buf) - pos - 4 < mlen:
                break
            body = bytes(buf[pos + 4 : pos + 4 + mlen])
            pos += 4 + mlen
            s = self._sessions[-1] if self._sessions else s
            if mtype == hs.CLIENT_HELLO and dirn == C2S:
                s = self._client_hello_session(s, ts, frame, out)
            out.append(
                TlsHandshakeMessage(
                    ts_ns=ts,
                    frame=frame,
                    direction=dirn,
                    tcp_stream=self.tcp_stream,
                    session=s.index,
                    msg_type=mtype,
                    length=mlen,
                    encrypted=encrypted,
                )
            )
            try:
                self._message(s, d, dirn, mtype, body, ts, frame, out)
            except hs.HandshakeParseError as exc:
                self._add(
                    "tls.handshake_parse_error",
                    f"{hs.HANDSHAKE_NAMES.get(mtype, f'type {mtype}')}: {exc}",
                    ts,
                    frame,
                    dirn,
                )
        if pos:
            del buf[:pos]

    def _client_hello_session(
        self, s: _Session, ts: int, frame: int, out: list[object]
    ) -> _Session:
        """The session a ClientHello belongs to (a new one unless it answers a
        HelloRetryRequest)."""
        if s.ch is None and s.sh is None:
            return s
        if s.hrr and s.sh is None and s.ch_count == 1:
            return s
        if not s.emitted:
            out.append(self._summary(s))
        ns = _Session(len(self._sessions))
        ns.first_ts, ns.first_frame = ts, frame
        self._sessions.append(ns)
        return ns

    def _message(
        self,
        s: _Session,
        d: _Dir,
        dirn: Direction,
        mtype: int,
        body: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        if mtype == hs.CLIENT_HELLO and dirn == C2S:
            self._on_client_hello(s, d, hs.parse_client_hello(body), ts, frame)
        elif mtype == hs.SERVER_HELLO and dirn == S2C:
            self._on_server_hello(s, hs.parse_server_hello(body), ts, frame)
        elif mtype == hs.HELLO_RETRY_REQUEST and dirn == S2C:
            self._on_server_hello(s, hs.parse_hello_retry_request_draft(body), ts, frame)
        elif mtype == hs.ENCRYPTED_EXTENSIONS and dirn == S2C:
            ee = hs.parse_encrypted_extensions(body)
            if ee.alpn is not None:
                s.alpn_selected = ee.alpn.decode("ascii", errors="replace")
            s.early_accepted = ee.early_data
        elif mtype == hs.CERTIFICATE and dirn == S2C:
            s.server_cert_seen = True
            chain = hs.parse_certificate(body, s.tls13)
            s.cert_len, s.cert_bytes = chain.count, chain.der_bytes
        elif mtype == hs.COMPRESSED_CERTIFICATE and dirn == S2C:
            s.server_cert_seen = True
            chain = hs.parse_compressed_certificate(body)
            s.cert_len, s.cert_bytes = chain.count, chain.der_bytes
        elif mtype == hs.SERVER_KEY_EXCHANGE and dirn == S2C:
            s.server_cert_seen = True
            if s.suite is not None and "_ECDHE_" in s.suite.name:
                g = hs.parse_server_key_exchange_group(body)
                if g is not None:
                    s.key_share_group = g
        elif mtype == hs.SERVER_HELLO_DONE:
            s.server_cert_seen = True
        elif mtype == hs.NEW_SESSION_TICKET and dirn == S2C:
            s.nst = True
        elif mtype == hs.FINISHED:
            self._finished(s, dirn, ts, frame, inferred=False, out=out)
        elif mtype == hs.KEY_UPDATE and s.tls13:
            self._key_update(s, d)
        elif mtype == hs.END_OF_EARLY_DATA and dirn == C2S:
            d.early = False
            if d.hs_dec is not None:
                d.dec, d.next_dec = d.hs_dec, [x for x in (d.app_dec,) if x is not None]

    def _sslv2_hello(
        self,
        s: _Session,
        d: _Dir,
        dirn: Direction,
        off: int,
        msg: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """The SSLv2-format ClientHello that old clients send first."""
        out.append(
            TlsRecord(
                ts_ns=ts,
                frame=frame,
                direction=dirn,
                tcp_stream=self.tcp_stream,
                session=s.index,
                offset=off,
                content_type=HANDSHAKE,
                version=SSL2_VERSION,
                length=len(msg),
                encrypted=False,
                decrypted=False,
                inner_content_type=HANDSHAKE,
                plaintext_length=len(msg),
            )
        )
        s.hs_bytes[dirn] += 2 + len(msg)
        if dirn != C2S:
            return
        s = self._client_hello_session(s, ts, frame, out)
        out.append(
            TlsHandshakeMessage(
                ts_ns=ts,
                frame=frame,
                direction=dirn,
                tcp_stream=self.tcp_stream,
                session=s.index,
                msg_type=hs.CLIENT_HELLO,
                length=len(msg) - 1,
                encrypted=False,
            )
        )
        try:
            self._on_client_hello(s, d, hs.parse_sslv2_client_hello(msg), ts, frame)
        except hs.HandshakeParseError as exc:
            self._add(
                "tls.handshake_parse_error", f"client_hello (SSLv2 format): {exc}", ts, frame, dirn
            )

    def _decompress(
        self, d: _Dir, res: tuple[int, bytes], dirn: Direction, off: int, ts: int, frame: int
    ) -> tuple[int, bytes] | None:
        assert d.decomp is not None
        try:
            pt = d.decomp.decompress(res[1], MAX_PLAINTEXT + 1)
        except zlib.error as exc:
            pt = None
            why = f"zlib: {exc}"
        else:
            why = "record expands beyond 2^14 + 1024 bytes"
        if pt is None or d.decomp.unconsumed_tail or len(pt) > MAX_PLAINTEXT:
            self._add(
                "tls.decompress_failed",
                f"record at stream offset {off}: {why}; compression state lost",
                ts,
                frame,
                dirn,
            )
            d.decomp = None
            d.dec = None
            return None
        return res[0], pt

    def _on_client_hello(
        self, s: _Session, d: _Dir, ch: hs.ClientHello, ts: int, frame: int
    ) -> None:
        s.ch_count += 1
        if s.ch is None:
            s.ch, s.ch_frame, s.ch_ts = ch, frame, ts
            self._lookup(s)
        if ch.early_data and s.ch_count == 1:
            d.protect = _PROTECT_APPDATA
            d.early = True
            d.dec = None
            d.next_dec = []
            early = s.secrets.client_early if s.secrets is not None else None
            if early is not None:
                for code in ch.cipher_suites:
                    suite = suite_info(code)
                    if suite.tls13 and suite.decryptable:
                        d.next_dec.append(Tls13Decryptor(suite, early))

    def _on_server_hello(self, s: _Session, sh: hs.ServerHello, ts: int, frame: int) -> None:
        client, server = self._dirs
        if sh.is_hrr:
            s.hrr = True
            s.hrr_sh = sh
            client.protect, client.dec, client.next_dec = _PROTECT_NONE, None, []
            client.early = False
            return
        if s.sh is not None:
            return
        s.sh, s.sh_frame, s.sh_ts = sh, frame, ts
        s.version = sh.version
        s.tls13 = effective_version(sh.version) == 0x0304
        s.suite = suite_info(sh.cipher_suite)
        if sh.key_share_group is not None:
            s.key_share_group = sh.key_share_group
        if sh.alpn is not None:
            s.alpn_selected = sh.alpn.decode("ascii", errors="replace")
        if s.tls13:
            server.protect = _PROTECT_APPDATA
            client.protect = _PROTECT_APPDATA
            if not self._keys_available(s, ts, frame):
                server.dec, server.next_dec = None, []
                if client.dec is None:
                    client.next_dec = []
                return
            self._setup_tls13(s, client, server)
        else:
            if not self._keys_available(s, ts, frame):
                return
            assert (
                s.ch is not None and s.secrets is not None and s.secrets.master_secret is not None
            )
            s.pending12 = tls12_decryptors(
                s.suite,
                effective_version(sh.version),
                s.secrets.master_secret,
                s.ch.random,
                sh.random,
                etm=sh.encrypt_then_mac and s.suite.mode == "cbc",
            )

    def _lookup(self, s: _Session) -> None:
        if s.secrets is None and s.ch is not None and self._keylog is not None:
            s.secrets = self._keylog.lookup(s.ch.random)

    def _keys_available(self, s: _Session, ts: int, frame: int) -> bool:
        """Whether this session can be decrypted; records why not (status + anomaly)."""
        assert s.suite is not None
        if self._keylog is None or not (self._keylog or self._keylog.sources):
            # no key log at all; one that was given but holds no secret is "no_keys" below
            s.reason = "no_keylog"
            return False
        if s.ch is None:
            s.reason = "incomplete"
            return False
        self._lookup(s)
        sec = s.secrets
        ok = sec is not None and (sec.has_tls13 if s.tls13 else sec.master_secret is not None)
        if not ok:
            s.reason = "no_keys"
            self._add(
                "tls.no_key_for_session",
                f"no {'TLS 1.3 secrets' if s.tls13 else 'CLIENT_RANDOM'} for client random "
                f"{s.ch.random[:8].hex()}... (session {s.index})",
                ts,
                frame,
                S2C,
            )
            return False
        # (a TLS 1.3 session that names a TLS <= 1.2 suite has no TLS 1.3 key schedule)
        if not s.suite.decryptable or (s.tls13 and (s.version != 0x0304 or not s.suite.tls13)):
            s.reason = "unsupported_cipher"
            what = s.suite.name if s.suite.decryptable else f"{s.suite.name} (0x{s.suite.code:04x})"
            self._add(
                "tls.unsupported_cipher",
                f"cannot decrypt {what}"
                + (" (TLS 1.3 draft)" if s.tls13 and s.version != 0x0304 else ""),
                ts,
                frame,
                S2C,
            )
            return False
        return True

    def _setup_tls13(self, s: _Session, client: _Dir, server: _Dir) -> None:
        sec, suite = s.secrets, s.suite
        assert sec is not None and suite is not None
        for dirn, d, hs_secret, traffic in (
            (C2S, client, sec.client_handshake, sec.client_traffic),
            (S2C, server, sec.server_handshake, sec.server_traffic),
        ):
            d.hs_dec = Tls13Decryptor(suite, hs_secret) if hs_secret is not None else None
            d.app_secret = traffic.get(0)
            d.app_gen = 0
            d.app_dec = Tls13Decryptor(suite, d.app_secret) if d.app_secret is not None else None
            nxt: list[RecordDecryptor] = [x for x in (d.hs_dec, d.app_dec) if x is not None]
            if dirn == C2S and s.ch is not None and s.ch.early_data:
                # early data first (decryptable or not), then handshake, then application keys
                d.next_dec = d.next_dec + nxt if d.dec is None else nxt
            else:
                d.dec, d.next_dec = (nxt[0], nxt[1:]) if nxt else (None, [])

    def _finished(
        self,
        s: _Session,
        dirn: Direction,
        ts: int,
        frame: int,
        *,
        inferred: bool,
        out: list[object],
    ) -> None:
        d = self._dirs[dirn]
        if s.tls13 and not inferred:
            if d.app_dec is not None:
                d.dec, d.next_dec = d.app_dec, []
            else:
                d.dec, d.next_dec = None, []
        if s.hs_done[dirn]:
            return
        s.hs_done[dirn] = True
        if dirn == C2S:
            if s.tls13:
                s.hs_done[S2C] = True
            s.fin_frame, s.fin_ts, s.fin_inferred = frame, ts, inferred
            out.append(
                TlsHandshakeCompleted(
                    ts_ns=ts,
                    frame=frame,
                    direction=dirn,
                    tcp_stream=self.tcp_stream,
                    session=s.index,
                    version=s.version,
                    cipher_suite=s.sh.cipher_suite if s.sh is not None else None,
                    alpn=s.alpn_selected,
                    sni=s.ch.sni if s.ch is not None else None,
                    resumed=self._resumption(s) is not None,
                    inferred=inferred,
                )
            )

    def _key_update(self, s: _Session, d: _Dir) -> None:
        sec = s.secrets
        if d.app_secret is None or s.suite is None or not s.suite.decryptable:
            d.dec = None
            return
        traffic = None
        if sec is not None:
            traffic = (sec.client_traffic if d is self._dirs[C2S] else sec.server_traffic).get(
                d.app_gen + 1
            )
        d.app_secret = traffic or next_traffic_secret(s.suite.prf_hash, d.app_secret)
        d.app_gen += 1
        d.app_dec = Tls13Decryptor(s.suite, d.app_secret)
        d.dec, d.next_dec = d.app_dec, []

    # ------------------------------------------------------------------ summary

    @staticmethod
    def _resumption(s: _Session) -> str | None:
        if s.sh is None:
            return None
        if s.tls13:
            return "psk" if s.sh.psk_selected else None
        ch = s.ch
        echoed = ch is not None and bool(ch.session_id) and ch.session_id == s.sh.session_id
        if s.abbreviated or (echoed and not s.server_cert_seen):
            if ch is not None and ch.session_ticket_len:
                return "ticket"
            return "session_id"
        return None

    @staticmethod
    def _early_accepted(s: _Session) -> bool | None:
        if s.ch is None or not s.ch.early_data:
            return None
        if s.early_accepted is not None:
            return s.early_accepted  # EncryptedExtensions (decrypted) says
        if s.hrr or (s.sh is not None and s.tls13 and not s.sh.psk_selected):
            return False  # early data needs the PSK to be accepted, and no HelloRetryRequest
        return None

    def _summary(self, s: _Session) -> TlsSession:
        s.emitted = True
        ch, sh = s.ch, s.sh
        if s.decrypted_records:
            status = "partial" if s.failed_records else "decrypted"
        elif sh is None:
            status = "incomplete"
        elif s.reason is not None:
            status = s.reason
        elif s.failed_records:
            status = "failed"
        elif not s.protected_records:
            status = "not_encrypted"
        else:
            status = "incomplete"
        decrypted = s.decrypted_records > 0
        j3, j3_md5, j4, j4r = _client_fingerprints(ch) if ch is not None else (None,) * 4
        j3s, j3s_md5, j4s = _server_fingerprints(sh) if sh is not None else (None,) * 3
        return TlsSession(
            ts_ns=s.ch_ts if s.ch_ts is not None else s.first_ts,
            frame=s.ch_frame if s.ch_frame is not None else s.first_frame,
            direction=s.ch_dir,
            tcp_stream=self.tcp_stream,
            session=s.index,
            client_hello_frame=s.ch_frame,
            client_hello_ts_ns=s.ch_ts,
            server_hello_frame=s.sh_frame,
            server_hello_ts_ns=s.sh_ts,
            sni=ch.sni if ch is not None else None,
            alpn_offered=tuple(p.decode("ascii", errors="replace") for p in ch.alpn)
            if ch is not None
            else (),
            alpn_selected=s.alpn_selected,
            client_version=ch.legacy_version if ch is not None else None,
            offered_versions=tuple(v for v in ch.supported_versions if not is_grease(v))
            if ch is not None
            else (),
            version=s.version,
            cipher_suites_offered=(
                sum(1 for c in ch.cipher_suites if not is_grease(c)) if ch is not None else None
            ),
            cipher_suite=sh.cipher_suite if sh is not None else None,
            key_share_group=s.key_share_group,
            hello_retry_request=s.hrr,
            resumption=self._resumption(s),
            early_data_offered=bool(ch is not None and ch.early_data),
            early_data_accepted=self._early_accepted(s),
            new_session_ticket=s.nst,
            cert_chain_len=s.cert_len,
            cert_chain_bytes=s.cert_bytes,
            client_finished_frame=s.fin_frame,
            client_finished_ts_ns=s.fin_ts,
            client_finished_inferred=s.fin_inferred,
            first_app_data_frame=s.app_frame,
            first_app_data_ts_ns=s.app_ts,
            client_handshake_bytes=s.hs_bytes[0],
            server_handshake_bytes=s.hs_bytes[1],
            client_app_bytes=s.app_bytes[0] if decrypted else None,
            server_app_bytes=s.app_bytes[1] if decrypted else None,
            alerts=tuple(s.alerts),
            decrypted=decrypted,
            decrypt_status=status,
            ja3=j3_md5,
            ja3_full=j3,
            ja3s=j3s_md5,
            ja3s_full=j3s,
            ja4=j4,
            ja4_r=j4r,
            ja4s=j4s,
        )


_FINGERPRINT_CACHE_SIZE = 4096
_client_fp: dict[tuple[object, ...], tuple[str | None, str | None, str | None, str | None]] = {}
_server_fp: dict[tuple[object, ...], tuple[str, str, str]] = {}


def _client_fingerprints(
    ch: hs.ClientHello,
) -> tuple[str | None, str | None, str | None, str | None]:
    """(ja3_full, ja3, ja4, ja4_r) of a ClientHello, remembered by the fields they depend on
    (a client sends the same ones in every connection; the random and key shares differ)."""
    key = (
        ch.sslv2, ch.legacy_version, ch.cipher_suites, ch.extensions, ch.supported_groups,
        ch.ec_point_formats, ch.supported_versions, ch.alpn, ch.signature_algorithms,
    )
    fp = _client_fp.get(key)
    if fp is None:
        j3 = ja3_full(ch)
        fp = (j3, md5_hex(j3) if j3 is not None else None, ja4(ch), ja4_r(ch))
        if len(_client_fp) >= _FINGERPRINT_CACHE_SIZE:
            _client_fp.clear()
        _client_fp[key] = fp
    return fp


def _server_fingerprints(sh: hs.ServerHello) -> tuple[str, str, str]:
    """(ja3s_full, ja3s, ja4s) of a ServerHello, remembered as above."""
    key = (sh.legacy_version, sh.cipher_suite, sh.extensions, sh.supported_version, sh.alpn)
    fp = _server_fp.get(key)
    if fp is None:
        j3s = ja3s_full(sh)
        fp = (j3s, md5_hex(j3s), ja4s(sh))
        if len(_server_fp) >= _FINGERPRINT_CACHE_SIZE:
            _server_fp.clear()
        _server_fp[key] = fp
    return fp


def _type_name(ctype: int) -> str:
    return {20: "change_cipher_spec", 21: "alert", 22: "handshake", 23: "application_data"}.get(
        ctype, f"type {ctype}"
    )
