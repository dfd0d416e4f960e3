"""Concatenating the frames of one table across captures, workers or chunks, keeping every
dtype (used by :mod:`pcaptools.many`, :mod:`pcaptools.parallel` and :mod:`pcaptools.export`;
``pcaptools.many.concat_tables`` re-exports it)."""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["concat_tables"]


def concat_tables(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate frames of one table keeping every dtype: categoricals get the union of
    the categories, like ``pandas.api.types.union_categoricals`` (``pd.concat`` would turn
    differing ones into ``object``); empty frames do not decide a dtype. Returns a frame
    with a fresh RangeIndex."""
    if not frames:
        return pd.DataFrame()
    non_empty = [f for f in frames if len(f)] or frames[:1]
    if len(non_empty) == 1:
        return non_empty[0].reset_index(drop=True)
    first = non_empty[0]
    fixed: dict[str, pd.CategoricalDtype] = {}
    for col in first.columns:
        if isinstance(first[col].dtype, pd.CategoricalDtype):
            # every frame's categories in first-seen order (what union_categoricals does,
            # but also across an empty frame whose categories are typed object)
            seen: dict[Any, None] = {}
            for f in non_empty:
                if col in f.columns and isinstance(f[col].dtype, pd.CategoricalDtype):
                    seen.update(dict.fromkeys(f[col].cat.categories))
            fixed[col] = pd.CategoricalDtype(list(seen))
    if fixed:
        non_empty = [f.astype(fixed) for f in non_empty]
    return pd.concat(non_empty, ignore_index=True)
