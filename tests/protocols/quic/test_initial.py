"""Initial keys, header protection and AEAD against the RFC 9001 Appendix A (QUIC v1) and
RFC 9369 Appendix A (QUIC v2) test vectors."""

from __future__ import annotations

import pytest

from pcaptools.protocols.quic.initial import (
    CryptoStream,
    QuicDecryptError,
    decode_packet_number,
    initial_keys,
    open_initial,
    parse_initial_frames,
)
from pcaptools.protocols.quic.packets import VERSION_1, VERSION_2, split_datagram

DCID = bytes.fromhex("8394c8f03e515708")

# RFC 9001 A.3: the server's Initial (protected), packet number 1, carrying ACK + CRYPTO
SERVER_INITIAL_V1 = bytes.fromhex(
    "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a"
    "5816b6394100f37a1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3"
    "dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b562bfb19fb84"
    "022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc4"
    "2158407dd074ee"
)
SERVER_PAYLOAD = bytes.fromhex(
    "02000000000600405a020000560303eefce7f7b37ba1d1632e96677825ddf739"
    "88cfc79825df566dc5430b9a045a1200130100002e00330024001d00209d3c94"
    "0d89690b84d08a60993c144eca684d1081287c834d5311bcf32bb9da1a002b00"
    "020304"
)
# RFC 9369 A.3: the same server Initial under QUIC v2
SERVER_INITIAL_V2 = bytes.fromhex(
    "dc6b3343cf0008f067a5502a4262b5004075d92faaf16f05d8a4398c47089698"
    "baeea26b91eb761d9b89237bbf87263017915358230035f7fd3945d88965cf17"
    "f9af6e16886c61bfc703106fbaf3cb4cfa52382dd16a393e42757507698075b2"
    "c984c707f0a0812d8cd5a6881eaf21ceda98f4bd23f6fe1a3e2c43edd9ce7ca8"
    "4bed8521e2e140"
)


@pytest.mark.parametrize(
    ("version", "client", "server"),
    [
        (VERSION_1,
         ("1f369613dd76d5467730efcbe3b1a22d", "fa044b2f42a3fd3b46fb255c",
          "9f50449e04a0e810283a1e9933adedd2"),
         ("cf3a5331653c364c88f0f379b6067e37", "0ac1493ca1905853b0bba03e",
          "c206b8d9b9f0f37644430b490eeaa314")),
        (VERSION_2,
         ("8b1a0bc121284290a29e0971b5cd045d", "91f73e2351d8fa91660e909f",
          "45b95e15235d6f45a6b19cbcb0294ba9"),
         ("82db637861d55e1d011f19ea71d5d2a7", "dd13c276499c0249d3310652",
          "edf6d05c83121201b436e16877593c3a")),
    ],
)
def test_initial_keys_are_the_rfc_vectors(
    version: int, client: tuple[str, str, str], server: tuple[str, str, str]
) -> None:
    keys = initial_keys(version, DCID)
    assert keys is not None
    for got, want in zip(keys, (client, server), strict=True):
        assert (got.key.hex(), got.iv.hex(), got.hp.hex()) == want


def test_initial_secrets_v1() -> None:
    keys = initial_keys(VERSION_1, DCID)
    assert keys is not None
    assert keys[0].secret.hex() == (
        "c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea")
    assert keys[1].secret.hex() == (
        "3c199828fd139efd216c155ad844cc81fb82fa8d7446fa7d78be803acdda951b")


def test_unknown_version_has_no_initial_keys() -> None:
    assert initial_keys(0xFF00001D, DCID) is None


@pytest.mark.parametrize("packet", [SERVER_INITIAL_V1, SERVER_INITIAL_V2])
def test_server_initial_of_the_rfc_decrypts(packet: bytes) -> None:
    pkts, error = split_datagram(packet)
    assert error is None and len(pkts) == 1
    p = pkts[0]
    assert p.packet_type == "initial"
    assert p.dcid == b"" and p.scid == bytes.fromhex("f067a5502a4262b5")
    assert p.end == len(packet)
    assert p.version is not None and p.pn_offset is not None
    keys = initial_keys(p.version, DCID)
    assert keys is not None
    opened = open_initial(packet, p.pn_offset, keys[1], -1)
    assert opened.packet_number == 1
    assert opened.payload == SERVER_PAYLOAD
    names, crypto, stop = parse_initial_frames(opened.payload)
    assert (names, stop) == (["ACK", "CRYPTO"], None)
    assert [(off, len(data)) for off, data in crypto] == [(0, 90)]
    stream = CryptoStream(1000)
    msgs = stream.add(*crypto[0])
    assert [(t, len(b)) for t, b in msgs] == [(2, 86)]  # a whole ServerHello


def test_the_wrong_keys_do_not_decrypt() -> None:
    p = split_datagram(SERVER_INITIAL_V1)[0][0]
    keys = initial_keys(VERSION_1, b"\x01" * 8)
    assert keys is not None and p.pn_offset is not None
    with pytest.raises(QuicDecryptError):
        open_initial(SERVER_INITIAL_V1, p.pn_offset, keys[1], -1)
    # v1 keys on the v2 packet (and the client's keys on a server packet) fail too
    keys = initial_keys(VERSION_1, DCID)
    assert keys is not None
    with pytest.raises(QuicDecryptError):
        open_initial(SERVER_INITIAL_V2, p.pn_offset, keys[1], -1)
    with pytest.raises(QuicDecryptError):
        open_initial(SERVER_INITIAL_V1, p.pn_offset, keys[0], -1)


def test_packet_number_decoding_rfc9000_a3() -> None:
    # RFC 9000 A.3: largest 0xa82f30ea, truncated 0x9b32 (2 bytes) -> 0xa82f9b32
    assert decode_packet_number(0x9B32, 2, 0xA82F30EA) == 0xA82F9B32
    assert decode_packet_number(0, 1, -1) == 0
    assert decode_packet_number(1, 4, 0) == 1
    assert decode_packet_number(0x00, 1, 0xFF) == 0x100  # wraps forward


def test_crypto_stream_reorders_and_ignores_repeats() -> None:
    msg = bytes([1, 0, 0, 6]) + b"abcdef" + bytes([2, 0, 0, 1]) + b"z"
    s = CryptoStream(100)
    assert s.add(5, msg[5:9]) == []
    assert s.add(0, msg[:5]) == []
    assert s.add(9, msg[9:]) == [(1, b"abcdef"), (2, b"z")]
    assert s.add(0, msg) == []  # a retransmission
    big = CryptoStream(8)
    assert big.add(0, bytes([1, 0, 1, 0]) + b"x" * 6) == []
    assert big.overflow


def test_frames_an_initial_may_not_carry_stop_the_walk() -> None:
    names, crypto, stop = parse_initial_frames(bytes([0x01, 0x00, 0x00, 0x08, 0x00]))
    assert names == ["PING", "PADDING"] and crypto == []
    assert stop == "frame type 0x8 not allowed in an Initial packet"
    names, _, stop = parse_initial_frames(bytes([0x06, 0x00, 0x05, 0x61]))
    assert names == [] and stop == "CRYPTO frame of 5 bytes cut short"
