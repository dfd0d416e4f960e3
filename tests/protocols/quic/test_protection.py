"""Key-log packet protection (protocols/quic/protection.py) on RFC 9001 Appendix A.5 (the
ChaCha20-Poly1305 short header packet: header protection, packet number, AEAD) and its key
update label ("quic ku", §6 and A.5), plus the frame parser on hand-built frames."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pcaptools.protocols.quic.frames import parse_frames
from pcaptools.protocols.quic.protection import PacketProtection, unprotect

SECRET = bytes.fromhex("9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b")
PACKET = bytes.fromhex("4cfe4189655e5cd55c41f69080575d7999c25a5bfb")


def test_rfc9001_a5_chacha20_short_header() -> None:
    prot = PacketProtection(0x1303, SECRET, 1)
    assert prot.iv.hex() == "e0459b3474bdd0e44a41c144"
    assert prot.mask(bytes.fromhex("5e5cd55c41f69080575d7999c25a5bfb")).hex() == "aefefe7d03"
    u = unprotect(PACKET, 1, prot, 654360563, long_header=False)
    assert u.packet_number == 654360564 and u.pn_len == 3
    assert u.header.hex() == "4200bff4" and u.key_phase == 0
    assert prot.decrypt(u.header, u.ciphertext, u.packet_number) == b"\x01"  # PING


def test_key_update_secret() -> None:
    nxt = PacketProtection(0x1303, SECRET, 1).next_generation()
    assert nxt.secret.hex() == "1223504755036d556342ee9361d253421a826c9ecdf3c7148684b36b714881f9"
    assert nxt.generation == 1


def test_frames_of_every_kind() -> None:
    payload = bytes.fromhex(
        "00000001"                    # PADDING x3 (one frame), PING
        "030502010100000a0b0c"        # ACK ECN: largest 5, delay 2, 1 range more, first 1, 0, 0
        "0f04400a03616263"            # STREAM id 4 off 10 len 3 fin "abc"
        "040801ff"                    # RESET_STREAM 8 code 1, final size cut short
    )
    frames, stop = parse_frames(payload)
    assert [f.name for f in frames][:4] == ["PADDING", "PING", "ACK", "STREAM"]
    ack = frames[2]
    assert ack.ack_largest == 5 and ack.ack_delay == 2 and ack.ecn == (0x0A, 0x0B, 0x0C)
    assert ack.ack_ranges == ((4, 5), (2, 2))
    st = frames[3]
    assert (st.stream_id, st.offset, st.length, st.fin, st.data) == (4, 10, 3, True, b"abc")
    assert stop is not None  # the RESET_STREAM's final size varint is cut short
    close, stop = parse_frames(bytes.fromhex("1d0c03627965") + b"\x1e")
    assert stop is None and close[0].reason == "bye" and close[0].error_code == 12
    assert close[1].name == "HANDSHAKE_DONE"


# ------------------------------------------- the tracker: key update, stateless reset (hand-built)

def _protect(prot: PacketProtection, dcid: bytes, pn: int, payload: bytes, phase: int) -> bytes:
    """A short-header packet (4-byte packet number) protected with ``prot`` (RFC 9001 §5)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    first = 0x40 | (phase << 2) | 0x03
    header = bytes([first]) + dcid + pn.to_bytes(4, "big")
    nonce = (int.from_bytes(prot.iv, "big") ^ pn).to_bytes(12, "big")
    key = prot._aead
    assert isinstance(key, AESGCM)
    sealed = key.encrypt(nonce, payload, header)
    pn_off = 1 + len(dcid)
    mask = prot.mask(sealed[4 - 4:16])  # sample starts 4 bytes after the packet number
    out = bytearray(header + sealed)
    out[0] ^= mask[0] & 0x1F
    for i in range(4):
        out[pn_off + i] ^= mask[1 + i]
    return bytes(out)


def _datagram(frame: int, payload: bytes, *, to_server: bool = True) -> Any:
    from pcaptools.net.packet import UdpDatagram

    a, b = bytes([192, 0, 2, 10]), bytes([192, 0, 2, 20])
    src, dst, sport, dport = (a, b, 50000, 443) if to_server else (b, a, 443, 50000)
    return UdpDatagram(frame=frame, ts_ns=frame * 1_000_000, frame_len=len(payload) + 42,
                       ip_version=4, src=src, dst=dst, ttl=64, sport=sport, dport=dport,
                       payload=payload)


