"""Column buffers for the tables that grow with packets: typed arrays, not Python lists of objects.

An int column costs 8 bytes per row (``array('q')``) instead of ~36 for a list of ints;
a category column stores a 4-byte code per row and one dict of values. NA is a sentinel.
"""

from __future__ import annotations

import mmap
import struct
from array import array
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

try:
    import pyarrow as pa
except ImportError:  # pragma: no cover - pandas then stores strings as Python objects
    pa = None

NA = -(2**63)
"""sentinel for a missing value in an int column"""
NA32 = -(2**31)
NA16 = -(2**15)
NA8 = -(2**7)
"""the sentinels of the narrower fields of :class:`Records` (each type's smallest value)"""


class IntColumn:
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = array("q")

    def to_numpy(self) -> np.ndarray:
        if not len(self.data):
            return np.empty(0, np.int64)
        return np.frombuffer(self.data, dtype=np.int64).copy()

    def to_nullable(self) -> Any:
        return nullable(self.to_numpy())

    def to_float_ms(self) -> np.ndarray:
        """ns values -> float ms, NA -> NaN."""
        return float_ms(self.to_numpy())

    def to_boolean(self) -> Any:
        return boolean(self.to_numpy())

    def take(self) -> np.ndarray:
        """:meth:`to_numpy`, and the column is emptied (the same array object stays, so bound
        ``data.append`` methods keep working)."""
        a = self.to_numpy()
        del self.data[:]
        return a


class CodeColumn:
    """A category column: values are interned to small integer codes (-1 = NA)."""

    __slots__ = ("codes", "data")

    def __init__(self) -> None:
        self.codes: dict[object, int] = {}
        self.data = array("i")

    def code(self, value: object) -> int:
        """The code of ``value`` (allocating one); callers may cache it and use append_code()."""
        c = self.codes.get(value)
        if c is None:
            c = self.codes[value] = len(self.codes)
        return c

    def take(self) -> pd.Categorical:
        """:meth:`to_categorical`, and the codes are emptied (the values and their codes stay,
        so later rows keep the same codes and every chunk has all categories seen so far)."""
        cat = self.to_categorical()
        del self.data[:]
        return cat

    def to_categorical(self) -> pd.Categorical:
        codes = (np.frombuffer(self.data, dtype=np.int32).copy() if len(self.data)
                 else np.empty(0, np.int32))
        return categorical(self.codes, codes)


def categorical(values: dict[object, int], codes: np.ndarray) -> pd.Categorical:
    """A Categorical of ``codes`` (int32, -1 = NA) whose categories are the keys of ``values``
    (value -> code) in code order. Raises ValueError if a code has no value."""
    cats: list[object] = [None] * len(values)
    for v, c in values.items():
        cats[c] = v
    return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype=object))


def first_seen_codes(raw: np.ndarray, seen: dict[int, int], code_of: Callable[[int], int],
                     *, missing: int | None = None, dtype: Any = np.int32) -> np.ndarray:
    """The codes (``dtype``, int32 by default) of ``raw`` (small non-negative ints) by ``seen``
    (value -> code); a value not in ``seen`` yet gets ``code_of(value)``, the new values in the
    order in which they first appear in ``raw``: the codes that coding the values one row at a
    time gives. ``missing``: the value that stands for NA (code -1, never coded)."""
    if not len(raw):
        return np.empty(0, dtype)
    present = np.flatnonzero(np.bincount(raw)).tolist()
    if missing is not None and missing in present:
        present.remove(missing)
    new = [v for v in present if v not in seen]
    for _, v in sorted((int(np.argmax(raw == v)), v) for v in new):
        seen[v] = code_of(v)
    lut = np.full(max(present[-1] if present else 0, missing or 0) + 1, -1, dtype=dtype)
    for v in present:
        lut[v] = seen[v]
    codes: np.ndarray = lut[raw]
    return codes


def sorted_categorical(codes: np.ndarray, labels: Sequence[str]) -> pd.Categorical:
    """``pd.Categorical([labels[c] for c in codes])`` from ``codes`` (ints; -1 is NA) into
    ``labels`` (distinct str, in sorted order): the categories are the labels present, sorted,
    as pandas makes them from the values."""
    if not len(codes):
        return pd.Categorical([])
    present = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(labels)))
    lut = np.full(len(labels) + 1, -1, dtype=np.intp)  # (the last entry: code -1, NA)
    lut[present] = np.arange(len(present))
    cats: list[Any] = [labels[i] for i in present.tolist()]
    return pd.Categorical.from_codes(lut[codes], categories=pd.Index(cats))


def nullable(a: np.ndarray) -> Any:
    """Signed ints with their type's smallest value as the missing-value sentinel (:data:`NA`
    for int64, :data:`NA32`, :data:`NA16`, :data:`NA8`) -> an ``Int64`` (``Int32``...) array
    of the same width (shares ``a``)."""
    return pd.arrays.IntegerArray(a, a == np.iinfo(a.dtype).min)


