"""``load_many()``: many capture files analysed in parallel, their tables side by side.

    many = pcaptools.load_many("captures/", keylog="keys.txt", packets=False)
    many.connections                      # every file's connections, leading `capture` column
    many["client.pcapng"]                 # that file's Capture, exactly as load() returned it
    many.summaries                        # one row per file (frames, duration, error, ...)

Each file is read by :func:`pcaptools.load` in a worker process (one per core by default);
the parent gets every file's :class:`~pcaptools.capture.Capture` back and concatenates the
tables on first access. ``tcp_stream`` (and frame numbers) stay per file: a connection is
``(capture, tcp_stream)``, so join tables on both columns.

Memory: the parent holds every file's tables. For thousands of files or multi-GB ones, use
``packets=False`` or write Parquet per file with :mod:`pcaptools.distributed`.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pandas as pd

from .capture import load
from .errors import PcapToolsError
from .parallel import mp_context
from .result import TABLES, Capture, CaptureSummary
from .tables.concat import concat_tables
from .tcp.tracker import RETRANSMISSION_KINDS

__all__ = [
    "CAPTURE_SUFFIXES",
    "ManyCaptures",
    "capture_files",
    "capture_names",
    "concat_tables",
    "load_many",
]

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")
"""file names a directory scan picks up, alone or followed by .gz, .bz2, .xz or .zst"""
_COMPRESSED = ("", ".gz", ".bz2", ".xz", ".zst")

FilesProgress = Callable[[int, int], None]
"""called as progress(files_done, files_total) in the parent after each file"""


def _is_capture_name(name: str) -> bool:
    low = name.lower()
    return any(low.endswith(s + c) for s in CAPTURE_SUFFIXES for c in _COMPRESSED)


def capture_files(paths_or_dir: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
                  ) -> list[Path]:
    """The capture files ``load_many`` reads: a directory gives its capture files (not
    recursive, by name: ``*.pcap``, ``*.pcapng``, ``*.cap``, ``*.dmp``, each
    optionally ``.gz``/``.bz2``/``.xz``/``.zst``), sorted by name; files are taken as given
    (directories among them are expanded the same way). Missing paths are kept so that
    ``load_many`` reports them as errors."""
    items = [paths_or_dir] if isinstance(paths_or_dir, (str, os.PathLike)) else list(paths_or_dir)
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            out += sorted((c for c in p.iterdir() if c.is_file() and _is_capture_name(c.name)),
                          key=lambda c: c.name)
        else:
            out.append(p)
    return out


def capture_names(paths: list[Path]) -> list[str]:
    """Unique display names: the file name, or the path relative to the common parent when
    two files share a name."""
    names = [p.name for p in paths]
    if len(set(names)) == len(names):
        return names
    absolute = [Path(os.path.abspath(p)) for p in paths]
    common = Path(os.path.commonpath(absolute)) if len(paths) > 1 else absolute[0].parent
    rel = [str(a.relative_to(common)) if a != common else a.name for a in absolute]
    if len(set(rel)) == len(rel):
        return rel
    return [f"{i}:{n}" for i, n in enumerate(rel)]  # the same file given twice


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _load_one(path: str, kwargs: dict[str, Any]) -> tuple[CaptureSummary, dict[str, pd.DataFrame]]:
    cap = load(path, **kwargs)
    return cap.summary, cap.tables


class ManyCaptures:
    """The result of :func:`load_many`: per-file Captures and their tables concatenated.

    Every table attribute of :class:`~pcaptools.capture.Capture` is here too (``connections``,
    ``tcp_events``, ``http2_streams``, ``packets``, ``warnings``, ...): the files' tables one
    after the other in file order, with a leading ``capture`` column (categorical, the file's
    name), and every other column's dtype as in ``load()``. Concatenation happens on first
    access to a table and is cached.
    """

    def __init__(self, captures: Mapping[str, Capture], *, paths: Mapping[str, str] | None = None,
                 errors: Mapping[str, str] | None = None) -> None:
        self.captures: dict[str, Capture] = dict(captures)
        """name -> Capture as ``load()`` returned it, in file order"""
        self.errors: dict[str, str] = dict(errors or {})
        """name -> why the file could not be read at all (it has no rows anywhere)"""
        self.paths: dict[str, str] = dict(
            paths or {n: c.summary.path for n, c in self.captures.items()})
        """name -> path as given, for every file including failed ones"""
        self._merged: dict[str, pd.DataFrame] = {}

    # -- mapping-like access to the per-file Captures
    def __getitem__(self, name: str) -> Capture:
        return self.captures[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.captures)

    def __len__(self) -> int:
        return len(self.captures)

    @property
    def names(self) -> list[str]:
        """capture names in file order (failed files included)"""
        return list(self.paths)

    # -- merged tables
    def table(self, name: str) -> pd.DataFrame:
        """Table ``name`` of every capture, concatenated, with a leading ``capture`` column."""
        if name not in self._merged:
            if name not in TABLES:
                raise KeyError(f"unknown table {name!r}; known: {sorted(TABLES)}")
            frames = []
            for cname, cap in self.captures.items():
                df = cap.tables.get(name, TABLES[name].frame([]))
                df = df.copy(deep=False)
                df.insert(0, "capture", cname)
                frames.append(df)
            if not frames:
                frames = [TABLES[name].frame([])]
                frames[0].insert(0, "capture", pd.Series([], dtype="string"))
            out = concat_tables(frames)
            out["capture"] = pd.Categorical(out["capture"].astype(object),
                                            categories=self.names)
            self._merged[name] = out
        return self._merged[name]

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """every merged table by name (builds the ones not built yet)"""
        return {n: self.table(n) for n in TABLES}

    def __getattr__(self, name: str) -> pd.DataFrame:
        if name in TABLES:
            return self.table(name)
        raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")

    @property
    def retransmissions(self) -> pd.DataFrame:
        """merged tcp_events rows of the retransmission kinds (as ``Capture.retransmissions``)"""
        ev = self.table("tcp_events")
        return ev[ev["kind"].isin(RETRANSMISSION_KINDS)].reset_index(drop=True)

    @property
    def summaries(self) -> pd.DataFrame:
        """One row per file (failed ones too): capture, path, format, frames, first/last
        timestamps (ns), duration_s, wire_bytes, TCP connections, warnings, error."""
        rows = []
        for name in self.names:
            cap = self.captures.get(name)
            s = cap.summary if cap is not None else None
            rows.append({
                "capture": name,
                "path": self.paths[name],
                "format": s.format if s else None,
                "compression": s.compression if s else None,
                "file_size": s.file_size if s else None,
                "frames": s.frames if s else None,
                "first_ts_ns": s.first_ts_ns if s else None,
                "last_ts_ns": s.last_ts_ns if s else None,
                "duration_s": s.duration_s if s else None,
                "wire_bytes": s.wire_bytes if s else None,
                "tcp_frames": s.tcp_frames if s else None,
                "udp_frames": s.udp_frames if s else None,
                "tcp_connections": len(cap.connections) if cap is not None else None,
                "warnings": len(cap.warnings) if cap is not None else None,
                "error": self.errors.get(name),
            })
        df = pd.DataFrame(rows, columns=["capture", "path", "format", "compression", "file_size",
                                         "frames", "first_ts_ns", "last_ts_ns", "duration_s",
                                         "wire_bytes", "tcp_frames", "udp_frames",
                                         "tcp_connections", "warnings", "error"])
        for col in ("file_size", "frames", "first_ts_ns", "last_ts_ns", "wire_bytes", "tcp_frames",
                    "udp_frames", "tcp_connections", "warnings"):
            df[col] = df[col].astype("Int64")
        for col in ("path", "format", "compression", "error"):
            df[col] = df[col].astype("string")
        df["duration_s"] = df["duration_s"].astype("float64")
        df["capture"] = pd.Categorical(df["capture"], categories=self.names)
        return df

    # -- export
    def to_parquet(self, directory: str | os.PathLike[str], **kw: Any) -> dict[str, Path]:
        """:func:`pcaptools.export.to_parquet` of the merged tables (+ ``captures.parquet``)."""
        from .export import to_parquet

        return to_parquet(self, directory, **kw)

    def to_csv(self, directory: str | os.PathLike[str], **kw: Any) -> dict[str, Path]:
        """:func:`pcaptools.export.to_csv` of the merged tables (+ ``captures.csv``)."""
        from .export import to_csv

        return to_csv(self, directory, **kw)

    def __repr__(self) -> str:
        frames = sum(c.summary.frames for c in self.captures.values())
        err = f", {len(self.errors)} unreadable" if self.errors else ""
        return f"<ManyCaptures: {len(self.captures)} captures, {frames} frames{err}>"


def _context() -> multiprocessing.context.BaseContext:
    """the start method of :func:`load_many`'s workers: :func:`pcaptools.parallel.mp_context`"""
    return mp_context()


