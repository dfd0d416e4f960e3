"""Parquet and CSV export: every table and dtype back as load() gave it; partitions by capture."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools import export
from tests.conftest import CAPTURES
from tests.test_many import tshark_counts

pytest.importorskip("pyarrow")
DEMO_FRAMES, DEMO_CONNS = (tshark_counts("demo.pcapng") if (CAPTURES / "demo.pcapng.facts.json")
                           .exists() else (0, 0))


@pytest.fixture(scope="module")
def demo() -> pcaptools.Capture:
    if not (CAPTURES / "demo.pcapng").exists():
        pytest.skip("captures/demo.pcapng missing")
    return pcaptools.load(CAPTURES / "demo.pcapng")


def test_to_parquet_round_trips_every_table(demo: pcaptools.Capture, tmp_path: Path) -> None:
    written = demo.to_parquet(tmp_path / "out")
    assert sorted(written) == sorted([*pcaptools.TABLES, "captures"])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"{n}.parquet" for n in [*pcaptools.TABLES, "captures"])
    for name, df in demo.tables.items():
        back = pd.read_parquet(written[name])
        # same columns, same dtypes (empty tables included), same values
        pd.testing.assert_frame_equal(back, df, check_categorical=False)
        assert list(back.dtypes.astype(str)) == list(df.dtypes.astype(str)), name
    assert len(pd.read_parquet(written["connections"])) == DEMO_CONNS
    assert len(pd.read_parquet(written["packets"])) == DEMO_FRAMES
    summ = pd.read_parquet(written["captures"])
    assert summ.loc[0, "frames"] == DEMO_FRAMES and summ.loc[0, "format"] == "pcapng"
    assert json.loads(summ.loc[0, "extra"])["warning_counts"] == dict(
        demo.summary.extra["warning_counts"])


def test_module_function_subset_and_unknown_table(demo: pcaptools.Capture, tmp_path: Path) -> None:
    written = export.to_parquet(demo, tmp_path, tables=["connections", "warnings"])
    assert sorted(written) == ["connections", "warnings"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["connections.parquet", "warnings.parquet"]
    with pytest.raises(ValueError, match="unknown tables"):
        export.to_parquet(demo, tmp_path, tables=["nope"])


def test_header_lists_survive(corpus: Path, tmp_path: Path) -> None:
    cap = pcaptools.load(corpus / "http2-with-cookies.pcapng")
    frames = cap.http2_frames
    assert frames["headers"].notna().sum() == 30
    back = pd.read_parquet(cap.to_parquet(tmp_path)["http2_frames"])
    i = frames.index[frames["headers"].notna()][0]
    assert [tuple(h) for h in back.loc[i, "headers"]] == list(frames.loc[i, "headers"])
    assert back["headers"].isna().sum() == frames["headers"].isna().sum()
    pd.testing.assert_frame_equal(back.drop(columns="headers"), frames.drop(columns="headers"),
                                  check_categorical=False)


def test_to_csv(demo: pcaptools.Capture, tmp_path: Path) -> None:
    written = export.to_csv(demo, tmp_path)
    assert sorted(written) == sorted([*pcaptools.TABLES, "captures"])
    lines = written["connections"].read_text().splitlines()
    assert lines[0].split(",") == pcaptools.TABLES["connections"].names
    assert len(lines) == 1 + DEMO_CONNS
    first = dict(zip(lines[0].split(","), lines[1].split(","), strict=True))
    c0 = demo.connections.iloc[0]
    assert (first["tcp_stream"], first["client_port"], first["server_port"]) == (
        "0", str(c0["client_port"]), "8443")  # the demo's first connection: its wss WebSocket
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{9}\+00:00", first["first_ts"])
    assert pd.Timestamp(first["first_ts"]) == c0["first_ts"]  # nanoseconds kept
    assert len(pd.read_csv(written["packets"])) == DEMO_FRAMES
    # an empty table is a header line only
    assert written["dns"].read_text().splitlines() == [
        ",".join(pcaptools.TABLES["dns"].names)]


def test_csv_header_lists_are_json(corpus: Path, tmp_path: Path) -> None:
    cap = pcaptools.load(corpus / "http2_h2c.pcap")
    df = pd.read_csv(cap.to_csv(tmp_path, tables=["http2_frames"])["http2_frames"])
    got = [json.loads(v) for v in df["headers"].dropna()]
    want = [[list(h) for h in v] for v in cap.http2_frames["headers"].dropna()]
    assert got == want and len(got) == 3


def test_partitions_by_capture(demo: pcaptools.Capture, tmp_path: Path) -> None:
    reset = pcaptools.load(CAPTURES / "tcp-reset.pcap")
    ds = tmp_path / "ds"
    rows = export.write_partition(demo, ds, "demo.pcapng")
    assert rows["connections"] == DEMO_CONNS and rows["captures"] == 1
    export.write_partition(reset, ds, "odd name=1/2.pcap")  # percent-encoded directory
    assert (ds / "connections" / "capture=odd%20name%3D1%2F2.pcap" / "part-0.parquet").exists()
    export.write_partition(reset, ds, "odd name=1/2.pcap")  # rewriting replaces it
    conns = export.read_table(ds, "connections")
    assert list(conns.columns) == ["capture", *pcaptools.TABLES["connections"].names]
    assert conns.groupby("capture", observed=True).size().to_dict() == {
        "demo.pcapng": DEMO_CONNS, "odd name=1/2.pcap": tshark_counts("tcp-reset.pcap")[1]}
    ref = pcaptools.TABLES["connections"].frame([])
    assert [str(conns[c].dtype) for c in ref.columns] == [str(ref[c].dtype) for c in ref.columns]
    only = export.read_table(ds, "tcp_events", captures=["odd name=1/2.pcap"])
    assert len(only) == len(reset.tcp_events)
    # empty in both captures: still the table's columns
    dns = export.read_table(ds, "dns")
    assert len(dns) == 0 and list(dns.columns)[1:] == pcaptools.TABLES["dns"].names
    summ = export.read_table(ds, "captures")
    assert summ.set_index("capture")["frames"].to_dict() == {
        "demo.pcapng": DEMO_FRAMES, "odd name=1/2.pcap": tshark_counts("tcp-reset.pcap")[0]}
    with pytest.raises(FileNotFoundError):
        export.read_table(ds, "nope")


def test_pandas_reads_the_partitioned_dataset_directly(demo: pcaptools.Capture,
                                                       tmp_path: Path) -> None:
    export.write_partition(demo, tmp_path, "a.pcapng")
    export.write_partition(demo, tmp_path, "b.pcapng")
    df = pd.read_parquet(tmp_path / "tcp_events")
    assert len(df) == 2 * len(demo.tcp_events)
    assert sorted(df["capture"].unique()) == ["a.pcapng", "b.pcapng"]
