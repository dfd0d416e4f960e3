"""One capture on several cores: ``load(path, workers=N)``.

Each of the N worker processes reads and decodes the whole file (about a twentieth of a
full analysis), and follows only the TCP connections whose address pair is its own
(:func:`pcaptools.frameloop.shard_of`, a hash of both addresses and ports, the same for
both directions): their TCP analysis, payloads (TLS decryption, HTTP/1.1, HTTP/2, SSE,
WebSocket), ``packets`` rows and the ICMP errors that quote them (``load(..., shard=(k,
N))``; worker 0 also takes what belongs to no TCP connection: UDP, DNS, QUIC, file-level
warnings, non-TCP frames). Wireshark's analysis of a connection depends only on the
packets of its address pair, so a worker that sees only those computes what one process
computes. Only the ``tcp_stream`` numbers are global: one process numbers the connections
in the order they begin, a worker its own. Each worker says where each of its
connections began (``summary.extra["tcp_stream_opened"]``) and the parent numbers all of
them in that order (:func:`_renumbered`) and concatenates the tables. Every row of a
single-process ``load()`` is there exactly once, with the same values and dtypes, and the
warning counts add up to the same totals.

Row order: tables with a ``frame`` column (packets, tcp_events, tls_records,
http2_frames, sse_events, ws_frames, ws_messages, dns, warnings) are in frame order, as
``load()`` returns them; per-connection tables (connections, tcp_handshakes,
tls_handshakes) in ``tcp_stream`` order, also as ``load()`` does; the tables whose rows
``load()`` appends when a request or connection completes (http_requests,
http2_streams, http2_connections, ws_connections, ws_heartbeats) and tcp_losses in the
order of their key. Warnings kept as rows are capped per code after merging, as in one process.

``max_record_rows`` (a cap on each per-record table in all) is applied again to the merged
tables, which are in frame order as one process emits them: every worker keeps the first
rows of its own share, so the first ``max_record_rows`` rows of the merged table are those
one process keeps, and the ``table.records_truncated`` row is written here at the first row
that does not fit (the workers' own are dropped); ``summary.extra["rows_dropped"]`` adds up.

What it gains depends on the number of cores and on how evenly the connections' work
spreads over the address pairs (one huge connection is one worker's): on the benchmark
capture (``benchmarks/README.md``) see the ``parallel`` rows. The progress callback
(``progress``) is called by the shard that runs in the calling process (:func:`run_parallel`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import threading
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from ._eventcap import PER_RECORD_TABLES
from ._memory import large_blocks_mapped
from .export import load_streamed
from .pipeline import LoadOptions, is_stream, load_capture, not_for_streams, run_tables
from .result import TABLES, Capture, CaptureSummary
from .tables.concat import concat_tables
from .tables.dns_tables import link_tcp_retries
from .tables.foundation import WARNINGS
from .tables.tcp_tables import suppressed_rows

#: tables whose rows load() appends on completion: ordered by their key here
_BY_KEY = ("http_requests", "http2_streams", "http2_connections", "ws_connections", "ws_heartbeats",
           "tcp_losses")


def mp_context() -> multiprocessing.context.BaseContext:
    """The start method of the worker processes (here and in :mod:`pcaptools.many`)."""
    # fork is the cheapest start (no re-import of pandas per worker) but is unsafe once the
    # parent runs other threads; then spawn
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _load_shard(path: str, options: LoadOptions) -> tuple[CaptureSummary, dict[str, pd.DataFrame]]:
    return run_tables(path, options)


def load_parallel(path: str | os.PathLike[str], *, workers: int | None = None,
                  **kwargs: Any) -> Capture:
    """``load(path, **kwargs)`` on ``workers`` processes (default: every core). Returns the
    same tables as :func:`~pcaptools.capture.load` (row order: see the module docstring);
    ``progress`` follows the file as :func:`run_parallel` says. ``shard`` is not accepted.
    Errors opening the file are raised as by ``load()``."""
    if "shard" in kwargs:
        raise TypeError("load_parallel() takes no shard")
    return run_parallel(path, LoadOptions(**kwargs), workers=workers)


def run_parallel(path: str | os.PathLike[str], options: LoadOptions, *,
                 workers: int | None = None) -> Capture:
    """:func:`load_parallel` with a :class:`~pcaptools.pipeline.LoadOptions` (its
    ``workers`` and ``shard`` are not used: ``workers`` is the number of processes, default
    every core): the shards run :func:`pcaptools.pipeline.run`.

    ``progress`` is called, in this process and thread, by shard 0, the one that runs here:
    every worker reads the whole file, so the bytes it has read are how far the job is (a
    worker with more connections to parse may end later; then the merge follows, which the
    callback does not see)."""
    n = workers or os.cpu_count() or 1
    if n <= 1:  # one process, as load() (workers=1)
        one = dataclasses.replace(options, workers=1, shard=None)
        return load_streamed(path, one) if one.out is not None else load_capture(path, one)
    if is_stream(path):  # (each shard reads the whole capture)
        raise not_for_streams(path, n)
    base = dataclasses.replace(options, workers=1, progress=None)
    # shards 1..n-1 in worker processes, shard 0 here meanwhile (its tables need no pickling);
    # the parts received and the merge with large blocks mapped too, as in a pass (_memory:
    # the parts' columns, freed as the merge goes, go back to the system)
    with ProcessPoolExecutor(max_workers=n - 1, mp_context=mp_context()) as pool, \
            large_blocks_mapped():
        futures = [pool.submit(_load_shard, os.fspath(path),
                               dataclasses.replace(base, shard=(k, n))) for k in range(1, n)]
        parts = [_load_shard(os.fspath(path), dataclasses.replace(
            base, shard=(0, n), progress=options.progress))]
        parts += [f.result() for f in futures]
        del futures  # (a future keeps its result: the parts are merge_shards' to let go)
        return merge_shards(parts, max_warnings_per_code=options.max_warnings_per_code,
                            max_record_rows=options.max_record_rows, consume=True)


_RECORDS_TRUNCATED = "table.records_truncated"


def _where(frame: Any, ts: Any, tcp_stream: Any) -> tuple[int, int, int]:
    """(frame, ts_ns, tcp_stream) of a table row's values"""
    return int(frame), int(pd.Timestamp(ts).value), int(tcp_stream)


