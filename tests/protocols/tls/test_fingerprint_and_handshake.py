"""Hello parsing, cipher suite table, JA3/JA3S/JA4/JA4S (tshark agreement is in test_tls_vs_tshark.py)."""

from __future__ import annotations

import _rfc8448 as rfc
import pytest
from _tls_build import ext, handshake, vec

from pcaptools.protocols.tls import handshake as hs
from pcaptools.protocols.tls.fingerprint import ja3_full, ja3s_full, ja4, ja4_r, ja4s
from pcaptools.protocols.tls.suites import (
    effective_version,
    group_name,
    is_grease,
    suite_info,
    suite_name,
    version_name,
)

# the example of FoxIO's technical_details/JA4.md (Chrome): ciphers and extensions in wire order
JA4_DOC_CIPHERS = (
    0x1301,
    0x1302,
    0x1303,
    0xC02B,
    0xC02F,
    0xC02C,
    0xC030,
    0xCCA9,
    0xCCA8,
    0xC013,
    0xC014,
    0x009C,
    0x009D,
    0x002F,
    0x0035,
)
JA4_DOC_EXTS = (
    0x001B,
    0x0000,
    0x0033,
    0x0010,
    0x4469,
    0x0017,
    0x002D,
    0x000D,
    0x0005,
    0x0023,
    0x0012,
    0x002B,
    0xFF01,
    0x000B,
    0x000A,
    0x0015,
)
JA4_DOC_SIGS = (0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601)


def _doc_hello(**kw: object) -> hs.ClientHello:
    fields: dict[str, object] = dict(
        legacy_version=0x0303,
        random=b"r" * 32,
        session_id=b"",
        compression_methods=b"\0",
        cipher_suites=(0x0A0A, *JA4_DOC_CIPHERS),
        extensions=(0x1A1A, *JA4_DOC_EXTS, 0x2A2A),
        sni="example.com",
        alpn=(b"h2", b"http/1.1"),
        supported_versions=(0x3A3A, 0x0304, 0x0303),
        supported_groups=(0x4A4A, 0x001D, 0x0017),
        ec_point_formats=(0,),
        signature_algorithms=JA4_DOC_SIGS,
    )
    fields.update(kw)
    return hs.ClientHello(**fields)  # type: ignore[arg-type]


def test_ja4_matches_the_foxio_specification_example() -> None:
    ch = _doc_hello()
    assert ja4(ch) == "t13d1516h2_8daaf6152771_e5627efa2ab1"
    assert ja4_r(ch) == (
        "t13d1516h2_002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9_"
        "0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_"
        "0403,0804,0401,0503,0805,0501,0806,0601"
    )
    # no signature algorithms: no underscore before hashing (JA4.md: 6d807ffa2a79)
    assert ja4(_doc_hello(signature_algorithms=())).endswith("_6d807ffa2a79")


@pytest.mark.parametrize(
    ("alpn", "chars"),
    [
        ((), "00"),
        ((b"",), "00"),
        ((b"h2",), "h2"),
        ((b"http/1.1",), "h1"),
        ((b"x",), "xx"),
        ((b"\xab",), "ab"),
        ((b"\xab\xcd",), "ad"),
        ((b"0\xab",), "3b"),
        ((b"01\xab\xcd",), "3d"),
        ((b"0\xab\xcd1",), "01"),
    ],
)
def test_ja4_alpn_characters(alpn: tuple[bytes, ...], chars: str) -> None:
    assert ja4(_doc_hello(alpn=alpn))[8:10] == chars


def test_ja4_version_sni_and_counts() -> None:
    assert (
        ja4(
            _doc_hello(supported_versions=(), legacy_version=0x0301, sni=None, extensions=(0x000A,))
        )[:10]
        == "t10i1501h2"
    )
    assert (
        ja4(_doc_hello(cipher_suites=(), extensions=()))[:11] == "t13i0000h2_"
    )  # SNI: the extension
    assert ja4(_doc_hello(cipher_suites=(), extensions=())).endswith("_000000000000_000000000000")
    many = tuple(range(1, 120))
    assert ja4(_doc_hello(cipher_suites=many))[4:6] == "99"
    assert ja4(_doc_hello(supported_versions=(0x7F1C,)))[1:3] == "00"


