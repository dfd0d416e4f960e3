"""captures/quic-suites.pcapng: QUIC packet protection with each TLS 1.3 cipher suite and
QUIC version 2, decrypted with the shipped key log, against tshark 4.0.17 and the recording's
facts.

scripts/record_captures.py (scenario quic-suites) recorded four aioquic connections, one
request each: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384 and TLS_CHACHA20_POLY1305_SHA256
(ChaCha20 header protection) over QUIC v1, then TLS_AES_128_GCM_SHA256 over QUIC v2
(0x6b3343cf: RFC 9369's Initial salt, ``quicv2`` key labels, its own long-header type bits).
tshark 4.0.17 decrypts all four (QUIC v2 final included; it puts v2's long-header types in
``quic.long.packet_type_v2``). Per packet numbers, frame types, STREAM / ACK / CRYPTO fields
are compared frame by frame in tests/protocols/quic/test_quic_keys_vs_tshark.py; here each
connection's version, connection IDs, SNI, ALPN, cipher suite, packet and frame counts and
its response stream are.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import pcaptools
from tests.conftest import CAPTURES
from tests.oracle import keylog_options, tshark_fields

SUITES = CAPTURES / "quic-suites.pcapng"
KEYS = CAPTURES / "quic-suites.keys"
SERVER = "192.0.2.20"
#: per connection, in order: (cipher suite, quic_connections.version, tshark's quic.version)
PLANNED = [("TLS_AES_128_GCM_SHA256", "1", "0x00000001"),
           ("TLS_AES_256_GCM_SHA384", "1", "0x00000001"),
           ("TLS_CHACHA20_POLY1305_SHA256", "1", "0x00000001"),
           ("TLS_AES_128_GCM_SHA256", "2", "0x6b3343cf")]
_TLS_SUITES = {"0x1301": "TLS_AES_128_GCM_SHA256", "0x1302": "TLS_AES_256_GCM_SHA384",
               "0x1303": "TLS_CHACHA20_POLY1305_SHA256"}

pytestmark = pytest.mark.skipif(not SUITES.is_file(), reason="quic-suites.pcapng is absent")

_FIELDS = ("frame.number", "ip.src", "quic.connection.number", "quic.version", "quic.header_form",
           "quic.dcid", "quic.scid", "quic.frame_type", "quic.remaining_payload",
           "tls.handshake.type", "tls.handshake.extensions_server_name",
           "tls.handshake.extensions_alpn_str", "tls.handshake.ciphersuite",
           "quic.stream.stream_id", "quic.stream_data")


@pytest.fixture(scope="module")
def cap() -> pcaptools.Capture:
    return pcaptools.load(SUITES, keylog=KEYS)


@pytest.fixture(scope="module")
def facts() -> dict[str, Any]:
    return dict(json.loads(Path(f"{SUITES}.facts.json").read_text()))


@pytest.fixture(scope="module")
def theirs() -> dict[int, dict[str, Any]]:
    """tshark's view per QUIC connection number: its datagrams' fields, in order."""
    out: dict[int, dict[str, Any]] = {}
    for r in tshark_fields(SUITES, _FIELDS, keylog_options(KEYS), display_filter="quic"):
        v = {f: (r[i].split(",") if r[i] else []) for i, f in enumerate(_FIELDS)}
        c = out.setdefault(int(v["quic.connection.number"][0]), {"datagrams": []})
        c["datagrams"].append(v)
    for c in out.values():
        d = c["datagrams"]
        first_c = next(x for x in d if x["ip.src"][0] != SERVER)
        first_s = next(x for x in d if x["ip.src"][0] == SERVER)
        hs = [(t, x) for x in d for t in x["tls.handshake.type"]]
        c.update(
            version=first_c["quic.version"][0], original_dcid=first_c["quic.dcid"][0],
            client_scid=first_c["quic.scid"][0], server_scid=first_s["quic.scid"][0],
            sni=next(x["tls.handshake.extensions_server_name"][0] for t, x in hs if t == "1"),
            # ALPN in the server's EncryptedExtensions (type 8, in a Handshake packet)
            alpn=next(x["tls.handshake.extensions_alpn_str"][-1] for t, x in hs if t == "8"),
            cipher=_TLS_SUITES[next(x["tls.handshake.ciphersuite"][0] for t, x in hs
                                    if t == "2")],
            undecrypted=sum(len(x["quic.remaining_payload"]) for x in d),
            frame_types=Counter(int(t) for x in d for t in x["quic.frame_type"]),
            packets={side: sum(len(x["quic.header_form"]) for x in d
                               if (x["ip.src"][0] == SERVER) == (side == "server"))
                     for side in ("client", "server")},
        )
    return out


def test_each_connection_has_its_suite_and_version(cap: pcaptools.Capture,
                                                   theirs: dict[int, dict[str, Any]],
                                                   facts: dict[str, Any]) -> None:
    qc = cap.quic_connections
    assert len(qc) == len(theirs) == 4
    got = list(zip(qc["cipher"].astype(str), qc["version"].astype(str), strict=True))
    assert got == [(c, v) for c, v, _ in PLANNED]
    # aioquic's own view, in the facts
    q = [c["quic"] for c in facts["connections"]]
    assert [("TLS_" + x["cipher_suite"], x["version"]) for x in q] == [
        (c, t) for c, _, t in PLANNED]
    for i, row in enumerate(qc.to_dict("records")):
        t = theirs[i]
        assert t["version"] == PLANNED[i][2]
        assert row["cipher"] == t["cipher"]
        assert (row["original_dcid"], row["client_scid"], row["server_scid"]) == (
            t["original_dcid"], t["client_scid"], t["server_scid"])
        assert (row["sni"], row["alpn"]) == (t["sni"], t["alpn"]) == ("lab.test", "h3")
        assert row["tls_version"] == "TLS 1.3"
        # the facts name the same connection IDs
        assert (q[i]["original_dcid"], q[i]["client_scid"], q[i]["server_cid"]) == (
            t["original_dcid"], t["client_scid"], t["server_scid"])


def test_every_packet_of_every_connection_decrypts(cap: pcaptools.Capture,
                                                   theirs: dict[int, dict[str, Any]]) -> None:
    qc = cap.quic_connections.reset_index(drop=True)
    pk, fr = cap.quic_packets, cap.quic_frames
    assert (pk["status"].astype(str) == "decrypted").all()
    assert (qc["decrypt_failed"] == 0).all() and qc["keys_found"].all()
    assert not cap.warnings["code"].astype(str).str.startswith("quic.").any()
    for i in range(4):
        t = theirs[i]
        assert t["undecrypted"] == 0
        mine = pk[pk["quic_connection"] == i]
        for side, d in (("client", "client_to_server"), ("server", "server_to_client")):
            n = int((mine["direction"].astype(str) == d).sum())
            assert n == t["packets"][side]
            # the key log's packets: all but the Initials (decrypted with RFC 9001 keys)
            assert int(qc.loc[i, f"{side}_decrypted_packets"]) == (
                n - int(qc.loc[i, f"{side}_initial_packets"]))
        # every frame, by type code: pcaptools' quic_frames and tshark's quic.frame_type
        codes = Counter(fr[fr["quic_connection"] == i]["frame_type_code"].astype(int).tolist())
        assert codes == t["frame_types"]
        assert sum(codes[t] for t in range(0x08, 0x10)) >= 2  # STREAM frames (request, answer)
    # long-header packet types, v2 included: Initials and Handshakes of each connection
    types = pk.groupby(["quic_connection", "packet_type"], observed=True).size()
    for i in range(4):
        assert types[(i, "initial")] >= 2 and types[(i, "handshake")] >= 2
        assert types[(i, "1rtt")] > 5


def test_response_streams_equal_the_timeline(cap: pcaptools.Capture, facts: dict[str, Any]
                                             ) -> None:
    ev = cap.http3_sse_events
    st = cap.http3_streams
    for i, c in enumerate(facts["connections"]):
        (r,) = c["requests"]
        mine = ev[(ev["quic_connection"] == i) & (ev["stream_id"] == r["quic_stream_id"])]
        assert len(mine) == r["sse_events_received"] == r["plan"]["tokens"] + 2 == 7
        assert mine["delta_text"].dropna().tolist() == r["tokens"] == r["server_tokens"]
        assert mine["done"].astype(bool).tolist() == [False] * 6 + [True]
        s = st[(st["quic_connection"] == i) & (st["stream_id"] == r["quic_stream_id"])].iloc[0]
        assert (int(s["status"]), s["content_type"]) == (200, "text/event-stream")
        assert s["end_reason"] == "end_stream" and not bool(s["partial"])
        assert int(s["server_data_bytes"]) == r["body_bytes"]
    # tshark's decrypted stream data, reassembled by the recorder: the same tokens
    tq = facts["tshark"]["quic"]["streams"]
    assert [s["tokens"] for s in tq] == [c["requests"][0]["tokens"] for c in facts["connections"]]
