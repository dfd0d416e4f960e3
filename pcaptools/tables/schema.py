"""Table schemas: one object per table, naming every column's dtype, unit and meaning.

Builders collect rows as plain tuples (or whole columns as lists/arrays) with times
as integer nanoseconds, and call :meth:`TableSchema.frame`, which orders the columns,
converts ``*_ts`` integer ns to ``datetime64[ns, UTC]`` and casts every dtype. An empty
table keeps its columns and dtypes. ``docs/tables.md`` is generated from these objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

TS_DTYPE = "datetime64[ns, UTC]"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    dtype: str
    """pandas dtype: int64, Int64, float64, boolean, bool, string, category, datetime64[ns, UTC], object"""
    unit: str | None
    doc: str


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

    def frame(
        self,
        rows: Iterable[Sequence[Any]] | None = None,
        *,
        columns: Mapping[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Build the table from row tuples (in column order) or from whole columns."""
        names = self.names
        if columns is not None:
            missing = set(names) - set(columns)
            if missing:
                raise ValueError(f"{self.name}: columns missing: {sorted(missing)}")
            data = {n: columns[n] for n in names}
        else:
            rows = list(rows or ())
            for r in rows[:1]:
                if len(r) != len(names):
                    raise ValueError(f"{self.name}: row has {len(r)} values, schema has {len(names)}")
            data = {n: [r[i] for r in rows] for i, n in enumerate(names)}
        out = {}
        for col in self.columns:
            out[col.name] = _cast(data[col.name], col)
        return pd.DataFrame(out, columns=names)

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
            lines.append(f"| `{c.name}` | {c.dtype} | {c.unit or ''} | {doc} |")
        return "\n".join(lines) + "\n"


def _cast(values: Any, col: Column) -> Any:
    """``values`` as an array of ``col``'s dtype (numpy array, pandas extension array or Categorical)."""
    dt = col.dtype
    if dt == TS_DTYPE:
        arr = pd.array(values, dtype="Int64")
        return pd.to_datetime(arr, unit="ns", utc=True)
    if dt == "int64":
        return np.asarray(values, dtype=np.int64) if len(values) else np.empty(0, np.int64)
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