def test_ja3_drops_grease_like_tshark() -> None:
    ch = _doc_hello()
    assert ja3_full(ch) == (
        "771,4865-4866-4867-49195-49199-49196-49200-52393-52392-49171-49172-156-157-47-53,"
        "27-0-51-16-17513-23-45-13-5-35-18-43-65281-11-10-21,29-23,0"
    )
    sslv2 = hs.ClientHello(0x0301, b"r" * 32, b"", (4,), b"\0", (), sslv2=True)
    assert ja3_full(sslv2) is None and ja4(sslv2) is None


def test_rfc8448_hellos_parse() -> None:
    ch = hs.parse_client_hello(rfc.CLIENT_HELLO[4:])
    assert (ch.legacy_version, ch.random, ch.cipher_suites, ch.sni) == (
        0x0303,
        rfc.CLIENT_RANDOM,
        (0x1301, 0x1303, 0x1302),
        "server",
    )
    assert ch.extensions == (0, 0xFF01, 10, 35, 51, 43, 13, 45, 28)
    assert (ch.supported_versions, ch.key_share_groups, ch.session_ticket_len) == (
        (0x0304,),
        (29,),
        0,
    )
    sh = hs.parse_server_hello(rfc.SERVER_HELLO[4:])
    assert (sh.version, sh.cipher_suite, sh.key_share_group, sh.is_hrr, sh.extensions) == (
        0x0304,
        0x1301,
        29,
        False,
        (51, 43),
    )
    assert ja3s_full(sh) == "771,4865,51-43"
    assert (
        ja4s(sh) == "t130200_1301_234ea6891581"
    )  # as FoxIO's snapshots show for this extension order
    ee = hs.parse_encrypted_extensions(rfc.ENCRYPTED_EXTENSIONS[4:])
    assert (ee.alpn, ee.early_data, ee.extensions) == (None, False, (10, 28, 0))
    chain = hs.parse_certificate(rfc.CERTIFICATE[4:], tls13=True)
    assert (chain.count, chain.der_bytes) == (1, 432)


def test_hello_retry_request_and_draft_server_hello() -> None:
    body = (
        b"\x03\x03"
        + hs.HRR_RANDOM
        + b"\x00"
        + b"\x13\x02\x00"
        + vec(2, ext(43, b"\x03\x04") + ext(51, b"\x00\x17"))
    )
    sh = hs.parse_server_hello(body)
    assert (sh.is_hrr, sh.version, sh.key_share_group) == (True, 0x0304, 0x17)
    draft = b"\x7f\x13" + b"r" * 32 + b"\x13\x02" + vec(2, ext(40, b"\x00\x1d" + vec(2, b"k" * 32)))
    sh = hs.parse_server_hello(draft)
    assert (sh.version, sh.cipher_suite, sh.session_id, sh.key_share_group) == (
        0x7F13,
        0x1302,
        b"",
        29,
    )


@pytest.mark.parametrize("cut", [1, 10, 34, 35, 40, 50])
def test_truncated_client_hello_raises_parse_error(cut: int) -> None:
    with pytest.raises(hs.HandshakeParseError):
        hs.parse_client_hello(rfc.CLIENT_HELLO[4 : 4 + cut])


def test_bad_vector_lengths_raise_parse_error() -> None:
    body = bytearray(rfc.CLIENT_HELLO[4:])
    body[-3] = 0xFF  # the last extension's length goes beyond the message
    with pytest.raises(hs.HandshakeParseError):
        hs.parse_client_hello(bytes(body))
    with pytest.raises(hs.HandshakeParseError):
        hs.parse_certificate(b"\x00\x00\x10\x00\x00\x20abc", tls13=False)


def test_sslv2_client_hello() -> None:
    msg = (
        b"\x01\x03\x03\x00\x09\x00\x00\x00\x20"
        + b"\x00\x00\x04\x01\x00\x80\x00\x00\xff"
        + b"C" * 32
    )
    ch = hs.parse_sslv2_client_hello(msg)
    assert (ch.legacy_version, ch.cipher_suites, ch.random, ch.sslv2) == (
        0x0303,
        (4, 0xFF),
        b"C" * 32,
        True,
    )
    short = b"\x01\x03\x01\x00\x03\x00\x00\x00\x10\x00\x00\x05" + b"c" * 16
    assert hs.parse_sslv2_client_hello(short).random == b"\0" * 16 + b"c" * 16


