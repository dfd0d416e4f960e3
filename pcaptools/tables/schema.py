"""Table schemas: one object per table, naming every column's dtype, unit and meaning.

Builders collect rows as plain tuples (or whole columns as lists/arrays) with times
as integer nanoseconds, and call :meth:`TableSchema.frame`, which orders the columns,
converts ``*_ts`` integer ns to ``datetime64[ns, UTC]`` and casts every dtype. An empty
table keeps its columns and dtypes. ``docs/tables.md`` is generated from these objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.api.types import infer_dtype

from .._columns import all_missing, null_strings
from .._memory import trim

TS_DTYPE = "datetime64[ns, UTC]"

CHUNK_ROWS = 65536
"""rows per chunk (Parquet row group) when tables are streamed out while reading"""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    dtype: str
    """pandas dtype: int64, int32, int16, int8, Int64, Int32, Int16, Int8, float64, boolean, bool, string,
    category, datetime64[ns, UTC], object. The narrower integer widths are for columns whose
    values the protocol bounds (ports, IP protocol numbers, TCP flags, lengths of one packet):
    always signed, with room beyond the protocol's range (a difference of two ports or two
    lengths cannot wrap). Sums and cumulative sums come back as 64-bit ints (numpy widens
    them); products do not: cast first (``.astype("Int64")``) for arithmetic that may leave
    the column's range."""
    unit: str | None
    doc: str
    secret: str | None = None
    """what credentials the values may carry, as a kind of
    :data:`pcaptools.redaction.SECRET_KINDS` (``url``, ``authority``, ``headers``,
    ``subprotocols``, ``json``, ``text``): ``load()`` redacts the column with it unless
    ``show_secrets=True``. None: the column holds no credential."""