def test_the_tracker_follows_a_key_update_and_sees_a_stateless_reset() -> None:
    from pcaptools.diagnostics import Diagnostics
    from pcaptools.protocols.quic.observer import QuicTracker
    from pcaptools.protocols.tls.keylog import KeyLog, SessionSecrets
    from pcaptools.tables.quic_tables import quic_connections_table, quic_packets_table

    secret = bytes(range(32))
    dcid = bytes.fromhex("c0ffee01")
    gen0 = PacketProtection(0x1301, secret, 1)
    gen1 = gen0.next_generation()
    ping = b"\x01" + b"\x00" * 20  # PING and padding (enough for the sample)
    diag = Diagnostics()
    tracker = QuicTracker(diag, KeyLog())
    tracker.datagram(_datagram(1, _protect(gen0, dcid, 0, ping, 0)))  # opens it (midstream)
    (conn,) = tracker.connections
    conn.secrets = SessionSecrets(client_traffic={0: secret})
    tracker._register(conn, dcid, 0)
    tracker.datagram(_datagram(2, _protect(gen0, dcid, 1, ping, 0)))
    tracker.datagram(_datagram(3, _protect(gen1, dcid, 3, ping, 1)))  # the key update
    tracker.datagram(_datagram(4, _protect(gen0, dcid, 2, ping, 0)))  # reordered, old keys
    tracker.datagram(_datagram(5, _protect(gen1, dcid, 4, ping, 1)))
    token = bytes(range(100, 116))
    conn.reset_tokens[1].add(token)
    tracker.datagram(_datagram(6, b"\x41" + bytes(20) + token, to_server=False))
    pk = quic_packets_table(tracker)
    assert pk["status"].tolist() == ["no_key", "decrypted", "decrypted", "decrypted",
                                     "decrypted", "stateless_reset"]
    assert pk["packet_number"].tolist()[1:5] == [1, 3, 2, 4]
    assert pk["frames"].tolist()[1] == "PING,PADDING"
    (row,) = quic_connections_table(tracker).itertuples()
    assert row.key_updates == 1 and row.decrypt_failed == 0
    assert (row.end, row.closed_by) == ("stateless_reset", "server")
    assert not diag.counts


# ------------------------------------------------------------------------------ robustness

@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_parse_frames_never_raises(payload: bytes) -> None:
    frames, stop = parse_frames(payload)
    assert stop is not None or sum(1 for _ in frames) >= (1 if payload else 0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=200), max_size=6))
def test_the_tracker_never_raises_on_garbage_after_a_known_connection(
        payloads: list[bytes]) -> None:
    from pcaptools.diagnostics import Diagnostics
    from pcaptools.protocols.quic.observer import QuicTracker
    from pcaptools.protocols.tls.keylog import KeyLog, SessionSecrets

    tracker = QuicTracker(Diagnostics(), KeyLog())
    tracker.datagram(_datagram(1, b"\x41" + bytes(30)))
    (conn,) = tracker.connections
    conn.secrets = SessionSecrets(client_traffic={0: bytes(32)}, server_traffic={0: bytes(32)},
                                  client_handshake=bytes(32), server_handshake=bytes(32))
    tracker._register(conn, b"\x01\x02\x03\x04", 0)
    for i, p in enumerate(payloads, 2):
        tracker.datagram(_datagram(i, bytes([p[0] | 0x40]) + p[1:], to_server=bool(i % 2)))
    tracker.finish(100_000_000, 99)
    assert len(tracker.packet_rows) >= 1


def test_key_log_keys_follow_the_version_labels() -> None:
    """The same derivation as the Initial keys (RFC 9001 A.1, RFC 9369 A.1: "quic key" for v1,
    "quicv2 key" for v2) from the Initial secrets of the RFCs' connection ID."""
    from pcaptools.protocols.quic.initial import initial_keys
    from pcaptools.protocols.quic.packets import VERSION_1, VERSION_2

    dcid = bytes.fromhex("8394c8f03e515708")
    for version, iv in ((VERSION_1, "fa044b2f42a3fd3b46fb255c"),
                        (VERSION_2, "91f73e2351d8fa91660e909f")):
        keys = initial_keys(version, dcid)
        assert keys is not None
        client = keys[0]
        prot = PacketProtection(0x1301, client.secret, version)
        assert prot.iv == client.iv and prot.iv.hex() == iv
        assert prot.mask(bytes(16)) == PacketProtection(0x1301, client.secret, version,
                                                        hp=client.hp).mask(bytes(16))


def test_a_packet_that_does_not_decrypt_is_a_row_and_the_next_ones_still_decrypt() -> None:
    from pcaptools.diagnostics import Diagnostics
    from pcaptools.protocols.quic.observer import QuicTracker
    from pcaptools.protocols.tls.keylog import KeyLog, SessionSecrets
    from pcaptools.tables.quic_tables import quic_connections_table, quic_packets_table

    secret, dcid = bytes(range(32)), bytes.fromhex("c0ffee01")
    good = PacketProtection(0x1301, secret, 1)
    bad = PacketProtection(0x1301, bytes(32), 1)
    ping = b"\x01" + b"\x00" * 20
    diag = Diagnostics()
    tracker = QuicTracker(diag, KeyLog())
    tracker.datagram(_datagram(1, _protect(good, dcid, 0, ping, 0)))
    (conn,) = tracker.connections
    conn.secrets = SessionSecrets(client_traffic={0: secret})
    tracker._register(conn, dcid, 0)
    tracker.datagram(_datagram(2, _protect(bad, dcid, 1, ping, 0)))  # corrupted / other keys
    tracker.datagram(_datagram(3, _protect(good, dcid, 2, ping, 0)))
    tracker.datagram(_datagram(4, _protect(good, dcid, 3, ping, 0)))
    assert quic_packets_table(tracker)["status"].tolist() == [
        "no_key", "decrypt_failed", "decrypted", "decrypted"]
    (row,) = quic_connections_table(tracker).itertuples()
    assert row.decrypt_failed == 1 and row.needs_keylog
    assert diag.counts["quic.decrypt_failed"] == 1
