"""analyse_directory on a dask.distributed LocalCluster: the partitioned Parquet reads back
(pandas, pcaptools.export.read_table, DuckDB) with exactly the rows load() gives per file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.export import read_table
from tests.conftest import CAPTURES

distributed = pytest.importorskip("dask.distributed")
pytest.importorskip("pyarrow")

from pcaptools.distributed import analyse_directory  # noqa: E402

FILES = ("demo.pcapng", "http1-basic.pcap", "tcp-reset.pcap")


@pytest.fixture
def capdir(tmp_path: Path) -> Path:
    d = tmp_path / "caps"
    d.mkdir()
    for f in FILES:
        if not (CAPTURES / f).exists():
            pytest.skip(f"captures/{f} missing")
        (d / f).symlink_to(CAPTURES / f)
    (d / "broken.pcap").write_text("not a capture\n")
    return d


@pytest.fixture(scope="module")
def client():  # type: ignore[no-untyped-def]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_local_cluster_rows_equal_load_per_file(capdir: Path, tmp_path: Path, client) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "ds"
    res = analyse_directory(capdir, out, scheduler=client)
    assert res.files == ["broken.pcap", *FILES]
    assert list(res.errors) == ["broken.pcap"]
    assert "is not a capture file" in res.errors["broken.pcap"]
    singles = {f: pcaptools.load(capdir / f) for f in FILES}
    for table in pcaptools.TABLES:
        want = {f: len(c.tables[table]) for f, c in singles.items()}
        assert res.rows[table] == sum(want.values()), table
        got = read_table(out, table)
        assert got.groupby("capture", observed=True).size().reindex(
            list(FILES), fill_value=0).to_dict() == want, table
        assert list(got.columns) == ["capture", *pcaptools.TABLES[table].names]
        # pandas reads the Hive layout directly too
        direct = pd.read_parquet(out / table)
        assert len(direct) == sum(want.values())
    per = res.per_capture.set_index(["capture", "table"])["rows"]
    assert per[("demo.pcapng", "packets")] == singles["demo.pcapng"].summary.frames
    # values, not only counts: one file's connections equal load()'s
    conns = read_table(out, "connections", captures=["tcp-reset.pcap"]).drop(columns="capture")
    pd.testing.assert_frame_equal(conns, singles["tcp-reset.pcap"].connections,
                                  check_categorical=False)


def test_duckdb_reads_the_dataset(capdir: Path, tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "ds"
    analyse_directory(capdir, out, scheduler="synchronous", packets=False)
    rows = duckdb.sql(
        f"SELECT capture, count(*) FROM read_parquet('{out}/connections/*/*.parquet', "
        "hive_partitioning = true) GROUP BY capture ORDER BY capture").fetchall()
    assert rows == [(f, len(pcaptools.load(capdir / f).connections)) for f in FILES]
    assert read_table(out, "packets").empty  # packets=False went to every load()


def test_rerun_replaces_partitions_and_scheduler_strings(capdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    first = analyse_directory(capdir, out, scheduler="synchronous", tables=["connections"])
    assert sorted(p.name for p in out.iterdir()) == ["captures", "connections"]
    again = analyse_directory([capdir / "demo.pcapng"], out, scheduler="threads",
                              tables=["connections"])
    assert again.files == ["demo.pcapng"] and again.errors == {}
    conns = read_table(out, "connections")
    assert len(conns) == first.rows["connections"]  # demo's partition replaced, not added
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no capture files"):
        analyse_directory(tmp_path / "empty", out)
    missing = analyse_directory([tmp_path / "gone.pcap"], out, scheduler="synchronous")
    assert list(missing.errors) == ["gone.pcap"] and missing.rows == {}
