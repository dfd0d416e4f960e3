"""Key schedules against published vectors: RFC 8448 (TLS 1.3) and the TLS 1.2 PRF vectors."""

from __future__ import annotations

import hashlib

import _rfc8448 as rfc

from pcaptools.protocols.tls.decrypt import Tls13Decryptor
from pcaptools.protocols.tls.keyschedule import (
    derive_secret,
    hkdf_extract,
    key_block,
    master_secret,
    next_traffic_secret,
    prf10,
    prf12,
    traffic_keys,
)
from pcaptools.protocols.tls.suites import suite_info


def _th(*msgs: bytes) -> bytes:
    return hashlib.sha256(b"".join(msgs)).digest()


def test_rfc8448_key_schedule_secrets() -> None:
    early = hkdf_extract("sha256", b"", b"\0" * 32)
    assert early == rfc.EARLY_SECRET
    derived = derive_secret("sha256", early, b"derived", _th())
    assert derived == rfc.DERIVED_FOR_HANDSHAKE
    hs = hkdf_extract("sha256", derived, rfc.ECDHE_SHARED)
    assert hs == rfc.HANDSHAKE_SECRET
    th_sh = _th(rfc.CLIENT_HELLO, rfc.SERVER_HELLO)
    assert derive_secret("sha256", hs, b"c hs traffic", th_sh) == rfc.CLIENT_HS_TRAFFIC
    assert derive_secret("sha256", hs, b"s hs traffic", th_sh) == rfc.SERVER_HS_TRAFFIC
    derived2 = derive_secret("sha256", hs, b"derived", _th())
    assert derived2 == rfc.DERIVED_FOR_MASTER
    master = hkdf_extract("sha256", derived2, b"\0" * 32)
    assert master == rfc.MASTER_SECRET
    th_sf = _th(
        rfc.CLIENT_HELLO,
        rfc.SERVER_HELLO,
        rfc.ENCRYPTED_EXTENSIONS,
        rfc.CERTIFICATE,
        rfc.CERTIFICATE_VERIFY,
        rfc.SERVER_FINISHED,
    )
    assert derive_secret("sha256", master, b"c ap traffic", th_sf) == rfc.CLIENT_AP_TRAFFIC
    assert derive_secret("sha256", master, b"s ap traffic", th_sf) == rfc.SERVER_AP_TRAFFIC
    assert derive_secret("sha256", master, b"exp master", th_sf) == rfc.EXPORTER_MASTER


def test_rfc8448_traffic_keys_and_ivs() -> None:
    assert traffic_keys("sha256", rfc.SERVER_HS_TRAFFIC, 16) == (
        rfc.SERVER_HS_KEY,
        rfc.SERVER_HS_IV,
    )
    assert traffic_keys("sha256", rfc.CLIENT_HS_TRAFFIC, 16) == (
        rfc.CLIENT_HS_KEY,
        rfc.CLIENT_HS_IV,
    )
    assert traffic_keys("sha256", rfc.SERVER_AP_TRAFFIC, 16) == (
        rfc.SERVER_AP_KEY,
        rfc.SERVER_AP_IV,
    )
    assert traffic_keys("sha256", rfc.CLIENT_AP_TRAFFIC, 16) == (
        rfc.CLIENT_AP_KEY,
        rfc.CLIENT_AP_IV,
    )


def test_rfc8448_records_decrypt_to_the_published_messages() -> None:
    suite = suite_info(0x1301)
    assert (suite.name, suite.key_len, suite.prf_hash) == ("TLS_AES_128_GCM_SHA256", 16, "sha256")
    rec = rfc.SERVER_FLIGHT_RECORD
    ctype, pt = Tls13Decryptor(suite, rfc.SERVER_HS_TRAFFIC).decrypt(rec[0], 0x0303, rec[5:])
    assert ctype == 22
    assert (
        pt
        == rfc.ENCRYPTED_EXTENSIONS + rfc.CERTIFICATE + rfc.CERTIFICATE_VERIFY + rfc.SERVER_FINISHED
    )
    rec = rfc.CLIENT_FINISHED_RECORD
    assert Tls13Decryptor(suite, rfc.CLIENT_HS_TRAFFIC).decrypt(23, 0x0303, rec[5:]) == (
        22,
        rfc.CLIENT_FINISHED,
    )
    server_ap = Tls13Decryptor(suite, rfc.SERVER_AP_TRAFFIC)
    assert (
        server_ap.decrypt(23, 0x0303, rfc.SERVER_TICKET_RECORD[5:])[0] == 22
    )  # seq 0: NewSessionTicket
    assert server_ap.decrypt(23, 0x0303, rfc.SERVER_APP_RECORD[5:]) == (23, rfc.APP_DATA)  # seq 1
    assert server_ap.decrypt(23, 0x0303, rfc.SERVER_ALERT_RECORD[5:]) == (
        21,
        b"\x01\x00",
    )  # close_notify
    client_ap = Tls13Decryptor(suite, rfc.CLIENT_AP_TRAFFIC)
    assert client_ap.decrypt(23, 0x0303, rfc.CLIENT_APP_RECORD[5:]) == (23, rfc.APP_DATA)
    assert client_ap.seq == 1


