"""Tables to files: Parquet (one file per table, or a Hive-partitioned dataset) and CSV.

    pcaptools.export.to_parquet(cap, "out/")        # out/connections.parquet, ..., out/capture.json
    pcaptools.export.to_csv(cap, "out/")            # out/connections.csv, ...
    pcaptools.export.write_partition(cap, "ds/", "a.pcap")  # ds/<table>/capture=a.pcap/*.parquet
    pcaptools.export.read_table("ds/", "connections")       # all captures, with a `capture` column

Parquet keeps every dtype: the Arrow schema is built from the table's
:class:`~pcaptools.tables.schema.TableSchema` (not guessed from the values), so an empty
table, an all-missing column or a categorical with few values is written with the same
types in every file, and pandas reads back exactly the dtypes ``load()`` returned
(``Int64``, ``boolean``, ``string``, ``category``, ``datetime64[ns, UTC]``). Header-list
columns (``object`` dtype, tuples of ``(name, value)``) become ``list<list<string>>``; they read
back as arrays of ``[name, value]`` arrays. In CSV they are JSON text.

Parquet needs pyarrow (``pip install 'pcaptools[parquet]'``); without it these functions
raise ImportError saying so. Nothing here prints.

Streaming export while reading: ``pcaptools.load(path, out="dir/")`` writes the same files
(``dir/<table>.parquet`` for every table, plus ``dir/captures.parquet``) while it reads, so a
capture whose tables do not fit in memory can still be analysed (with pandas, DuckDB, the
Dask runner: the layout and the dtypes are the ones :func:`to_parquet` gives). The tables
that grow with the traffic (packets, tcp_events, tls_records, http2_frames, http2_streams,
http_requests, sse_events, ws_frames, ws_messages) are written in row groups of
``chunk_rows`` rows (65,536 by default) as soon as that many rows are final; the builders
hand them over through the hook of :mod:`pcaptools.tables.schema` (:class:`Drainable`,
:class:`ChunkPump`) and :class:`ParquetSink` writes them. Every file is written as a new
``.<table>.parquet.<random>.partial`` and renamed when the capture has been read to its end, so
a reader never sees a half-written table. ``load`` then returns a :class:`StreamedCapture`:
the smaller per-connection tables in memory, the others read back from their file when asked
for. The tables of one row per connection that a port scan makes big (connections,
tcp_handshakes, coverage) are written at the end a chunk of connections at a time
(:func:`pcaptools.pipeline.run`), never whole in memory.

Every file here (:func:`to_parquet`, :func:`to_csv`, :func:`write_partition`, the streaming
export) is written the same way (:func:`pcaptools._safewrite.atomic_open`): into a new
temporary file in the target folder, then renamed over the target, so a symlink at the
target is replaced, never written through, and a failed write leaves the old file intact.

Every file also records, in its Parquet key-value metadata (``pcaptools.categories``), the
categories of its categorical columns as ``load()`` orders and types them; pandas itself
reads them back as ``str`` categories in first-seen order (equal as a set, so the column
dtype compares equal for unordered categoricals), except where a streamed row group had
fewer rows than categories: it holds only those its rows use (a SYN flood's packets table
would otherwise repeat a million addresses in every row group), so a plain read may lack
categories no row of that column uses. :func:`read_parquet_table` and
:class:`StreamedCapture` restore them exactly, so their tables equal ``load()``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import urllib.parse
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from ._safewrite import atomic_open, mode_for
from .pipeline import LoadOptions, run
from .result import TABLES, Capture, CaptureSummary
from .tables.concat import concat_tables
from .tables.coverage import STREAM_PROTOCOLS
from .tables.heartbeats import websocket_heartbeats
from .tables.schema import CHUNK_ROWS, ChunkPump, Drainable
from .tables.tcp_tables import EventsDrain
from .tcp.tracker import TcpTracker

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "PARTITION_COLUMN",
    "ParquetSink",
    "StreamedCapture",
    "arrow_schema",
    "load_streamed",
    "read_parquet_table",
    "read_table",
    "summary_row",
    "to_csv",
    "to_parquet",
    "write_partition",
]

PARTITION_COLUMN = "capture"
"""name of the column (and Hive partition key) that says which capture file a row came from"""


class _HasTables(Protocol):
    @property
    def tables(self) -> Mapping[str, pd.DataFrame]: ...


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet  # registers pa.parquet
    except ImportError as exc:  # pragma: no cover - pyarrow is installed in the test env
        raise ImportError(
            "Parquet export needs pyarrow: pip install 'pcaptools[parquet]'"
        ) from exc
    return pa


def _is_header_list(name: str) -> bool:
    return name.endswith("headers")


def _arrow_type(pa: Any, dtype: str, name: str) -> Any:
    if dtype in ("int64", "Int64"):
        return pa.int64()
    if dtype in ("int32", "Int32"):
        return pa.int32()
    if dtype in ("int16", "Int16"):
        return pa.int16()
    if dtype in ("int8", "Int8"):
        return pa.int8()
    if dtype == "float64":
        return pa.float64()
    if dtype in ("bool", "boolean"):
        return pa.bool_()
    if dtype == "string":
        return pa.string()
    if dtype == "category":
        return pa.dictionary(pa.int32(), pa.string())
    if dtype.startswith("datetime64[ns"):
        return pa.timestamp("ns", tz="UTC" if "UTC" in dtype else None)
    if dtype == "object" and _is_header_list(name):
        return pa.list_(pa.list_(pa.string()))
    return None  # let Arrow infer (object columns we do not know)


def arrow_schema(table: str, df: pd.DataFrame) -> pa.Schema:
    """The Arrow schema ``df`` is written with: from ``TABLES[table]`` when the table is known
    (so every file of a dataset agrees), else from ``df``'s dtypes. Columns whose type cannot be
    named (unknown ``object`` columns) are inferred from the values, or ``string`` when all
    are missing. Extra columns of ``df`` (e.g. ``capture``) are typed from their dtype."""
    pa = _pyarrow()
    known = {c.name: c.dtype for c in TABLES[table].columns} if table in TABLES else {}
    fields = []
    for col in df.columns:
        dtype = known.get(col, str(df[col].dtype))
        t = _arrow_type(pa, dtype, col)
        if t is None:
            non_null = df[col].dropna()
            t = pa.array(non_null.iloc[:1000]).type if len(non_null) else pa.string()
        fields.append(pa.field(col, t))
    return pa.schema(fields)


def _prepare(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """Copy of ``df`` whose header-list columns hold lists of ``[str, str]`` (None kept) and
    whose categoricals have string categories, ready for ``pa.Table.from_pandas``."""
    out = None
    for col in df.columns:
        s = df[col]
        if s.dtype == object and _is_header_list(col):
            out = df.copy() if out is None else out
            out[col] = pd.Series(
                [None if v is None or v is pd.NA or (isinstance(v, float) and v != v)
                 else [[str(a), str(b)] for a, b in v] for v in s], index=s.index, dtype=object)
        elif isinstance(s.dtype, pd.CategoricalDtype) and len(s.cat.categories) \
                and s.cat.categories.inferred_type != "string":
            out = df.copy() if out is None else out
            out[col] = s.cat.rename_categories([str(c) for c in s.cat.categories])
    return df if out is None else out


def _to_arrow(table: str, df: pd.DataFrame) -> pa.Table:
    pa = _pyarrow()
    df = _prepare(table, df)
    return pa.Table.from_pandas(df, schema=arrow_schema(table, df), preserve_index=False)


def _select(tables: Mapping[str, pd.DataFrame],
            names: Iterable[str] | None) -> dict[str, pd.DataFrame]:
    if names is None:
        return dict(tables)
    names = list(names)
    unknown = [n for n in names if n not in tables]
    if unknown:
        raise ValueError(f"unknown tables {unknown}; known: {sorted(tables)}")
    return {n: tables[n] for n in names}


def summary_row(summary: CaptureSummary) -> dict[str, Any]:
    """A CaptureSummary as one flat row: lists and dicts as JSON text, times as integer ns."""
    d = asdict(summary)
    d["linktypes"] = ",".join(str(x) for x in d["linktypes"])
    d["duration_s"] = summary.duration_s
    d["extra"] = json.dumps(d["extra"], sort_keys=True, default=str)
    return d


def _summaries_frame(cap: Any) -> pd.DataFrame | None:
    """One row per capture: ``cap.summaries`` (ManyCaptures) or the one CaptureSummary."""
    frame = getattr(cap, "summaries", None)
    if isinstance(frame, pd.DataFrame):
        return frame
    summary = getattr(cap, "summary", None)
    if isinstance(summary, CaptureSummary):
        return pd.DataFrame([summary_row(summary)])
    return None


def to_parquet(cap: _HasTables, directory: str | os.PathLike[str], *,
               tables: Iterable[str] | None = None, compression: str = "zstd") -> dict[str, Path]:
    """Write one ``<table>.parquet`` per table of ``cap`` (a Capture or ManyCaptures) into
    ``directory`` (created), plus ``captures.parquet`` (one row per capture: the summary).

    Empty tables are written too (schema only). ``tables`` limits the tables written.
    Returns ``{table: path}``. Raises ValueError for an unknown table name, OSError when the
    directory cannot be written, ImportError without pyarrow.
    """
    pa = _pyarrow()
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, df in _select(cap.tables, tables).items():
        path = d / f"{name}.parquet"
        with atomic_open(path, "wb") as f:
            pa.parquet.write_table(_to_arrow(name, df), f, compression=compression)
        written[name] = path
    summ = _summaries_frame(cap)
    if summ is not None and tables is None:
        path = d / "captures.parquet"
        with atomic_open(path, "wb") as f:
            pa.parquet.write_table(pa.Table.from_pandas(summ, preserve_index=False), f,
                                   compression=compression)
        written["captures"] = path
    return written


def _csv_ready(df: pd.DataFrame) -> pd.DataFrame:
    out = None
    for col in df.columns:
        s = df[col]
        if s.dtype == object:
            out = df.copy() if out is None else out
            out[col] = pd.Series([None if v is None else json.dumps(
                [list(x) for x in v] if _is_header_list(col) else v, default=str) for v in s],
                index=s.index, dtype=object)
    return df if out is None else out


def to_csv(cap: _HasTables, directory: str | os.PathLike[str], *,
           tables: Iterable[str] | None = None) -> dict[str, Path]:
    """Write one ``<table>.csv`` per table (header row, UTF-8, times as ISO 8601 with
    nanoseconds and ``+00:00``, missing values empty, header lists as JSON) plus
    ``captures.csv``. Returns ``{table: path}``; raises ValueError for an unknown table."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, df in _select(cap.tables, tables).items():
        path = d / f"{name}.csv"
        with atomic_open(path, "w", newline="") as f:
            _csv_ready(df).to_csv(f, index=False)
        written[name] = path
    summ = _summaries_frame(cap)
    if summ is not None and tables is None:
        path = d / "captures.csv"
        with atomic_open(path, "w", newline="") as f:
            summ.to_csv(f, index=False)
        written["captures"] = path
    return written


