"""The packer of idle connections' parsers (:mod:`pcaptools.tcp.packing`): shared objects stay
shared, unknown and unpicklable objects are refused (the connection keeps its live state), TLS
state is flagged as secret, and the objects pickle cannot pack by default (AEAD ciphers, a
record reader's memoryviews) come back working. That load() with every idle connection packed
gives every table of load() without it: ``tests/tcp/test_frozen.py``."""

from __future__ import annotations

import zlib

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.tls.decrypt import _AAD13, Tls13Decryptor
from pcaptools.protocols.tls.keylog import KeyLog, SessionSecrets
from pcaptools.protocols.tls.keyschedule import traffic_keys
from pcaptools.protocols.tls.records import RecordReader
from pcaptools.protocols.tls.suites import suite_info
from pcaptools.tcp.packing import StreamPacker


class _Plugin:
    """A plugin's state that does not say it may be packed."""

    def __init__(self) -> None:
        self.n = 1


class _OptedIn(_Plugin):
    _packing_ = "packable"


def test_shared_objects_are_referred_to_not_copied() -> None:
    diag, keys = Diagnostics(), KeyLog()
    secrets = SessionSecrets(master_secret=b"m" * 48)
    state = {"diag": diag, "keys": keys, "secrets": secrets, "mine": [1, 2, bytearray(b"x")]}
    packer = StreamPacker()
    blob = packer.pack(state)
    assert blob is not None and not packer.secret
    assert b"m" * 48 not in blob  # (the secret is referred to, not in the blob)
    back = packer.unpack(blob)
    assert back["diag"] is diag and back["keys"] is keys and back["secrets"] is secrets
    assert back["mine"] == [1, 2, bytearray(b"x")] and back["mine"] is not state["mine"]
    again = packer.unpack(packer.pack(state))  # type: ignore[arg-type]
    assert again["diag"] is diag  # (one number per shared object, however often packed)


def test_unknown_and_unpicklable_objects_are_refused() -> None:
    packer = StreamPacker()
    assert packer.pack({"plugin": _Plugin()}) is None
    assert packer.pack([zlib.decompressobj()]) is None
    assert packer.pack([zlib.decompressobj()]) is None
    assert packer.refused == {f"{__name__}._Plugin": 1, "zlib.Decompress": 2}
    blob = packer.pack({"plugin": _OptedIn()})  # (a plugin's class that opts in)
    assert blob is not None and packer.unpack(blob)["plugin"].n == 1


def test_tls_state_is_secret_and_decrypts_the_same_once_unpacked() -> None:
    suite = suite_info(0x1301)  # TLS_AES_128_GCM_SHA256
    secret = bytes(range(32))
    key, iv = traffic_keys(suite.prf_hash, secret, suite.key_len, 12)

    def record(seq: int, text: bytes) -> bytes:
        nonce = (int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big")
        n = len(text) + 1 + 16
        return AESGCM(key).encrypt(nonce, text + b"\x17", _AAD13.pack(23, 0x0303, n))

    dec = Tls13Decryptor(suite, secret)
    assert dec.decrypt(23, 0x0303, record(0, b"first")) == (23, b"first")
    packer = StreamPacker()
    blob = packer.pack({"dec": dec})
    assert blob is not None and packer.secret  # (holds a key: kept in memory by the tracker)
    back = packer.unpack(blob)["dec"]
    assert back.seq == 1 and back is not dec
    assert back.decrypt(23, 0x0303, record(1, b"second")) == (23, b"second")
    assert packer.pack({"plain": [1]}) is not None and not packer.secret  # (per packing)


def test_a_record_in_progress_survives_packing() -> None:
    """A TLS record split over chunks is held as memoryview pieces, which pickle cannot pack:
    packed joined, the record completes as it would have."""
    data = bytes([23, 3, 3, 0, 10]) + bytes(range(10)) + bytes([23, 3, 3, 0, 2]) + b"ab"
    want = RecordReader().feed(data, 0)
    r = RecordReader()
    recs, _ = r.feed(memoryview(data)[:9], 0)
    assert not recs and r.parts
    packer = StreamPacker()
    blob = packer.pack(r)
    assert blob is not None
    back = packer.unpack(blob)
    got = back.feed(data[9:], 9)
    assert [tuple(x) for x in got[0]] == [tuple(x) for x in want[0]]
    assert got[1] == want[1] and back.records == 2 and back.bytes_seen == len(data)