@dataclass(frozen=True, slots=True)
class TableSchema:
    name: str
    grain: str
    """what one row is"""
    key: tuple[str, ...]
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def secret_columns(self) -> tuple[tuple[str, str], ...]:
        """``(column, kind)`` of every column that may carry a credential (``Column.secret``),
        what :func:`pcaptools.redaction.redact_frame` takes"""
        return tuple((c.name, c.secret) for c in self.columns if c.secret is not None)

    def frame(
        self,
        rows: Iterable[Sequence[Any]] | None = None,
        *,
        columns: Mapping[str, Any] | None = None,
        copy: bool = True,
    ) -> pd.DataFrame:
        """Build the table from row tuples (in column order) or from whole columns.

        Returns a DataFrame with exactly this schema's columns and dtypes. Raises ValueError
        when a column is missing or a row has the wrong number of values. Each column is cast
        on its own and the DataFrame is assembled without consolidating copies, so the peak
        memory is the result plus one column. ``copy=False`` (for builders handing over fresh
        columns): numpy/pandas arrays in ``columns`` that already have the column's dtype (an
        int64 array for a ``*_ts`` column too) become the table's columns as they are, without
        a copy (values under an ``Int64`` mask are set to 0 in place, as a cast sets them),
        and a ``dict`` of columns is emptied as they are cast, so each input column is freed
        as soon as its cast exists (the peak is the table plus one column, not the table
        twice); the caller must not use the columns afterwards. With ``copy=True`` an input
        array is never shared with the result and ``columns`` is left as it is.
        """
        names = self.names
        out: dict[str, Any] = {}
        if columns is not None:
            missing = set(names) - set(columns)
            if missing:
                raise ValueError(f"{self.name}: columns missing: {sorted(missing)}")
            taken = columns if not copy and isinstance(columns, dict) else None
            for col in self.columns:
                if taken is not None:
                    out[col.name] = _cast(taken.pop(col.name), col, share=True)
                    continue
                values = columns[col.name]
                arr = _cast(values, col, share=not copy)
                if copy and _shares(arr, values):
                    arr = arr.copy()
                out[col.name] = arr
        else:
            if not isinstance(rows, list):
                rows = list(rows or ())
            for r in rows[:1]:
                if len(r) != len(names):
                    raise ValueError(f"{self.name}: row has {len(r)} values, schema has {len(names)}")
            for i, col in enumerate(self.columns):
                # one column at a time (a C loop): the transposed lists never exist together
                out[col.name] = _cast(list(map(itemgetter(i), rows)), col)
        return pd.DataFrame(out, columns=names, copy=False)

    def frame_in_chunks(self, chunks: Iterable[Sequence[Sequence[Any]]]) -> pd.DataFrame:
        """:meth:`frame` of the rows of ``chunks`` (lists of row tuples, in order), cast one
        chunk at a time (:class:`ChunkedFrame`): only one chunk's row tuples exist at once.
        Same columns, dtypes and values as :meth:`frame` of all the rows."""
        out = ChunkedFrame(self)
        for rows in chunks:
            out.add(rows)
        return out.frame()

    def check(self, df: pd.DataFrame) -> None:
        """Raise AssertionError if ``df`` does not have exactly this schema's columns and dtypes."""
        assert list(df.columns) == self.names, f"{self.name}: columns {list(df.columns)} != {self.names}"
        for col in self.columns:
            got = str(df[col.name].dtype)
            want = col.dtype
            if want == "string":
                ok = isinstance(df[col.name].dtype, pd.StringDtype)
            elif want == "category":
                ok = isinstance(df[col.name].dtype, pd.CategoricalDtype)
            else:
                ok = got == want
            assert ok, f"{self.name}.{col.name}: dtype {got} != {want}"

    def markdown(self) -> str:
        lines = [
            f"## `{self.name}`",
            "",
            f"One row: {self.grain}. Key: {', '.join(f'`{k}`' for k in self.key)}.",
            "",
            "| column | dtype | unit | meaning |",
            "|---|---|---|---|",
        ]
        for c in self.columns:
            doc = c.doc.replace("|", "\\|")
            if c.secret is not None:
                doc += f" (credentials redacted unless `show_secrets`: `{c.secret}`)"
            lines.append(f"| `{c.name}` | {c.dtype} | {c.unit or ''} | {doc} |")
        return "\n".join(lines) + "\n"


class ChunkedFrame:
    """One table built from chunks of row tuples, each chunk's columns cast as it is added:
    for a table of one row per connection (millions in a port scan), the row tuples are most
    of what building it costs, and only one chunk of them exists at once. The columns are
    joined by :meth:`frame`, one at a time; ``category`` columns keep their values (shared
    objects, a pointer a row) and are cast once there, so their categories are those of
    :meth:`TableSchema.frame`. The result has the columns, dtypes and values that
    :meth:`TableSchema.frame` gives for all the rows."""

    __slots__ = ("parts", "schema")

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.parts: list[list[Any]] = [[] for _ in schema.columns]

    def add(self, rows: Sequence[Sequence[Any]]) -> None:
        """Cast the next rows (in column order; raises ValueError as :meth:`TableSchema.frame`
        does for a row of the wrong length)."""
        cols = self.schema.columns
        if not rows:
            return
        if len(rows[0]) != len(cols):
            raise ValueError(f"{self.schema.name}: row has {len(rows[0])} values, schema has "
                             f"{len(cols)}")
        for i, col in enumerate(cols):
            values = list(map(itemgetter(i), rows))
            if col.dtype == "category":
                self.parts[i] += values
            else:
                self.parts[i].append(_cast(values, col))

    def add_frame(self, df: pd.DataFrame) -> None:
        """Add the rows of ``df``, a frame of this schema (:meth:`TableSchema.frame`)."""
        for i, col in enumerate(self.schema.columns):
            s = df[col.name]
            if col.dtype == "category":
                self.parts[i] += s.tolist()
            elif isinstance(s.dtype, pd.api.extensions.ExtensionDtype):
                self.parts[i].append(s.array)
            else:
                self.parts[i].append(s.to_numpy())

    def frame(self) -> pd.DataFrame:
        """The table of every row added (the parts are released as they are joined)."""
        out: dict[str, Any] = {}
        for i, col in enumerate(self.schema.columns):
            got = self.parts[i]
            self.parts[i] = []
            if col.dtype == "category":
                out[col.name] = _cast(got, col)
            elif len(got) == 1:
                out[col.name] = got[0]
            elif not got:
                out[col.name] = _cast([], col)
            else:
                joined = pd.concat([pd.Series(a, copy=False) for a in got], ignore_index=True)
                ext = isinstance(joined.dtype, pd.api.extensions.ExtensionDtype)
                out[col.name] = joined.array if ext else joined.to_numpy()
                del got, joined
                trim()  # (the chunks' pages, else kept by the allocator beside the column)
        return pd.DataFrame(out, columns=self.schema.names, copy=False)


