"""How fast does the TLS layer parse and decrypt? (MB/s of TLS record bytes through TlsObserver)

Builds one synthetic connection per cipher (ClientHello, ServerHello, then ``--mb`` MiB of
server application data in full 16 KiB records), feeds it to a TlsObserver in TCP-sized
chunks (``--chunk`` bytes, default 1448) and reports MB/s of TLS record bytes, with and
without keys (record parsing only). The inner observer is a no-op.

    python benchmarks/tls_decrypt.py [--mb 64] [--chunk 1448]

:func:`tls_decrypt_mbps` is the reusable helper: ``tls_decrypt_mbps("tls13-aes128gcm", mb=16)``.
"""

from __future__ import annotations

import argparse
import hmac
import os
import struct
import sys
import time
from pathlib import Path

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.protocols.tls import KeyLog, TlsObserver
from pcaptools.protocols.tls.keyschedule import hkdf_expand_label, prf12

CIPHERS = {
    # name: (version, suite)
    "tls13-aes128gcm": (0x0304, 0x1301),
    "tls13-chacha20": (0x0304, 0x1303),
    "tls12-aes256gcm": (0x0303, 0xC030),
    "tls12-aes128cbc-sha": (0x0303, 0xC013),
}
RECORD = 16384


def _hs(mtype: int, body: bytes) -> bytes:
    return bytes([mtype]) + len(body).to_bytes(3, "big") + body


def _rec(ctype: int, body: bytes) -> bytes:
    return struct.pack(">BHH", ctype, 0x0303, len(body)) + body


def _ext(t: int, data: bytes) -> bytes:
    return struct.pack(">HH", t, len(data)) + data