def partition_dir(out: str | os.PathLike[str], table: str, capture: str) -> Path:
    """``out/<table>/capture=<capture, percent-encoded>``: the Hive partition of one capture."""
    return Path(out) / table / f"{PARTITION_COLUMN}={urllib.parse.quote(capture, safe='')}"


def write_partition(cap: Any, out: str | os.PathLike[str], capture: str, *,
                    tables: Iterable[str] | None = None,
                    compression: str = "zstd") -> dict[str, int]:
    """Write ``cap``'s tables into the Hive-partitioned dataset ``out``:
    ``out/<table>/capture=<capture>/part-0.parquet`` for every table, and the summary as
    ``out/captures/capture=<capture>/part-0.parquet``. A partition written before for the
    same capture is replaced. The files do not hold the ``capture`` column: readers get it
    from the directory name (pandas, pyarrow, DuckDB ``hive_partitioning``, Spark).

    Returns ``{table: rows written}``. Raises OSError when ``out`` cannot be written.
    """
    pa = _pyarrow()
    rows: dict[str, int] = {}
    items = list(_select(cap.tables, tables).items())
    summ = _summaries_frame(cap)
    for name, df in items + ([("captures", summ)] if summ is not None else []):
        d = partition_dir(out, name, capture)
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        tbl = _to_arrow(name, df) if name in TABLES else pa.Table.from_pandas(
            df, preserve_index=False)
        with atomic_open(d / "part-0.parquet", "wb") as f:
            pa.parquet.write_table(tbl, f, compression=compression)
        rows[name] = len(df)
    return rows