# ------------------------------------------------------------------ streaming hook
#
# A builder whose rows are final when they are added (append-only tables: packets,
# tcp_events, tls_records, http2_frames, sse_events, ws_frames...) can hand them over in
# chunks while the capture is read, so a table never has to sit in memory whole:
#
#   * it implements :class:`Drainable`: ``pending()`` says how many rows each of its tables
#     holds, ``drain(table)`` returns them as a DataFrame of the table's schema and forgets
#     them (category codes are kept, so every chunk has all categories seen so far);
#   * what it returns at the end (``tables()``, ``frame()``...) is then only the rows not yet
#     drained: the whole table is the drained chunks followed by that remainder;
#   * :class:`ChunkPump` (driven by ``load(out=...)``) polls the builders every few thousand
#     frames and passes every chunk of at least ``chunk_rows`` rows to a :class:`TableSink`
#     (``pcaptools.export.ParquetSink`` writes it as one Parquet row group).
#
# A builder keeping row tuples can hold them in a :class:`RowBuffer` (a list) and drain it.


class TableSink(Protocol):
    """Receives the chunks of the tables, in row order (see :class:`ChunkPump`)."""

    def write(self, table: str, chunk: pd.DataFrame) -> None: ...


@runtime_checkable
class Drainable(Protocol):
    """A builder that can hand over its finished rows while the capture is being read."""

    def pending(self) -> Mapping[str, int]:
        """rows held now, per table this builder can drain"""
        ...

    def drain(self, table: str) -> pd.DataFrame:
        """The rows of ``table`` held now, as a DataFrame of its schema; they are removed."""
        ...


class RowBuffer(list[tuple[Any, ...]]):
    """The row tuples of one table (a plain list: ``append`` is list.append) that can be
    drained: ``drain()`` returns them as ``schema.frame(rows)`` and empties the list."""

    __slots__ = ("schema",)

    def __init__(self, schema: TableSchema) -> None:
        super().__init__()
        self.schema = schema

    def drain(self) -> pd.DataFrame:
        df = self.schema.frame(self)
        self.clear()
        return df


class ChunkPump:
    """Moves finished rows from :class:`Drainable` builders to a :class:`TableSink`.

    ``poll()`` (cheap: one ``pending()`` call per builder) drains every table holding at
    least ``chunk_rows`` rows; ``flush()`` drains everything left. A table must be drained
    by one builder only (the order of its chunks is the order of its rows)."""

    def __init__(self, sink: TableSink, chunk_rows: int = CHUNK_ROWS) -> None:
        self.sink = sink
        self.chunk_rows = max(1, chunk_rows)
        self.sources: list[Drainable] = []
        self.rows: dict[str, int] = {}
        """rows handed to the sink so far, per table"""

    def add(self, source: Drainable) -> None:
        self.sources.append(source)

    def poll(self) -> None:
        limit = self.chunk_rows
        for src in self.sources:
            for table, n in src.pending().items():
                if n >= limit:
                    self._move(src, table)

    def flush(self) -> None:
        for src in self.sources:
            for table, n in src.pending().items():
                if n:
                    self._move(src, table)

    def _move(self, src: Drainable, table: str) -> None:
        chunk = src.drain(table)
        if len(chunk):
            self.rows[table] = self.rows.get(table, 0) + len(chunk)
            self.sink.write(table, chunk)