def build(name: str, mb: float) -> tuple[bytes, bytes, str, int]:
    """(client bytes, server bytes, key log text, plaintext bytes) of one synthetic connection."""
    version, suite = CIPHERS[name]
    cr, sr = os.urandom(32), os.urandom(32)
    tls13 = version == 0x0304
    c_exts = _ext(43, b"\x02\x03\x04") if tls13 else b""
    ch = _hs(
        1,
        b"\x03\x03"
        + cr
        + b"\x00"
        + b"\x00\x02"
        + struct.pack(">H", suite)
        + b"\x01\x00"
        + struct.pack(">H", len(c_exts))
        + c_exts,
    )
    s_exts = _ext(43, b"\x03\x04") if tls13 else b""
    sh = _hs(
        2,
        b"\x03\x03"
        + sr
        + b"\x00"
        + struct.pack(">HB", suite, 0)
        + struct.pack(">H", len(s_exts))
        + s_exts,
    )
    n_records = max(1, int(mb * 1024 * 1024) // RECORD)
    payload = os.urandom(RECORD)
    server = bytearray(_rec(22, sh))
    if tls13:
        sec = {
            k: os.urandom(32)
            for k in (
                "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                "SERVER_TRAFFIC_SECRET_0",
                "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
                "CLIENT_TRAFFIC_SECRET_0",
            )
        }
        keylog = "".join(f"{k} {cr.hex()} {v.hex()}\n" for k, v in sec.items())
        chacha = suite == 0x1303

        def sealer(secret: bytes):  # type: ignore[no-untyped-def]
            key = hkdf_expand_label("sha256", secret, b"key", b"", 32 if chacha else 16)
            iv = int.from_bytes(hkdf_expand_label("sha256", secret, b"iv", b"", 12), "big")
            aead = ChaCha20Poly1305(key) if chacha else AESGCM(key)
            seq = [0]

            def seal(inner: int, content: bytes) -> bytes:
                pt = content + bytes([inner])
                hdr = struct.pack(">BHH", 23, 0x0303, len(pt) + 16)
                nonce = (iv ^ seq[0]).to_bytes(12, "big")
                seq[0] += 1
                return hdr + aead.encrypt(nonce, pt, hdr)

            return seal

        hs_seal = sealer(sec["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
        server += hs_seal(22, _hs(8, b"\x00\x00") + _hs(20, b"F" * 32))
        ap = sealer(sec["SERVER_TRAFFIC_SECRET_0"])
        for _ in range(n_records):
            server += ap(23, payload[: RECORD - 1])
        client = _rec(22, ch) + sealer(sec["CLIENT_HANDSHAKE_TRAFFIC_SECRET"])(
            22, _hs(20, b"f" * 32)
        )
        return bytes(client), bytes(server), keylog, n_records * (RECORD - 1)
    master = os.urandom(48)
    keylog = f"CLIENT_RANDOM {cr.hex()} {master.hex()}\n"
    cbc = suite == 0xC013
    kb = prf12(
        "sha384" if suite == 0xC030 else "sha256",
        master,
        b"key expansion",
        sr + cr,
        2 * (20 + 32 + 16),
    )
    seq = [0]
    if cbc:
        mac_key, key = kb[20:40], kb[40 + 16 : 40 + 32]

        def seal12(ctype: int, content: bytes) -> bytes:
            mac = hmac.new(
                mac_key, struct.pack(">QBHH", seq[0], ctype, 0x0303, len(content)) + content, "sha1"
            ).digest()
            data = content + mac
            pad = 15 - len(data) % 16
            data += bytes([pad]) * (pad + 1)
            iv = os.urandom(16)
            enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            seq[0] += 1
            return _rec(ctype, iv + enc.update(data) + enc.finalize())

        content_len = RECORD - 20 - 16 - 16
    else:
        aead, salt = AESGCM(kb[32:64]), kb[68:72]

        def seal12(ctype: int, content: bytes) -> bytes:
            explicit = struct.pack(">Q", seq[0])
            aad = struct.pack(">QBHH", seq[0], ctype, 0x0303, len(content))
            seq[0] += 1
            return _rec(ctype, explicit + aead.encrypt(salt + explicit, content, aad))

        content_len = RECORD - 8 - 16
    server += _rec(20, b"\x01") + seal12(22, _hs(20, b"v" * 12))
    for _ in range(n_records):
        server += seal12(23, payload[:content_len])
    client = _rec(22, ch) + _rec(20, b"\x01")
    return bytes(client), bytes(server), keylog, n_records * content_len


class _Sink:
    def __init__(self) -> None:
        self.n = 0

    def feed(self, chunk: StreamChunk) -> list[object]:
        self.n += len(chunk.data)
        return []

    def gap(self, *args: object) -> list[object]:
        return []

    def close(self, *args: object) -> list[object]:
        return []


def tls_decrypt_mbps(
    name: str = "tls13-aes128gcm", *, mb: float = 16, chunk: int = 1448, keys: bool = True
) -> dict[str, float]:
    """Feed one synthetic connection of ``name``; return record MB/s, plaintext bytes and records."""
    client, server, keylog, plain = build(name, mb)
    diag = Diagnostics()
    kl = None
    if keys:
        kl = KeyLog()
        kl.add_text(keylog, diag, source="bench")
    sink = _Sink()
    obs = TlsObserver(tcp_stream=0, diag=diag, keylog=kl, inner_factory=lambda alpn: sink)
    events = 0
    t0 = time.perf_counter()
    events += len(
        obs.feed(
            StreamChunk(
                direction=Direction.CLIENT_TO_SERVER, data=client, ts_ns=0, frame=1, offset=0
            )
        )
    )
    frame = 2
    for off in range(0, len(server), chunk):
        events += len(
            obs.feed(
                StreamChunk(
                    direction=Direction.SERVER_TO_CLIENT,
                    data=server[off : off + chunk],
                    ts_ns=frame,
                    frame=frame,
                    offset=off,
                )
            )
        )
        frame += 1
    elapsed = time.perf_counter() - t0
    if keys and (sink.n != plain or diag.rows):
        raise RuntimeError(f"{name}: decrypted {sink.n} of {plain} bytes; anomalies {diag.counts}")
    return {
        "mb_per_s": len(server) / elapsed / 1e6,
        "seconds": elapsed,
        "record_bytes": len(server),
        "plaintext_bytes": sink.n,
        "events": events,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=64)
    ap.add_argument("--chunk", type=int, default=1448)
    args = ap.parse_args(argv)
    for name in CIPHERS:
        for keys in (True, False):
            r = tls_decrypt_mbps(name, mb=args.mb, chunk=args.chunk, keys=keys)
            print(
                f"{name:22s} {'decrypt' if keys else 'no keys':8s} {r['mb_per_s']:8.1f} MB/s "
                f"({r['record_bytes'] / 1e6:.1f} MB in {r['seconds']:.2f} s, {r['events']} events)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