def read_table(path: str | os.PathLike[str], table: str, *,
               captures: Iterable[str] | None = None) -> pd.DataFrame:
    """Read ``table`` back from what :func:`to_parquet` or :func:`write_partition` wrote.

    ``path/<table>.parquet`` is read as it is. A partitioned dataset ``path/<table>/`` comes
    back with a leading ``capture`` column (categorical, the capture names decoded), rows in
    capture-name order, and the table's dtypes; ``captures`` keeps only those captures.
    Raises FileNotFoundError when neither exists.
    """
    pa = _pyarrow()
    base = Path(path)
    single = base / f"{table}.parquet"
    if single.exists():
        df = pd.read_parquet(single)
        if captures is not None and PARTITION_COLUMN in df.columns:
            df = df[df[PARTITION_COLUMN].isin(list(captures))].reset_index(drop=True)
        return df
    d = base / table
    if not d.is_dir():
        raise FileNotFoundError(f"no {table}.parquet or {table}/ dataset in {base}")
    parts = sorted(p for p in d.iterdir()
                   if p.is_dir() and p.name.startswith(f"{PARTITION_COLUMN}="))
    names = [urllib.parse.unquote(p.name.split("=", 1)[1]) for p in parts]
    if captures is not None:
        wanted = set(captures)
        keep = [(p, n) for p, n in zip(parts, names, strict=True) if n in wanted]
        parts, names = [p for p, _ in keep], [n for _, n in keep]
    frames = []
    for p, n in zip(parts, names, strict=True):
        files = sorted(p.glob("*.parquet"))
        df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True) if len(files) > 1 \
            else pd.read_parquet(files[0])
        df.insert(0, PARTITION_COLUMN, n)
        frames.append(df)
    if not frames:
        empty = pa.parquet.read_schema(next(d.rglob("*.parquet"))).empty_table().to_pandas() \
            if any(d.rglob("*.parquet")) else pd.DataFrame()
        empty.insert(0, PARTITION_COLUMN, pd.Series(pd.Categorical([], categories=names)))
        return empty
    out = concat_tables(frames)
    out[PARTITION_COLUMN] = pd.Categorical(out[PARTITION_COLUMN], categories=names)
    return out


