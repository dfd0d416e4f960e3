"""End to end through the public API: pcaptools.load() agrees with tshark 4.0 on every capture.

For every capture in captures/ and ../shared/corpus/: the number of frames, the tcp.stream of
every TCP frame, the set of frames carrying each TCP analysis flag, duplicate-ACK numbers, the
initial RTT of every stream, and the SYN / SYN-ACK frames of every handshake.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest

import pcaptools
from tests.conftest import corpus_files, shipped_captures
from tests.oracle import tshark_fields

CAPTURES = [*shipped_captures(), *corpus_files()]

FLAG_FIELDS = {
    "retransmission": "tcp.analysis.retransmission",
    "fast_retransmission": "tcp.analysis.fast_retransmission",
    "spurious_retransmission": "tcp.analysis.spurious_retransmission",
    "out_of_order": "tcp.analysis.out_of_order",
    "lost_segment": "tcp.analysis.lost_segment",
    "ack_lost_segment": "tcp.analysis.ack_lost_segment",
    "duplicate_ack": "tcp.analysis.duplicate_ack",
    "keep_alive": "tcp.analysis.keep_alive",
    "keep_alive_ack": "tcp.analysis.keep_alive_ack",
    "zero_window": "tcp.analysis.zero_window",
    "zero_window_probe": "tcp.analysis.zero_window_probe",
    "zero_window_probe_ack": "tcp.analysis.zero_window_probe_ack",
    "window_full": "tcp.analysis.window_full",
    "window_update": "tcp.analysis.window_update",
    "reused_ports": "tcp.analysis.reused_ports",
}
FIELDS = ("frame.number", "tcp.stream", "tcp.flags.syn", "tcp.flags.ack",
          "tcp.analysis.duplicate_ack_num", "tcp.analysis.initial_rtt", "icmp.type", "icmpv6.type",
          "tcp.analysis.ack_rtt", "tcp.analysis.acks_frame",
          *FLAG_FIELDS.values())
ICMP = (FIELDS.index("icmp.type"), FIELDS.index("icmpv6.type"))


def _tcp_rows(rows: list[list[str]]) -> list[list[str]]:
    """tshark rows of real TCP segments (not ICMP errors quoting a TCP header)."""
    return [r for r in rows if r[1] != "" and not (r[ICMP[0]] or r[ICMP[1]])]


def _ids(p: Path) -> str:
    return p.name


@pytest.fixture(scope="module")
def loaded() -> dict[Path, pcaptools.Capture]:
    return {}


def _load(cache: dict[Path, pcaptools.Capture], path: Path) -> pcaptools.Capture:
    if path not in cache:
        cache[path] = pcaptools.load(path)
    return cache[path]


def _tshark(path: Path) -> list[list[str]]:
    return tshark_fields(str(path), FIELDS)


@pytest.mark.tshark
@pytest.mark.parametrize("path", CAPTURES, ids=_ids)
def test_frames_and_stream_index_match_tshark(tshark: str, loaded, path: Path) -> None:
    cap = _load(loaded, path)
    rows = _tshark(path)
    assert cap.summary.frames == len(rows)
    ours = cap.packets.dropna(subset=["tcp_stream"])
    ours_map = dict(zip(ours["frame"].tolist(), ours["tcp_stream"].astype(int).tolist(), strict=True))
    # every frame with a tcp.stream, ICMP errors quoting a TCP header included (as tshark)
    theirs_map = {int(r[0]): int(r[1]) for r in rows if r[1] != ""}
    assert ours_map == theirs_map


@pytest.mark.tshark
@pytest.mark.parametrize("path", CAPTURES, ids=_ids)
def test_analysis_flags_match_tshark(tshark: str, loaded, path: Path) -> None:
    cap = _load(loaded, path)
    rows = _tcp_rows(_tshark(path))
    idx = {f: i for i, f in enumerate(FIELDS)}
    ev = cap.tcp_events
    for kind, field in FLAG_FIELDS.items():
        theirs = {int(r[0]) for r in rows if r[idx[field]] != ""}
        if kind == "retransmission":
            # tshark sets tcp.analysis.retransmission on fast and spurious retransmissions too;
            # our kinds are exclusive and Capture.retransmissions is their union.
            ours = set(cap.retransmissions["frame"].tolist())
        else:
            ours = set(ev.loc[ev["kind"] == kind, "frame"].tolist())
        assert ours == theirs, f"{kind}: only ours {sorted(ours - theirs)[:10]}, only tshark {sorted(theirs - ours)[:10]}"
    dup = ev[ev["kind"] == "duplicate_ack"]
    ours_num = dict(zip(dup["frame"].tolist(), dup["dup_ack_num"].astype(int).tolist(), strict=True))
    theirs_num = {int(r[0]): int(r[idx["tcp.analysis.duplicate_ack_num"]]) for r in rows
                  if r[idx["tcp.analysis.duplicate_ack_num"]] != ""}
    assert ours_num == theirs_num


@pytest.mark.tshark
@pytest.mark.parametrize("path", CAPTURES, ids=_ids)
def test_handshakes_match_tshark(tshark: str, loaded, path: Path) -> None:
    cap = _load(loaded, path)
    rows = _tshark(path)
    idx = {f: i for i, f in enumerate(FIELDS)}
    syns: dict[int, list[int]] = defaultdict(list)
    synacks: dict[int, list[int]] = defaultdict(list)
    irtt: dict[int, float] = {}
    for r in _tcp_rows(rows):
        stream = int(r[1])
        if r[idx["tcp.flags.syn"]] == "1":
            (synacks if r[idx["tcp.flags.ack"]] == "1" else syns)[stream].append(int(r[0]))
        v = r[idx["tcp.analysis.initial_rtt"]]
        if v and stream not in irtt:
            irtt[stream] = float(v) * 1e3
    hs = cap.tcp_handshakes.set_index("tcp_stream")
    assert set(hs.index) == set(syns) | set(synacks)
    for stream, frames in syns.items():
        assert hs.at[stream, "syn_frame"] == frames[0]
        assert hs.at[stream, "syn_count"] == len(frames)
    for stream, frames in synacks.items():
        assert hs.at[stream, "synack_frame"] == frames[0]
        assert hs.at[stream, "synack_count"] == len(frames)
    for stream in hs.index:
        ours = hs.at[stream, "irtt_ms"]
        if stream in irtt:
            assert ours == pytest.approx(irtt[stream], abs=1e-3), stream
        else:
            assert math.isnan(ours), stream


@pytest.mark.tshark
@pytest.mark.parametrize("path", CAPTURES, ids=_ids)
def test_ack_rtt_matches_tshark(tshark: str, loaded, path: Path) -> None:
    cap = _load(loaded, path)
    rows = _tcp_rows(_tshark(path))
    i_rtt, i_acks = FIELDS.index("tcp.analysis.ack_rtt"), FIELDS.index("tcp.analysis.acks_frame")
    theirs = {int(r[0]): (round(float(r[i_rtt]) * 1e3, 6), int(r[i_acks])) for r in rows if r[i_rtt]}
    p = cap.packets.dropna(subset=["ack_rtt_ms"])
    ours = {f: (round(rtt, 6), int(a)) for f, rtt, a in
            zip(p["frame"].tolist(), p["ack_rtt_ms"].tolist(), p["acks_frame"].tolist(), strict=True)}
    assert ours == theirs
