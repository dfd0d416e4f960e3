"""The TLS layer against tshark 4.0 on every TLS capture of the corpus (same key logs).

Compared: handshake message types per frame, every record (frame, content type, length,
version), ClientHello/ServerHello fields (SNI, ALPN, cipher suite, versions, JA3, JA3S),
and the decrypted application data of every connection, byte for byte, against
``tshark -z follow,tls,raw``.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from _tls_feed import Run, run
from conftest import CORPUS, CORPUS_KEYS
from oracle import keylog_options, tshark_fields

from pcaptools.protocols.tls import TlsHandshakeMessage, TlsRecord, TlsSession
from pcaptools.protocols.tls.suites import version_name

pytestmark = [pytest.mark.corpus, pytest.mark.tshark]

#: TLS captures of the corpus and their key logs (None: no keys, or keys in a pcapng DSB)
CAPTURES: dict[str, str | None] = {
    **CORPUS_KEYS,
    "dsb-tls3.cryptohack.org.pcapng": None,
    "http2-with-cookies.pcapng": None,
    "chrome-cloudflare-quic-with-secrets.pcapng": None,
    "hrr.pcap": None,
    "tls13_psk_succesfull.pcap": None,
    "tls-13draft19-early-data.pcap": None,
    "tls_DER-incomplete-header.pcap": None,
    "many_interfaces-1.pcapng": None,
    "raw_ip.pcap": None,
}
DECRYPTABLE = [
    c
    for c in CAPTURES
    if CAPTURES[c]
    or c
    in (
        "dsb-tls3.cryptohack.org.pcapng",
        "http2-with-cookies.pcapng",
        "chrome-cloudflare-quic-with-secrets.pcapng",
    )
]

#: (capture, frame) -> why pcaptools and tshark differ there
KNOWN_DIFFERENCES = {
    (
        "hrr.pcap",
        11,
    ): "frame 11 is out of order (it fills the hole before frame 9); pcaptools reassembles it and "
    "parses the ServerHello and encrypted records it completes, tshark 4.0 shows no TLS there",
}


def _path(name: str) -> Path:
    p = CORPUS / name
    if not p.exists():
        pytest.skip(f"{name} is not in the corpus")
    return p


def _keylog(name: str) -> Path | None:
    k = CAPTURES[name]
    return CORPUS / k if k else None


@functools.cache
def _run(name: str) -> Run:
    return run(_path(name), _keylog(name))


def _opts(name: str) -> tuple[str, ...]:
    return keylog_options(_keylog(name))


def _skip_known(name: str, frame: int) -> bool:
    return (name, frame) in KNOWN_DIFFERENCES


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_handshake_message_types_per_frame(name: str, tshark: str) -> None:
    r = _run(name)
    theirs = {}
    for frame, types in tshark_fields(
        _path(name),
        ("frame.number", "tls.handshake.type"),
        _opts(name),
        "tcp && tls.handshake.type",
    ):
        theirs[int(frame)] = [int(t) for t in types.split(",") if t]
    ours: dict[int, list[int]] = {}
    for e in r.of(TlsHandshakeMessage):
        ours.setdefault(e.frame, []).append(e.msg_type)
    diffs = {
        f: (ours.get(f), theirs.get(f))
        for f in set(ours) | set(theirs)
        if ours.get(f) != theirs.get(f) and not _skip_known(name, f)
    }
    assert diffs == {}
    assert (
        sum(len(v) for v in theirs.values()) > 0 or name == "raw_ip.pcap"
    )  # one mid-stream record only


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_records_per_frame(name: str, tshark: str) -> None:
    """Every record: frame, (inner) content type, length and version, as tshark shows them."""
    r = _run(name)
    rows = tshark_fields(
        _path(name),
        ("frame.number", "tls.record.content_type", "tls.record.length", "tls.record.version"),
        _opts(name),
        "tcp && tls.record",
    )
    theirs: Counter[tuple[int, str, int, str]] = Counter()
    for frame, ctypes, lengths, versions in rows:
        f = int(frame)
        if _skip_known(name, f):
            continue
        lens = [int(x) for x in lengths.split(",") if x]
        cts = ctypes.split(",") if ctypes else []
        # undecrypted TLS 1.3 records have no content type (only tls.record.opaque_type); in these
        # captures they always follow the cleartext records of their frame
        cts += [""] * (len(lens) - len(cts))
        for ct, ln, v in zip(cts, lens, versions.split(","), strict=True):
            theirs[(f, ct, ln, v)] += 1
    ours: Counter[tuple[int, str, int, str]] = Counter()
    for e in r.of(TlsRecord):
        if _skip_known(name, e.frame):
            continue
        ct = (
            "" if e.inner_content_type is None or e.version == 0x0002 else str(e.inner_content_type)
        )
        ours[(e.frame, ct, e.length, f"0x{e.version:04x}")] += 1
    assert ours - theirs == Counter()
    assert theirs - ours == Counter()


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_hello_fields_and_fingerprints(name: str, tshark: str) -> None:
    r = _run(name)
    sessions = r.of(TlsSession)
    by_ch = {s.client_hello_frame: s for s in sessions}
    by_sh = {s.server_hello_frame: s for s in sessions}
    fields = (
        "frame.number",
        "tls.handshake.type",
        "tls.handshake.extensions_server_name",
        "tls.handshake.extensions_alpn_str",
        "tls.handshake.ja3",
        "tls.handshake.ja3_full",
        "tls.handshake.ja3s",
        "tls.handshake.ja3s_full",
        "tls.handshake.ciphersuite",
        "tls.handshake.version",
        "tls.handshake.extensions.supported_version",
    )
    checked = 0
    for frame, types, sni, alpn, ja3, ja3f, ja3s, ja3sf, suites, versions, sv in tshark_fields(
        _path(name),
        fields,
        _opts(name),
        "tcp && (tls.handshake.type == 1 || tls.handshake.type == 2)",
    ):
        f = int(frame)
        tl = types.split(",")
        if "1" in tl and "2" not in tl and f in by_ch:
            s = by_ch[f]
            assert (s.sni or "") == sni, f
            assert ",".join(s.alpn_offered) == alpn, f
            assert (s.ja3 or "") == ja3 and (s.ja3_full or "") == ja3f, f
            assert f"0x{s.client_version:04x}" == versions.split(",")[0], f
            checked += 1
        if "2" in tl and "1" not in tl and f in by_sh:
            s = by_sh[f]
            if (
                not s.hello_retry_request
            ):  # (one ServerHello in the frame: the JA3S string is whole)
                assert s.ja3s == ja3s and s.ja3s_full == ja3sf, f
            assert (
                s.cipher_suite is not None and f"0x{s.cipher_suite:04x}" == suites.split(",")[-1]
            ), f
            if sv:
                assert s.version is not None and f"0x{s.version:04x}" == sv.split(",")[-1], f
            if s.version is not None and s.version < 0x0304 and alpn:
                assert s.alpn_selected == alpn, f
            checked += 1
    # every ClientHello tshark shows is one of our sessions (SSLv2 hellos included)
    ch_frames = {
        int(f)
        for (f,) in tshark_fields(
            _path(name), ("frame.number",), _opts(name), "tcp && tls.handshake.type == 1"
        )
    }
    ours_ch = {s.client_hello_frame for s in sessions} | {
        e.frame for e in r.of(TlsHandshakeMessage) if e.msg_type == 1
    }
    assert ch_frames <= ours_ch
    assert checked >= (1 if ch_frames else 0)


def _follow_tls(name: str, streams: list[int]) -> dict[int, tuple[str | None, list[bytearray]]]:
    """tcp_stream -> (node 0 "addr:port", [node 0 bytes, node 1 bytes]) from tshark -z follow,tls,raw."""
    args = ["tshark", "-n", "-r", str(_path(name)), *_opts(name), "-q"]
    for s in streams:
        args += ["-z", f"follow,tls,raw,{s}"]
    with tempfile.TemporaryDirectory() as cfg:
        out = subprocess.run(
            args,
            capture_output=True,
            text=True,
            check=False,
            env=dict(os.environ, WIRESHARK_CONFIG_DIR=cfg),
        ).stdout
    res: dict[int, tuple[str | None, list[bytearray]]] = {}
    cur: int | None = None
    for line in out.splitlines():
        if line.startswith("Filter: tcp.stream eq "):
            cur = int(line.split()[-1])
            res[cur] = (None, [bytearray(), bytearray()])
        elif cur is not None and line.startswith("Node 0: "):
            res[cur] = (line[8:], res[cur][1])
        elif cur is not None and line and not line.startswith(("=", "Follow:", "Node ")):
            node = 1 if line.startswith("\t") else 0
            res[cur][1][node] += bytes.fromhex(line.strip())
    return res


@pytest.mark.parametrize("name", DECRYPTABLE)
def test_decrypted_application_data_equals_tshark_follow(name: str, tshark: str) -> None:
    r = _run(name)
    streams = sorted(r.observers)
    theirs = _follow_tls(name, streams)
    compared = 0
    for st in streams:
        node0, data = theirs.get(st, (None, [bytearray(), bytearray()]))
        inner = r.inners.get(st)
        ours = [bytes(inner.data[0]), bytes(inner.data[1])] if inner else [b"", b""]
        if node0 is not None and node0.rsplit(":", 1)[-1] != str(r.client_ports[st]):
            data = [data[1], data[0]]  # tshark's node 0 is whoever sent decrypted data first
        assert ours[0] == bytes(data[0]), (name, st, "client", len(ours[0]), len(data[0]))
        assert ours[1] == bytes(data[1]), (name, st, "server", len(ours[1]), len(data[1]))
        compared += bool(ours[0] or ours[1])
    assert compared >= 1
    # and the tls_handshakes byte counts say the same
    for s in r.of(TlsSession):
        inner = r.inners.get(s.tcp_stream)
        if s.decrypted and inner is not None and len(r.of(TlsSession)) == len(streams):
            assert (s.client_app_bytes, s.server_app_bytes) == (
                len(inner.data[0]),
                len(inner.data[1]),
            )


EXPECTED_SESSIONS = {
    # capture: [(tcp_stream, version, cipher suite name, decrypt_status), ...] for the first rows
    "illustrated-tls12-capture.pcap": [(0, "TLS 1.2", 0xC013, "decrypted")],
    "illustrated-tls13-capture.pcap": [(0, "TLS 1.3", 0x1302, "decrypted")],
    "tls12-decryption.pcap": [(0, "TLS 1.2", 0xC030, "decrypted")],
    "tls3.cryptohack.org.pcapng": [(0, "TLS 1.3", 0x1302, "decrypted")],
    "dsb-tls3.cryptohack.org.pcapng": [(0, "TLS 1.3", 0x1302, "decrypted")],
    "http2-with-cookies.pcapng": [(0, "TLS 1.3", 0x1301, "decrypted")],
    "chrome-cloudflare-quic-with-secrets.pcapng": [(0, "TLS 1.3", 0x1301, "decrypted")],
    "tls_nss_example.pcap": [
        (0, "TLS 1.2", 0xC030, "decrypted"),
        (1, "TLS 1.3", 0x1302, "decrypted"),
    ],
    "hrr.pcap": [(0, "TLS 1.3", 0x1302, "no_keylog")],
    "tls13_psk_succesfull.pcap": [(0, "TLS 1.3", 0x1303, "no_keylog")],
}


@pytest.mark.parametrize("name", sorted(EXPECTED_SESSIONS))
def test_session_rows(name: str) -> None:
    rows = [
        (s.tcp_stream, version_name(s.version), s.cipher_suite, s.decrypt_status)
        for s in sorted(_run(name).of(TlsSession), key=lambda s: (s.tcp_stream, s.session))
    ]
    assert rows == EXPECTED_SESSIONS[name]


def test_dump_pcapng_cipher_matrix_all_73_connections_decrypt() -> None:
    """73 TLS 1.2 connections, 73 cipher suites (AES-GCM/CBC, Camellia, SEED, IDEA, 3DES, DES,
    RC4, export DES40/RC2/RC4, DEFLATE compression, SSLv2-format hellos): all decrypt."""
    sessions = _run("dump.pcapng").of(TlsSession)
    assert len(sessions) == 73
    assert Counter(s.decrypt_status for s in sessions) == Counter({"decrypted": 73})
    assert len({s.cipher_suite for s in sessions}) == 73
    assert all(s.client_app_bytes == 18 for s in sessions)  # "GET / HTTP/1.0\r\n\r\n"
    assert [row.code for row in _run("dump.pcapng").diag.rows] == []


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_certificate_chains_match_tshark(name: str, tshark: str) -> None:
    """Number of certificates and their DER bytes (tls.handshake.certificate_length)."""
    theirs = []
    for (lengths,) in tshark_fields(
        _path(name),
        ("tls.handshake.certificate_length",),
        _opts(name),
        "tcp && tls.handshake.type == 11 && tls.handshake.certificate_length",
    ):
        ls = [int(x) for x in lengths.split(",") if x]
        theirs.append((len(ls), sum(ls)))
    ours = [
        (s.cert_chain_len, s.cert_chain_bytes)
        for s in _run(name).of(TlsSession)
        if s.cert_chain_len is not None
    ]
    assert sorted(ours) == sorted(theirs)


@pytest.mark.parametrize(
    "name", ["http2-with-cookies.pcapng", "chrome-cloudflare-quic-with-secrets.pcapng"]
)
def test_ja4_and_ja4s_match_foxio_reference_output(name: str) -> None:
    """tshark 4.0 has no JA4: the reference is FoxIO's own tool (rust/ja4/src/snapshots/*.snap
    of FoxIO-LLC/ja4, the repository these two captures come from)."""
    (s,) = _run(name).of(TlsSession)
    assert (s.ja4, s.ja4s) == ("t13d1516h2_8daaf6152771_e5627efa2ab1", "t130200_1301_234ea6891581")
