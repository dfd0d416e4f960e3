"""Amplification through tiny records: a pcap record can be 16 bytes on disk (a zero-length
record) and gzip packs megabytes of them into kilobytes, so a small file is millions of
frames. Every table but ``packets`` grows with connections; ``packets`` grows with frames and
is capped (``load(max_packet_rows=...)``): past the cap, frames get no row, one
``table.packets_truncated`` row says from which frame, and every other table is exactly what
an uncapped load gives.

The full-size case (the 66 KB file of 4.2 million frames, ``_hostile.tiny_record_bomb()``)
is measured for docs/robustness.md, not run here: it takes ~15 s and 1.4 GB."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.capture import Capture
from tests.robustness._build import C2S, T0, Conv, bounded, codes, load_bytes, pcap, rows
from tests.robustness._hostile import tiny_record_bomb

_GOOD_FRAMES = 18  # the good connection, frames 1-18, then the zero-length records


def _without(cap: Capture, code: str) -> pd.DataFrame:
    w = cap.warnings
    return w[w["code"].astype(str) != code].reset_index(drop=True)


_ZERO_RECORDS = 52_428


def _after() -> bytes:
    """pcap records (no file header) of a second connection whose data segment is sent twice
    and acknowledged twice (a spurious retransmission): tcp_events rows after the records."""
    c = Conv(sport=40001, t0=T0 + 10**9).handshake().send(C2S, b"x" * 300)
    _, seg = c.packets[-2]
    t2, ack = c.packets[-1]
    c.packets += [(t2 + 1000, seg), (t2 + 2000, ack)]
    c.t += 3000
    return pcap(c.close())[24:]


_AFTER_FRAMES = 10
_FRAMES = _GOOD_FRAMES + _ZERO_RECORDS + _AFTER_FRAMES


@pytest.fixture(scope="module")
def small_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bomb at 1/80 scale: 52,428 zero-length records between the good connection and a
    second connection with a retransmission."""
    p = tmp_path_factory.mktemp("bomb") / "bomb.pcap.gz"
    p.write_bytes(tiny_record_bomb(zeros=16 * _ZERO_RECORDS, after=_after()))
    return p


def test_bomb_is_small_on_disk_and_many_frames(small_bomb: Path) -> None:
    cap = pcaptools.load(small_bomb)  # default cap far above: no row missing
    assert small_bomb.stat().st_size < 4000
    assert cap.summary.frames == len(cap.packets) == _FRAMES
    assert "table.packets_truncated" not in codes(cap)


@pytest.mark.parametrize("cap_rows", [10, 1000])
def test_capped_packets_table_and_every_other_table_unchanged(
    small_bomb: Path, cap_rows: int
) -> None:
    """Cap 10 cuts the good connection itself (frames 11-18 get no packets row), cap 1000
    the zero-length records; either way only the packets table and one warning change, and
    the connection after the records is in every other table."""
    full = pcaptools.load(small_bomb, max_packet_rows=None)
    capped = pcaptools.load(small_bomb, max_packet_rows=cap_rows)
    assert capped.summary.frames == full.summary.frames == _FRAMES
    # the packets table: exactly frames 1..cap, identical to the uncapped rows
    assert capped.packets["frame"].tolist() == list(range(1, cap_rows + 1))
    assert rows(capped.packets) == rows(full.packets.iloc[:cap_rows])  # (categories may differ)
    # one warning row, at the first frame without a row
    w = capped.warnings[capped.warnings["code"].astype(str) == "table.packets_truncated"]
    assert len(w) == 1
    row = w.iloc[0]
    assert row["frame"] == cap_rows + 1
    assert row["layer"] == "table" and pd.isna(row["tcp_stream"])
    assert f"stops at frame {cap_rows:,}" in row["detail"]
    assert f"frame {cap_rows + 1:,} and every later frame" in row["detail"]
    first_missing = full.packets.iloc[cap_rows]
    assert row["ts"] == first_missing["ts"]
    counts = capped.summary.extra["warning_counts"]
    assert isinstance(counts, dict) and counts["table.packets_truncated"] == 1
    full_counts = full.summary.extra["warning_counts"]
    assert isinstance(full_counts, dict)
    assert counts == {**full_counts, "table.packets_truncated": 1}
    # every other table covers every frame, exactly as without the cap
    for name in pcaptools.TABLES:
        if name not in ("packets", "warnings"):
            pd.testing.assert_frame_equal(capped.tables[name], full.tables[name], obj=name)
    assert len(capped.connections) == 2 and len(capped.http_requests) == 1
    kinds = capped.tcp_events["kind"].astype(str).tolist()
    assert kinds == ["spurious_retransmission", "resent", "duplicate_ack"]
    assert (capped.tcp_events["frame"] > _GOOD_FRAMES + _ZERO_RECORDS).all()
    assert rows(_without(capped, "table.packets_truncated")) == rows(full.warnings)


def test_cap_with_parallel_workers(small_bomb: Path) -> None:
    """load(workers=2): the first frame past the cap belongs to worker 1's connection (the one
    after the zeros), the warning is worker 0's (file level): still one row, at that frame."""
    cap_rows = _GOOD_FRAMES + _ZERO_RECORDS
    one = pcaptools.load(small_bomb, max_packet_rows=cap_rows)
    two = pcaptools.load(small_bomb, max_packet_rows=cap_rows, workers=2)
    assert sorted(two.packets["frame"]) == one.packets["frame"].tolist() == list(
        range(1, cap_rows + 1)
    )
    for cap in (one, two):
        w = cap.warnings[cap.warnings["code"].astype(str) == "table.packets_truncated"]
        assert w["frame"].tolist() == [cap_rows + 1]
        counts = cap.summary.extra["warning_counts"]
        assert isinstance(counts, dict) and counts["table.packets_truncated"] == 1


def test_zero_cap_and_packets_off(small_bomb: Path) -> None:
    zero = pcaptools.load(small_bomb, max_packet_rows=0)
    assert len(zero.packets) == 0
    w = zero.warnings
    assert w.loc[w["code"].astype(str) == "table.packets_truncated", "frame"].tolist() == [1]
    off = pcaptools.load(small_bomb, packets=False)  # switched off: no table, no warning
    assert len(off.packets) == 0 and "table.packets_truncated" not in codes(off)


def test_cap_bounds_memory(tmp_path: Path) -> None:
    """80,018 frames from a 7 KB file: with a cap of 1,000 rows, the peak of new allocations
    stays under 8 MiB (uncapped, the packets table alone needs ~50 MB)."""
    data = tiny_record_bomb(zeros=16 * 80_000)
    assert len(data) < 7_000
    cap, _ = bounded(
        lambda: load_bytes(tmp_path, data, "b.pcap.gz", max_packet_rows=1000), limit=8 << 20
    )
    assert cap.summary.frames == 80_018 and len(cap.packets) == 1000
    counts = cap.summary.extra["warning_counts"]
    assert isinstance(counts, dict) and counts["net.truncated_link_header"] == 80_000
    assert cap.packets["ts"].iloc[0] == pd.Timestamp(T0, unit="ns", tz="UTC")
