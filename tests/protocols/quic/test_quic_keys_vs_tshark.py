"""quic_packets and quic_frames with a key log, against tshark 4.0.17 with the same secrets.

Captures: the corpus's illustrated-quic (key log file) and Chrome/Cloudflare (keys in the
pcapng DSB), and the shipped h3-sse-chat, h3-sse-lossy, h3-sse-lossy-server and quic-suites
(the three TLS 1.3 cipher suites and QUIC v2; their .keys).
Per frame of the capture, in order: every packet's packet number (``quic.packet_number``),
long packet type and source connection ID (``quic.long.packet_type``, for QUIC v2
``quic.long.packet_type_v2``, ``quic.scid``), and
every frame's type (``quic.frame_type``), STREAM stream id / offset / length
(``quic.stream.stream_id``, ``quic.stream.offset`` when the OFF bit is set,
``quic.stream.length`` when LEN is), ACK largest acknowledged, ACK delay field and the CRYPTO
offsets and lengths. Every Handshake, 0-RTT and 1-RTT packet of these captures decrypts.

Known difference (asserted as such): tshark takes the zero padding after the Chrome server's
coalesced Initial in frame 49 for one more short-header packet (packet number 3097482, no
frames); pcaptools does not (see test_quic_vs_tshark).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import pcaptools
from tests.conftest import CAPTURES, CORPUS
from tests.oracle import keylog_options, tshark_fields

CASES = {
    "illustrated-quic-capture.pcap": (CORPUS / "illustrated-quic-capture.pcap",
                                      CORPUS / "illustrated-quic-keylog.txt"),
    "chrome-cloudflare-quic-with-secrets.pcapng": (
        CORPUS / "chrome-cloudflare-quic-with-secrets.pcapng", None),
    "h3-sse-chat.pcapng": (CAPTURES / "h3-sse-chat.pcapng", CAPTURES / "h3-sse-chat.keys"),
    "h3-sse-lossy.pcapng": (CAPTURES / "h3-sse-lossy.pcapng", CAPTURES / "h3-sse-lossy.keys"),
    "h3-sse-lossy-server.pcapng": (CAPTURES / "h3-sse-lossy-server.pcapng",
                                   CAPTURES / "h3-sse-lossy-server.keys"),
    # AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305 over QUIC v1, AES-128-GCM over QUIC v2
    "quic-suites.pcapng": (CAPTURES / "quic-suites.pcapng", CAPTURES / "quic-suites.keys"),
}
#: frame -> tshark's extra packet numbers (padding it reads as a packet)
EXTRA_PNS = {"chrome-cloudflare-quic-with-secrets.pcapng": {49: ["3097482"]}}

_FIELDS = ("frame.number", "quic.packet_number", "quic.frame_type", "quic.stream.stream_id",
           "quic.stream.offset", "quic.stream.length", "quic.ack.largest_acknowledged",
           "quic.ack.ack_delay", "quic.crypto.offset", "quic.crypto.length",
           "quic.long.packet_type", "quic.scid", "quic.long.packet_type_v2")
_LONG = {"initial": "0", "0rtt": "1", "handshake": "2", "retry": "3"}
#: QUIC v2's long-header type bits (RFC 9369 §3.2), which tshark 4.0 puts in their own field
_LONG_V2 = {"initial": "1", "0rtt": "2", "handshake": "3", "retry": "0"}
_VERSION_2 = 0x6B3343CF


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> tuple[str, pcaptools.Capture, dict[int, Any]]:
    name = request.param
    path, keys = CASES[name]
    if not path.exists():
        pytest.skip(f"{name} is absent")
    cap = pcaptools.load(path, keylog=keys)
    rows = tshark_fields(path, _FIELDS, keylog_options(keys), display_filter="quic")
    theirs = {int(r[0]): {f: (r[i].split(",") if r[i] else []) for i, f in enumerate(_FIELDS)}
              for r in rows}
    return name, cap, theirs


def _ours(frames: pd.DataFrame, packets: pd.DataFrame) -> dict[int, dict[str, list[str]]]:
    """The same fields from quic_packets and quic_frames, per frame (plain loops: cheap)."""
    out: dict[int, dict[str, list[str]]] = {}
    for p in packets.sort_values(["frame", "index"]).itertuples():
        o = out.setdefault(int(p.frame), {f: [] for f in _FIELDS[1:]})
        if not pd.isna(p.packet_number):
            o["quic.packet_number"].append(str(int(p.packet_number)))
        if p.long_header and not pd.isna(p.version) and int(p.version) == _VERSION_2:
            o["quic.long.packet_type_v2"].append(_LONG_V2[str(p.packet_type)])
            if p.scid:
                o["quic.scid"].append(str(p.scid))
        elif p.long_header:
            o["quic.long.packet_type"].append(_LONG[str(p.packet_type)])
            if p.scid:  # (tshark leaves an empty connection ID out)
                o["quic.scid"].append(str(p.scid))
    for r in frames.sort_values(["frame", "packet_index", "frame_index"]).itertuples():
        o = out[int(r.frame)]
        code = int(r.frame_type_code)
        o["quic.frame_type"].append(str(code))
        if r.frame_type == "STREAM":
            o["quic.stream.stream_id"].append(str(int(r.stream_id)))
            if code & 4:
                o["quic.stream.offset"].append(str(int(r.offset)))
            if code & 2:
                o["quic.stream.length"].append(str(int(r.length)))
        elif r.frame_type == "ACK":
            o["quic.ack.largest_acknowledged"].append(str(int(r.ack_largest)))
            o["quic.ack.ack_delay"].append(str(int(r.ack_delay)))
        elif r.frame_type == "CRYPTO":
            o["quic.crypto.offset"].append(str(int(r.offset)))
            o["quic.crypto.length"].append(str(int(r.length)))
    return out


def test_every_protected_packet_decrypts(case: tuple[str, pcaptools.Capture, Any]) -> None:
    name, cap, _ = case
    pk = cap.quic_packets
    protected = pk[pk["packet_type"].isin(["initial", "handshake", "0rtt", "1rtt"])]
    assert len(protected) > 0
    assert (protected["status"] == "decrypted").all(), name
    assert protected["packet_number"].notna().all()
    qc = cap.quic_connections
    assert qc["keys_found"].all() and not qc["needs_keylog"].any()
    assert (qc["decrypt_failed"] == 0).all()
    assert not cap.warnings["code"].astype(str).str.startswith("quic.").any()


def test_packet_numbers_and_frames_equal_tshark(case: tuple[str, pcaptools.Capture, Any]
                                                ) -> None:
    name, cap, theirs = case
    ours = _ours(cap.quic_frames, cap.quic_packets)
    assert set(ours) == set(theirs)
    extra = EXTRA_PNS.get(name, {})
    compared = 0
    for frame, o in ours.items():
        t = theirs[frame]
        pns = t["quic.packet_number"]
        for pn in extra.get(frame, []):
            pns.remove(pn)
        assert o["quic.packet_number"] == pns, (name, frame)
        for f in _FIELDS[2:]:
            assert o[f] == t[f], (name, frame, f)
        compared += len(o["quic.frame_type"])
    assert compared == len(cap.quic_frames) > 0