def merge_shards(parts: list[tuple[CaptureSummary, dict[str, pd.DataFrame]]], *,
                 max_warnings_per_code: int = 1000,
                 max_record_rows: int | None = None, consume: bool = False) -> Capture:
    """The Capture of a whole file from its workers' parts (``parts[k]`` from ``shard=(k, n)``);
    ``max_record_rows``: the workers' cap on each per-record table, applied to the merged
    tables (module docstring). ``consume=True`` empties the list ``parts``, so that each
    table's parts are let go once it is merged (if nothing else holds them): the memory
    peak is the merged tables and one table's parts, not all parts and the merged tables."""
    own = _renumbered(parts)
    if consume:
        parts.clear()
    parts = own
    summary = parts[0][0]
    counts: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    by_conn: Counter[int] = Counter()
    for s, _ in parts:
        wc = s.extra.get("warning_counts", {})
        counts.update(wc if isinstance(wc, dict) else {})
        for key, into in (("rows_dropped", dropped), ("rows_dropped_by_connection", by_conn)):
            v = s.extra.get(key, {})
            into.update(v if isinstance(v, dict) else {})
    record_rows: list[tuple[Any, ...]] = []
    # where each worker's share of a table first did not fit: (frame, ts_ns, tcp_stream)
    first_cut: dict[str, list[tuple[int, int, int]]] = {}
    if max_record_rows is not None:
        counts.pop(_RECORDS_TRUNCATED, None)
        for _, t in parts:
            w = t.get("warnings")
            if w is None or not len(w):
                continue
            for r in w[w["code"].astype(object) == _RECORDS_TRUNCATED].itertuples():
                first_cut.setdefault(str(r.detail).split(" ", 1)[0], []).append(
                    _where(r.frame, r.ts, r.tcp_stream))
    summary.extra["workers"] = len(parts)
    tables: dict[str, pd.DataFrame] = {}
    for name, schema in TABLES.items():
        frames = [t.pop(name) for _, t in parts if name in t]  # (own dicts: _renumbered)
        if not frames:
            continue
        if name == "warnings" and max_record_rows is not None:
            frames = [f[f["code"].astype(object) != _RECORDS_TRUNCATED] for f in frames]
            if record_rows:
                frames.append(WARNINGS.frame(record_rows))
        df = concat_tables(frames)
        if name in _BY_KEY:
            df = df.sort_values(list(schema.key), kind="stable")
        elif "frame" in df.columns:
            df = df.sort_values("frame", kind="stable", na_position="first")
        elif "tcp_stream" in df.columns:
            df = df.sort_values("tcp_stream", kind="stable")
        if max_record_rows is not None and name in PER_RECORD_TABLES:
            cuts = first_cut.get(name, [])
            if len(df) > max_record_rows:
                cut = df.iloc[max_record_rows:]
                first = cut.iloc[0]
                dropped[name] += len(cut)
                by_conn.update(cut["tcp_stream"].astype("int64").tolist())
                cuts.append(_where(first["frame"], first["ts"], first["tcp_stream"]))
                df = df.iloc[:max_record_rows]
            if cuts:  # the earliest row that one process would not have kept
                frame, ts_ns, stream = min(cuts)
                record_rows.append((
                    ts_ns, frame, stream, None, "table", _RECORDS_TRUNCATED,
                    f"{name} reached {max_record_rows:,} rows (max_record_rows): this row and "
                    f"every later one of that table are not kept "
                    f"(summary.extra['rows_dropped'] counts them)", None,
                ))
                counts[_RECORDS_TRUNCATED] += 1
        if name == "warnings":
            df = _merge_warnings(df, counts, max_warnings_per_code)
        elif name == "dns":  # a UDP row (worker 0) and its TCP retry (any worker)
            df = link_tcp_retries(df.reset_index(drop=True))
        tables[name] = _sorted_categories(name, df.reset_index(drop=True), frames)
    summary.extra["warning_counts"] = dict(counts)
    summary.extra["rows_dropped"] = {t: dropped[t] for t in PER_RECORD_TABLES if dropped[t]}
    summary.extra["rows_dropped_by_connection"] = dict(sorted(by_conn.items()))
    return Capture(summary, tables)


