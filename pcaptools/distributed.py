"""Analyse a directory of captures on a Dask cluster, writing a partitioned Parquet dataset.

    from pcaptools.distributed import analyse_directory
    res = analyse_directory("captures/", "dataset/", scheduler="tcp://scheduler:8786",
                            keylog="keys.txt", packets=False)
    pcaptools.export.read_table("dataset/", "connections")     # pandas, `capture` column
    duckdb.sql("SELECT capture, count(*) FROM read_parquet('dataset/connections/*/*.parquet',"
               " hive_partitioning = true) GROUP BY capture")

One task per capture file: the worker runs :func:`pcaptools.load` and writes every table to
``out/<table>/capture=<file name>/part-0.parquet`` (Hive layout, see
:func:`pcaptools.export.write_partition`) plus the file's summary to
``out/captures/capture=<name>/``; only row counts travel back. So the workers must see the
capture files and ``out`` at the same paths (a shared file system) when the cluster spans
machines. Re-running replaces the partitions of the captures it analyses and leaves the
others.

Needs ``dask[distributed]`` (``pip install 'pcaptools[dask]'``) and pyarrow.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .capture import load_with
from .errors import PcapToolsError
from .export import write_partition
from .many import capture_files, capture_names
from .pipeline import LoadOptions

__all__ = ["AnalyseResult", "analyse_directory"]


@dataclass(slots=True)
class AnalyseResult:
    """What :func:`analyse_directory` wrote."""

    out: Path
    files: list[str]
    """capture names (the partition values) in file order, failed ones included"""
    rows: dict[str, int]
    """table -> rows written over all captures"""
    per_capture: pd.DataFrame
    """one row per (capture, table): rows written"""
    errors: dict[str, str] = field(default_factory=dict)
    """capture -> why it could not be read (nothing written for it)"""


_Outcome = tuple[str, dict[str, int] | None, str | None]
"""(capture name, rows written per table or None, error or None)"""


def _analyse_one(path: str, name: str, out: str, tables: list[str] | None,
                 options: LoadOptions) -> _Outcome:
    """Worker side: load one capture, write its partitions; (name, rows per table, error)."""
    try:
        cap = load_with(path, options)
    except (PcapToolsError, OSError) as exc:
        return name, None, " ".join((str(exc).strip() or type(exc).__name__).split())
    return name, write_partition(cap, out, name, tables=tables), None


def _dask() -> Any:
    """the dask module (untyped for mypy; ImportError without dask)"""
    import dask

    return dask


def _distributed() -> Any:
    import dask.distributed

    return dask.distributed


def _compute(tasks: list[Any], scheduler: Any) -> list[_Outcome]:
    dask = _dask()
    if isinstance(scheduler, str) and "://" in scheduler:
        with _distributed().Client(scheduler) as client:
            return list(dask.compute(*tasks, scheduler=client))
    if scheduler is None:
        try:
            client = _distributed().default_client()
        except (ImportError, ValueError):
            scheduler = "processes"
        else:
            return list(dask.compute(*tasks, scheduler=client))
    return list(dask.compute(*tasks, scheduler=scheduler))


def analyse_directory(directory: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
                      out: str | os.PathLike[str], *, scheduler: Any = None,
                      tables: Iterable[str] | None = None,
                      **load_kwargs: Any) -> AnalyseResult:
    """Analyse every capture of ``directory`` (or a list of files; see
    :func:`pcaptools.many.capture_files`) as one Dask task each and write the partitioned
    dataset ``out``; returns an :class:`AnalyseResult`.

    ``scheduler``: a ``dask.distributed.Client``; a scheduler address (``"tcp://host:8786"``,
    a Client is opened and closed around the run); ``"synchronous"``, ``"threads"`` or
    ``"processes"`` (dask's local schedulers); or None: the current default Client if one
    exists, else ``"processes"``. ``tables`` limits the tables written; ``load_kwargs`` go to
    every ``load()`` (``keylog`` must be readable by the workers).

    A capture that cannot be read is listed in ``errors`` and gets no partition. Raises
    ValueError when no capture file is found, ImportError without dask.
    """
    dask = _dask()
    paths = capture_files(directory)
    if not paths:
        raise ValueError(f"no capture files in {directory!s}")
    names = capture_names(paths)
    out_p = Path(out)
    out_p.mkdir(parents=True, exist_ok=True)
    wanted = list(tables) if tables is not None else None
    options = LoadOptions(**load_kwargs)
    task = dask.delayed(_analyse_one, pure=False)
    tasks = [task(str(p), name, str(out_p), wanted, options)
             for p, name in zip(paths, names, strict=True)]
    results = _compute(tasks, scheduler)
    rows: dict[str, int] = {}
    per: list[tuple[str, str, int]] = []
    errors: dict[str, str] = {}
    for name, counts, err in results:
        if err is not None or counts is None:
            errors[name] = err or "failed"
            continue
        for table, n in counts.items():
            rows[table] = rows.get(table, 0) + n
            per.append((name, table, n))
    per_df = pd.DataFrame(per, columns=["capture", "table", "rows"])
    per_df["capture"] = pd.Categorical(per_df["capture"], categories=names)
    per_df["table"] = per_df["table"].astype("string")
    return AnalyseResult(out=out_p, files=names, rows=rows, per_capture=per_df, errors=errors)
