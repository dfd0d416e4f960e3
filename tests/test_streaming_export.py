"""Streaming export (``load(path, out=dir)``): the files are the ones ``to_parquet`` writes,
every table read back equals ``load(path)``'s, and the builders hand rows over while reading.
Also the pieces it rests on: the fast casts of ``TableSchema.frame``, ``Records``, the
``Drainable`` hook and ``ChunkPump``."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pcaptools
from pcaptools import _columns, export
from pcaptools._columns import (
    NA,
    NA8,
    NA16,
    NA32,
    NULL_STRINGS_MAPPED_ROWS,
    CodeColumn,
    Records,
    TextColumn,
    boolean,
    first_seen_codes,
    null_strings,
    nullable,
    sorted_categorical,
)
from pcaptools.diagnostics import Diagnostics
from pcaptools.export import StreamedCapture, read_parquet_table
from pcaptools.many import concat_tables
from pcaptools.tables.foundation import PACKETS
from pcaptools.tables.http_tables import HttpTablesBuilder
from pcaptools.tables.packets import PacketsBuilder
from pcaptools.tables.schema import (
    NARROW_INTS,
    TS_DTYPE,
    ChunkPump,
    Column,
    Drainable,
    RowBuffer,
    _cast,
    _cast_reference,
    _shares,
)
from pcaptools.tables.tcp_tables import EventsDrain
from pcaptools.tables.tls_tables import TlsTablesBuilder
from pcaptools.tables.ws_tables import WS_MESSAGES, WsTablesBuilder, _labels_categorical
from pcaptools.tcp.tracker import TcpTracker
from tests.conftest import CAPTURES, CORPUS

pytest.importorskip("pyarrow")
import pyarrow as pa
import pyarrow.parquet as pq

#: real captures with their key logs (TLS 1.2/1.3, HTTP/1.1 + HTTP/2, SSE, WebSocket)
REAL = ["compare-h1.pcapng", "compare-h2.pcapng", "h2-sse-chat.pcapng", "ws-tls.pcapng",
        "demo.pcapng", "http1-lossy.pcap", "tls-resumption.pcapng"]


def _keys(path: Path) -> Path | None:
    k = path.with_suffix(".keys")
    return k if k.exists() else None


def _capture(name: str) -> Path:
    p = CAPTURES / name
    if not p.exists():
        pytest.skip(f"captures/{name} missing")
    return p


def _repeat(src: Path, dst: Path, factor: int) -> int:
    """``factor`` copies of ``src`` shifted in time and to fresh client ports (new TCP
    connections with the same packets; TLS keys still apply), as benchmarks/memory_scaling."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "memory_scaling.py"
    spec = importlib.util.spec_from_file_location("_memory_scaling", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return int(mod.repeat_capture(src, dst, factor))


def assert_same_tables(cap: StreamedCapture, ref: pcaptools.Capture) -> None:
    """Every file read by pandas equals ref's table (the dtypes as strings, the values; its
    categories are those its rows use, at least: a row group with fewer rows than categories
    holds only the ones it uses); the StreamedCapture's own tables equal it exactly."""
    assert list(cap.paths) == [*pcaptools.TABLES, "captures"]
    for name, df in ref.tables.items():
        back = pd.read_parquet(cap.paths[name])
        pd.testing.assert_frame_equal(back, df, check_categorical=False)
        assert list(back.dtypes.astype(str)) == list(df.dtypes.astype(str)), name
        for col in df.columns:
            if isinstance(df[col].dtype, pd.CategoricalDtype) and len(df):
                got, want = set(back[col].cat.categories), set(df[col].cat.categories)
                assert set(df[col].dropna().unique()) <= got <= want, (name, col)
        pd.testing.assert_frame_equal(getattr(cap, name), df, check_exact=True)
        pd.testing.assert_frame_equal(cap.tables[name], df, check_exact=True)


@pytest.mark.parametrize("name", [*REAL, "coverage-mixed.pcap", "dns-transports.pcap",
                                  "ipv6.pcap", "tcp-refused.pcap", "quic-endings.pcapng",
                                  "pmtu-icmp-client.pcap", "zeek-rules.pcap"])
def test_connection_tables_written_in_chunks(name: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """connections, tcp_handshakes and coverage are written a chunk of connections at a time
    at the end of a streaming load (issue #18: never whole in memory): with chunks of 2
    connections, one row group per chunk, and the coverage rows of the other flows (DNS,
    ICMP, QUIC...) merged between the chunks in first-frame order, as load() orders them."""
    import pyarrow.parquet as pq

    from pcaptools.tables import tcp_tables

    monkeypatch.setattr(tcp_tables, "CHUNK_ROWS", 2)
    path = _capture(name)
    ref = pcaptools.load(path, keylog=_keys(path))
    cap = pcaptools.load(path, keylog=_keys(path), out=tmp_path / "out")
    assert_same_tables(cap, ref)
    n = len(ref.connections)
    for table in ("connections", "tcp_handshakes"):
        assert pq.ParquetFile(cap.paths[table]).metadata.num_row_groups == max(1, -(-n // 2))
    assert "connections" not in cap._memory and "coverage" not in cap._memory


@pytest.mark.parametrize("name", REAL)
def test_streamed_tables_equal_load(name: str, tmp_path: Path) -> None:
    path = _capture(name)
    ref = pcaptools.load(path, keylog=_keys(path))
    cap = pcaptools.load(path, keylog=_keys(path), out=tmp_path / "out", chunk_rows=16)
    assert isinstance(cap, StreamedCapture) and isinstance(cap, pcaptools.Capture)
    assert cap.summary.frames == ref.summary.frames
    assert_same_tables(cap, ref)
    assert cap.rows == {n: len(df) for n, df in ref.tables.items()}
    # the layout of Capture.to_parquet: the same file names, nothing else left behind
    written = ref.to_parquet(tmp_path / "ref")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        p.name for p in written.values())
    summ = pd.read_parquet(cap.paths["captures"])
    assert summ.loc[0, "frames"] == ref.summary.frames
    assert export.read_table(tmp_path / "out", "connections").equals(
        pd.read_parquet(written["connections"]))


def test_rows_are_written_while_reading(tmp_path: Path) -> None:
    """12 copies of compare-h2 (4,752 frames, 12 TLS 1.3 connections with HTTP/2 and SSE):
    load() polls the builders every 4,096 frames, so with chunk_rows=64 every big table is
    written in one row group per chunk of at least 64 rows, then its remainder."""
    src = _capture("compare-h2.pcapng")
    big = tmp_path / "x12.pcap"
    frames = _repeat(src, big, 12)
    assert frames == 12 * 396
    ref = pcaptools.load(big, keylog=_keys(src))
    assert len(ref.connections) == 12 and len(ref.sse_events) == 12 * 220
    cap = pcaptools.load(big, keylog=_keys(src), out=tmp_path / "out", chunk_rows=64)
    assert_same_tables(cap, ref)
    for table in ("packets", "tls_records", "http2_frames", "sse_events", "tcp_events"):
        groups = pq.ParquetFile(cap.paths[table]).metadata.num_row_groups
        assert groups == 2, (table, groups)  # the chunk drained at frame 4,096, the rest
        first = pq.ParquetFile(cap.paths[table]).metadata.row_group(0).num_rows
        assert 64 <= first < len(getattr(ref, table)), table
    # the per-connection tables other than connections, tcp_handshakes and coverage (written
    # a chunk of connections at a time at the end) are held in memory, the others read from
    # their file (the QUIC and HTTP/3 tables are built at the end, not streamed, for now)
    assert set(cap._memory) == {"tls_handshakes",
                                "http2_connections", "ws_connections", "ws_heartbeats", "dns",
                                "icmp_errors", "path_mtu", "warnings", "tcp_losses",
                                "quic_connections", "quic_packets", "quic_frames",
                                "http3_connections", "http3_frames", "http3_streams",
                                "http3_pushes", "http3_sse_events"}
    # part of a table: columns and pyarrow filters
    part = cap.read("packets", columns=["frame", "tcp_stream", "flags"],
                    filters=[("tcp_stream", "==", 3)])
    want = ref.packets.loc[ref.packets["tcp_stream"] == 3, ["frame", "tcp_stream", "flags"]]
    pd.testing.assert_frame_equal(part, want.reset_index(drop=True), check_exact=True)
    # while a table is referenced, reading it again returns the same DataFrame
    pk = cap.packets
    assert cap.packets is pk


def test_websocket_heartbeats_from_streamed_frames(tmp_path: Path) -> None:
    """ws_heartbeats is derived from ws_frames at the end: with ws_frames streamed out in
    chunks it is built from the Ping/Pong rows kept on the way, and equals load()'s."""
    src = _capture("ws-tls.pcapng")
    big = tmp_path / "x42.pcap"
    _repeat(src, big, 42)  # 4,158 frames: one poll at frame 4,096
    ref = pcaptools.load(big, keylog=_keys(src))
    assert len(ref.ws_heartbeats) == 42 * 12
    cap = pcaptools.load(big, keylog=_keys(src), out=tmp_path / "out", chunk_rows=50)
    assert pq.ParquetFile(cap.paths["ws_frames"]).metadata.num_row_groups == 2
    assert_same_tables(cap, ref)


@pytest.mark.skipif(not (CORPUS / "suricata-websocket-ping-input.pcap").exists(),
                    reason="corpus missing")
def test_websocket_pings_corpus(tmp_path: Path) -> None:
    path = CORPUS / "suricata-websocket-ping-input.pcap"
    ref = pcaptools.load(path)
    assert len(ref.ws_heartbeats) > 0
    assert_same_tables(pcaptools.load(path, out=tmp_path, chunk_rows=1), ref)


def test_streamed_capture_repr_and_copy(tmp_path: Path) -> None:
    path = _capture("demo.pcapng")
    cap = pcaptools.load(path, out=tmp_path / "out")
    assert isinstance(cap, StreamedCapture)
    assert repr(cap).startswith("<StreamedCapture 'demo.pcapng'")
    assert "cap.packets" in cap._repr_html_() and ">file<" in cap._repr_html_()
    copied = cap.to_parquet(tmp_path / "copy")
    assert sorted(p.name for p in copied.values()) == sorted(p.name for p in cap.paths.values())
    assert cap.to_parquet(tmp_path / "out") == cap.paths
    with pytest.raises(AttributeError):
        _ = cap.no_such_table
    with pytest.raises(KeyError):
        cap.read("captures")


def test_out_rejects_workers(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one process"):
        pcaptools.load(_capture("demo.pcapng"), out=tmp_path, workers=2)


def test_packet_row_cap_does_not_apply_when_streaming(tmp_path: Path) -> None:
    path = _capture("demo.pcapng")
    capped = pcaptools.load(path, max_packet_rows=100)
    assert len(capped.packets) == 100
    cap = pcaptools.load(path, max_packet_rows=100, out=tmp_path)
    assert cap.rows["packets"] == cap.summary.frames == 229  # capinfos: 229 packets
    assert "table.packets_truncated" not in set(cap.warnings["code"])


def test_sink_abort_removes_partial_files(tmp_path: Path) -> None:
    sink = export.ParquetSink(tmp_path)
    sink.write("packets", PACKETS.frame([]))
    names = [p.name for p in tmp_path.iterdir()]  # a new file each time (never followed)
    assert len(names) == 1
    assert names[0].startswith(".packets.parquet.") and names[0].endswith(".partial")
    sink.abort()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("recorded", [None, 1000])
def test_a_syn_flood_streams_one_address_category_per_row_group(
        tmp_path: Path, recorded: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 one-SYN connections from 20,000 addresses (cold connections, issue #18),
    streamed in row groups of about 5,000 rows: the files read back as load()'s tables, and
    each row group of the packets' ``src`` column holds only the addresses of its rows (not
    all those seen so far). With at most 1,000 categories recorded, the addresses are not
    held by the writer (nor by the packets builder, which forgets them after each chunk):
    the file records no categories for them, and pyarrow's reading of the row groups as one
    gives load()'s first-seen order all the same."""
    import json
    import subprocess
    import sys

    import pyarrow.parquet as pq

    if recorded is not None:
        monkeypatch.setattr(export, "RECORDED_CATEGORIES", recorded)
    flood = tmp_path / "flood.pcap"
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "synflood.py"
    subprocess.run([sys.executable, str(script), str(flood), "--connections", "20000"],
                   check=True, capture_output=True)
    ref = pcaptools.load(flood)
    cap = pcaptools.load(flood, out=tmp_path / "out", chunk_rows=5000)
    assert_same_tables(cap, ref)
    meta = json.loads(pq.ParquetFile(cap.paths["packets"]).metadata.metadata[
        export.CATEGORIES_KEY.encode()])
    if recorded is None:
        assert len(meta["src"]["categories"]) == 20001  # (one code space: the server too)
    else:
        assert meta["src"] == {"dtype": "object", "categories": None, "shared": ["src", "dst"]}
        assert meta["direction"]["categories"] == ["client_to_server", "server_to_client"]
    assert len(ref.connections) == 20000 and ref.packets["src"].nunique() == 20000
    f = pq.ParquetFile(cap.paths["packets"])
    assert f.num_row_groups >= 2
    rows = 0
    for i in range(f.num_row_groups):
        for chunk in f.read_row_group(i, columns=["src"]).column(0).chunks:
            assert len(chunk.dictionary) == len(chunk)  # (one SYN an address)
            rows += len(chunk)
    assert rows == 20000


def test_categories_restored_exactly(tmp_path: Path) -> None:
    """pandas reads dictionary columns back with str categories in first-seen order; the
    recorded metadata gives back load()'s (object categories in code order, sorted str)."""
    OBJ_CATS = pd.Index(["b", "a", "z"], dtype=object)
    chunks = [
        pd.DataFrame({
            "obj": pd.Categorical.from_codes([1, 1], categories=OBJ_CATS),
            "srt": pd.Categorical(["q", "p"]),
        }),
        pd.DataFrame({
            "obj": pd.Categorical.from_codes([0, -1], categories=OBJ_CATS),
            "srt": pd.Categorical(["c", None]),
        }),
    ]
    sink = export.ParquetSink(tmp_path)
    for c in chunks:
        sink.write("t", c)
    path = sink.close()["t"]
    plain = pd.read_parquet(path)
    assert plain["obj"].tolist()[:3] == ["a", "a", "b"]
    back = read_parquet_table(path)
    assert list(back["obj"].cat.categories) == ["b", "a", "z"]
    assert back["obj"].cat.categories.dtype == object
    assert list(back["srt"].cat.categories) == ["c", "p", "q"]
    assert back["srt"].tolist()[:3] == ["q", "p", "c"] and pd.isna(back["srt"].iloc[3])


# ------------------------------------------------------------------ the builders' hook


def test_every_big_table_has_a_drainable_builder() -> None:
    """load(out=...) bounds memory only for tables some builder drains: every table that
    grows with traffic must be covered."""
    sources: list[Any] = [PacketsBuilder(), TlsTablesBuilder(), WsTablesBuilder(),
                          EventsDrain(TcpTracker(Diagnostics())), HttpTablesBuilder()]
    assert all(isinstance(s, Drainable) for s in sources)
    covered = {t for s in sources for t in s.pending()}
    assert covered == {"packets", "tcp_sack_blocks", "tls_records", "ws_frames", "ws_messages",
                       "tcp_events", "http2_frames", "http2_streams", "http_requests", "sse_events"}


class _ListSink:
    def __init__(self) -> None:
        self.chunks: list[tuple[str, int]] = []

    def write(self, table: str, chunk: pd.DataFrame) -> None:
        self.chunks.append((table, len(chunk)))


def test_chunk_pump_drains_at_the_threshold() -> None:
    sink = _ListSink()
    buf = RowBuffer(WS_MESSAGES)

    class Src:
        def pending(self) -> dict[str, int]:
            return {"ws_messages": len(buf)}

        def drain(self, table: str) -> pd.DataFrame:
            return buf.drain()

    pump = ChunkPump(sink, chunk_rows=3)
    pump.add(Src())
    row = (1, 10, 0, None, "client_to_server", 0, "text", 1, 1, 10, 0.0, 6, 4, 0, False, None,
           None, True, "fin", True, "hi", False, None)
    for _ in range(2):
        buf.append(row)
    pump.poll()
    assert sink.chunks == []
    buf.append(row)
    pump.poll()
    assert sink.chunks == [("ws_messages", 3)] and len(buf) == 0
    buf.append(row)
    pump.flush()
    assert sink.chunks == [("ws_messages", 3), ("ws_messages", 1)]
    assert pump.rows == {"ws_messages": 4}


def test_records_seal_and_columns() -> None:
    rec = Records([("a", "q"), ("b", "i"), ("c", "b")], chunk_rows=2)
    assert rec.row_bytes == 13 and rec.limit == 26
    rec.buf += rec.pack(NA, -1, 1)
    rec.seal()  # a single row: its field views count as contiguous, must still be copied
    rec.buf += rec.pack(5, 7, 0)
    rec.buf += rec.pack(6, 8, 1)
    assert len(rec) == 3
    rec.seal()
    assert rec.column("a").tolist() == [NA, 5, 6]
    assert rec.column("b").dtype == np.int32 and rec.column("b").tolist() == []  # taken
    assert rec.column("c").tolist() == [1, 0, 1]
    assert len(rec.buf) == 0


def test_codes_made_per_column_equal_codes_made_per_row() -> None:
    """first_seen_codes codes values in the order they first appear, as CodeColumn.code row
    by row does, and keeps the codes of earlier chunks; sorted_categorical gives what
    pd.Categorical makes of the labels."""
    col, seen = CodeColumn(), {}
    chunks = [[3, 1, 3, 0], [], [2, 0, 5, 2]]
    want = CodeColumn()
    for chunk in chunks:
        got = first_seen_codes(np.array(chunk, dtype=np.int64), seen, lambda v: col.code(f"v{v}"))
        assert got.dtype == np.int32
        assert got.tolist() == [want.code(f"v{v}") for v in chunk]
    assert col.codes == want.codes
    labels = ("a", "b", "c", "d")
    for codes in ([], [2], [3, 0, 3], [1, 2, 1, 0, 3], [2, -1, 0, -1]):  # (-1: NA)
        got = pd.Series(sorted_categorical(np.array(codes, dtype=np.int8), labels))
        want_s = pd.Series(pd.Categorical([labels[c] if c >= 0 else None for c in codes]))
        pd.testing.assert_series_equal(got, want_s, check_exact=True)
        assert got.cat.categories.dtype == want_s.cat.categories.dtype
        assert got.cat.codes.dtype == want_s.cat.codes.dtype


def test_packets_builder_hands_rows_over() -> None:
    """PacketsBuilder.frame() returns the rows held and forgets them: two calls give the
    two halves, with the categories seen so far (the streaming contract)."""
    path = _capture("demo.pcapng")
    whole = pcaptools.load(path).packets
    assert len(whole) == 229  # capinfos: 229 packets
    from pcaptools.io import open_capture
    from pcaptools.net.decode import PacketDecoder
    from pcaptools.net.packet import TcpSegment

    diag = Diagnostics()
    dec, tr, pb = PacketDecoder(diag), TcpTracker(diag), PacketsBuilder(chunk_rows=7)
    parts = []
    with open_capture(path, diag) as reader:
        for raw in reader.frames():
            pkt = dec.decode(raw)
            pb.add(raw, pkt, tr.segment(pkt) if type(pkt) is TcpSegment else None)
            if raw.frame == 200:
                # (demo's frames 1-200 carry 8 SACK blocks: tcp_sack_blocks, same builder)
                assert pb.pending() == {"packets": 200, "tcp_sack_blocks": 8}
                parts.append(pb.drain())
                assert len(pb) == 0
    parts.append(pb.frame())
    assert [len(p) for p in parts] == [200, 29]
    joined = concat_tables(parts)  # categoricals: union of the categories
    pd.testing.assert_frame_equal(joined, whole, check_categorical=False)
    assert list(parts[1]["src"].cat.categories) == list(whole["src"].cat.categories)


# ------------------------------------------------------------------ fast casts


_INT = st.one_of(st.none(), st.integers(-(2**63) + 1, 2**63 - 1))
_VALUES = {
    "Int64": st.lists(_INT, max_size=20),
    TS_DTYPE: st.lists(st.one_of(st.none(), st.integers(0, 2**62)), max_size=20),
    "int64": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20),
    "float64": st.lists(st.one_of(st.none(), st.floats(allow_nan=True), st.integers(-1000, 1000)),
                        max_size=20),
    "string": st.lists(st.one_of(st.none(), st.text(max_size=5)), max_size=20),
    "boolean": st.lists(st.one_of(st.none(), st.booleans()), max_size=20),
    "bool": st.lists(st.booleans(), max_size=20),
    "category": st.lists(st.one_of(st.none(), st.sampled_from(["b", "a", "c"])), max_size=20),
    "object": st.lists(st.one_of(st.none(), st.tuples(st.text(max_size=2), st.text(max_size=2))),
                       max_size=5),
}
# the narrow integer dtypes: values mostly inside their range, some beyond it (refused, not
# wrapped); the nullable ones with missing values
for _name, _np in NARROW_INTS.items():
    _lo, _hi = int(np.iinfo(_np).min), int(np.iinfo(_np).max)
    _ints = st.one_of(st.integers(_lo, _hi), st.integers(_lo - 3, _hi + 3),
                      st.integers(-(2**63), 2**63 - 1))
    _VALUES[_name] = st.lists(st.one_of(st.none(), _ints) if _name[0] == "I" else _ints,
                              max_size=20)


def _same(dtype: str, values: list[Any]) -> None:
    col = Column("c", dtype, None, "")
    try:
        want = pd.Series(_cast_reference(list(values), col))
    except (TypeError, ValueError, OverflowError) as exc:
        with pytest.raises(type(exc)):
            _cast(list(values), col)
        return
    got = pd.Series(_cast(list(values), col))
    assert got.dtype == want.dtype
    pd.testing.assert_series_equal(got, want, check_exact=True)


@pytest.mark.parametrize("dtype", sorted(_VALUES))
def test_fast_cast_equals_pandas(dtype: str) -> None:
    @given(_VALUES[dtype])
    def check(values: list[Any]) -> None:
        _same(dtype, values)

    check()


@pytest.mark.parametrize(("dtype", "values"), [
    ("Int64", [1, 2.0]), ("Int64", [True, None]), ("Int64", [1, pd.NA, float("nan")]),
    ("Int64", [2**63]), ("Int64", np.array([1, None], dtype=object)),
    ("Int64", np.array([3, 4], dtype=np.uint8)), (TS_DTYPE, [1, None, NA]),
    (TS_DTYPE, np.array([5, NA])), ("string", [1, "a", None]), ("string", ["x", pd.NA]),
    ("boolean", [1, 0, None]), ("float64", [1, None, "2.5"]),
    ("Int64", [None, None]), (TS_DTYPE, [None]), ("category", ["b", 1, None]),
    ("category", [None, None]), ("category", ["a", float("nan")]), ("category", ["a", pd.NA]),
    ("category", ["é", "e", "Z", "ä", "e"]), ("category", [str(i) for i in range(300)]),
    ("category", ("x", None)),
    ("Int16", [1, None, 40000]), ("Int8", [None, None]), ("Int32", np.array([2**31], np.int64)),
    ("int16", np.array([-5, 7], np.int8)), ("Int32", [1, 2.0]), ("int8", [128]),
])
def test_fast_cast_unusual_inputs(dtype: str, values: Any) -> None:
    col = Column("c", dtype, None, "")
    try:
        want = pd.Series(_cast_reference(values, col))
    except (TypeError, ValueError, OverflowError):
        with pytest.raises((TypeError, ValueError, OverflowError)):
            _cast(values, col)
        return
    got = pd.Series(_cast(values, col))
    assert got.dtype == want.dtype
    pd.testing.assert_series_equal(got, want, check_exact=True)


def test_frame_copy_semantics() -> None:
    """copy=True never shares an input array with the table; copy=False hands it over."""
    a = np.arange(3, dtype=np.int64)
    cols = {n: [None] * 3 for n in PACKETS.names}
    cols.update({"frame": a, "ts": a, "frame_len": a, "cap_len": a, "interface": a})
    df = PACKETS.frame(columns=cols)
    assert not np.shares_memory(df["frame"].to_numpy(), a)
    df2 = PACKETS.frame(columns=cols, copy=False)
    assert np.shares_memory(df2["frame"].to_numpy(), a)
    assert math.isnan(df2["ack_rtt_ms"].iloc[0])


@pytest.mark.parametrize(("dtype", "values"), [
    ("Int64", pd.arrays.IntegerArray(np.array([7, NA, 9]), np.array([False, True, False]))),
    (TS_DTYPE, np.array([5, NA, 2**62], dtype=np.int64)),
    ("boolean", pd.arrays.BooleanArray(np.array([True, False]), np.array([False, True]))),
    ("category", pd.Categorical.from_codes(np.array([1, -1, 0], np.int8),
                                           categories=pd.Index(["a", "b"]))),
    ("float64", np.array([1.5, np.nan])), ("bool", np.array([True, False])),
    ("Int16", pd.arrays.IntegerArray(np.array([7, -(2**15), 9], np.int16),
                                     np.array([False, True, False]))),
    ("int32", np.array([3, -4], np.int32)),
])
def test_handed_over_arrays_are_the_table_columns(dtype: str, values: Any) -> None:
    """copy=False: an array of the column's dtype (int64 ns for a *_ts column) becomes the
    column without a copy, and equals what the cast of a copy gives (an Int64 column's values
    under the mask are 0, as the cast leaves them)."""
    col = Column("c", dtype, None, "")
    want = pd.Series(_cast(values.copy(), col))
    got = _cast(values, col, share=True)
    pd.testing.assert_series_equal(pd.Series(got), want, check_exact=True)
    data = got.asi8 if isinstance(got, pd.DatetimeIndex) else got
    assert got is values or _shares(data, values)
    if dtype in ("Int64", "Int16"):
        assert values.to_numpy(dtype=np.int64, na_value=-1).tolist() == [7, -1, 9]
        assert pd.Series(got).array._data.tolist() == want.array._data.tolist() == [7, 0, 9]


def test_narrow_casts_refuse_values_beyond_their_width() -> None:
    """A value that does not fit a narrow column is an error, never a wrapped number (pandas'
    own astype from Int64 to Int16 wraps 40000 to -25536)."""
    assert pd.array([40000], dtype="Int64").astype("Int16")[0] == -25536  # (why we check)
    for dtype, values in (("Int16", [1, None, 40000]), ("int32", np.array([2**31])),
                          ("Int8", pd.array([5, 200], dtype="Int64"))):
        col = Column("c", dtype, None, "")
        with pytest.raises(TypeError, match="cannot safely cast"):
            _cast(values, col)
        with pytest.raises(TypeError, match="cannot safely cast"):
            _cast_reference(list(values), col)
    # the sentinels of the packed fields are each type's smallest value
    for na, t in ((NA32, np.int32), (NA16, np.int16), (NA8, np.int8)):
        got = nullable(np.array([3, na], t))
        assert str(got.dtype) == np.dtype(t).name.capitalize() and got.isna().tolist() == [False, True]
        assert boolean(np.array([1, 0, na], t)).tolist() == [True, False, pd.NA]


def test_aligned_records_pad_rows() -> None:
    """Records(align=8): rows padded with zeros to 8 bytes, every field at its offset."""
    rec = Records([("a", "q"), ("b", "i"), ("c", "h"), ("d", "b")], chunk_rows=2, align=8)
    assert rec.row_bytes == 16 and rec.dtype.itemsize == 16
    assert [rec.dtype.fields[n][1] for n in "abcd"] == [0, 8, 12, 14]
    rec.buf += rec.pack(NA, NA32, NA16, NA8)
    rec.buf += rec.pack(1, 2, 3, 4)
    assert rec.buf[15] == 0 and len(rec.buf) == 32
    rec.buf += rec.pack(5, 6, 7, 8)
    rec.seal()
    assert rec.column("a").tolist() == [NA, 1, 5]
    assert rec.column("b").dtype == np.int32 and rec.column("d").tolist() == [NA8, 4, 8]
    assert rec.column("c").tolist() == [NA16, 3, 7]


def test_first_seen_codes_with_a_missing_value() -> None:
    """missing=: rows of that value get -1 and the value is never coded."""
    col, seen = CodeColumn(), {}
    raw = np.array([0x200, 2, 0x12, 2, 0x200, 0x10], dtype=np.int16)
    got = first_seen_codes(raw, seen, lambda v: col.code(f"v{v}"), missing=0x200,
                           dtype=np.int16)
    assert got.dtype == np.int16 and got.tolist() == [-1, 0, 1, 0, -1, 2]
    assert seen == {2: 0, 0x12: 1, 0x10: 2}
    only_missing = first_seen_codes(np.array([0x200], np.int16), seen, col.code, missing=0x200)
    assert only_missing.tolist() == [-1]


@given(st.lists(st.one_of(st.none(), st.sampled_from(["fin", "interrupted", "é", "A", ""])),
                max_size=30))
def test_ws_message_labels_equal_pandas_categories(labels: list[str | None]) -> None:
    """ws_messages' category columns, packed as first-seen codes, are what pd.Categorical
    makes of the labels (categories present, sorted; None NA); all None stays a list for the
    schema's cast, as before."""
    coded: dict[str | None, int] = {None: -1}
    codes = []
    for label in labels:
        if label not in coded:
            coded[label] = len(coded) - 1
        codes.append(coded[label])
    got = _labels_categorical(np.array(codes, dtype=np.int16), coded)
    col = WS_MESSAGES.columns[WS_MESSAGES.names.index("end_reason")]
    want = pd.Series(_cast(list(labels), col))
    pd.testing.assert_series_equal(pd.Series(_cast(got, col)), want, check_exact=True)
    assert pd.Series(_cast(got, col)).cat.categories.dtype == want.cat.categories.dtype


def test_packets_bounded_columns_and_flags() -> None:
    """The bounded packets columns are narrow; flags, made from tcp_flags when the table is,
    are the letters of its 9 bits in Wireshark's order, categories in first-seen order, NA
    where tcp_flags is."""
    pk = pcaptools.load(_capture("demo.pcapng")).packets
    PACKETS.check(pk)
    assert {c: str(pk[c].dtype) for c in ("cap_len", "interface", "ip_version", "ip_proto",
                                          "sport", "dport", "tcp_flags", "tcp_len", "window")} \
        == {"cap_len": "int32", "interface": "int32", "ip_version": "Int8",
            "ip_proto": "Int16", "sport": "Int32", "dport": "Int32", "tcp_flags": "Int16",
            "tcp_len": "Int32", "window": "Int32"}
    letters = dict(zip(pk["tcp_flags"].dropna().astype(int), pk["flags"].dropna().astype(str),
                       strict=True))
    assert letters[0x02] == "S" and letters[0x12] == "AS" and letters[0x10] == "A"
    assert letters[0x18] == "AP" and letters[0x11] == "AF"
    assert (pk["flags"].isna() == pk["tcp_flags"].isna()).all()
    first_seen = list(dict.fromkeys(pk["flags"].dropna().astype(str)))
    assert list(pk["flags"].cat.categories) == first_seen
    assert pk["ip_version"].isna().sum() == 2 and set(pk["ip_version"].dropna()) == {4}


def test_frame_takes_a_dict_of_columns_one_at_a_time() -> None:
    """copy=False with a dict: each input column leaves the dict as it is cast (its memory is
    the table's, or freed, before the next column is made); copy=True leaves the dict as is."""
    n = 3
    a = np.arange(n, dtype=np.int64)
    cols: dict[str, Any] = {c: [None] * n for c in PACKETS.names}
    cols.update({"frame": a, "ts": a.copy(), "frame_len": a, "cap_len": a, "interface": a})
    cols["seq"] = pd.arrays.IntegerArray(a.copy(), np.array([False, True, False]))
    kept = PACKETS.frame(columns=dict(cols))
    given = dict(cols)
    df = PACKETS.frame(columns=given, copy=False)
    assert given == {}
    pd.testing.assert_frame_equal(df, kept, check_exact=True)
    PACKETS.check(df)
    assert np.shares_memory(df["ts"].array.asi8, cols["ts"])
    assert df["seq"].array is cols["seq"]
    same = dict(cols)
    PACKETS.frame(columns=same)
    assert same.keys() == cols.keys()


def test_a_tcp_len_beyond_the_column_is_na_with_a_warning(tmp_path: Path) -> None:
    """An IPv6 Jumbo Payload claiming 2.4 GB (a frame whose pcap record says 4 GB on the wire,
    82 bytes captured): its tcp_len does not fit Int32, so the packets cell is NA and a
    table.packets_value_too_large row says why (never a wrapped number); the decoder's own
    rows and the reassembly gap keep the full length."""
    import struct

    eth = b"\x02" * 6 + b"\x04" * 6 + b"\x86\xdd"
    ip6 = struct.pack("!IHBB", 6 << 28, 0, 0, 64) + bytes(15) + b"\x01" + bytes(15) + b"\x02"
    hbh = bytes([6, 0, 0xC2, 4]) + struct.pack("!I", 0x90000000)  # (hop-by-hop: Jumbo Payload)
    tcp = struct.pack("!HHIIBBHHH", 40000, 443, 1000, 0, 5 << 4, 0x02, 65535, 0, 0)
    frame = eth + ip6 + hbh + tcp
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    for ts, orig in ((1, 0xFFFFFFF0), (2, len(frame))):
        data += struct.pack("<IIII", ts, 0, len(frame), orig) + frame
    path = tmp_path / "jumbo.pcap"
    path.write_bytes(data)
    cap = pcaptools.load(path)
    assert cap.packets["tcp_len"].tolist() == [pd.NA, 0]
    assert cap.packets["frame_len"].tolist() == [0xFFFFFFF0, 82]
    w = cap.warnings.set_index("code")
    assert w.loc["table.packets_value_too_large", "frame"] == 1
    assert "tcp.len 2,415,919,076" in w.loc["table.packets_value_too_large", "detail"]
    assert "2415919076 bytes" in w.loc["tcp.reassembly_gap", "detail"]


@pytest.mark.parametrize("n", [0, 1, 4096, NULL_STRINGS_MAPPED_ROWS - 1, NULL_STRINGS_MAPPED_ROWS,
                               200_003])
def test_null_strings_equal_pandas_missing_strings(n: int) -> None:
    """A column no row fills: the same values, dtype and Arrow type as pandas makes, and every
    operation on it works as on pandas' (the mapped zeros are read-only, never written)."""
    ours, ref = null_strings(n), pd.array([None] * n, dtype="string")
    pd.testing.assert_extension_array_equal(ours, ref)
    assert ours._pa_array.type == ref._pa_array.type == "large_string"
    s = pd.Series(ours)
    assert s.isna().sum() == n and s.count() == 0
    both = pd.concat([s, pd.Series(["a", None], dtype="string")], ignore_index=True)
    assert both.tolist() == [pd.NA] * n + ["a", pd.NA]
    assert (s.fillna("x") == "x").all()
    s2 = s.copy()
    if n:
        s2.iloc[0] = "set"  # (a new array: the mapped one stays as it is)
        assert s2.iloc[0] == "set" and s.isna().all()


def test_null_strings_without_a_map_are_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no map can be made (mmap fails, or has no flags and prot as on Windows) the column
    is allocated as before, with the same values."""
    def no_map(*args: object, **kwargs: object) -> object:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(_columns.mmap, "mmap", no_map)
    n = NULL_STRINGS_MAPPED_ROWS + 1
    got = null_strings(n)
    pd.testing.assert_extension_array_equal(got, pd.array([None] * n, dtype="string"))
    assert got._pa_array.chunks[0].buffers()[1].is_mutable  # (pa.nulls' own, allocated)


def test_null_strings_allocate_nothing() -> None:
    """5 million missing strings: their 40 MB of offsets and bitmap are the read-only map, not
    memory Arrow allocates (its pool's count moves by the array objects only), while pa.nulls
    allocates all of it. (What that does to a load's peak RSS is measured by
    benchmarks/run.py, not here.)"""
    before = pa.total_allocated_bytes()
    col = null_strings(5_000_000)
    frame = pd.DataFrame({"x": col})
    assert frame["x"].isna().all()
    assert pa.total_allocated_bytes() - before < 4096
    chunk = col._pa_array.chunks[0]
    assert not chunk.buffers()[1].is_mutable and chunk.buffers()[1].size == 40_000_008
    assert frame.memory_usage(deep=True, index=False)["x"] >= 40_000_000  # (what pandas counts)
    before = pa.total_allocated_bytes()
    allocated = pa.nulls(5_000_000, pa.large_string())
    assert pa.total_allocated_bytes() - before >= 40_000_000 and len(allocated) == 5_000_000


def test_text_column_blocks_with_no_value_are_counted() -> None:
    """TextColumn keeps a block with no value as its row count: a column of only such blocks is
    null_strings, one with values too equals the values in order."""
    empty = TextColumn()
    for n in (3, 4096, 70_000):
        empty.extend([None] * n)
    assert all(type(b) is int for b in empty.blocks)
    got = empty.values()
    assert len(got) == 74_099 and pd.isna(got).all()
    mixed = TextColumn()
    rows: list[str | None] = []
    for block in ([None, None], ["a", None, ""], [None], ["é"], [None] * 5):
        mixed.extend(list(block))
        rows += block
    assert [type(b).__name__ for b in mixed.blocks].count("int") == 3
    pd.testing.assert_extension_array_equal(pd.array(mixed.values(), dtype="string"),
                                            pd.array(rows, dtype="string"))


def test_mapped_null_strings_leave_every_table_of_real_captures_equal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With every string column that no row fills mapped (the row threshold lowered to 1), each
    table of real captures (voice over WebSocket with its realtime events, SSE over HTTP/2) equals
    the ordinary load's, and the unfilled columns are the mapped kind (read-only offsets)."""
    for name, keys in (("voice-realtime.pcapng", "voice-realtime.keys"),
                       ("h2-sse-chat.pcapng", "h2-sse-chat.keys")):
        monkeypatch.setattr(_columns, "NULL_STRINGS_MAPPED_ROWS", 10**12)
        ref = pcaptools.load(CAPTURES / name, keylog=CAPTURES / keys)
        monkeypatch.setattr(_columns, "NULL_STRINGS_MAPPED_ROWS", 1)
        got = pcaptools.load(CAPTURES / name, keylog=CAPTURES / keys)
        mapped = 0
        for table in pcaptools.TABLES:
            a, b = getattr(got, table), getattr(ref, table)
            pd.testing.assert_frame_equal(a, b, check_exact=True)
            for col in a.columns:
                if isinstance(a[col].dtype, pd.StringDtype) and len(a) and a[col].isna().all():
                    offsets = a[col].array._pa_array.chunks[0].buffers()[1]
                    mapped += not offsets.is_mutable  # (the read-only map; Arrow's own are not)
        assert mapped >= 3, name
