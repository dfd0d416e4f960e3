#!/usr/bin/env python3
"""Snapshot every table of every shipped and corpus capture, and compare snapshots exactly.

A refactor that must keep behaviour identical (issue #14) takes a snapshot before the first
move and compares after every commit:

    scripts/snapshot.py write /tmp/snap-before              # this tree, this build
    PCAPTOOLS_PURE=1 scripts/snapshot.py write /tmp/snap-pure
    scripts/snapshot.py compare /tmp/snap-before             # this tree against the snapshot
    scripts/snapshot.py diff /tmp/snap-before /tmp/snap-pure # two snapshots

One snapshot is a folder with one pickle per (capture, option set): every table of
``Capture.tables`` (the DataFrames exactly, dtypes and categories included) and the
``CaptureSummary`` as a dict. Paths inside the summary are made relative to the capture's
folder, so a snapshot taken in one git worktree compares with another. Option sets
(``--options``): ``default``, ``nopackets`` (``packets=False``), ``nopayloads``
(``payloads=False``), ``workers2`` (``workers=2``), ``out`` (``out=DIR``, the streamed
export read back). The corpus (``../shared/corpus``) is used when it is there.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"

OPTION_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "nopackets": {"packets": False},
    "nopayloads": {"payloads": False},
    "workers2": {"workers": 2},
    "out": {"out": True},
}

#: corpus capture -> its key log (corpus/MANIFEST.md); DSB captures need none
CORPUS_KEYS = {
    "illustrated-tls12-capture.pcap": "illustrated-tls12-keylog.txt",
    "tls12-decryption.pcap": "tls12-decryption.keylog.txt",
    "dump.pcapng": "premaster.txt",
    "tls_nss_example.pcap": "tls_nss_example.keys.txt",
    "illustrated-tls13-capture.pcap": "illustrated-tls13-keylog.txt",
    "tls3.cryptohack.org.pcapng": "keylogfile.txt",
    "illustrated-quic-capture.pcap": "illustrated-quic-keylog.txt",
}
_CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz", ".pcap.zst", ".pcapng.zst")


def cases() -> list[tuple[str, Path, Path | None]]:
    """(name, capture, key log) of every shipped capture, then every corpus capture."""
    out: list[tuple[str, Path, Path | None]] = []
    for p in sorted((ROOT / "captures").iterdir()):
        if p.name.endswith(_CAPTURE_SUFFIXES):
            stem = p.name.split(".pcap")[0]
            k = p.with_name(stem + ".keys")
            out.append((f"captures/{p.name}", p, k if k.is_file() else None))
    if CORPUS.is_dir():
        for p in sorted(CORPUS.iterdir()):
            if p.name.endswith(_CAPTURE_SUFFIXES):
                k = CORPUS_KEYS.get(p.name)
                out.append((f"corpus/{p.name}", p, CORPUS / k if k else None))
    return out


def _summary(summary: Any, base: Path) -> dict[str, Any]:
    d = asdict(summary)
    d["path"] = os.path.relpath(d["path"], base)
    extra = dict(d["extra"])
    if isinstance(extra.get("keylog"), str):
        extra["keylog"] = os.path.relpath(extra["keylog"], base)
    d["extra"] = extra
    return d


def take(path: Path, keylog: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    import pcaptools

    kw = dict(options)
    with tempfile.TemporaryDirectory(prefix="pcaptools-snap-") as tmp:
        if kw.pop("out", None):
            kw["out"] = tmp
        cap = pcaptools.load(path, keylog=keylog, **kw)
        tables = {name: cap.tables[name].copy() for name in sorted(cap.tables)}
    return {"tables": tables, "summary": _summary(cap.summary, path.parent)}


def _file(directory: Path, name: str, opt: str) -> Path:
    return directory / f"{name.replace('/', '__')}@{opt}.pkl"


def write(directory: Path, opts: list[str], only: list[str]) -> int:
    from pcaptools import _accel

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "BUILD").write_text(_accel.summary() + "\n")
    n = 0
    t0 = time.monotonic()
    for name, path, keys in cases():
        if only and not any(o in name for o in only):
            continue
        for opt in opts:
            snap = take(path, keys, OPTION_SETS[opt])
            _file(directory, name, opt).write_bytes(pickle.dumps(snap, protocol=5))
            n += 1
    print(f"{n} snapshots written to {directory} in {time.monotonic() - t0:.0f} s "
          f"({_accel.summary()})")
    return 0


def _differences(want: dict[str, Any], got: dict[str, Any], where: str,
                 new_tables: frozenset[str] = frozenset()) -> list[str]:
    import pandas as pd

    problems: list[str] = []
    got = {**got, "tables": {k: v for k, v in got["tables"].items()
                             if not (k in new_tables and k not in want["tables"])}}
    if set(want["tables"]) != set(got["tables"]):
        problems.append(f"{where}: tables {sorted(set(want['tables']) ^ set(got['tables']))} "
                        "only on one side")
    for t in sorted(set(want["tables"]) & set(got["tables"])):
        try:
            pd.testing.assert_frame_equal(got["tables"][t], want["tables"][t], check_exact=True,
                                          obj=f"{where}:{t}")
        except AssertionError as exc:
            problems.append(str(exc).strip().splitlines()[0] + "\n    "
                            + "\n    ".join(str(exc).strip().splitlines()[1:8]))
    if want["summary"] != got["summary"]:
        ws, gs = want["summary"], got["summary"]
        keys = sorted(k for k in set(ws) | set(gs) if ws.get(k) != gs.get(k))
        problems.append(f"{where}: summary differs in {keys}: "
                        + "; ".join(f"{k}: {ws.get(k)!r} -> {gs.get(k)!r}" for k in keys)[:2000])
    return problems


def compare(directory: Path, other: Path | None, opts: list[str], only: list[str],
            new_tables: frozenset[str] = frozenset()) -> int:
    """This tree (or the snapshot ``other``) against the snapshot ``directory``."""
    from pcaptools import _accel

    problems: list[str] = []
    n = 0
    t0 = time.monotonic()
    wanted = {p.name for p in directory.glob("*.pkl")}
    for name, path, keys in cases():
        if only and not any(o in name for o in only):
            continue
        for opt in opts:
            f = _file(directory, name, opt)
            if f.name not in wanted:
                problems.append(f"{name}@{opt}: not in {directory}")
                continue
            want = pickle.loads(f.read_bytes())
            if other is not None:
                g = _file(other, name, opt)
                if not g.is_file():
                    problems.append(f"{name}@{opt}: not in {other}")
                    continue
                got = pickle.loads(g.read_bytes())
            else:
                got = take(path, keys, OPTION_SETS[opt])
            problems += _differences(want, got, f"{name}@{opt}", new_tables)
            n += 1
    for p in problems:
        print(p)
    against = other if other is not None else f"this tree ({_accel.summary()})"
    print(f"{n} snapshots compared, {len(problems)} differences: {directory} vs {against} "
          f"in {time.monotonic() - t0:.0f} s")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in ("write", "compare", "diff"):
        p = sub.add_parser(cmd)
        p.add_argument("directory", type=Path)
        if cmd == "diff":
            p.add_argument("other", type=Path)
        p.add_argument("--options", default=",".join(OPTION_SETS),
                       help=f"comma-separated option sets of {', '.join(OPTION_SETS)} (default: all)")
        p.add_argument("--only", action="append", default=[],
                       help="only captures whose name contains this (repeatable)")
        p.add_argument("--new-table", action="append", default=[],
                       help="a table added since the snapshot: not compared where the snapshot "
                            "lacks it (repeatable)")
    a = ap.parse_args(argv)
    opts = [o for o in a.options.split(",") if o]
    bad = [o for o in opts if o not in OPTION_SETS]
    if bad:
        ap.error(f"unknown option set(s) {bad}")
    if a.cmd == "write":
        return write(a.directory, opts, a.only)
    return compare(a.directory, getattr(a, "other", None), opts, a.only,
                   frozenset(a.new_table))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
