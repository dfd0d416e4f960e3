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

Not here yet: streaming export while reading (``load(path, out="dir/")`` writing row groups
as it goes, so a capture's tables never sit in memory whole). It needs, in code this module
does not own: (1) builders that hand over *final* rows during the pass: a ``drain()`` on
``PacketsBuilder``, the TLS/HTTP table builders and the tracker's event columns, returning the
rows that can no longer change; packets rows change after they are added (``ack_rtt_ms`` and
``acks_frame`` are filled when the ACK arrives, ``resent``), so a row is final only once its
connection has closed or it is older than the ACK window; connection rows are final only when
the connection ends; (2) a hook in ``load()`` calling ``drain()`` every N frames and a sink
(here: one ``pyarrow.parquet.ParquetWriter`` per table, schema from :func:`arrow_schema`,
one row group per drain). Until then, :mod:`pcaptools.distributed` bounds memory per file
and ``packets=False`` removes the one table that grows with the frame count.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

from .capture import TABLES, CaptureSummary

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "PARTITION_COLUMN",
    "arrow_schema",
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
        elif isinstance(s.dtype, pd.CategoricalDtype) and len(s.cat.categories) and not all(
                isinstance(c, str) for c in s.cat.categories):
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
        pa.parquet.write_table(_to_arrow(name, df), path, compression=compression)
        written[name] = path
    summ = _summaries_frame(cap)
    if summ is not None and tables is None:
        path = d / "captures.parquet"
        pa.parquet.write_table(pa.Table.from_pandas(summ, preserve_index=False), path,
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
        _csv_ready(df).to_csv(path, index=False)
        written[name] = path
    summ = _summaries_frame(cap)
    if summ is not None and tables is None:
        path = d / "captures.csv"
        summ.to_csv(path, index=False)
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
        pa.parquet.write_table(tbl, d / "part-0.parquet", compression=compression)
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
    from .many import concat_tables

    out = concat_tables(frames)
    out[PARTITION_COLUMN] = pd.Categorical(out[PARTITION_COLUMN], categories=names)
    return out