def _renumbered(parts: list[tuple[CaptureSummary, dict[str, pd.DataFrame]]]
                ) -> list[tuple[CaptureSummary, dict[str, pd.DataFrame]]]:
    """The parts (not changed) with the workers' own ``tcp_stream`` numbers (each numbers the connections it follows, in
    the order they begin) made those of one process: every connection, of every worker,
    in the order of the frame that began it (``summary.extra["tcp_stream_opened"]``; one
    frame begins at most one connection of one worker, so the order is total). Renumbers
    every ``tcp_stream`` column, the ``tcp.stream N`` in warning texts (DNS over TCP and
    HTTPS name their connection) and ``summary.extra["rows_dropped_by_connection"]``."""
    opened: list[list[int]] = []
    for s, _ in parts:
        o = s.extra.get("tcp_stream_opened")
        if not isinstance(o, list):
            raise ValueError("merge_shards() takes the parts of load(shard=(k, n)) runs")
        opened.append(o)
    frames = np.concatenate([np.asarray(o, np.int64) for o in opened] + [np.empty(0, np.int64)])
    worker = np.concatenate([np.full(len(o), k, np.int64) for k, o in enumerate(opened)]
                            + [np.empty(0, np.int64)])
    local = np.concatenate([np.arange(len(o), dtype=np.int64) for o in opened]
                           + [np.empty(0, np.int64)])
    order = np.lexsort((local, worker, frames))
    number = np.empty(len(order), np.int64)
    number[order] = np.arange(len(order), dtype=np.int64)
    start = 0
    out = []
    for (s, part), o in zip(parts, opened, strict=True):
        lut = number[start:start + len(o)]
        start += len(o)
        tables = dict(part)
        for name, df in part.items():
            if "tcp_stream" not in df.columns or not len(df):
                continue
            df = tables[name] = df.copy(deep=False)  # (its columns replaced, not changed)
            if name == "warnings":
                text = df["detail"].astype(object)
                has = (df["tcp_stream"].notna() & text.str.contains("tcp.stream ", regex=False)
                       .fillna(False).astype(bool)).to_numpy(bool)
                if has.any():  # (the text names the row's own connection)
                    detail = df["detail"].copy()
                    detail[has] = [
                        t.replace(f"tcp.stream {n}", f"tcp.stream {lut[n]}")
                        for t, n in zip(text[has], df["tcp_stream"][has].astype("int64"),
                                        strict=True)]
                    df["detail"] = detail
            df["tcp_stream"] = _mapped(df["tcp_stream"], lut)
        extra = {k: v for k, v in s.extra.items() if k != "tcp_stream_opened"}
        by_conn = extra.get("rows_dropped_by_connection")
        if isinstance(by_conn, dict) and by_conn:
            extra["rows_dropped_by_connection"] = {int(lut[k]): v for k, v in by_conn.items()}
        out.append((dataclasses.replace(s, extra=extra), tables))
    return out