# ------------------------------------------------------------------ streaming export

CATEGORIES_KEY = "pcaptools.categories"
"""Parquet key-value metadata: ``{column: {"dtype": ..., "categories": [...]}}`` as JSON"""


SHARED_CODE_SPACES: dict[str, tuple[str, ...]] = {"packets": ("src", "dst")}
"""table -> categorical columns whose categories are one list, in first-seen order over the
rows, each row's values in column order (the packets builder codes ``src`` then ``dst`` of
each frame, one code space): restored that way when they are not recorded"""

RECORDED_CATEGORIES = 65536
"""the most categories :class:`_Categories` keeps of a text column in first-seen order"""


class _Categories:
    """The categories of one categorical column over all the chunks written: the order and
    dtype ``load()`` gives the whole column (codes appended in first-seen order, or sorted
    when every chunk was built by ``pd.Categorical(values)``).

    Text categories in first-seen order need no record: pyarrow reads the row groups'
    dictionaries back as one, new values appended in the order they come, which is that
    order (each row group's dictionary holds its categories in code order). Once a text
    column is known not to be sorted and has more than :data:`RECORDED_CATEGORIES` values,
    they are let go (:attr:`seen` None, :meth:`final` None): a port scan's million addresses
    are not held through the pass. (A read of some row groups only then has the categories
    of those row groups, not all of the table's.)"""

    __slots__ = ("_last", "dtype", "seen", "sorted")

    def __init__(self) -> None:
        self.seen: dict[Any, None] | None = {}
        self.sorted = True
        self.dtype = "object"
        self._last: pd.Index | None = None

    def add(self, cats: pd.Index) -> None:
        if len(cats) or not self.seen:  # (a chunk of NAs only has empty categories of any dtype)
            self.dtype = str(cats.dtype)
        if self.seen is None:  # (first-seen text: nothing to record)
            self._last = cats
            return
        prev = self._last
        k = 0  # (categories known from the previous chunk: a builder that keeps its codes
        # hands over the categories seen so far, then the new ones; only those are walked)
        if prev is not None and 0 < len(prev) <= len(cats) and cats[:len(prev)].equals(prev):
            k = len(prev)
        values = cats[k:].tolist()
        self.seen.update(dict.fromkeys(values))
        if self.sorted:
            check = [prev[-1], *values] if k and prev is not None else values
            try:
                self.sorted = check == sorted(check)
            except TypeError:
                self.sorted = False
        self._last = cats
        if (not self.sorted and self.dtype == "object" and len(self.seen) > RECORDED_CATEGORIES
                and all(isinstance(v, str) for v in self.seen)):
            self.seen = None

    def final(self) -> list[Any] | None:
        """The categories in order, None for first-seen text (nothing to record)."""
        if self.seen is None:
            return None
        values = list(self.seen)
        if self.sorted:
            try:
                return sorted(values)
            except TypeError:
                pass
        return values


def _json_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


