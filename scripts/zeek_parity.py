#!/usr/bin/env python3
"""How far pcaptools agrees with Zeek's own test suite on TCP connection records.

Zeek's btest baselines (``testing/btest/Baseline/<test>/conn.log``) are what Zeek's test
suite expects for the traces in ``testing/btest/Traces``. This script reads them from a git
mirror of zeek/zeek (default ``/work/.mirror/zeek+zeek/repo``), finds the trace each test reads
(``-r $TRACES/...`` in the test file) and whether it runs with ``-C`` (checksums ignored), loads
the trace with pcaptools and compares every TCP row of the baseline with

* ``before``: the ``connections`` table (one row per Wireshark tcp.stream), and
* ``after``: :func:`pcaptools.analyses.conn_log` (Zeek's connection boundaries and letters,
  with ``check_checksums`` unless the test uses ``-C``),

matching rows by (originator address and port, responder address and port, start time
within 1 ms, or the n-th row of that 4-tuple), in either orientation. It prints, for each side,
how many rows agree on conn_state, history, packets (orig_pkts + resp_pkts), bytes (orig_bytes
and resp_bytes) and how many Zeek rows have no counterpart; ``--details`` lists the
differences. Not a test: it needs the mirror, and Zeek's baselines depend on the scripts each
test loads (e.g. ``-b`` runs have fewer likely server ports).

A ``zeek -b`` run registers only the ports of the protocol scripts it ``@load``s as likely
server ports: the "after" run passes those (read from each ``main.zeek``) to ``conn_log``.

    python scripts/zeek_parity.py [--mirror DIR] [--details] [--only NAME]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd

import pcaptools

MIRROR = "/work/.mirror/zeek+zeek/repo"
_TRACE = re.compile(r"-r\s+\$TRACES/(\S+)")


def _git(mirror: str, *args: str, binary: bool = False) -> Any:
    out = subprocess.run(["git", "-C", mirror, *args], capture_output=True, check=False)
    return out.stdout if binary else out.stdout.decode("utf-8", "replace")


def _tests(mirror: str) -> list[tuple[str, str, str, bool, set[int] | None]]:
    """(baseline name, conn.log path, trace path, -C, likely server ports of a ``-b`` run or
    None) for each baseline conn.log with one trace."""
    files = _git(mirror, "ls-tree", "-r", "--name-only", "HEAD", "testing/btest").splitlines()
    have = set(files)
    out = []
    for f in files:
        if not (f.startswith("testing/btest/Baseline/") and f.endswith("/conn.log")):
            continue
        name = f.split("/")[3]
        base = name.split(".")
        cands = []
        for ext in (".zeek", ".test", ".bro", ""):
            cands.append("testing/btest/" + "/".join(base) + ext)
            if len(base) > 1:  # a test file with a dot in its name
                cands.append("testing/btest/" + "/".join(base[:-1]) + "." + base[-1] + ext)
        test = next((c for c in cands if c in have), None)
        if test is None:
            continue
        text = _git(mirror, "show", f"HEAD:{test}")
        traces = _TRACE.findall(text)
        if len(set(traces)) != 1:  # no trace, or several (which one wrote conn.log is unclear)
            continue
        trace = "testing/btest/Traces/" + traces[0].strip("'\"")
        if trace not in have:
            continue
        no_cksum = bool(re.search(r"zeek[^\n]*\s-C\b", text)) or "-C" in text.split()
        bare = bool(re.search(r"zeek\s[^\n]*-b\b", text))
        ports = None
        if bare:  # a bare run registers only the ports of the protocol scripts it loads
            ports = set()
            for proto in set(re.findall(r"@load\s+base/protocols/([a-z0-9_-]+)", text)):
                ports |= _proto_ports(mirror, proto)
        out.append((name, f, trace, no_cksum, ports))
    return out


_PORTS_CACHE: dict[str, set[int]] = {}


def _proto_ports(mirror: str, proto: str) -> set[int]:
    """TCP ports the protocol's main.zeek registers (its part of likely_server_ports)."""
    if proto not in _PORTS_CACHE:
        text = " ".join(_git(mirror, "show", f"HEAD:scripts/base/protocols/{proto}/main.zeek")
                        .split())
        found: set[int] = set()
        for block in re.findall(r"const [a-z_]*ports *= *\{[^}]*\}", text):
            found |= {int(p) for p in re.findall(r"(\d+)/tcp", block)}
        _PORTS_CACHE[proto] = found
    return _PORTS_CACHE[proto]


def _conn_log_rows(text: str) -> pd.DataFrame:
    fields: list[str] = []
    rows = []
    for line in text.splitlines():
        if line.startswith("#fields"):
            fields = line.split("\t")[1:]
        elif line and not line.startswith("#") and fields:
            rows.append(dict(zip(fields, line.split("\t"), strict=False)))
    df = pd.DataFrame(rows)
    # logs written with a field name map or another scope separator (id_orig_h, src...)
    alias = {"src": "id.orig_h", "src_ip": "id.orig_h", "src_port": "id.orig_p",
             "dst": "id.resp_h", "dst_ip": "id.resp_h", "dst_port": "id.resp_p"}
    ren = {}
    for c in df.columns:
        m = re.fullmatch(r"id[^a-z]?(orig|resp)_(h|p)", c)
        if m:
            ren[c] = f"id.{m.group(1)}_{m.group(2)}"
        elif c in alias:
            ren[c] = alias[c]
    df = df.rename(columns=ren)
    if "proto" in df:
        df = df[df["proto"] == "tcp"]
    return df.reset_index(drop=True)


