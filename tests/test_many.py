"""load_many(): every file's tables side by side, exactly as load() gives them, plus `capture`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
import pcaptools.cli as cli
from pcaptools.errors import CaptureFormatError
from pcaptools.many import ManyCaptures, capture_files, concat_tables, load_many
from tests.conftest import CAPTURES

FILES = ("demo.pcapng", "http1-basic.pcap", "tcp-reset.pcap")


def tshark_counts(name: str) -> tuple[int, int]:
    """(frames, TCP streams) tshark counted when captures/<name> was recorded (its facts)."""
    t = json.loads((CAPTURES / f"{name}.facts.json").read_text())["tshark"]
    return t["frames"], len(t["streams"])


@pytest.fixture
def capdir(tmp_path: Path) -> Path:
    """Three shipped captures (symlinked), one text file posing as a pcap, one non-capture."""
    d = tmp_path / "caps"
    d.mkdir()
    for f in FILES:
        if not (CAPTURES / f).exists():
            pytest.skip(f"captures/{f} missing")
        (d / f).symlink_to(CAPTURES / f)
    (d / "broken.pcap").write_text("not a capture\n")
    (d / "notes.txt").write_text("ignored: not a capture file name\n")
    return d


def _without_capture(df: pd.DataFrame, name: str) -> pd.DataFrame:
    part = df[df["capture"] == name].drop(columns="capture").reset_index(drop=True)
    for col in part.columns:
        if isinstance(part[col].dtype, pd.CategoricalDtype):
            part[col] = part[col].cat.remove_unused_categories()
    return part


def test_directory_scan_is_sorted_and_by_name(capdir: Path) -> None:
    assert [p.name for p in capture_files(capdir)] == [
        "broken.pcap", "demo.pcapng", "http1-basic.pcap", "tcp-reset.pcap"]


def test_merged_tables_equal_load_per_file(capdir: Path) -> None:
    many = load_many(capdir, workers=2)
    assert isinstance(many, ManyCaptures)
    assert many.names == ["broken.pcap", "demo.pcapng", "http1-basic.pcap", "tcp-reset.pcap"]
    assert list(many) == list(FILES)
    assert list(many.errors) == ["broken.pcap"]
    assert "is not a capture file" in many.errors["broken.pcap"]
    singles = {f: pcaptools.load(capdir / f) for f in FILES}
    for table, schema in pcaptools.TABLES.items():
        merged = many.table(table)
        assert list(merged.columns) == ["capture", *schema.names]
        assert isinstance(merged["capture"].dtype, pd.CategoricalDtype)
        assert list(merged["capture"].cat.categories) == many.names
        ref = schema.frame([])
        for col in schema.names:  # every dtype as load() gives it
            assert str(merged[col].dtype) == str(ref[col].dtype), (table, col)
        assert len(merged) == sum(len(c.tables[table]) for c in singles.values())
        for f, cap in singles.items():
            one = cap.tables[table].copy()
            for col in one.columns:
                if isinstance(one[col].dtype, pd.CategoricalDtype):
                    one[col] = one[col].cat.remove_unused_categories()
            pd.testing.assert_frame_equal(_without_capture(merged, f), one,
                                          check_categorical=False)
    # tshark's counts, recorded with each capture
    assert many["demo.pcapng"].summary.frames == tshark_counts("demo.pcapng")[0]
    demo = many.connections[many.connections["capture"] == "demo.pcapng"]
    assert demo["tcp_stream"].tolist() == list(range(tshark_counts("demo.pcapng")[1]))
    assert many.connections.groupby("capture", observed=False).size().to_dict() == {
        "broken.pcap": 0, **{f: tshark_counts(f)[1] for f in FILES}}
    assert len(many.retransmissions) == sum(len(c.retransmissions) for c in singles.values())
    assert many.connections is many.connections  # built once, cached


def test_summaries_one_row_per_file(capdir: Path) -> None:
    s = load_many(capdir, workers=1).summaries
    assert s["capture"].tolist() == ["broken.pcap", "demo.pcapng", "http1-basic.pcap",
                                     "tcp-reset.pcap"]
    row = s.set_index("capture").loc["demo.pcapng"]
    assert (row["frames"], row["tcp_connections"], row["format"]) == (
        *tshark_counts("demo.pcapng"), "pcapng")
    assert pd.isna(row["error"])
    assert pd.isna(s.set_index("capture").loc["broken.pcap", "frames"])
    assert str(s["frames"].dtype) == "Int64"


def test_workers_1_and_pool_agree(capdir: Path) -> None:
    a, b = load_many(capdir, workers=1), load_many(capdir, workers=3)
    for table in pcaptools.TABLES:
        pd.testing.assert_frame_equal(a.table(table), b.table(table))


def test_list_of_files_progress_and_kwargs(capdir: Path) -> None:
    calls: list[tuple[int, int]] = []
    many = load_many([capdir / "demo.pcapng", capdir / "tcp-reset.pcap"], workers=2,
                     packets=False, progress=lambda d, t: calls.append((d, t)))
    assert sorted(calls) == [(1, 2), (2, 2)]
    assert len(many.packets) == 0
    assert len(many.connections) == tshark_counts("demo.pcapng")[1] + tshark_counts(
        "tcp-reset.pcap")[1]


def test_strict_raises_and_empty_dir(capdir: Path, tmp_path: Path) -> None:
    with pytest.raises(CaptureFormatError):
        load_many(capdir, workers=1, strict=True)
    with pytest.raises(CaptureFormatError):
        load_many(capdir, workers=2, strict=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no capture files"):
        load_many(tmp_path / "empty")


def test_same_file_name_in_two_directories(tmp_path: Path) -> None:
    for sub in ("client", "server"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "trace.pcap").symlink_to(CAPTURES / "tcp-reset.pcap")
    many = load_many([tmp_path / "client", tmp_path / "server"], workers=1)
    assert many.names == ["client/trace.pcap", "server/trace.pcap"]
    assert len(many.connections) == 2 * tshark_counts("tcp-reset.pcap")[1]


def test_concat_tables_unions_categories() -> None:
    a = pd.DataFrame({"k": pd.Categorical(["x", "y"]), "n": pd.array([1, None], dtype="Int64")})
    b = pd.DataFrame({"k": pd.Categorical(["z"]), "n": pd.array([3], dtype="Int64")})
    empty = pd.DataFrame({"k": pd.Categorical([]), "n": pd.array([], dtype="Int64")})
    out = concat_tables([a, empty, b])
    assert list(out["k"].cat.categories) == ["x", "y", "z"]
    assert out["k"].tolist() == ["x", "y", "z"]
    assert str(out["n"].dtype) == "Int64" and out.index.tolist() == [0, 1, 2]
    assert not isinstance(pd.concat([a, b])["k"].dtype, pd.CategoricalDtype)  # plain concat


def test_cli_directory_one_report_per_capture(capdir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out, exp, js = tmp_path / "reports", tmp_path / "tables", tmp_path / "s.json"
    rc = cli.main([str(capdir), "-o", str(out), "--export", str(exp), "--json", str(js),
                   "--workers", "2"])
    assert rc == 1  # broken.pcap could not be read; the others' reports are written
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"pcap-report: error: {capdir / 'broken.pcap'} is not a capture")
    frames = sum(tshark_counts(f)[0] for f in FILES)
    conns = sum(tshark_counts(f)[1] for f in FILES)
    # no key log beside demo.pcapng here: its 3 TLS sessions stay encrypted, and stderr says so
    assert err[1].startswith("pcap-report: demo.pcapng: None of the 3 TLS sessions could be "
                             "decrypted: no key log was given")
    assert err[-1] == (f"analysed 3 captures, {frames:,} frames, {conns} connections -> "
                       f"{out / 'index.html'}")
    assert sorted(p.name for p in out.iterdir()) == [
        "demo.report.html", "http1-basic.report.html", "index.html", "tcp-reset.report.html"]
    index = (out / "index.html").read_text()
    assert '<a href="demo.report.html">demo.pcapng</a>' in index
    assert "unreadable: " in index
    data = json.loads(js.read_text())
    assert [(c["capture"], c["frames"]) for c in data["captures"]] == [
        (f, tshark_counts(f)[0]) for f in FILES]
    # the index's per-capture columns (pcaptools.report.html.index_facts): no key log here, so
    # demo's 3 TLS sessions stay encrypted (no TTFT, no WebSocket pings to miss); its black-holed
    # connection is unclean all the same, as are tcp-reset's 3 reset connections
    facts = {c["capture"]: [c[k] for k in ("ttft_median_ms", "tls_sessions", "tls_decrypted",
                                           "unclean_connections", "missed_heartbeats")]
             for c in data["captures"]}
    assert facts == {"demo.pcapng": [None, 3, 0, 1, None],
                     "http1-basic.pcap": [None, 0, None, 0, None],
                     "tcp-reset.pcap": [None, 0, None, 3, None]}
    assert ("<th>TTFT median ms</th><th>TLS decrypted</th><th>unclean connections</th>"
            "<th>missed heartbeats</th>") in index
    assert "<td class=n>0 of 3</td>" in index
    table = pd.read_parquet(exp / "connections.parquet")
    assert table.groupby("capture", observed=True).size().to_dict() == {
        f: tshark_counts(f)[1] for f in FILES}
    (capdir / "broken.pcap").unlink()
    assert cli.main([str(capdir / "demo.pcapng"), str(capdir / "tcp-reset.pcap"), "-o",
                     str(out), "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_spawned_workers_give_the_same_tables(capdir: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # the pool uses spawn instead of fork once the parent runs other threads (e.g. a progress bar)
    import multiprocessing

    import pcaptools.many as many_mod

    monkeypatch.setattr(many_mod, "_context", lambda: multiprocessing.get_context("spawn"))
    files = [capdir / "demo.pcapng", capdir / "tcp-reset.pcap"]
    spawned = load_many(files, workers=2, packets=False)
    pd.testing.assert_frame_equal(spawned.connections, load_many(files, workers=1,
                                                                 packets=False).connections)