class ParquetSink:
    """Writes tables chunk by chunk: one ``<table>.parquet`` per table in ``directory``, one
    row group per :meth:`write`, with the Arrow schema of :func:`arrow_schema` (the same
    files :func:`to_parquet` writes). A :class:`~pcaptools.tables.schema.TableSink`.

    Files are written as new ``.<table>.parquet.<random>.partial`` files (``O_EXCL``: nothing
    already there is written through) and renamed by :meth:`close`, replacing what was at
    ``<table>.parquet`` (a symlink too, never followed); :meth:`abort` removes them. Raises
    OSError when the directory cannot be written, ImportError without pyarrow."""

    def __init__(self, directory: str | os.PathLike[str], *, compression: str = "zstd") -> None:
        self._pa = _pyarrow()
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.compression = compression
        self._writers: dict[str, Any] = {}
        """per table: its ParquetWriter (None once finished: :meth:`_finish`)"""
        self._files: dict[str, tuple[Any, Path]] = {}
        """per table: the open temporary file and its path"""
        self._cats: dict[str, dict[str, _Categories]] = {}
        self.rows: dict[str, int] = {}
        """rows written so far, per table"""

    def _partial(self, table: str) -> Any:
        """A new temporary file for ``table`` in the directory, open for writing."""
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{table}.parquet.",
                                   suffix=".partial")
        fobj = os.fdopen(fd, "wb")
        self._files[table] = (fobj, Path(tmp))
        return fobj

    def write(self, table: str, chunk: pd.DataFrame) -> None:
        """Append ``chunk`` (a DataFrame of the table's schema) as one row group; an empty
        chunk only opens the file (so the table exists, with its schema, when closed). A
        categorical column's row group holds only the categories its rows use (every chunk
        of a streamed table carries all the categories seen so far: a million addresses
        would be written again in every row group); the file's metadata keeps them all."""
        cats = self._cats.setdefault(table, {})
        used = None
        for col in chunk.columns:
            s = chunk[col]
            if isinstance(s.dtype, pd.CategoricalDtype):
                c = s.cat.categories
                cats.setdefault(col, _Categories()).add(c)
                if len(c) > len(chunk) and c.inferred_type == "string":
                    used = chunk.copy(deep=False) if used is None else used
                    used[col] = s.cat.remove_unused_categories()
        arrow = _to_arrow(table, chunk if used is None else used)
        w = self._writers.get(table)
        if w is None:
            if table in self._writers:
                raise ValueError(f"{table}: its file is finished (read_back)")
            w = self._writers[table] = self._pa.parquet.ParquetWriter(
                self._partial(table), arrow.schema, compression=self.compression)
            self.rows[table] = 0
        if len(chunk) or not self.rows[table]:
            w.write_table(arrow, row_group_size=max(len(chunk), 1))
        self.rows[table] += len(chunk)

    def _finish(self, table: str) -> Path:
        """Finish ``table``'s file (its categories metadata) and close it; returns its
        temporary path. No more rows can be written to it."""
        w = self._writers[table]
        if w is not None:
            meta: dict[str, Any] = {}
            for col, c in self._cats[table].items():
                final = c.final()
                if final is None:
                    meta[col] = {"dtype": c.dtype, "categories": None}
                    shared = SHARED_CODE_SPACES.get(table, ())
                    if col in shared:
                        meta[col]["shared"] = list(shared)
                elif all(_json_scalar(v) for v in final):
                    meta[col] = {"dtype": c.dtype, "categories": final}
            w.add_key_value_metadata({CATEGORIES_KEY: json.dumps(meta)})
            w.close()
            self._writers[table] = None
            self._files[table][0].close()
        return self._files[table][1]

    def read_back(self, table: str, columns: list[str], *,
                  filters: Any = None) -> Any:
        """``table``'s rows written so far (``columns`` only; pyarrow ``filters``), as a
        ``pyarrow.parquet.ParquetFile`` to read a row group at a time (no filters) or a
        DataFrame (filters); the file is finished first (:meth:`_finish`): nothing more can be
        written to it. For a step that reads a table the export has written whole, a chunk at
        a time."""
        tmp = self._finish(table)
        if filters is None:
            return self._pa.parquet.ParquetFile(tmp)
        return read_parquet_table(tmp, columns=columns, filters=filters)

    def close(self) -> dict[str, Path]:
        """Finish every file (its categories metadata), rename it into place; returns
        ``{table: path}``."""
        done: dict[str, Path] = {}
        for table in list(self._writers):
            tmp = self._finish(table)
            self._files.pop(table)
            path = self.directory / f"{table}.parquet"
            os.chmod(tmp, mode_for(path))
            os.replace(tmp, path)
            done[table] = path
        self._writers = {}
        return done

    def abort(self) -> None:
        """Close and remove the files not yet renamed into place (nothing raises)."""
        for w in self._writers.values():
            with contextlib.suppress(Exception):  # best effort clean-up of a failed run
                if w is not None:
                    w.close()
        for fobj, tmp in self._files.values():
            with contextlib.suppress(Exception):
                fobj.close()
            tmp.unlink(missing_ok=True)
        self._writers = {}
        self._files = {}


