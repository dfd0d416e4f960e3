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
from .analyses.summary import headline
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
        decrypts TLS with the key log your client wrote (SSLKEYLOGFILE=sslkeys.txt)
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
before reading; a subset option that does not fit the capture, e.g. --start after --end).
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
        "(Decryption Secrets Blocks) are always used",
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
        type=int,
        metavar="N",
        help="processes to use: with several captures, files read in parallel (default: one "
        "per core); with one capture, N > 1 splits its connections' payload parsing over N "
        "processes (default: 1; see pcaptools.parallel)",
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
        help="rows of one report table embedded in the page (default: 200,000); a longer "
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
        "-q", "--quiet", action="store_true", help="no progress bar and no final summary line"
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
    code = _check(err, outputs + _export_outputs(args), _inputs(args, [args.capture]),
                  _export_folders(args))
    if code:
        return code

    source: Any = sys.stdin.buffer if args.capture == STDIN else args.capture
    bar, progress = _progress(err, args.capture, enabled=not args.quiet and _isatty(err))
    try:
        with _live_interrupt(err, args.capture):
            if args.workers is not None and args.workers > 1:
                cap = load(source, workers=args.workers, **_load_kwargs(args))
            else:
                cap = load(source, progress=progress, **_load_kwargs(args))
    except (PcapToolsError, OSError, KeyboardInterrupt) as exc:
        if bar is not None:
            bar.close()  # clear the bar before the error line
        if isinstance(exc, KeyboardInterrupt):
            return _interrupted(err)
        return _fail(err, _message(exc, args.capture))
    if bar is not None:
        bar.close()
    try:
        cap = _subset(cap, args)
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
    code = _check(err, outputs, _inputs(args, list(paths)))
    if code:
        return code
    caps = []
    for path in paths:
        bar, progress = _progress(err, path, enabled=not args.quiet and _isatty(err))
        try:
            source: Any = sys.stdin.buffer if path == STDIN else path
            caps.append(load(source, progress=progress, **_load_kwargs(args)))
        except (PcapToolsError, OSError) as exc:
            if bar is not None:
                bar.close()
            return _fail(err, _message(exc, path))
        if bar is not None:
            bar.close()
    try:
        a, b = (_subset(c, args) for c in caps)
    except ValueError as exc:
        return _usage(err, str(exc))
    labels = ("A", "B")
    if args.labels:
        names = [x.strip() for x in args.labels.split(",")]
        if len(names) != 2 or not all(names):
            return _fail(err, f"--labels {args.labels!r}: give two names, e.g. --labels h1,h2")
        labels = (names[0], names[1])
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
    code = _check(err, outputs + _export_outputs(args), _inputs(args, files),
                  [("-o" if args.output else "the report folder", out_dir),
                   *_export_folders(args)])
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
        many = load_many(files, workers=args.workers, progress=progress, **_load_kwargs(args))
    except (PcapToolsError, OSError, ValueError) as exc:
        if bar is not None:
            bar.close()
        return _fail(err, _message(exc, args.capture[0]))
    if bar is not None:
        bar.close()
    for why in many.errors.values():
        print(f"{PROG}: error: {why}", file=err)
    if _filters(args):
        from .many import ManyCaptures

        try:
            many = ManyCaptures({n: _subset(c, args) for n, c in many.captures.items()},
                                paths=many.paths, errors=many.errors)
        except ValueError as exc:
            return _usage(err, str(exc))

    entries: list[dict[str, Any]] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, cap in many.captures.items():
            head = _headline(cap)
            report = out_dir / _report_name(name)
            title = f"{args.title}: {name}" if args.title else None
            write_report(cap, report, title=title, **_report_kw(args))
            entries.append({"capture": name, "report": report.name, **head})
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
    """A small self-contained page: one row per capture with a link to its report."""
    import html as h

    cols = (("frames", "frames"), ("duration_s", "duration s"),
            ("tcp_connections", "TCP connections"), ("lost_segments", "segments lost"),
            ("retransmitted_segments", "retransmissions (tshark)"),
            ("warnings", "warnings"))
    head = "".join(f"<th>{h.escape(label)}</th>" for _, label in cols)
    rows = []
    for e in entries:
        cells = []
        for key, _ in cols:
            v = e.get(key)
            cells.append(f"<td class=n>{v:,.3f}</td>" if isinstance(v, float)
                         else f"<td class=n>{v:,}</td>" if isinstance(v, int)
                         else f"<td>{h.escape(str(v))}</td>")
        rows.append(f"<tr><td><a href=\"{h.escape(e['report'])}\">{h.escape(e['capture'])}</a>"
                    f"</td>{''.join(cells)}</tr>")
    for name, why in errors.items():
        rows.append(f"<tr><td>{h.escape(name)}</td><td colspan={len(cols)}>unreadable: "
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


def _inputs(args: argparse.Namespace, captures: Sequence[str | os.PathLike[str]]
            ) -> list[Labelled]:
    """The files no output may overwrite: the captures (not stdin) and the key log."""
    out: list[Labelled] = [("the capture", c) for c in captures if str(c) != STDIN]
    if args.keylog:
        out.append(("the key log", args.keylog))
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


def _subset(cap: Capture, args: argparse.Namespace) -> Capture:
    """``cap`` cut to the subset options (unchanged without any). Raises ValueError."""
    kw = _filters(args)
    return subset(cap, **kw) if kw else cap


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


def _load_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The load() options the command line sets (the same for every capture it reads)."""
    return {"keylog": args.keylog, "packets": not args.no_packets,
            "show_secrets": args.show_secrets, "max_packet_rows": args.max_packet_rows,
            "max_events_per_connection": args.max_events_per_connection,
            "max_record_rows": args.max_record_rows,
            "max_decompressed_bytes": args.max_decompressed_bytes}


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
