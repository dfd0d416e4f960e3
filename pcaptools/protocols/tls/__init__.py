"""TLS over TCP: record layer, handshake facts, key logs, decryption, JA3/JA4.

    from pcaptools.protocols.tls import KeyLog, TlsObserver
    keylog = KeyLog.from_file("sslkeys.txt", diag)
    obs = TlsObserver(tcp_stream=0, diag=diag, keylog=keylog, inner_factory=make_http)
    events = obs.feed(chunk)            # TlsRecord, TlsHandshakeMessage, TlsAlert, ...

Modules: :mod:`.records` (record splitting), :mod:`.handshake` (message bodies),
:mod:`.keylog` (NSS key logs), :mod:`.keyschedule` (HKDF, PRF), :mod:`.decrypt`
(record protection), :mod:`.suites` (cipher suite parameters and names),
:mod:`.fingerprint` (JA3, JA3S, JA4, JA4S), :mod:`.observer` (the state machine),
:mod:`.events` (what it emits).
"""

from __future__ import annotations

from .events import TlsAlert, TlsHandshakeCompleted, TlsHandshakeMessage, TlsRecord, TlsSession
from .keylog import KeyLog, SessionSecrets
from .observer import TlsObserver
from .records import looks_like_tls
from .suites import suite_name, version_name

__all__ = [
    "KeyLog",
    "SessionSecrets",
    "TlsAlert",
    "TlsHandshakeCompleted",
    "TlsHandshakeMessage",
    "TlsObserver",
    "TlsRecord",
    "TlsSession",
    "looks_like_tls",
    "suite_name",
    "version_name",
]
