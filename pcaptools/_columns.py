"""Column buffers for the tables that grow with packets: typed arrays, not Python lists of objects.

An int column costs 8 bytes per row (``array('q')``) instead of ~36 for a list of ints;
a category column stores a 4-byte code per row and one dict of values. NA is a sentinel.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pandas as pd

NA = -(2**63)
"""sentinel for a missing value in an int column"""


class IntColumn:
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = array("q")

    def to_numpy(self) -> np.ndarray:
        return np.frombuffer(self.data, dtype=np.int64).copy() if len(self.data) else np.empty(0, np.int64)

    def to_nullable(self) -> Any:
        a = self.to_numpy()
        return pd.arrays.IntegerArray(a, a == NA)

    def to_float_ms(self) -> np.ndarray:
        """ns values -> float ms, NA -> NaN."""
        a = self.to_numpy()
        out = a.astype(np.float64) / 1e6
        out[a == NA] = np.nan
        return out

    def to_boolean(self) -> Any:
        a = self.to_numpy()
        return pd.arrays.BooleanArray(a == 1, a == NA)


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

    def to_categorical(self) -> pd.Categorical:
        cats: list[object] = [None] * len(self.codes)
        for v, c in self.codes.items():
            cats[c] = v
        codes = np.frombuffer(self.data, dtype=np.int32).copy() if len(self.data) else np.empty(0, np.int32)
        return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype=object))