def float_ms(a: np.ndarray) -> np.ndarray:
    """int64 ns with the :data:`NA` sentinel -> float ms, NA -> NaN."""
    out = a.astype(np.float64)
    out /= 1e6  # (in place: one float array, not two)
    out[a == NA] = np.nan
    return out


def boolean(a: np.ndarray) -> Any:
    """Signed ints 1/0/missing (the type's smallest value, as for :func:`nullable`) -> a
    ``boolean`` array."""
    return pd.arrays.BooleanArray(a == 1, a == np.iinfo(a.dtype).min)


class Records:
    """Fixed-width rows packed into one bytearray, one C call per row, turned into numpy
    columns every ``chunk_rows`` rows (so no Python object is kept per row).

    ``fields`` are ``(name, code)`` pairs with :mod:`struct` codes ``q`` (int64), ``i``
    (int32), ``h``, ``b``... (a narrow field's missing value is its type's smallest value:
    :data:`NA32`, :data:`NA16`, :data:`NA8`, as :func:`nullable` reads them). A builder
    appends a row with ``buf += pack(*values)`` (bind
    :attr:`buf` and :attr:`pack` once: the bytearray is never replaced) and calls
    :meth:`seal` when ``len(buf) >= limit``. :meth:`column` then hands over one field's
    values at a time, freeing them in the builder as it goes. ``pack`` raises
    :class:`struct.error` for a value out of its field's range (nothing is appended then).
    """

    __slots__ = ("_chunks", "buf", "dtype", "limit", "names", "pack", "row_bytes")

    def __init__(self, fields: Sequence[tuple[str, str]], chunk_rows: int = 65536,
                 align: int = 1) -> None:
        """``align``: rows are padded with zero bytes to a multiple of this many bytes (with
        the fields ordered widest first, 8 keeps every field of every row aligned)."""
        fmt = "<" + "".join(code for _, code in fields)
        size = struct.calcsize(fmt)
        pad = -size % align
        st = struct.Struct(fmt + f"{pad}x" if pad else fmt)
        self.names = tuple(name for name, _ in fields)
        self.pack = st.pack
        self.row_bytes = st.size
        formats = ["<" + code for _, code in fields]
        offsets = [struct.calcsize("<" + "".join(code for _, code in fields[:k]))
                   for k in range(len(fields))]
        self.dtype = np.dtype({"names": list(self.names), "formats": formats,
                               "offsets": offsets, "itemsize": st.size})
        assert self.dtype.itemsize == st.size
        self.limit = st.size * max(1, chunk_rows)
        """seal() when the buffer holds this many bytes"""
        self.buf = bytearray()
        self._chunks: dict[str, list[np.ndarray]] = {name: [] for name in self.names}

    def __len__(self) -> int:
        """rows held (sealed and buffered)"""
        sealed = sum(len(c) for c in self._chunks[self.names[0]]) if self.names else 0
        return sealed + len(self.buf) // self.row_bytes

    def seal(self) -> None:
        """Turn the buffered rows into one numpy chunk per field and empty the buffer."""
        if not self.buf:
            return
        rec = np.frombuffer(self.buf, dtype=self.dtype)
        for name in self.names:
            # always a copy (a one-row view counts as contiguous): no view may outlive rec
            self._chunks[name].append(rec[name].copy())
        del rec  # release the buffer export before resizing
        del self.buf[:]

    def column(self, name: str) -> np.ndarray:
        """All values of field ``name`` (call :meth:`seal` first), removed from this object."""
        chunks = self._chunks[name]
        self._chunks[name] = []
        if len(chunks) == 1:
            return chunks[0]
        out = np.empty(sum(map(len, chunks)), dtype=self.dtype[name])
        at = 0
        chunks.reverse()
        while chunks:  # (each chunk freed once copied: the column is not held twice)
            c = chunks.pop()
            out[at:at + len(c)] = c
            at += len(c)
            del c
        return out


_ARROW_STRINGS = pa is not None and pd.StringDtype().storage == "pyarrow"
"""pandas stores ``string`` columns in Arrow: text columns are converted block by block"""


NULL_STRINGS_MAPPED_ROWS = 65_536
"""from this many rows, :func:`null_strings` maps its zeros instead of allocating them"""


def all_missing(values: list[str | None] | tuple[str | None, ...]) -> bool:
    """``values`` is not empty and every one is None (one C pass, none when the first is set)"""
    return bool(values) and values[0] is None and values.count(None) == len(values)