def test_compressed_certificate_zlib() -> None:
    import zlib

    inner = vec(1, b"") + vec(3, vec(3, b"X" * 100) + vec(2, b"") + vec(3, b"Y" * 50) + vec(2, b""))
    body = b"\x00\x01" + len(inner).to_bytes(3, "big") + vec(3, zlib.compress(inner))
    chain = hs.parse_compressed_certificate(body)
    assert (chain.count, chain.der_bytes) == (2, 150)
    brotli = b"\x00\x02" + (1000).to_bytes(3, "big") + vec(3, b"??")
    assert hs.parse_compressed_certificate(brotli) == hs.CertificateChain(None, 1000)


def test_server_key_exchange_group() -> None:
    assert hs.parse_server_key_exchange_group(b"\x03\x00\x1d\x20") == 29
    assert hs.parse_server_key_exchange_group(b"\x01\x00") is None
    assert handshake(14, b"") == b"\x0e\x00\x00\x00"


@pytest.mark.parametrize(
    ("code", "name", "cipher", "mode", "key_len", "mac", "prf"),
    [
        (0x1301, "TLS_AES_128_GCM_SHA256", "AES", "aead", 16, None, "sha256"),
        (0x1302, "TLS_AES_256_GCM_SHA384", "AES", "aead", 32, None, "sha384"),
        (0x1303, "TLS_CHACHA20_POLY1305_SHA256", "CHACHA20", "aead", 32, None, "sha256"),
        (0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "AES", "aead", 16, None, "sha256"),
        (0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "AES", "aead", 32, None, "sha384"),
        (
            0xCCA8,
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            "CHACHA20",
            "aead",
            32,
            None,
            "sha256",
        ),
        (0xC0AC, "TLS_ECDHE_ECDSA_WITH_AES_128_CCM", "AES-CCM", "aead", 16, None, "sha256"),
        (0xC013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "AES", "cbc", 16, "sha1", "sha256"),
        (0xC028, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "AES", "cbc", 32, "sha384", "sha384"),
        (0x000A, "TLS_RSA_WITH_3DES_EDE_CBC_SHA", "3DES", "cbc", 24, "sha1", "sha256"),
        (0x0004, "TLS_RSA_WITH_RC4_128_MD5", "RC4", "stream", 16, "md5", "sha256"),
        (0x0003, "TLS_RSA_EXPORT_WITH_RC4_40_MD5", "RC4", "stream", 16, "md5", "sha256"),
        (0x0002, "TLS_RSA_WITH_NULL_SHA", "NULL", "null", 0, "sha1", "sha256"),
        (0xC03C, "TLS_RSA_WITH_ARIA_128_CBC_SHA256", None, "null", 0, None, "sha256"),
    ],
)
def test_cipher_suite_parameters(
    code: int, name: str, cipher: str | None, mode: str, key_len: int, mac: str | None, prf: str
) -> None:
    s = suite_info(code)
    assert (s.name, s.cipher, s.mode, s.key_len, s.mac, s.prf_hash) == (
        name,
        cipher,
        mode,
        key_len,
        mac,
        prf,
    )
    assert suite_name(code) == name


def test_names() -> None:
    assert suite_name(0x0A0A) == "GREASE" and suite_name(0x7777) == "0x7777"
    assert is_grease(0xFAFA) and not is_grease(0xFAFB) and not is_grease(0x0A1A)
    assert [version_name(v) for v in (0x0300, 0x0303, 0x0304, 0x7F13, 0xFB1A, 0x1234, None)] == [
        "SSL 3.0",
        "TLS 1.2",
        "TLS 1.3",
        "TLS 1.3 (draft 19)",
        "TLS 1.3 (Facebook draft 26)",
        "0x1234",
        None,
    ]
    assert effective_version(0x7F13) == 0x0304 and effective_version(0x0303) == 0x0303
    assert (group_name(29), group_name(23), group_name(0x11EC), group_name(0x2A2A)) == (
        "x25519",
        "secp256r1",
        "0x11EC",
        "GREASE",
    )