def _num(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _match(zeek: pd.DataFrame, ours: pd.DataFrame, ts_col: str) -> list[tuple[dict[str, Any], Any]]:
    """Pair each Zeek row with one of ours (or None), by 4-tuple in either orientation and
    start time (to 1 ms), else by order within the 4-tuple."""
    by_tuple: dict[frozenset[tuple[str, int]], list[Any]] = defaultdict(list)
    for r in ours.itertuples(index=False):
        key = frozenset({(str(r.client_addr), int(r.client_port)),
                         (str(r.server_addr), int(r.server_port))})
        by_tuple[key].append(r)
    used: set[int] = set()
    pairs = []
    for z in zeek.to_dict("records"):
        key = frozenset({(z.get("id.orig_h", ""), _num(z.get("id.orig_p")) or 0),
                         (z.get("id.resp_h", ""), _num(z.get("id.resp_p")) or 0)})
        cands = [r for r in by_tuple.get(key, []) if id(r) not in used]
        best = None
        ts = z.get("ts", "")
        if cands and ts and "X" not in ts:
            t = float(ts)
            near = [r for r in cands if abs(getattr(r, ts_col).timestamp() - t) < 1e-3]
            best = near[0] if near else None
        if best is None and cands:
            best = cands[0]
        if best is not None:
            used.add(id(best))
        pairs.append((z, best))
    return pairs


def _compare(pairs: list[tuple[dict[str, Any], Any]], tally: dict[str, list[int]],
             details: list[str], label: str, trace: str) -> None:
    for z, r in pairs:
        if r is None:
            tally["unmatched"][0] += 1
            details.append(f"{label} {trace}: no row for {z.get('id.orig_h')}:"
                           f"{z.get('id.orig_p')} -> {z.get('id.resp_h')}:{z.get('id.resp_p')}"
                           f" {z.get('conn_state')} {z.get('history')}")
            continue
        checks = {}
        if "conn_state" in z:
            checks["conn_state"] = (z["conn_state"], str(r.conn_state))
        if "history" in z:
            checks["history"] = (z["history"], str(r.history))
        op, rp = _num(z.get("orig_pkts")), _num(z.get("resp_pkts"))
        if op is not None and rp is not None:
            checks["packets"] = (op + rp, int(r.client_packets) + int(r.server_packets))
        ob, rb = _num(z.get("orig_bytes")), _num(z.get("resp_bytes"))
        if ob is not None and rb is not None:
            mine = sorted((int(r.client_bytes), int(r.server_bytes)))
            checks["bytes"] = (tuple(sorted((ob, rb))), tuple(mine))
        for k, (want, got) in checks.items():
            tally[k][1] += 1
            if want == got:
                tally[k][0] += 1
            else:
                details.append(f"{label} {trace} {z.get('id.orig_h')}:{z.get('id.orig_p')} -> "
                               f"{z.get('id.resp_h')}:{z.get('id.resp_p')}: {k} zeek={want} "
                               f"ours={got}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", default=MIRROR)
    ap.add_argument("--details", action="store_true")
    ap.add_argument("--only", default=None)
    ap.add_argument("--before-only", action="store_true",
                    help="only the connections table (e.g. to measure an older pcaptools)")
    args = ap.parse_args(argv)
    tests = _tests(args.mirror)
    if args.only:
        tests = [t for t in tests if args.only in t[0]]
    tallies = {s: {k: [0, 0] for k in ("conn_state", "history", "packets", "bytes", "unmatched")}
               for s in ("before", "after")}
    details: list[str] = []
    n_traces = n_rows = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, log, trace, no_cksum, ports in tests:
            zeek = _conn_log_rows(_git(args.mirror, "show", f"HEAD:{log}"))
            if not len(zeek):
                continue
            data = _git(args.mirror, "show", f"HEAD:{trace}", binary=True)
            path = Path(tmp) / Path(trace).name
            path.write_bytes(data)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if args.before_only:
                        cap = pcaptools.load(path)
                        zl = None
                    else:
                        from pcaptools.analyses.conn_log import conn_log

                        cap = pcaptools.load(path, check_checksums=not no_cksum)
                        zl = conn_log(cap, check_checksums=not no_cksum,
                                      likely_server_ports=ports)
            except Exception as exc:  # a trace pcaptools cannot read: every row unmatched
                details.append(f"{name}: {type(exc).__name__}: {exc}")
                for s in tallies.values():
                    s["unmatched"][0] += len(zeek)
                n_rows += len(zeek)
                continue
            n_traces += 1
            n_rows += len(zeek)
            _compare(_match(zeek, cap.connections, "first_ts"), tallies["before"], details,
                     "before", name)
            if zl is not None:
                _compare(_match(zeek, zl, "first_ts"), tallies["after"], details, "after", name)
    print(f"{len(tests)} baseline conn.logs with one trace, {n_traces} traces read, "
          f"{n_rows} Zeek TCP rows")
    for s, t in tallies.items():
        if s == "after" and args.before_only:
            continue
        parts = [f"{k} {v[0]}/{v[1]}" for k, v in t.items() if k != "unmatched"]
        print(f"{s:6s} ({'connections' if s == 'before' else 'conn_log'}): " + ", ".join(parts)
              + f", Zeek rows without a counterpart {t['unmatched'][0]}")
    if args.details:
        print("\n".join(details))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