def _restore_categories(df: pd.DataFrame, meta: Mapping[str, Any]) -> pd.DataFrame:
    """``df`` (read by pandas) with the categorical columns named in ``meta`` given the
    categories, order and category dtype recorded when they were written (categories None:
    those read, in their order: :class:`_Categories`)."""
    orders: dict[tuple[str, ...], list[Any]] = {}  # (a code space's order, made once)
    for col, m in meta.items():
        if col not in df.columns or not isinstance(df[col].dtype, pd.CategoricalDtype):
            continue
        s = df[col]
        if m["categories"] is None:
            shared = tuple(m.get("shared") or [col])
            if all(c in df.columns for c in shared):  # (else those of the rows read)
                values = orders.get(shared)
                if values is None:
                    # first-seen order over the rows, each row's values in column order
                    both = np.column_stack([df[c].astype(object).to_numpy() for c in shared])
                    values = orders[shared] = [v for v in pd.unique(both.ravel()).tolist()
                                               if isinstance(v, str)]
            else:
                values = s.cat.categories.tolist()
            cats = pd.Index(values, dtype=m["dtype"])
            df[col] = pd.Categorical(s.astype(object), categories=cats)
            continue
        want = pd.Index(m["categories"], dtype=m["dtype"])
        if not all(isinstance(v, str) for v in m["categories"]):
            # written as text (see _prepare): map the text back to the values
            s = s.cat.rename_categories({c: v for c in s.cat.categories for v in m["categories"]
                                         if str(v) == c})
        df[col] = s.cat.set_categories(want)
    return df


def read_parquet_table(path: str | os.PathLike[str], *, columns: list[str] | None = None,
                       filters: Any = None) -> pd.DataFrame:
    """``pd.read_parquet(path, columns=..., filters=...)`` and, for a file written by
    :class:`ParquetSink`, the categorical columns restored to what ``load()`` returned
    (categories, their order and dtype) and header lists as tuples of ``(name, value)``.
    ``filters`` are pyarrow's (e.g.
    ``[("tcp_stream", "==", 3)]``). Raises FileNotFoundError when the file is missing."""
    pa = _pyarrow()
    df = pd.read_parquet(path, columns=columns, filters=filters)
    kv = pa.parquet.ParquetFile(path).metadata.metadata or {}
    raw = kv.get(CATEGORIES_KEY.encode())
    if raw:
        df = _restore_categories(df, json.loads(raw))
        for col in df.columns:
            if df[col].dtype == object and _is_header_list(col):
                df[col] = pd.Series(
                    [None if v is None else tuple((str(a), str(b)) for a, b in v) for v in df[col]],
                    index=df.index, dtype=object)
    return df


class _LazyTables(Mapping[str, pd.DataFrame]):
    """``StreamedCapture.tables``: every table by name, read from its file when asked for."""

    def __init__(self, cap: StreamedCapture) -> None:
        self._cap = cap

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._cap.paths or name == "captures":
            raise KeyError(name)
        return self._cap.read(name)

    def __iter__(self) -> Iterator[str]:
        return (n for n in self._cap.paths if n != "captures")

    def __len__(self) -> int:
        return sum(1 for _ in self)


