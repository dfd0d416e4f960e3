"""Key-log packet protection (protocols/quic/protection.py) on RFC 9001 Appendix A.5 (the
ChaCha20-Poly1305 short header packet: header protection, packet number, AEAD) and its key
update label ("quic ku", §6 and A.5), plus the frame parser on hand-built frames."""

from __future__ import annotations

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
    assert prot.open(u.header, u.ciphertext, u.packet_number) == b"\x01"  # PING


def test_key_update_secret() -> None:
    nxt = PacketProtection(0x1303, SECRET, 1).next_generation()
    assert nxt.secret.hex() == "1223504755036d556342ee9361d253421a826c9ecdf3c7148684b36b714881f9"
    assert nxt.generation == 1


def test_frames_of_every_kind() -> None:
    payload = bytes.fromhex(
        "00000001"                    # PADDING x3 (one frame), PING
        "030502010100000a0b0c"        # ACK ECN: largest 5, delay 2, 1 more range; first 1; gap 0 len 0
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
