"""Events of :class:`~pcaptools.protocols.tls.TlsObserver`.

Every event carries ``ts_ns``, ``frame`` (of the TCP segment that completed the record),
``direction`` and ``tcp_stream``. No event holds key material; decrypted application
data is not an event either (it goes to the inner observer).

:class:`TlsRecord`, one per record, is a named tuple (as
:class:`~pcaptools.protocols.websocket.WsFrame` is): the observer makes it with a single C
call (``tuple.__new__`` on the tuple of its values: :data:`new_record`), where a frozen
dataclass costs a slot assignment per field, and the ``tls_records`` builder unpacks it in
one step. Read it by attribute, build one with keywords, change one with ``_replace``. The
other events (a few per connection) are frozen, slotted, keyword-only dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ...tcp.stream import Direction, Event


class _TlsRecordFields(NamedTuple):
    """The fields of :class:`TlsRecord` (a NamedTuple cannot have another base)."""

    ts_ns: int
    frame: int
    direction: Direction
    tcp_stream: int
    session: int
    """index of the TLS session in the connection (0, 1... after renegotiation / new ClientHello)"""
    offset: int
    """stream offset of the record header"""
    content_type: int
    """content type on the wire (23 for every TLS 1.3 protected record)"""
    version: int
    """record-layer version (0x0301... ; TLS 1.3 records say 0x0303)"""
    length: int
    """fragment length (header excluded)"""
    encrypted: bool
    """protected by a cipher on the wire"""
    decrypted: bool
    """encrypted and successfully decrypted"""
    inner_content_type: int | None
    """the real content type: the wire type when cleartext, the decrypted type, None when unknown"""
    plaintext_length: int | None
    """content bytes (cleartext length, or decrypted length without padding/MAC/tag); None when unknown"""


class TlsRecord(_TlsRecordFields, Event):
    """One TLS record (a row of ``tls_records``; a named tuple: see the module's docstring)."""

    __slots__ = ()


new_record = tuple.__new__
"""``new_record(TlsRecord, values)``: the record from the tuple of its values in field order,
without the keyword-argument ``__new__`` of a named tuple (one C call)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsHandshakeMessage(Event):
    """One handshake message, reassembled across records (cleartext or decrypted)."""

    ts_ns: int
    frame: int
    direction: Direction
    tcp_stream: int
    session: int
    msg_type: int
    """HandshakeType (1 client_hello, 2 server_hello, 11 certificate, 20 finished...)"""
    length: int
    """body length from the message header"""
    encrypted: bool
    """carried in protected records (and decrypted)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsAlert(Event):
    """An alert. ``level``/``description`` are None when it was encrypted and not decrypted."""

    ts_ns: int
    frame: int
    direction: Direction
    tcp_stream: int
    session: int
    level: int | None
    """1 warning, 2 fatal"""
    description: int | None
    """AlertDescription (0 close_notify, 40 handshake_failure...)"""
    encrypted: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsHandshakeCompleted(Event):
    """The client's Finished was seen (decrypted, or inferred from the record sequence)."""

    ts_ns: int
    frame: int
    direction: Direction
    tcp_stream: int
    session: int
    version: int | None
    cipher_suite: int | None
    alpn: str | None
    sni: str | None
    resumed: bool
    inferred: bool
    """True when the Finished was not decrypted but deduced (first protected record of the client)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSession(Event):
    """Everything known about one TLS session at the end: a row of ``tls_handshakes``.

    Emitted when a new ClientHello starts another session on the connection, when both
    directions are closed, or by :meth:`TlsObserver.finish`.
    """

    ts_ns: int
    frame: int
    direction: Direction
    """direction of the ClientHello (CLIENT_TO_SERVER unless the roles were guessed wrong)"""
    tcp_stream: int
    session: int
    client_hello_frame: int | None
    client_hello_ts_ns: int | None
    server_hello_frame: int | None
    server_hello_ts_ns: int | None
    sni: str | None
    alpn_offered: tuple[str, ...]
    alpn_selected: str | None
    client_version: int | None
    """ClientHello.legacy_version"""
    offered_versions: tuple[int, ...]
    """supported_versions of the ClientHello, GREASE removed"""
    version: int | None
    """negotiated version (supported_versions of the ServerHello, else its legacy version)"""
    cipher_suites_offered: int | None
    cipher_suite: int | None
    key_share_group: int | None
    hello_retry_request: bool
    resumption: str | None
    """session_id, ticket or psk; None for a full handshake or when unknown"""
    early_data_offered: bool
    early_data_accepted: bool | None
    new_session_ticket: bool
    cert_chain_len: int | None
    cert_chain_bytes: int | None
    client_finished_frame: int | None
    client_finished_ts_ns: int | None
    client_finished_inferred: bool
    first_app_data_frame: int | None
    first_app_data_ts_ns: int | None
    client_handshake_bytes: int
    server_handshake_bytes: int
    client_app_bytes: int | None
    """decrypted application data bytes sent by the client (None when not decrypted)"""
    server_app_bytes: int | None
    alerts: tuple[str, ...]
    """``client:fatal:handshake_failure``, ``server:encrypted``..."""
    decrypted: bool
    decrypt_status: str
    """decrypted, partial, failed, no_keys, no_keylog, unsupported_cipher, not_encrypted, incomplete"""
    ja3: str | None
    ja3_full: str | None
    ja3s: str | None
    ja3s_full: str | None
    ja4: str | None
    ja4_r: str | None
    ja4s: str | None