class StreamedCapture(Capture):
    """What ``load(path, out=directory)`` returns: a :class:`Capture` whose tables are in
    ``directory`` (one Parquet file each, ``paths``), not in memory.

    The tables of one row per connection built at the end (tls_handshakes, http2_connections,
    ws_connections, ws_heartbeats, dns, icmp_errors, path_mtu, warnings) and tcp_losses (one
    row per segment resent: built sorted at the end) are held in memory as well; connections,
    tcp_handshakes and coverage are written a chunk of connections at a time at the end and,
    like the others, read from their file each time the attribute (``cap.packets``) or
    ``cap.tables[name]`` is used, so keep the DataFrame in a variable rather than reading it
    again (while it is referenced, the same DataFrame is returned). :meth:`read` reads some
    columns or rows only (pyarrow filters); DuckDB reads ``directory/*.parquet`` directly.
    The DataFrames equal what ``load(path)`` returns (same dtypes and categories)."""

    def __init__(self, summary: CaptureSummary, directory: str | os.PathLike[str],
                 paths: Mapping[str, Path], memory: Mapping[str, pd.DataFrame]) -> None:
        # Capture.__init__ would read every table: set the attributes it sets ourselves
        self.summary = summary
        self.out = Path(directory)
        """the directory the tables were written to"""
        self.paths: dict[str, Path] = dict(paths)
        """``{table: file}`` for every table and ``captures`` (the summary row)"""
        self._memory = dict(memory)
        self._cache: weakref.WeakValueDictionary[str, pd.DataFrame] = weakref.WeakValueDictionary()
        self.tables = _LazyTables(self)  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        # only called for attributes not found otherwise: the tables
        if name in TABLES and "paths" in self.__dict__:
            return self.read(name)
        raise AttributeError(name)

    def read(self, table: str, *, columns: list[str] | None = None,
             filters: Any = None) -> pd.DataFrame:
        """Table ``table`` (all of it, or only ``columns`` / the rows matching pyarrow
        ``filters``) from memory or from its file. Raises KeyError for an unknown table."""
        if table not in self.paths or table == "captures":
            raise KeyError(table)
        whole = columns is None and filters is None
        if whole:
            if table in self._memory:
                return self._memory[table]
            hit = self._cache.get(table)
            if hit is not None:
                return hit
        df = read_parquet_table(self.paths[table], columns=columns, filters=filters)
        if whole:
            self._cache[table] = df
        return df

    @property
    def rows(self) -> dict[str, int]:
        """Rows of every table, from the files' metadata (nothing is read)."""
        pa = _pyarrow()
        return {n: pa.parquet.ParquetFile(p).metadata.num_rows for n, p in self.paths.items()
                if n != "captures"}

    def to_parquet(self, directory: str | os.PathLike[str], **kw: Any) -> dict[str, Path]:
        """The files are written already: copy them to ``directory`` (returns the copies;
        ``directory`` equal to :attr:`out` returns the files as they are)."""
        d = Path(directory)
        if d.resolve() == self.out.resolve() and not kw:
            return dict(self.paths)
        if kw:
            return to_parquet(self, directory, **kw)
        d.mkdir(parents=True, exist_ok=True)
        return {n: Path(shutil.copyfile(p, d / p.name)) for n, p in self.paths.items()}

    def __repr__(self) -> str:
        s = self.summary
        conns = self.rows.get("connections", "?")
        return (f"<StreamedCapture {Path(s.path).name!r} in {str(self.out)!r}: {s.frames} frames, "
                f"{conns} TCP connections>")

    def _repr_html_(self) -> str:
        import html

        s = self.summary
        rows = "".join(
            f"<tr><td><code>cap.{html.escape(n)}</code></td><td>{k}</td>"
            f"<td>{'memory' if n in self._memory else 'file'}</td></tr>"
            for n, k in self.rows.items()
        )
        return (f"<div><b>StreamedCapture</b> {html.escape(Path(s.path).name)} in "
                f"<code>{html.escape(str(self.out))}</code>: {s.frames} frames"
                f"<table><tr><th>table</th><th>rows</th><th>held in</th></tr>{rows}</table></div>")


_HEARTBEAT_CONNECTION_COLUMNS = ["tcp_stream", "last_ts", "end_ts", "end_reason"]
"""the ``connections`` columns :func:`websocket_heartbeats` reads"""


class _Stream:
    """The sink of ``load(out=...)``: a :class:`ParquetSink` that also keeps the WebSocket
    Ping/Pong rows of ws_frames (ws_heartbeats is derived from them at the end) and the
    tcp_streams of the rows of the tables the coverage table reads."""

    def __init__(self, sink: ParquetSink) -> None:
        self.sink = sink
        self.pings: list[pd.DataFrame] = []
        self.streams: dict[str, set[int]] = {name: set() for name, _ in STREAM_PROTOCOLS}
        """tcp_streams of the rows handed over, for the tables the coverage table reads"""

    def write(self, table: str, chunk: pd.DataFrame) -> None:
        seen = self.streams.get(table)
        if seen is not None and len(chunk) and "tcp_stream" in chunk.columns:
            seen.update(int(x) for x in chunk["tcp_stream"].dropna().unique().tolist())
        if table == "ws_frames" and len(chunk):
            keep = np.array(chunk["opcode"].isin([9, 10]), dtype=bool)
            if not self.pings:
                keep[0] = True
            if keep.any():
                self.pings.append(chunk[keep])
        self.sink.write(table, chunk)

    def read_back(self, table: str, columns: list[str], *, filters: Any = None) -> Any:
        """:meth:`ParquetSink.read_back`"""
        return self.sink.read_back(table, columns, filters=filters)