def _shares(arr: Any, values: Any) -> bool:
    """Might ``arr`` (a cast result) share memory with the caller's ``values``?"""
    if arr is values:
        return True
    a, v = _buffer(arr), _buffer(values)
    return a is not None and v is not None and np.may_share_memory(a, v)


def _buffer(x: Any) -> np.ndarray | None:
    """The numpy array holding ``x``'s values (itself, or a pandas array's backing array)."""
    b = x if isinstance(x, np.ndarray) else getattr(x, "_ndarray", getattr(x, "_data", None))
    return b if isinstance(b, np.ndarray) else None


NARROW_INTS: dict[str, type[np.signedinteger[Any]]] = {
    "int32": np.int32, "int16": np.int16, "int8": np.int8,
    "Int32": np.int32, "Int16": np.int16, "Int8": np.int8,
}
"""the narrower integer dtypes a :class:`Column` may have -> their numpy type"""

_INTEGER_KINDS = frozenset({"integer", "empty"})
"""pandas infer_dtype results for which the fast Int64 path gives what pd.array gives"""
_INT_TYPE = frozenset({int})
_NONE_TYPE = frozenset({type(None)})


def _int_and_mask(values: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``values`` (ints with None/NA/NaN for missing) as an int64 array and a missing-mask, or
    None when they are anything else (the caller then falls back to pandas' own conversion)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        if values.dtype.kind == "u" and len(values) and values.max() > np.iinfo(np.int64).max:
            return None
        return values.astype(np.int64), np.zeros(len(values), dtype=bool)
    if isinstance(values, pd.arrays.IntegerArray):
        return values.to_numpy(dtype=np.int64, na_value=0), values.isna()
    if isinstance(values, np.ndarray) and values.dtype != object:
        return None
    if not isinstance(values, (list, tuple, np.ndarray)):
        return None
    if not isinstance(values, np.ndarray):
        types = set(map(type, values))
        if types <= _INT_TYPE:
            try:  # plain ints, nothing missing: no object array needed
                ints = np.fromiter(values, dtype=np.int64, count=len(values))
                return ints, np.zeros(len(values), bool)
            except OverflowError:
                return None
        if types == _NONE_TYPE:  # nothing but missing values
            return np.zeros(len(values), np.int64), np.ones(len(values), bool)
    obj = values if isinstance(values, np.ndarray) else np.array(values, dtype=object)
    if obj.ndim != 1 or infer_dtype(obj, skipna=True) not in _INTEGER_KINDS:
        return None
    mask = pd.isna(obj)
    if mask.any():
        obj = obj.copy() if obj is values else obj
        obj[mask] = 0
    try:
        return obj.astype(np.int64), mask
    except (OverflowError, TypeError, ValueError):
        return None


def _string(values: Any) -> Any:
    """A ``string`` array of ``values`` (str, or None/NA/NaN for missing); pyarrow directly
    for a list of str, pandas' own conversion for anything else."""
    dtype = pd.StringDtype()
    if dtype.storage == "pyarrow" and isinstance(values, (list, tuple)):
        if all_missing(values):
            return null_strings(len(values))  # (no value: no memory either)
        try:
            return pd.arrays.ArrowStringArray(
                pa.array(values, type=pa.large_string(), from_pandas=True))
        except (pa.ArrowException, TypeError, ValueError):
            pass
    return pd.array(values, dtype="string")


def _cast(values: Any, col: Column, *, share: bool = False) -> Any:
    """``values`` as an array of ``col``'s dtype (numpy array, pandas extension array or
    Categorical): the same values and dtype as :func:`_cast_reference`, faster for the usual
    inputs (lists of Python ints/str/None, int64 arrays); anything unusual goes through it.
    ``share``: the caller hands ``values`` over (:meth:`TableSchema.frame` with
    ``copy=False``): an array that has the dtype already is the result itself (an ``Int64``
    one with the values under its mask set to 0 in place, as the cast sets them), and an
    int64 array of a ``*_ts`` column becomes its data; otherwise the result may still share
    memory with ``values`` (the caller checks, :func:`_shares`), but ``values`` is never
    changed."""
    dt = col.dtype
    n = len(values)
    if dt == "int64":
        return np.asarray(values, dtype=np.int64) if n else np.empty(0, np.int64)
    narrow = NARROW_INTS.get(dt)
    if narrow is not None:
        return _narrow(values, dt, narrow, share)
    if share:
        kept = _handed_over(values, dt)
        if kept is not None:
            return kept
    if dt == "Int64":
        im = _int_and_mask(values)
        if im is not None:
            return pd.arrays.IntegerArray(im[0], im[1])
    elif dt == TS_DTYPE:
        im = _int_and_mask(values)
        if im is not None:
            ns, mask = im
            if mask.any():
                ns[mask] = np.iinfo(np.int64).min  # NaT
            return pd.DatetimeIndex(ns.view("M8[ns]")).tz_localize("UTC")
    elif dt == "string":
        return _string(values)
    elif dt == "float64":
        if not isinstance(values, np.ndarray):
            try:
                return np.array(values, dtype=np.float64) if n else np.empty(0, np.float64)
            except (TypeError, ValueError):
                pass
    elif dt == "boolean":
        if isinstance(values, (list, tuple)):
            obj = np.array(values, dtype=object)
            if obj.ndim == 1 and infer_dtype(obj, skipna=True) in ("boolean", "empty"):
                mask = pd.isna(obj)
                if mask.any():
                    obj[mask] = False
                return pd.arrays.BooleanArray(obj.astype(bool), mask)
    elif dt == "object" and isinstance(values, (list, tuple)):
        return np.fromiter(values, dtype=object, count=n)
    elif dt == "category" and isinstance(values, (list, tuple)):
        cat = _str_categorical(values)
        if cat is not None:
            return cat
    return _cast_reference(values, col)


def _narrow(values: Any, dt: str, np_type: Any, share: bool) -> Any:
    """:func:`_cast` to a narrow integer dtype (:data:`NARROW_INTS`): an array of that width
    already (handed over: kept, with the values under an ``Int*`` mask set to 0 in place, as
    the cast sets them), else through int64, refusing a value that does not fit (TypeError)
    rather than wrapping it as numpy's and pandas' casts do."""
    nullable = dt[0] == "I"
    if share:
        if nullable and type(values) is pd.arrays.IntegerArray and str(values.dtype) == dt:
            arr: Any = values
            data, mask = arr._data, arr._mask
            if mask.any():
                data[mask] = 0
            return values
        if (not nullable and isinstance(values, np.ndarray) and values.dtype == np_type
                and values.ndim == 1):
            return values
    if not nullable:
        wide = np.asarray(values, dtype=np.int64) if len(values) else np.empty(0, np.int64)
        mask = None
    else:
        im = _int_and_mask(values)
        if im is None:
            return _cast_reference(values, Column("", dt, None, ""))
        wide, mask = im
    info = np.iinfo(np_type)
    if len(wide):
        lo, hi = wide.min(), wide.max()
        if lo < info.min or hi > info.max:
            if mask is not None:  # (the zeros under the mask are in range)
                live = wide[~mask]
                lo, hi = (live.min(), live.max()) if len(live) else (0, 0)
            if lo < info.min or hi > info.max:
                raise TypeError(f"cannot safely cast non-equivalent int64 to {np.dtype(np_type)}: "
                                f"values from {lo} to {hi}")
    out = wide.astype(np_type)
    return out if mask is None else pd.arrays.IntegerArray(out, mask)


def _handed_over(values: Any, dt: str) -> Any:
    """:func:`_cast` of ``values`` (handed over: changed in place, shared by the result) for
    the arrays whose dtype is ``dt`` already, and for int64 ns of a ``*_ts`` column (NA is
    the NaT sentinel there, as the cast makes it); None for anything else."""
    if dt == "Int64":
        if type(values) is pd.arrays.IntegerArray and values.dtype == pd.Int64Dtype():
            arr: Any = values  # (its int64 data and bool mask, as _buffer reads them)
            data, mask = arr._data, arr._mask
            if mask.any():
                data[mask] = 0  # (what the cast leaves under the mask)
            return values
    elif dt == TS_DTYPE:
        if isinstance(values, np.ndarray) and values.dtype == np.int64 and values.ndim == 1:
            return pd.DatetimeIndex(values, dtype=TS_DTYPE, copy=False)
    elif dt == "boolean":
        if type(values) is pd.arrays.BooleanArray:
            return values
    elif dt == "category":
        if type(values) is pd.Categorical:
            return values
    elif dt in ("float64", "bool"):
        if isinstance(values, np.ndarray) and values.dtype == dt and values.ndim == 1:
            return values
    return None


def _str_categorical(values: Sequence[Any]) -> pd.Categorical | None:
    """``pd.Categorical(values)`` for a list of str and None (at least one str): the
    categories are the distinct strings sorted (as pandas sorts them: by code point), None is
    NA. None for anything else (the caller then asks pandas)."""
    distinct = dict.fromkeys(values)
    distinct.pop(None, None)
    if not distinct or not all(type(v) is str for v in distinct):
        return None
    cats = sorted(distinct)
    code = {v: i for i, v in enumerate(cats)}
    code[None] = -1
    codes = np.fromiter(map(code.__getitem__, values), dtype=np.intp, count=len(values))
    # (from_codes narrows the codes to the dtype pandas gives that many categories)
    return pd.Categorical.from_codes(codes, categories=pd.Index(cats))


def _cast_reference(values: Any, col: Column) -> Any:
    """The plain pandas conversion of ``values`` to ``col``'s dtype (what :func:`_cast` must
    equal; also its fallback)."""
    dt = col.dtype
    if dt == TS_DTYPE:
        arr = pd.array(values, dtype="Int64")
        return pd.to_datetime(arr, unit="ns", utc=True)
    if dt == "int64":
        return np.asarray(values, dtype=np.int64) if len(values) else np.empty(0, np.int64)
    if dt in NARROW_INTS:
        # (through Int64, checking the range: pandas' and numpy's casts wrap silently)
        wide = pd.array(values, dtype="Int64")
        info = np.iinfo(NARROW_INTS[dt])
        if not wide.isna().all() and (wide.min() < info.min or wide.max() > info.max):
            raise TypeError(f"cannot safely cast non-equivalent int64 to {info.dtype}: "
                            f"values from {wide.min()} to {wide.max()}")
        return wide.astype(dt)  # (a numpy array for int32, int16, int8)
    if dt == "float64":
        return np.asarray(
            [np.nan if v is None else v for v in values] if not isinstance(values, np.ndarray) else values,
            dtype=np.float64,
        ) if len(values) else np.empty(0, np.float64)
    if dt == "bool":
        return np.asarray(values, dtype=bool) if len(values) else np.empty(0, bool)
    if dt == "Int64":
        return pd.array(values, dtype="Int64")
    if dt == "boolean":
        return pd.array(values, dtype="boolean")
    if dt == "string":
        return pd.array(values, dtype="string")
    if dt == "category":
        return pd.Categorical(values)
    if dt == "object":
        s = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            s[i] = v
        return s
    raise ValueError(f"{col.name}: unknown dtype {dt}")
