"""One capture on several cores: ``load(path, workers=N)``.

TCP stream numbers, analysis flags and connection records depend on every packet that
came before, so each of the N worker processes reads the whole file and follows all of
TCP (cheap: about a third of a full analysis). The expensive part, the payloads (TLS
decryption, HTTP/1.1, HTTP/2, SSE, WebSocket) and the per-frame ``packets`` rows, is
split: worker ``k`` parses only the connections with ``tcp_stream % N == k`` and keeps
only their rows (``load(..., shard=(k, N))``; worker 0 also keeps what belongs to no
connection: DNS, file-level warnings, non-TCP frames). The parent concatenates the
tables. Every row of a single-process ``load()`` is there exactly once, with the same
values and dtypes, and the warning counts add up to the same totals.

Row order: tables with a ``frame`` column (packets, tcp_events, tls_records,
http2_frames, sse_events, ws_frames, ws_messages, dns, warnings) are in frame order, as
``load()`` returns them; per-connection tables (connections, tcp_handshakes,
tls_handshakes) in ``tcp_stream`` order, also as ``load()`` does; the tables whose rows
``load()`` appends when a request or connection completes (http_requests,
http2_streams, http2_connections, ws_connections, ws_heartbeats) and tcp_losses in the
order of their key. Warnings kept as rows are capped per code after merging, as in one process.

What it gains depends on the share of payload work and on the number of cores: on the
benchmark capture (``benchmarks/README.md``) see the ``parallel`` rows. Progress
callbacks are not supported here (the workers run in other processes).
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pandas as pd

from .capture import TABLES, Capture, CaptureSummary, load
from .many import _context, concat_tables
from .tables.foundation import WARNINGS
from .tables.tcp_tables import suppressed_rows

#: tables whose rows load() appends on completion: ordered by their key here
_BY_KEY = ("http_requests", "http2_streams", "http2_connections", "ws_connections", "ws_heartbeats",
           "tcp_losses")


def _load_shard(path: str, shard: tuple[int, int], kwargs: dict[str, Any]
                ) -> tuple[CaptureSummary, dict[str, pd.DataFrame]]:
    cap = load(path, shard=shard, **kwargs)
    return cap.summary, cap.tables


def load_parallel(path: str | os.PathLike[str], *, workers: int | None = None,
                  **kwargs: Any) -> Capture:
    """``load(path, **kwargs)`` on ``workers`` processes (default: every core). Returns the
    same tables as :func:`~pcaptools.capture.load` (row order: see the module docstring).
    ``progress`` is not accepted. Errors opening the file are raised as by ``load()``."""
    if "progress" in kwargs or "shard" in kwargs:
        raise TypeError("load_parallel() takes neither progress nor shard")
    n = workers or os.cpu_count() or 1
    if n <= 1:
        return load(path, **kwargs)
    cap_rows = int(kwargs.get("max_warnings_per_code", 1000))
    # shards 1..n-1 in worker processes, shard 0 here meanwhile (its tables need no pickling)
    with ProcessPoolExecutor(max_workers=n - 1, mp_context=_context()) as pool:
        futures = [pool.submit(_load_shard, os.fspath(path), (k, n), kwargs) for k in range(1, n)]
        parts = [_load_shard(os.fspath(path), (0, n), kwargs)]
        parts += [f.result() for f in futures]
    return merge_shards(parts, max_warnings_per_code=cap_rows)


def merge_shards(parts: list[tuple[CaptureSummary, dict[str, pd.DataFrame]]], *,
                 max_warnings_per_code: int = 1000) -> Capture:
    """The Capture of a whole file from its workers' parts (``parts[k]`` from ``shard=(k, n)``)."""
    summary = parts[0][0]
    counts: Counter[str] = Counter()
    for s, _ in parts:
        wc = s.extra.get("warning_counts", {})
        counts.update(wc if isinstance(wc, dict) else {})
    summary.extra["warning_counts"] = dict(counts)
    summary.extra["workers"] = len(parts)
    tables: dict[str, pd.DataFrame] = {}
    for name, schema in TABLES.items():
        frames = [t[name] for _, t in parts if name in t]
        if not frames:
            continue
        df = concat_tables(frames)
        if name in _BY_KEY:
            df = df.sort_values(list(schema.key), kind="stable")
        elif "frame" in df.columns:
            df = df.sort_values("frame", kind="stable", na_position="first")
        elif "tcp_stream" in df.columns:
            df = df.sort_values("tcp_stream", kind="stable")
        if name == "warnings":
            df = _merge_warnings(df, counts, max_warnings_per_code)
        tables[name] = _sorted_categories(df.reset_index(drop=True), frames)
    return Capture(summary, tables)


_CLOSING = r"\d+ more occurrences of \S+ were counted but not listed"


def _merge_warnings(df: pd.DataFrame, counts: Counter[str], cap: int) -> pd.DataFrame:
    """The workers' warnings (in frame order) capped at ``cap`` rows per code, closed by one
    "N more occurrences" row per code that had more, from the summed counts (the workers'
    own closing rows are dropped)."""
    closing = (df["frame"].isna() & df["ts"].isna() & df["tcp_stream"].isna()
               & df["detail"].astype(object).str.fullmatch(_CLOSING).fillna(False))
    df = df[~closing.astype(bool)]
    df = df[(df.groupby("code", observed=True).cumcount() < cap).to_numpy()]
    extra = suppressed_rows({c: n - cap for c, n in counts.items() if n > cap})
    return concat_tables([df, WARNINGS.frame(extra)]) if extra else df


def _sorted_categories(df: pd.DataFrame, frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Categories as ``load()`` orders them: sorted where every part that shows an order
    (two or more categories) had them sorted, else in order of first appearance in the
    merged rows (what the builders that code strings as they see them produce). The
    categories keep the dtype ``load()`` gives them (str, int64 or object, even when empty;
    a part with rows decides over an empty part: all-NA columns get float64 categories)."""
    fix = {}
    for col in df.columns:
        dt = df[col].dtype
        if not isinstance(dt, pd.CategoricalDtype):
            continue
        parts: list[tuple[pd.CategoricalDtype, int]] = []
        for f in frames:
            fdt = f[col].dtype if col in f.columns else None
            if isinstance(fdt, pd.CategoricalDtype):
                parts.append((fdt, len(f)))
        shown = [c for c, _ in parts if len(c.categories) >= 2]
        cats: list[Any] = list(dt.categories)
        if shown and all(pd.Index(c.categories).is_monotonic_increasing for c in shown):
            with contextlib.suppress(TypeError):  # mixed types do not sort
                cats = sorted(cats)
        elif len(cats) >= 2:
            seen = list(pd.unique(df[col].dropna().astype(object)))
            rest = set(seen)
            cats = seen + [c for c in cats if c not in rest]
        kinds = ([c.categories.dtype for c, _ in parts if len(c.categories)]
                 or [c.categories.dtype for c, n in parts if n]
                 or [c.categories.dtype for c, _ in parts] or [dt.categories.dtype])
        fix[col] = pd.CategoricalDtype(pd.Index(cats, dtype=kinds[0]), ordered=dt.ordered)
    return df.astype(fix) if fix else df