def _mapped(col: pd.Series, lut: np.ndarray) -> pd.Series:
    """``col`` (tcp_stream numbers, int64 or Int64) through ``lut``, same dtype and nulls"""
    if col.dtype == np.int64:
        return pd.Series(lut[col.to_numpy()], index=col.index, name=col.name)
    na = col.isna().to_numpy(bool)
    v = col.to_numpy(np.int64, na_value=0)
    out = np.zeros(len(v), np.int64)
    out[~na] = lut[v[~na]]
    return pd.Series(pd.arrays.IntegerArray(out, na), index=col.index,
                     name=col.name).astype(col.dtype)


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


#: the category columns whose builders code values as they come (``_columns.CodeColumn``):
#: ``load()`` gives their categories in order of first appearance; every other category
#: column has them sorted, as pandas makes them from the values (``tables.schema``). The
#: packets table's src and dst share one list of addresses, in order of first appearance
#: (a row's src before its dst). tests/test_parallel.py checks the categories of every table
#: of the shipped and corpus captures against one process.
_FIRST_SEEN: dict[str, tuple[str, ...]] = {
    "packets": ("flags",),
    "tcp_events": ("kind",),
    "tls_records": ("content_type", "version", "inner_content_type", "direction"),
    "http2_frames": ("direction", "type", "flag_names", "error"),
    "ws_frames": ("direction", "opcode_name"),
}


def _first_seen(cats: list[Any], codes: np.ndarray) -> list[Any]:
    """``cats`` in the order in which ``codes`` (-1: NA) first use them, the unused after"""
    first = pd.unique(codes[codes >= 0]).tolist()
    used = set(first)
    return [cats[i] for i in first] + [c for i, c in enumerate(cats) if i not in used]


def _addresses(df: pd.DataFrame) -> list[Any]:
    """The packets table's addresses (src and dst together) in order of first appearance"""
    src, dst = df["src"].cat, df["dst"].cat
    cats = list(dict.fromkeys([*src.categories, *dst.categories]))
    where = {c: i for i, c in enumerate(cats)}
    both = np.empty(2 * len(df), np.int64)
    for k, col in enumerate((src, dst)):
        lut = np.array([where[c] for c in col.categories] + [-1], np.int64)
        both[k::2] = lut[col.codes.to_numpy()]  # (code -1 -> the -1 at the end)
    return _first_seen(cats, both)


def _sorted_categories(name: str, df: pd.DataFrame, frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Categories as ``load()`` orders them (:data:`_FIRST_SEEN`). The categories keep the
    dtype ``load()`` gives them (str, int64 or object, even when empty; a part with rows
    decides over an empty part: all-NA columns get float64 categories)."""
    fix = {}
    seen = _FIRST_SEEN.get(name, ())
    addresses: list[Any] | None = None
    for col in df.columns:
        dt = df[col].dtype
        if not isinstance(dt, pd.CategoricalDtype):
            continue
        parts: list[tuple[pd.CategoricalDtype, int]] = []
        for f in frames:
            fdt = f[col].dtype if col in f.columns else None
            if isinstance(fdt, pd.CategoricalDtype):
                parts.append((fdt, len(f)))
        cats: list[Any] = list(dt.categories)
        if name == "packets" and col in ("src", "dst") and len(df):
            if addresses is None:
                addresses = _addresses(df)
            cats = addresses
        elif col in seen:
            cats = _first_seen(cats, df[col].cat.codes.to_numpy())
        else:
            with contextlib.suppress(TypeError):  # mixed types do not sort
                cats = sorted(cats)
        kinds = ([c.categories.dtype for c, _ in parts if len(c.categories)]
                 or [c.categories.dtype for c, n in parts if n]
                 or [c.categories.dtype for c, _ in parts] or [dt.categories.dtype])
        want = pd.Index(cats, dtype=kinds[0])
        if not (want.dtype == dt.categories.dtype and want.equals(dt.categories)):
            # (recoded here: astype() to a dtype with the same categories in another order
            # does nothing, pandas taking the two unordered dtypes for equal)
            lut = np.append(want.get_indexer(dt.categories), -1)
            fix[col] = pd.Categorical.from_codes(
                lut[df[col].cat.codes.to_numpy()],
                dtype=pd.CategoricalDtype(want, ordered=dt.ordered))
    if fix:
        df = df.copy(deep=False)
        for col, values in fix.items():
            df[col] = values
    return df