def test_key_update_secret_is_hkdf_expand_label_traffic_upd() -> None:
    nxt = next_traffic_secret("sha256", rfc.CLIENT_AP_TRAFFIC)
    assert len(nxt) == 32 and nxt != rfc.CLIENT_AP_TRAFFIC
    # RFC 8446 7.2: HKDF-Expand-Label(secret, "traffic upd", "", Hash.length)
    info = b"\x00\x20" + bytes([len(b"tls13 traffic upd")]) + b"tls13 traffic upd" + b"\x00"
    import hmac

    assert nxt == hmac.new(rfc.CLIENT_AP_TRAFFIC, info + b"\x01", "sha256").digest()


def test_tls12_prf_sha256_vector() -> None:
    out = prf12(
        "sha256",
        bytes.fromhex("9bbe436ba940f017b17652849a71db35"),
        b"test label",
        bytes.fromhex("a0ba9f936cda311827a6f796ffd5198c"),
        100,
    )
    assert out.hex() == (
        "e3f229ba727be17b8d122620557cd453c2aab21d07c3d495329b52d4e61edb5a6b301791e90d35c9c9a46b4e14baf9af0fa022f7"
        "077def17abfd3797c0564bab4fbc91666e9def9b97fce34f796789baa48082d122ee42c5a72e5a5110fff70187347b66"
    )


def test_tls12_prf_sha384_vector() -> None:
    out = prf12(
        "sha384",
        bytes.fromhex("b80b733d6ceefcdc71566ea48e5567df"),
        b"test label",
        bytes.fromhex("cd665cf6a8447dd6ff8b27555edb7465"),
        148,
    )
    assert out.hex() == (
        "7b0c18e9ced410ed1804f2cfa34a336a1c14dffb4900bb5fd7942107e81c83cde9ca0faa60be9fe34f82b1233c9146a0e534cb40"
        "0fed2700884f9dc236f80edd8bfa961144c9e8d792eca722a7b32fc3d416d473ebc2c5fd4abfdad05d9184259b5bf8cd4d90fa0d"
        "31e2dec479e4f1a26066f2eea9a69236a3e52655c9e9aee691c8f3a26854308d5eaa3be85e0990703d73e56f"
    )


def test_tls10_prf_is_md5_xor_sha1_of_the_two_secret_halves() -> None:
    secret = bytes(range(48))
    out = prf10(secret, b"key expansion", b"s" * 64, 40)
    from pcaptools.protocols.tls.keyschedule import p_hash

    a = p_hash("md5", secret[:24], b"key expansion" + b"s" * 64, 40)
    b = p_hash("sha1", secret[24:], b"key expansion" + b"s" * 64, 40)
    assert out == bytes(x ^ y for x, y in zip(a, b, strict=True))
    # odd-length secrets share the middle byte (RFC 2246 5)
    odd = bytes(range(5))
    assert prf10(odd, b"l", b"", 16) == bytes(
        x ^ y
        for x, y in zip(
            p_hash("md5", odd[:3], b"l", 16), p_hash("sha1", odd[2:], b"l", 16), strict=True
        )
    )


def test_key_block_and_master_secret_per_version() -> None:
    cr, sr, master = b"c" * 32, b"s" * 32, b"m" * 48
    assert key_block(0x0303, "sha256", master, cr, sr, 72) == prf12(
        "sha256", master, b"key expansion", sr + cr, 72
    )
    assert key_block(0x0301, "sha256", master, cr, sr, 72) == prf10(
        master, b"key expansion", sr + cr, 72
    )
    ssl3 = key_block(0x0300, "sha256", master, cr, sr, 32)
    assert (
        ssl3[:16] == hashlib.md5(master + hashlib.sha1(b"A" + master + sr + cr).digest()).digest()
    )
    assert (
        ssl3[16:] == hashlib.md5(master + hashlib.sha1(b"BB" + master + sr + cr).digest()).digest()
    )
    pms = b"p" * 48
    assert master_secret(0x0303, "sha384", pms, cr, sr) == prf12(
        "sha384", pms, b"master secret", cr + sr, 48
    )