def load_many(paths_or_dir: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *,
              workers: int | None = None, progress: FilesProgress | None = None,
              strict: bool = False,
              keylogs: Mapping[str | os.PathLike[str], str | os.PathLike[str]] | None = None,
              **load_kwargs: Any) -> ManyCaptures:
    """Run :func:`pcaptools.load` on every capture file of ``paths_or_dir`` (a directory, a
    file, or a list of them; see :func:`capture_files`) and return a :class:`ManyCaptures`.

    ``workers``: processes to use (default: one per core, at most one per file; 1 reads the
    files one after the other in this process). ``load_kwargs`` go to every ``load()`` call
    (``keylog``, ``packets``, ``tls_records``, ``payloads``, ``max_warnings_per_code``);
    ``load``'s per-file ``progress`` is not available here: ``progress`` is called as
    ``progress(files_done, files_total)`` instead. ``keylogs`` maps a capture path (as given
    or found in the directory) to its own key log, used instead of ``keylog`` for that file
    (``pcap-report DIR`` passes the key logs found beside the captures).

    A file that cannot be read at all (missing, not a capture, unreadable key log) does not
    stop the others: it is listed in ``ManyCaptures.errors`` and ``summaries.error``; with
    ``strict=True`` the first such error is raised instead. Anything wrong inside a file
    becomes that file's ``warnings`` rows, as with ``load()``. Raises ValueError when no
    capture file is found.
    """
    paths = capture_files(paths_or_dir)
    if not paths:
        raise ValueError(f"no capture files in {paths_or_dir!s}")
    names = capture_names(paths)
    n = len(paths)
    if workers is None:
        workers = os.cpu_count() or 1
    workers = max(1, min(workers, n))
    results: dict[str, tuple[CaptureSummary, dict[str, pd.DataFrame]]] = {}
    errors: dict[str, str] = {}
    own = {os.fspath(k): os.fspath(v) for k, v in (keylogs or {}).items()}

    def kwargs_for(p: Path) -> dict[str, Any]:
        k = own.get(str(p))
        return load_kwargs if k is None else {**load_kwargs, "keylog": k}

    def failed(name: str, exc: BaseException) -> None:
        if strict:
            raise exc
        text = " ".join((str(exc).strip() or type(exc).__name__).split())
        if isinstance(exc, OSError) and not isinstance(exc, PcapToolsError):
            text = f"{exc.filename or ''}: {exc.strerror or text}".lstrip(": ")
        errors[name] = text

    done = 0
    if workers == 1:
        for name, p in zip(names, paths, strict=True):
            try:
                results[name] = _load_one(str(p), kwargs_for(p))
            except (PcapToolsError, OSError) as exc:
                failed(name, exc)
            done += 1
            if progress is not None:
                progress(done, n)
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) as pool:
            # largest files first, so that no worker starts a big file when the others are done
            order = sorted(zip(names, paths, strict=True), key=lambda np: -_size(np[1]))
            futures = {pool.submit(_load_one, str(p), kwargs_for(p)): name
                       for name, p in order}
            try:
                for fut in as_completed(futures):
                    name = futures[fut]
                    try:
                        results[name] = fut.result()
                    except (PcapToolsError, OSError) as exc:
                        failed(name, exc)
                    done += 1
                    if progress is not None:
                        progress(done, n)
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    captures = {name: Capture(*results[name]) for name in names if name in results}
    return ManyCaptures(captures, paths={nm: str(p) for nm, p in zip(names, paths, strict=True)},
                        errors=errors)