def null_strings(n: int) -> Any:
    """A ``string`` array (Arrow) of ``n`` missing values that holds no memory.

    Its offsets and validity bitmap are all zeros: from :data:`NULL_STRINGS_MAPPED_ROWS` rows
    they are one read-only private anonymous memory map, whose pages the kernel provides only
    when read, as the shared zero page, so the column costs no resident memory however long it
    is (allocated, a column that no row of a big table fills would hold 8 bytes a row of zeros:
    7.9 MB in the tables of the benchmark capture). Anything computed from it allocates its
    result as usual; the values, dtype and Arrow type (``large_string``) are those of
    ``pd.array([None] * n, dtype="string")``."""
    zeros = None
    if n >= NULL_STRINGS_MAPPED_ROWS:
        try:  # (no such map where mmap has no flags and prot, as on Windows, or none is left)
            zeros = pa.py_buffer(mmap.mmap(-1, (n + 1) * 8, flags=mmap.MAP_PRIVATE,
                                           prot=mmap.PROT_READ))
        except (AttributeError, TypeError, OSError, ValueError):
            pass
    if zeros is None:
        return pd.arrays.ArrowStringArray(pa.nulls(n, pa.large_string()))
    return pd.arrays.ArrowStringArray(pa.chunked_array([pa.LargeStringArray.from_buffers(
        n, zeros, pa.py_buffer(b""), zeros, null_count=n)]))


class TextColumn:
    """A string column built in blocks. Where pandas keeps strings in Arrow (its default with
    pyarrow installed) each block becomes a pyarrow array at once, so the rows' Python ``str``
    objects are freed: less memory, and no long lists for every full garbage collection to walk.
    Elsewhere (or if a block will not convert) the block stays a list. A block with no value
    is kept as its row count, and a column of such blocks only becomes :func:`null_strings`."""

    __slots__ = ("blocks",)

    def __init__(self) -> None:
        self.blocks: list[Any] = []

    def extend(self, values: list[str | None]) -> None:
        """Add ``values`` as one block (the list is kept as the block if it stays a list)."""
        if _ARROW_STRINGS:
            if all_missing(values):
                self.blocks.append(len(values))  # (every value missing: only counted)
                return
            try:
                self.blocks.append(pa.array(values, type=pa.large_string(), from_pandas=True))
                return
            except (pa.ArrowException, TypeError, ValueError):
                pass
        self.blocks.append(values)

    def values(self) -> Any:
        """The whole column: an ArrowStringArray when every block is Arrow, else a list."""
        blocks = self.blocks
        if not blocks:
            return []
        if all(type(b) is int for b in blocks):
            return null_strings(sum(blocks))
        if all(type(b) is not list for b in blocks):
            return pd.arrays.ArrowStringArray(pa.chunked_array([  # no copy
                pa.nulls(b, pa.large_string()) if type(b) is int else b for b in blocks]))
        out: list[str | None] = []
        for b in blocks:
            if type(b) is int:
                out.extend([None] * b)
            else:
                out.extend(b if type(b) is list else b.to_pylist())
        return out


TEXT_BLOCK_ROWS = 4096
"""rows of a :class:`TextColumns` block (as the SSE table's blocks: a block of 4,096 previews of
~100 characters is ~0.6 MB of Python strings)"""


class TextColumns:
    """Named string columns of a table that grows with packets, filled a row at a time: a
    builder appends each value with the bound list appends :attr:`append` (in ``names``
    order), and calls :meth:`flush` when :attr:`first` holds :attr:`block_rows` values; the
    values then move into Arrow blocks (:class:`TextColumn`), so the builder never holds more
    than ``block_rows`` Python ``str`` per column (a big table's text would otherwise stay as
    Python objects until the end of the pass, and leave the heap fragmented when freed)."""

    __slots__ = ("_blocked", "append", "block_rows", "columns", "first", "names", "pending")

    def __init__(self, names: Sequence[str], block_rows: int | None = None) -> None:
        self.names = tuple(names)
        self.block_rows = max(1, TEXT_BLOCK_ROWS if block_rows is None else block_rows)
        self.columns = {name: TextColumn() for name in self.names}
        self.pending: tuple[list[str | None], ...] = tuple([] for _ in self.names)
        """the values not yet in blocks, one list per column (never replaced)"""
        self.append: tuple[Callable[[str | None], None], ...] = tuple(
            p.append for p in self.pending)
        self.first = self.pending[0]
        """the first column's pending values (their count is the rows pending)"""
        self._blocked = 0

    def __len__(self) -> int:
        """rows held"""
        return self._blocked + len(self.first)

    def flush(self) -> None:
        """Move the pending values into one block per column."""
        if not self.first:
            return
        self._blocked += len(self.first)
        for name, values in zip(self.names, self.pending, strict=True):
            self.columns[name].extend(values.copy())
            values.clear()

    def take(self) -> dict[str, Any]:
        """Every column's values (:meth:`TextColumn.values`), handed over: this starts empty."""
        self.flush()
        out = {name: col.values() for name, col in self.columns.items()}
        self.columns = {name: TextColumn() for name in self.names}
        self._blocked = 0
        return out