def start_stream(out: str | os.PathLike[str], builders: Iterable[Any], *,
                 chunk_rows: int = CHUNK_ROWS, compression: str = "zstd") -> ChunkPump:
    """The :class:`ChunkPump` ``load(out=...)`` polls while reading: ``builders`` are its
    sources, each :class:`Drainable` (``TcpTracker`` through
    :class:`~pcaptools.tables.tcp_tables.EventsDrain`); anything else is a TypeError."""
    pump = ChunkPump(_Stream(ParquetSink(out, compression=compression)), chunk_rows)
    for b in builders:
        if isinstance(b, TcpTracker):
            pump.add(EventsDrain(b))
        elif isinstance(b, Drainable):
            pump.add(b)
        elif b is not None:
            raise TypeError(f"{type(b).__name__} cannot stream its rows (no pending/drain)")
    return pump


def finish_stream(pump: ChunkPump, summary: CaptureSummary, tables: Mapping[str, pd.DataFrame],
                  *, capture_end: int | None,
                  written: frozenset[str] = frozenset()) -> StreamedCapture:
    """Write what ``load()`` built at the end (``tables``: the per-connection tables and the
    rows not yet drained of the others; ``written``: the tables the end of the pass wrote
    already, a chunk at a time), derive ws_heartbeats, close every file and write
    ``captures.parquet``; returns the :class:`StreamedCapture`."""
    stream = pump.sink
    assert isinstance(stream, _Stream)
    sink = stream.sink
    try:
        streamed = {t for src in pump.sources for t in src.pending()}
        memory: dict[str, pd.DataFrame] = {}
        for name in TABLES:
            if name == "ws_heartbeats" or name in written:
                continue
            df = tables[name] if name in tables else TABLES[name].frame([])
            # (row groups of CHUNK_ROWS: the Arrow copy of a million-row table is made a
            # slice at a time)
            for start in range(0, max(len(df), 1), CHUNK_ROWS):
                stream.write(name, df.iloc[start:start + CHUNK_ROWS])
            if name not in streamed:
                memory[name] = df
        # the rows websocket_heartbeats() looks at (and one other row, if the table has
        # rows but no ping/pong: it then takes the same path as with the whole table)
        pings = stream.pings
        frames = concat_tables(pings) if pings else TABLES["ws_frames"].frame([])
        conns = memory.get("connections")
        if conns is None and "connections" in written:  # (the rows of the ws connections)
            ws = sorted({int(x) for x in frames["tcp_stream"].dropna().tolist()})
            conns = sink.read_back("connections", _HEARTBEAT_CONNECTION_COLUMNS,
                                   filters=[("tcp_stream", "in", ws)] if ws else None)
            if not ws:
                conns = None
        hb = websocket_heartbeats(frames, connections=conns, capture_end=capture_end)
        sink.write("ws_heartbeats", hb)
        memory["ws_heartbeats"] = hb
        paths = sink.close()
        pa = _pyarrow()
        cpath = Path(sink.directory) / "captures.parquet"
        pa.parquet.write_table(pa.Table.from_pandas(pd.DataFrame([summary_row(summary)]),
                                                    preserve_index=False), cpath,
                               compression=sink.compression)
        paths["captures"] = cpath
    except BaseException:
        sink.abort()
        raise
    ordered = {n: paths[n] for n in [*TABLES, "captures"]}
    return StreamedCapture(summary, sink.directory, ordered, memory)


def load_streamed(path: str | os.PathLike[str] | IO[bytes],
                  options: LoadOptions) -> StreamedCapture:
    """``load(path, out=options.out, ...)``: the single pass of :func:`pcaptools.pipeline.run`
    with its builders handing finished rows to ``options.out`` while reading (row groups of
    ``options.chunk_rows`` rows), then the rest written at the end; returns the
    :class:`StreamedCapture`."""
    out = options.out
    if out is None:
        raise ValueError("load_streamed() needs options.out (the directory to write)")
    res = run(path, options,
              open_sink=lambda builders: start_stream(out, builders, chunk_rows=options.chunk_rows))
    assert res.pump is not None
    return finish_stream(res.pump, res.summary, res.tables, capture_end=res.capture_end,
                         written=res.written)
