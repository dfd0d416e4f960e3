"""``pcap-report``: read a capture, write the offline HTML report (and optionally the headline
numbers as JSON, and the tables as Parquet or CSV).

Several captures (a directory, several files, or both): they are read in parallel
(:func:`pcaptools.load_many`) and each gets its own report, ``<stem>.report.html``, in the
output directory (``-o DIR``, default ``./pcap-reports``), with ``index.html`` there listing
every capture with its headline numbers and a link to its report. One report per capture,
not one over all of them, because the captures are usually different runs or vantage points
that an analyst compares side by side, and tcp_stream numbers, frame numbers and timelines
only mean something within one file. The merged tables (a ``capture`` column added) are
what ``--export DIR`` writes, for analysis across captures.

The capture ``-`` is standard input (``tcpdump -w - | pcap-report -``), read once without
seeking, compressed or not; a FIFO path works the same way. Ctrl-C stops such a live run
the way it stops tcpdump: the first one lets pcap-report read on to the end of the stream
(tcpdump got it too, flushes and closes the pipe) and write the report; a second one stops
it without a report (exit 130).

Key logs: ``--keylog`` is used for every capture given. Without it, each capture ``X.pcapng``
(``X.pcap.gz``...) is decrypted with ``X.keys``, ``X.keys.log`` or ``X.keylog`` beside it
when there is one (:func:`keylog_beside`; in directory mode and with ``--compare`` too), and
a line on stderr says so (``--no-auto-keylog`` turns this off). Every key log is read once
before the capture: one that cannot be read is exit status 1 before any analysis, one with
no key log line in it is a warning naming how many lines it read. TLS sessions that were
not decrypted are said on stderr in the report's words.

Outputs never destroy data: before any capture is read, every output path (``-o``, ``--json``,
the ``--export`` files, the reports and index of several captures) is checked: one that
resolves (symlinks followed, hard links found) to an input (a capture, the key log), or names
the same file as another output, is a device, or whose folder is missing or cannot be
written, is refused with exit status 2 (one line naming the paths), so a long analysis (or
a pipe, which cannot be read again) is never lost to a typo. Files are written to a
temporary file in their folder and renamed over the target (:mod:`pcaptools._safewrite`):
a symlink there is replaced, not written through. ``/dev/stdout``, ``/dev/null`` and named
pipes are written into (``--json /dev/stdout | jq``).

Exit status: 0 when the report was written (even if the capture had warnings), 1 when the
capture cannot be read or writing an output fails after the analysis (disk full; one
``pcap-report: error: ...`` line on stderr, no traceback), 2 for bad usage (an output that
would overwrite an input or another output, or whose folder is missing or not writable,
included: found before the capture is read).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__, _accel
from ._eventcap import DEFAULT_MAX_EVENTS_PER_CONNECTION, DEFAULT_MAX_RECORD_ROWS
from ._safewrite import Labelled, atomic_open, check_outputs, export_files
from .analyses.summary import fmt_ms, headline
from .capture import TABLES, Capture, is_stream, load
from .errors import OutputPathError, PcapToolsError
from .report import write_report
from .select import parse_time, subset

PROG = "pcap-report"

_COMPRESSED = (".gz", ".bz2", ".xz", ".zst")
_CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")

EPILOG = """\
examples:
  pcap-report capture.pcapng
        writes capture.report.html in the current directory
  pcap-report capture.pcap.gz -o /tmp/report.html --json /tmp/summary.json
        compressed captures are read directly; --json also writes the headline numbers
  tcpdump -i eth0 -c 10000 -w - | pcap-report - -o live.html
        '-' reads the capture from standard input (gzip'd too), without seeking; without
        -c, Ctrl-C stops tcpdump and the report covers what it wrote (twice: no report)
  pcap-report tls.pcapng --keylog sslkeys.txt
        decrypts TLS with the key log your client wrote (SSLKEYLOGFILE=sslkeys.txt);
        without --keylog, tls.keys (or tls.keys.log, tls.keylog) beside tls.pcapng is
        used, with a line saying so (--no-auto-keylog: not)
  pcap-report big.pcapng --no-packets --quiet
        skips the per-frame table (less memory for multi-GB captures) and the progress bar

  pcap-report h1.pcapng --compare h2.pcapng --labels HTTP/1.1,HTTP/2
        one page comparing two captures: the comparison table (TTFB, TTFT, handshakes,
        retransmissions, bytes on the wire per payload byte...), then both reports
  pcap-report captures/ -o reports/ --export tables/
        every capture in captures/ (in parallel): reports/<stem>.report.html each,
        reports/index.html, and the tables of all of them as Parquet in tables/
  pcap-report big.pcapng --export tables/ --export-format csv
        also writes one CSV per table
  pcap-report chat.pcapng --keylog keys.txt --sni '*.openai.com' --start 10 --end 25.5
        a report about part of the capture: the connections to that server name, the
        packets between 10 s and 25.5 s after the first frame (--host, --port, --stream N
        (repeatable) too); the header says which filter was applied

outputs are checked before the capture is read, and written to a temporary file in their
folder that is then renamed over the target (a symlink there is replaced, not followed);
/dev/stdout, /dev/null and named pipes are written into (--json /dev/stdout | jq .).

exit status: 0 report written (warnings included), 1 capture unreadable (with several
captures: any of them; the others' reports are still written) or an output write failed
after the analysis (e.g. disk full), 2 bad usage (also an output path that is an input or
another output, -o equal to --json say, or whose folder is missing or not writable: found
before reading; a subset option that does not fit the capture, e.g. --start after --end,
or that matches nothing in it: the message names the filter).

TLS sessions that could not be decrypted are said on stderr too (with --quiet only when
keys were given and failed, not for "no key log").
"""


STDIN = "-"
"""the capture argument that means standard input"""


def default_output(capture: str | Path) -> Path:
    """``<capture stem>.report.html`` in the working directory: ``x.pcapng`` and
    ``x.pcap.gz`` both give ``x.report.html``; ``-`` (stdin) gives ``stdin.report.html``."""
    if str(capture) == STDIN:
        return Path("stdin.report.html")
    name = Path(capture).name
    for suffixes in (_COMPRESSED, _CAPTURE_SUFFIXES):
        for suf in suffixes:
            if name.lower().endswith(suf) and len(name) > len(suf):
                name = name[: -len(suf)]
                break
    return Path(f"{name}.report.html")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Analyse a packet capture (pcap/pcapng, optionally gzip/bz2/xz/zstd "
        "compressed) and write a self-contained HTML report that opens offline.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "capture",
        nargs="+",
        help="capture file to analyse ('-': standard input, e.g. tcpdump -w - | pcap-report -); "
        "several files or a directory give one report per capture and an index",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="REPORT.html",
        help="where to write the report (default: <capture stem>.report.html "
        "in the current directory); with several captures, a directory (default: pcap-reports)",
    )
    p.add_argument(
        "--json",
        metavar="SUMMARY.json",
        dest="json_path",
        help="also write the headline numbers as JSON",
    )
    p.add_argument(
        "--keylog",
        metavar="KEYS.txt",
        help="NSS key log file (SSLKEYLOGFILE) to decrypt TLS; key logs embedded in a pcapng "
        "(Decryption Secrets Blocks) are always used. Without it, a key log beside the "
        "capture (X.keys, X.keys.log or X.keylog next to X.pcapng) is used, with a line "
        "saying so",
    )
    p.add_argument(
        "--no-auto-keylog",
        action="store_true",
        help="do not look for a key log beside the capture(s) (X.keys, X.keys.log, X.keylog)",
    )
    p.add_argument("--title", help="report title (default: the capture's file name)")
    p.add_argument(
        "--show-secrets",
        action="store_true",
        help="keep credential header values (Authorization, Cookie, Set-Cookie, API keys) in "
        "the tables and report; by default they are replaced by <redacted: N bytes>",
    )
    p.add_argument(
        "--no-packets",
        action="store_true",
        help="do not build the per-frame table (saves memory on captures of many millions "
        "of frames; per-ACK RTTs are then not available)",
    )
    p.add_argument(
        "--check-checksums",
        action="store_true",
        help="validate TCP checksums (off by default, as in tshark): bad segments become "
        "tcp_events rows of kind bad_checksum and tcp.bad_checksum warnings",
    )
    p.add_argument(
        "--export",
        metavar="DIR",
        help="also write every table to DIR: one <table>.parquet each (several captures: "
        "merged, with a capture column) and captures.parquet",
    )
    p.add_argument(
        "--export-format",
        choices=("parquet", "csv"),
        default="parquet",
        help="file format of --export (default: parquet)",
    )
    p.add_argument(
        "--workers",
        type=_positive_int,
        metavar="N",
        help="processes to use: with several captures, files read in parallel (default: one "
        "per core); with one capture, N > 1 splits its TCP connections (their analysis and "
        "payload parsing) over N processes (default: 1; see pcaptools.parallel)",
    )
    p.add_argument(
        "--max-packet-rows",
        type=_rows_or_none,
        metavar="N|none",
        default=2_000_000,
        help="per-frame rows kept in the packets table (default: 2,000,000, about 0.65 GB); "
        "later frames get no row and one table.packets_truncated warning says so, every other "
        "table still covers them; 'none' keeps all",
    )
    p.add_argument(
        "--max-events-per-connection",
        type=_rows_or_none,
        metavar="N|none",
        default=DEFAULT_MAX_EVENTS_PER_CONNECTION,
        help="per-record rows (TLS records, HTTP/2 frames, SSE events, WebSocket frames and "
        "messages) kept per connection; past N one table.events_truncated warning "
        "(default: 1,000,000; 'none' keeps all)",
    )
    p.add_argument(
        "--max-record-rows",
        type=_rows_or_none,
        metavar="N|none",
        default=DEFAULT_MAX_RECORD_ROWS,
        help="rows kept in each per-record table (tls_records, http2_frames, sse_events, "
        "ws_frames, ws_messages); past N one table.records_truncated warning per table "
        "(default: 2,000,000; 'none' keeps all)",
    )
    p.add_argument(
        "--max-decompressed-bytes",
        type=_size,
        metavar="SIZE",
        help="stop reading after SIZE bytes of the (decompressed) capture, with a "
        "capture.decompression_limit warning: a guard against decompression bombs "
        "(e.g. 8G; default: no limit)",
    )
    p.add_argument(
        "--compare",
        metavar="B.pcapng",
        help="compare the capture with a second one (e.g. HTTP/1.1 vs HTTP/2, before vs "
        "after): one page with the comparison table first, then both reports "
        "(default output: <A stem>-vs-<B stem>.report.html); --keylog applies to both",
    )
    p.add_argument(
        "--labels",
        metavar="A,B",
        help="with --compare: names of the two captures in the table (default: A,B)",
    )
    p.add_argument(
        "--max-table-rows",
        type=_positive_int,
        metavar="N",
        help="rows of one report table embedded in the page (default: 50,000); a longer "
        "table says 'showing first N of M rows' (every row is in --export and the DataFrames)",
    )
    sub = p.add_argument_group(
        "subset (the report, --json and --export are about the matching part only; filters "
        "combine with AND)"
    )
    sub.add_argument("--host", metavar="H",
                     help="connections with this IP address on either side, or whose TLS SNI / "
                     "HTTP Host / :authority is this name (globs like '*.example.com' allowed)")
    sub.add_argument("--port", type=_port, metavar="P", help="TCP connections with this port on "
                     "either side (and UDP packets with it)")
    sub.add_argument("--sni", metavar="S",
                     help="TLS connections whose server name (SNI) is S (exact, or a glob like "
                     "'*.openai.com'; case-insensitive)")
    sub.add_argument("--stream", type=int, action="append", metavar="N",
                     help="Wireshark tcp.stream N; repeat for several")
    sub.add_argument("--start", metavar="T",
                     help="from T: seconds after the first frame (e.g. 12.5) or an ISO 8601 time "
                     "(e.g. 2026-11-29T21:31:14Z, naive = UTC); connections overlapping the "
                     "window are kept whole, packets and TCP events are cut to it")
    sub.add_argument("--end", metavar="T", help="until T (same forms as --start)")
    p.add_argument(
        "-q", "--quiet", action="store_true",
        help="no progress bar, no final summary line and no notes (a key log found beside "
        "the capture, TLS not decrypted for want of a key log); warnings and errors still print"
    )
    p.add_argument("--version", action="version",
                   version=f"%(prog)s {__version__} ({_accel.summary()})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run pcap-report with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with 2 on bad usage
    err = sys.stderr
    for opt in ("start", "end"):
        value = getattr(args, opt)
        if value is not None:
            try:
                parse_time(value, 0, f"--{opt}")
            except ValueError as exc:
                parser.error(str(exc))
    if args.compare is not None:
        if len(args.capture) != 1 or os.path.isdir(args.capture[0]):
            parser.error("--compare takes exactly one other capture: pcap-report A --compare B")
        if args.capture[0] == STDIN and args.compare == STDIN:
            parser.error("standard input (-) can be only one of the two captures")
        return _main_compare(args, err)
    if args.labels is not None:
        parser.error("--labels goes with --compare")
    if len(args.capture) > 1 or os.path.isdir(args.capture[0]):
        if STDIN in args.capture:
            parser.error("standard input (-) is read on its own: pcap-report - [options]")
        return _main_many(args, err)
    args.capture = args.capture[0]
    if args.capture == STDIN and _isatty(sys.stdin):
        parser.error("standard input (-) is a terminal: pipe a capture into it, e.g. "
                     "tcpdump -w - | pcap-report -")
    if args.capture == STDIN and args.workers is not None and args.workers > 1:
        parser.error("--workers N > 1 reads the capture once per process, which standard input "
                     "cannot do: save it to a file first, or leave out --workers")
    out = Path(args.output) if args.output else default_output(args.capture)
    outputs: list[Labelled] = [("-o" if args.output else "the report", out)]
    if args.json_path:
        outputs.append(("--json", args.json_path))
    keylog = _keylog_for(args, args.capture)
    code = _check(err, outputs + _export_outputs(args), _inputs(args, [args.capture], [keylog]),
                  _export_folders(args))
    if code:
        return code
    found = {args.capture: keylog}
    code = _announce_keylogs(err, args, found)
    if code:
        return code
    keylog = found[args.capture]  # (None when the one found beside it cannot be read)

    source: Any = sys.stdin.buffer if args.capture == STDIN else args.capture
    kw = {**_load_kwargs(args), "keylog": keylog}
    bar, progress = _progress(err, args.capture, enabled=not args.quiet and _isatty(err))
    try:
        with _live_interrupt(err, args.capture):
            if args.workers is not None and args.workers > 1:
                cap = load(source, workers=args.workers, progress=progress, **kw)
            else:
                cap = load(source, progress=progress, **kw)
    except (PcapToolsError, OSError, KeyboardInterrupt) as exc:
        if bar is not None:
            bar.close()  # clear the bar before the error line
        if isinstance(exc, KeyboardInterrupt):
            return _interrupted(err)
        return _fail(err, _message(exc, args.capture))
    if bar is not None:
        bar.close()
    _say_decryption(err, cap, quiet=args.quiet)
    try:
        cap = _subset(cap, args, what=args.capture)
    except ValueError as exc:
        return _usage(err, str(exc))

    try:
        head = _headline(cap)
        write_report(cap, out, title=args.title, **_report_kw(args))
        if args.json_path:
            _write_json(args.json_path, head)
        if args.export:
            _export(cap, args)
    except (OSError, OutputPathError) as exc:
        return _fail(err, _message(exc, getattr(exc, "filename", None) or out))

    if not args.quiet:
        sub = f" (subset: {head['subset']})" if "subset" in head else ""
        print(
            f"analysed {head['frames']:,} frames, {_n(head['tcp_connections'], 'connection')}, "
            f"{_n(head['warnings'], 'warning')}{sub} -> {out}",
            file=err,
        )
    return 0


def compare_output(a: str | Path, b: str | Path) -> Path:
    """``<A stem>-vs-<B stem>.report.html`` in the working directory."""
    sa = default_output(a).name.removesuffix(".report.html")
    sb = default_output(b).name.removesuffix(".report.html")
    return Path(f"{sa}-vs-{sb}.report.html")


def _main_compare(args: argparse.Namespace, err: TextIO) -> int:
    """``pcap-report A --compare B``: one page, the comparison table first."""
    from .analyses.compare import compare
    from .report import write_comparison

    paths = (args.capture[0], args.compare)
    out = Path(args.output) if args.output else compare_output(*paths)
    outputs: list[Labelled] = [("-o" if args.output else "the report", out)]
    if args.json_path:
        outputs.append(("--json", args.json_path))
    keylogs = {p: _keylog_for(args, p) for p in paths}
    code = _check(err, outputs, _inputs(args, list(paths), list(keylogs.values())))
    if code:
        return code
    labels = ("A", "B")
    if args.labels:
        names = [x.strip() for x in args.labels.split(",")]
        if len(names) != 2 or not all(names):
            return _fail(err, f"--labels {args.labels!r}: give two names, e.g. --labels h1,h2")
        labels = (names[0], names[1])
    code = _announce_keylogs(err, args, keylogs)
    if code:
        return code
    caps = []
    for path, label in zip(paths, labels, strict=True):
        bar, progress = _progress(err, path, enabled=not args.quiet and _isatty(err))
        try:
            source: Any = sys.stdin.buffer if path == STDIN else path
            caps.append(load(source, progress=progress,
                             **{**_load_kwargs(args), "keylog": keylogs[path]}))
        except (PcapToolsError, OSError) as exc:
            if bar is not None:
                bar.close()
            return _fail(err, _message(exc, path))
        if bar is not None:
            bar.close()
        _say_decryption(err, caps[-1], quiet=args.quiet, name=label)
    try:
        a, b = (_subset(c, args, what=p) for c, p in zip(caps, paths, strict=True))
    except ValueError as exc:
        return _usage(err, str(exc))
    try:
        write_comparison(a, b, out, labels=labels, title=args.title, **_report_kw(args))
        if args.json_path:
            table = compare(a, b).astype(object)
            rows = table.where(table.notna(), None).to_dict("records")
            doc = {"labels": list(labels), "a": _headline(a), "b": _headline(b),
                   "comparison": rows}
            _write_json(args.json_path, doc)
    except (OSError, OutputPathError) as exc:
        return _fail(err, _message(exc, getattr(exc, "filename", None) or out))
    if not args.quiet:
        print(f"compared {Path(paths[0]).name} ({labels[0]}) with {Path(paths[1]).name} "
              f"({labels[1]}) -> {out}", file=err)
    return 0


def _export(cap: Any, args: argparse.Namespace) -> None:
    from . import export

    if args.export_format == "csv":
        export.to_csv(cap, args.export)
    else:
        export.to_parquet(cap, args.export)


def _main_many(args: argparse.Namespace, err: TextIO) -> int:
    """Several captures: one report each, index.html, optional merged JSON / export."""
    from .many import capture_files, capture_names, load_many

    files = capture_files(args.capture)
    if not files:
        return _fail(err, f"{', '.join(args.capture)}: no capture files found")
    out_dir = Path(args.output) if args.output else Path("pcap-reports")
    outputs: list[Labelled] = [("the index", out_dir / "index.html")]
    outputs += [(f"the report of {name}", out_dir / _report_name(name))
                for name in capture_names(files)]
    if args.json_path:
        outputs.append(("--json", args.json_path))
    keylogs = {str(f): _keylog_for(args, f) for f in files}
    code = _check(err, outputs + _export_outputs(args),
                  _inputs(args, files, list(keylogs.values())),
                  [("-o" if args.output else "the report folder", out_dir),
                   *_export_folders(args)])
    if code:
        return code
    code = _announce_keylogs(err, args, keylogs)
    if code:
        return code
    bar = None
    progress = None
    if not args.quiet and _isatty(err):
        from tqdm import tqdm

        bar = tqdm(total=len(files), unit="file", file=err, desc="reading", leave=False)

        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)

    try:
        kw = _load_kwargs(args)
        if not args.keylog:
            kw["keylogs"] = {f: k for f, k in keylogs.items() if k is not None}
        many = load_many(files, workers=args.workers, progress=progress, **kw)
    except (PcapToolsError, OSError, ValueError) as exc:
        if bar is not None:
            bar.close()
        return _fail(err, _message(exc, args.capture[0]))
    if bar is not None:
        bar.close()
    for why in many.errors.values():
        print(f"{PROG}: error: {why}", file=err)
    for name, c in many.captures.items():
        _say_decryption(err, c, quiet=args.quiet, name=name)
    if _filters(args):
        from .many import ManyCaptures

        try:
            subs = {n: _subset(c, args, what=None) for n, c in many.captures.items()}
            if subs and all(_holds_nothing(c) for c in subs.values()):
                # nothing anywhere: name the filter, as for one capture (the first one's words)
                first = next(iter(many.captures.values()))
                raise ValueError(_why_empty(first, args, f"any of the {len(subs)} captures",
                                            hint=False))
            many = ManyCaptures(subs, paths=many.paths, errors=many.errors)
        except ValueError as exc:
            return _usage(err, str(exc))

    entries: list[dict[str, Any]] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, cap in many.captures.items():
            head = _headline(cap)
            report = out_dir / _report_name(name)
            title = f"{args.title}: {name}" if args.title else None
            facts = write_report(cap, report, title=title, **_report_kw(args))
            entries.append({"capture": name, "report": report.name, **head, **facts})
        index = out_dir / "index.html"
        with atomic_open(index, "w") as f:
            f.write(_index_html(entries, many.errors, args.title))
        if args.json_path:
            _write_json(args.json_path, {"captures": entries, "errors": many.errors})
        if args.export:
            _export(many, args)
    except (OSError, OutputPathError) as exc:
        return _fail(err, _message(exc, getattr(exc, "filename", None) or out_dir))

    if not args.quiet:
        frames = sum(e["frames"] for e in entries)
        conns = sum(e["tcp_connections"] for e in entries)
        print(
            f"analysed {_n(len(entries), 'capture')}, {frames:,} frames, "
            f"{_n(conns, 'connection')} -> {index}",
            file=err,
        )
    return 1 if many.errors else 0


def _index_html(entries: list[dict[str, Any]], errors: dict[str, str], title: str | None) -> str:
    """A small self-contained page: one row per capture with a link to its report, its
    headline counts and what its report's checklist answers first."""
    import html as h

    cols = (("frames", "frames"), ("duration_s", "duration s"),
            ("tcp_connections", "TCP connections"), ("lost_segments", "segments lost"),
            ("retransmitted_segments", "retransmissions (tshark)"),
            ("ttft_median_ms", "TTFT median ms"), ("tls_decrypted", "TLS decrypted"),
            ("unclean_connections", "unclean connections"),
            ("missed_heartbeats", "missed heartbeats"), ("warnings", "warnings"))
    head = "".join(f"<th>{h.escape(label)}</th>" for _, label in cols)
    ncols = len(cols)
    rows = []
    for e in entries:
        cells = []
        for key, _ in cols:
            v = e.get(key)
            if key == "tls_decrypted" and v is not None:  # "2 of 3" sessions
                v = f"{v:,} of {e['tls_sessions']:,}"
            elif key == "ttft_median_ms" and v is not None:
                v = fmt_ms(v).removesuffix(" ms")
            cells.append("<td class=n>\u2013</td>" if v is None  # does not apply
                         else f"<td class=n>{v:,.3f}</td>" if isinstance(v, float)
                         else f"<td class=n>{v:,}</td>" if isinstance(v, int)
                         else f"<td class=n>{h.escape(str(v))}</td>")
        rows.append(f"<tr><td><a href=\"{h.escape(e['report'])}\">{h.escape(e['capture'])}</a>"
                    f"</td>{''.join(cells)}</tr>")
    for name, why in errors.items():
        rows.append(f"<tr><td>{h.escape(name)}</td><td colspan={ncols}>unreadable: "
                    f"{h.escape(why)}</td></tr>")
    t = h.escape(title or "pcap-report")
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        f"<title>{t}: {len(entries)} captures</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.3em .6em}td.n{text-align:right}"
        f"</style></head><body><h1>{t}</h1><p>{len(entries)} captures, one report each.</p>"
        f"<table><tr><th>capture</th>{head}</tr>{''.join(rows)}</table></body></html>\n"
    )


# -- helpers ---------------------------------------------------------------------------------------


def _report_name(capture_name: str) -> Path:
    """The file name of one capture's report among several."""
    return default_output(capture_name.replace(os.sep, "__"))


def _write_json(path: str | os.PathLike[str], doc: Any) -> None:
    with atomic_open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def _inputs(args: argparse.Namespace, captures: Sequence[str | os.PathLike[str]],
            keylogs: Sequence[str | None] = ()) -> list[Labelled]:
    """The files no output may overwrite: the captures (not stdin) and the key logs (given
    or found beside a capture)."""
    out: list[Labelled] = [("the capture", c) for c in captures if str(c) != STDIN]
    if args.keylog:
        out.append(("the key log", args.keylog))
    out += [("the key log", k) for k in dict.fromkeys(keylogs) if k and k != args.keylog]
    return out


def _export_outputs(args: argparse.Namespace) -> list[Labelled]:
    if not args.export:
        return []
    suffix = ".csv" if args.export_format == "csv" else ".parquet"
    return [("--export", p) for p in export_files(args.export, list(TABLES), suffix)]


def _export_folders(args: argparse.Namespace) -> list[Labelled]:
    return [("--export", args.export)] if args.export else []


def _check(err: TextIO, outputs: Sequence[Labelled], inputs: Sequence[Labelled],
           folders: Sequence[Labelled] = ()) -> int:
    """0 when the outputs are safe to write, else 2 (bad usage) after one error line: an
    output that is an input or another output, or one that cannot be written (a missing or
    read-only folder, a device), found before any capture is read."""
    try:
        check_outputs(outputs, inputs, folders=folders)
    except OutputPathError as exc:
        return _usage(err, str(exc))
    return 0


_FILTERS = ("host", "port", "sni", "stream", "start", "end")


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    """The subset options given on the command line, as ``Capture.subset`` keywords."""
    return {k: getattr(args, k) for k in _FILTERS if getattr(args, k, None) is not None}


def _subset(cap: Capture, args: argparse.Namespace, *, what: str | None) -> Capture:
    """``cap`` cut to the subset options (unchanged without any). Raises ValueError for a bad
    value and, when ``what`` names the capture, for a subset that holds nothing (naming the
    filter that matched nothing: ``--help`` promises exit status 2)."""
    kw = _filters(args)
    if not kw:
        return cap
    sub = subset(cap, **kw)
    if what is not None and _holds_nothing(sub) and not _holds_nothing(cap):
        raise ValueError(_why_empty(cap, args, _display_name(what)))
    return sub


def _display_name(capture: str) -> str:
    return "standard input" if capture == STDIN else Path(capture).name


def _holds_nothing(cap: Capture) -> bool:
    """No row in any table (file-level warnings aside): what a filter that matched nothing
    leaves."""
    return all(len(df) == 0 for name, df in cap.tables.items() if name != "warnings")


def _filter_groups(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """The subset options given, as (option text, subset keywords): --start/--end together."""
    groups: list[tuple[str, dict[str, Any]]] = []
    for k in ("host", "port", "sni"):
        v = getattr(args, k, None)
        if v is not None:
            groups.append((f"--{k} {v}", {k: v}))
    if args.stream:
        groups.append((" ".join(f"--stream {n}" for n in args.stream), {"stream": args.stream}))
    window = {k: getattr(args, k) for k in ("start", "end") if getattr(args, k) is not None}
    if window:
        groups.append((" ".join(f"--{k} {v}" for k, v in window.items()), window))
    return groups


def _why_empty(cap: Capture, args: argparse.Namespace, where: str, *, hint: bool = True) -> str:
    """Which subset option matched nothing in ``cap`` (each one tried on its own), and (with
    ``hint``) what the capture holds instead."""
    groups = _filter_groups(args)
    alone = [(text, kw) for text, kw in groups if _holds_nothing(subset(cap, **kw))]
    if not alone:
        return (f"{' and '.join(t for t, _ in groups)} match nothing together in {where} "
                "(each matches something on its own)")
    parts = [f"{text} matches nothing in {where}{_what_there_is(cap, kw) if hint else ''}"
             for text, kw in alone]
    return "; ".join(parts)


def _what_there_is(cap: Capture, kw: dict[str, Any]) -> str:
    """A hint after "matches nothing": the values the capture does hold for that filter."""
    conns = cap.connections
    if "stream" in kw:
        if not len(conns):
            return " (it holds no TCP connection)"
        lo, hi = int(conns["tcp_stream"].min()), int(conns["tcp_stream"].max())
        return f" (its tcp.stream numbers are {lo} to {hi})" if lo != hi else \
            f" (its only tcp.stream is {lo})"
    if "sni" in kw:
        names = sorted({str(x) for x in cap.tls_handshakes["sni"].dropna().tolist()})
        if not names:
            return " (no TLS connection in it has a server name)"
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        return f" (server names seen: {shown})"
    if "start" in kw or "end" in kw:
        d = cap.summary.duration_s
        return "" if d is None else f" (its frames span 0 to {d:,.3f} s after the first one)"
    if "port" in kw:
        return " (no TCP connection or UDP packet uses that port)"
    return " (no address, server name, Host or :authority matches it)"


def _headline(cap: Capture) -> dict[str, Any]:
    """headline(cap), with the subset filter when one was applied."""
    head = headline(cap)
    sub = cap.summary.extra.get("subset")
    if isinstance(sub, str):
        head["subset"] = sub
        head["subset_display_filter"] = cap.summary.extra.get("subset_display_filter")
    return head


def _report_kw(args: argparse.Namespace) -> dict[str, Any]:
    return {} if args.max_table_rows is None else {"max_table_rows": args.max_table_rows}


KEYLOG_SUFFIXES = (".keys", ".keys.log", ".keylog")
"""key log names looked for beside a capture ``X.pcapng``: ``X.keys``, ``X.keys.log``,
``X.keylog`` (the first that is a file wins)"""


def keylog_beside(capture: str | os.PathLike[str]) -> Path | None:
    """The key log next to ``capture``, or None: ``X.keys``, ``X.keys.log`` or ``X.keylog``
    where ``X`` is the capture's name without its capture and compression suffixes
    (``run.pcapng``, ``run.pcap.gz`` -> ``run.keys``)."""
    if str(capture) == STDIN:
        return None
    p = Path(capture)
    stem = default_output(p.name).name.removesuffix(".report.html")
    for suffix in KEYLOG_SUFFIXES:
        k = p.with_name(stem + suffix)
        if k.is_file():
            return k
    return None


def _keylog_for(args: argparse.Namespace, capture: str | os.PathLike[str]) -> str | None:
    """--keylog, else (unless --no-auto-keylog) the key log found beside the capture."""
    if args.keylog:
        return str(args.keylog)
    if args.no_auto_keylog:
        return None
    found = keylog_beside(capture)
    return None if found is None else str(found)


def _announce_keylogs(err: TextIO, args: argparse.Namespace,
                      keylogs: dict[str, str | None]) -> int:
    """Say which key logs found beside the captures are used (unless --quiet), and read each
    key log once to warn when it holds no key log line at all. 0, or 1 after an error line
    when --keylog cannot be read (before the long analysis); a key log found beside a
    capture that cannot be read is left out of ``keylogs`` (set to None) with a warning."""
    from .diagnostics import Diagnostics
    from .errors import KeylogError
    from .protocols.tls.keylog import KeyLog

    for k in dict.fromkeys(v for v in keylogs.values() if v is not None):
        try:
            kl = KeyLog.from_file(k, Diagnostics(max_rows_per_code=0))
        except KeylogError as exc:
            if k == args.keylog:
                return _fail(err, _message(exc, k))
            # one found beside a capture that cannot be read: not used, and said
            print(f"{PROG}: warning: {_message(exc, k)}: not used", file=err)
            for c, v in keylogs.items():
                if v == k:
                    keylogs[c] = None
            continue
        if kl:
            continue
        how = "--keylog" if k == args.keylog else "the key log"
        if kl.ignored_lines:
            what = (f"only entries pcaptools does not use ({kl.ignored_lines:,} RSA, "
                    "EXPORTER_SECRET...)")
        elif kl.bad_lines:
            what = (f"none of them a key log line (CLIENT_RANDOM or a TLS 1.3 secret; "
                    f"{kl.bad_lines:,} tls.keylog_bad_line warnings)")
        else:
            what = "none of them a key log line (only comments and blank lines)"
        print(f"{PROG}: warning: {how} {k}: {kl.read_lines:,} "
              f"line{'' if kl.read_lines == 1 else 's'} read, {what}: it decrypts nothing",
              file=err)
    found = {c: k for c, k in keylogs.items() if k is not None and k != args.keylog}
    if found and not args.quiet:
        if len(found) == 1:
            (c, k), = found.items()
            print(f"{PROG}: using the key log found beside {_display_name(c)}: {k} "
                  "(--no-auto-keylog: do not)", file=err)
        else:
            print(f"{PROG}: using the key logs found beside {len(found)} of the "
                  f"{len(keylogs)} captures (X.keys next to X.pcapng; --no-auto-keylog: do "
                  "not)", file=err)
    return 0


#: decrypt_status values that are a failure to decrypt: said on stderr even with --quiet
_DECRYPT_FAILURES = frozenset({"no_keys", "failed", "partial", "unsupported_cipher"})


def _say_decryption(err: TextIO, cap: Capture, *, quiet: bool, name: str | None = None) -> None:
    """The report's sentences about the TLS sessions not decrypted, on stderr too (one line
    each, the capture's name first with several): with ``quiet`` only when some failed
    (no key for them, bad keys, unsupported cipher), not for "no key log" alone."""
    from .analyses.summary import tls_decrypt_sentences

    tls = cap.tables.get("tls_handshakes")
    if tls is None or not len(tls):
        return
    counts = {str(k): int(v) for k, v in tls["decrypt_status"].value_counts().items() if v}
    if quiet and not _DECRYPT_FAILURES.intersection(counts):
        return
    where = f"{name}: " if name else ""
    for sentence in tls_decrypt_sentences(counts):
        print(f"{PROG}: {where}{sentence}", file=err)


def _load_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The load() options the command line sets (the same for every capture it reads)."""
    return {"keylog": args.keylog, "packets": not args.no_packets,
            "show_secrets": args.show_secrets, "max_packet_rows": args.max_packet_rows,
            "max_events_per_connection": args.max_events_per_connection,
            "max_record_rows": args.max_record_rows,
            "max_decompressed_bytes": args.max_decompressed_bytes,
            "check_checksums": args.check_checksums}


def _rows_or_none(text: str) -> int | None:
    return None if text.strip().lower() == "none" else _positive_int(text)


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _size(text: str) -> int:
    """``123``, ``64K``, ``500M``, ``8G``, ``1T`` (binary units, optional trailing B)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if m is None or int(m.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 500M or 8G")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} is not at least 1")
    return n


def _port(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{n} is not in 0..65535")
    return n


def _usage(err: TextIO, message: str) -> int:
    """A bad option value found after reading the capture: exit status 2, like argparse."""
    print(f"{PROG}: error: {message}", file=err)
    return 2


def _fail(err: TextIO, message: str) -> int:
    print(f"{PROG}: error: {message}", file=err)
    return 1


def _message(exc: BaseException, path: object) -> str:
    """One line: ``<path>: <reason>`` for OSError, the exception text otherwise."""
    if isinstance(exc, OSError) and not isinstance(exc, PcapToolsError):
        reason = exc.strerror or str(exc)
        return f"{path}: {reason}"
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


@contextlib.contextmanager
def _live_interrupt(err: TextIO, capture: str) -> Iterator[None]:
    """While standard input or a FIFO is read (``tcpdump -w - | pcap-report -``), the first
    Ctrl-C does not stop pcap-report: the terminal sent it to tcpdump too, which flushes and
    closes the pipe, and the report of everything it wrote is then made as at any end of
    the stream. A second Ctrl-C stops pcap-report without a report (exit 130). Only in the
    main thread, and only over Python's default handler (one set by a caller is kept)."""
    if capture != STDIN and not is_stream(capture):
        yield
        return
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def first(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print(f"{PROG}: interrupted: the report is written when the stream ends (a writer in "
              "this terminal, such as tcpdump, got the Ctrl-C too); Ctrl-C again to stop "
              "without a report", file=err)

    signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted(err: TextIO) -> int:
    print(f"{PROG}: interrupted: no report written", file=err)
    return 130


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _progress(
    err: TextIO, path: str, *, enabled: bool
) -> tuple[Any, Callable[[int, int], None] | None]:
    """A tqdm bar on ``err`` (bytes of the capture file read) and the ``load(progress=...)``
    callback that drives it."""
    if not enabled:
        return None, None
    from tqdm import tqdm

    try:
        if path == STDIN:
            raise ValueError(path)  # (not a file named "-")
        st = os.stat(path)
        size: int | None = st.st_size if stat.S_ISREG(st.st_mode) else None  # (a FIFO: unknown)
    except (OSError, ValueError):
        size = None  # stdin; or load() will say why
    bar = tqdm(
        total=size,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=err,
        desc="reading",
        leave=False,
        dynamic_ncols=True,
        mininterval=0.2,
    )

    def progress(done: int, total: int) -> None:
        if total and bar.total != total:
            bar.total = total
            bar.refresh()
        if done > bar.n:
            bar.update(done - bar.n)

    return bar, progress


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
