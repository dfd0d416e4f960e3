"""Bad input through the whole pipeline: clear errors for non-captures, warning rows and
everything before the damage analysed for broken ones."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import pcaptools
from tests.conftest import shipped_captures


def _demo() -> Path:
    path = next((p for p in shipped_captures() if p.name == "http1-lossy.pcap"), None)
    if path is None:
        pytest.skip("captures/http1-lossy.pcap is absent")
    return path


def test_not_a_capture_raises_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "notes.json"
    p.write_text('{\n  "a": 1}\n')
    with pytest.raises(pcaptools.CaptureFormatError, match="JSON"):
        pcaptools.load(p)


def test_empty_file_raises_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "empty.pcap"
    p.write_bytes(b"")
    with pytest.raises(pcaptools.CaptureFormatError, match="empty"):
        pcaptools.load(p)


def test_missing_file_raises_open_error(tmp_path: Path) -> None:
    with pytest.raises(pcaptools.CaptureOpenError):
        pcaptools.load(tmp_path / "nope.pcap")


def test_truncated_capture_keeps_everything_before_the_cut(tmp_path: Path) -> None:
    src = _demo()
    full = pcaptools.load(src)
    data = src.read_bytes()
    rng = random.Random(7)
    for cut in sorted(rng.sample(range(200, len(data) - 1), 12)):
        p = tmp_path / f"cut{cut}.pcap"
        p.write_bytes(data[:cut])
        cap = pcaptools.load(p)
        n = cap.summary.frames
        assert n < full.summary.frames
        # every frame before the cut is there, with the same stream numbers and flags
        same = full.packets[full.packets["frame"] <= n]
        assert cap.packets["frame"].tolist() == same["frame"].tolist()
        assert cap.packets["tcp_stream"].tolist() == same["tcp_stream"].tolist()
        ev_full = full.tcp_events[full.tcp_events["frame"] <= n]
        assert sorted(zip(cap.tcp_events["frame"], cap.tcp_events["kind"].astype(str), strict=True)) == \
            sorted(zip(ev_full["frame"], ev_full["kind"].astype(str), strict=True))
        # a cut exactly between two records is a clean (shorter) file: no warning; a cut inside a
        # record is one row. Out-of-order bytes still waiting for a hole at the cut are a gap,
        # and the hole itself (never resent nor acknowledged before the cut) an unresolved one.
        codes = cap.warnings["code"].astype(str).tolist()
        assert codes.count("capture.truncated_record") <= 1
        assert set(codes) <= {"capture.truncated_record", "tcp.reassembly_gap", "tcp.unresolved_gap"}
        unresolved = cap.tcp_losses[cap.tcp_losses["kind"].astype(str) == "unresolved"]
        assert (len(unresolved) > 0) == ("tcp.unresolved_gap" in codes)


def test_garbage_packets_become_warning_rows_and_the_rest_is_analysed(tmp_path: Path) -> None:
    """Overwrite the IP+TCP headers of some frames with garbage (record framing intact)."""
    src = _demo()
    full = pcaptools.load(src)
    data = bytearray(src.read_bytes())
    off, frame, damaged = 24, 0, []
    rng = random.Random(3)
    while off + 16 <= len(data):
        incl = int.from_bytes(data[off + 8:off + 12], "little")
        frame += 1
        if frame % 25 == 0 and incl > 40:
            start = off + 16 + 14  # after the Ethernet header
            data[start:start + 24] = bytes(rng.randrange(256) for _ in range(24))
            damaged.append(frame)
        off += 16 + incl
    p = tmp_path / "garbled.pcap"
    p.write_bytes(bytes(data))
    cap = pcaptools.load(p)
    assert cap.summary.frames == full.summary.frames
    assert len(cap.warnings) >= 1
    w = cap.warnings
    net_rows = w[w["layer"].astype(str) == "net"]
    assert len(net_rows) >= 1
    assert set(net_rows["frame"].astype(int)) <= set(damaged)
    # the bytes of segments lost to garbage are gaps in the byte streams, reported later; the
    # receiver acknowledged them, so tcp_losses calls them capture drops (or unresolved at the end)
    assert set(w["code"].astype(str)) - set(net_rows["code"].astype(str)) <= {
        "tcp.reassembly_gap", "tcp.capture_started_mid_stream", "tcp.capture_drop", "tcp.unresolved_gap"}
    assert not (cap.tcp_losses["kind"].astype(str) == "loss").sum() > (full.tcp_losses["kind"].astype(str) == "loss").sum()
    # undamaged frames keep their TCP decode
    ok = cap.packets[~cap.packets["frame"].isin(damaged)]
    ok_full = full.packets[~full.packets["frame"].isin(damaged)]
    assert ok["tcp_len"].tolist() == ok_full["tcp_len"].tolist()
