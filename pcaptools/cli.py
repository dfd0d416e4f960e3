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

Exit status: 0 when the report was written (even if the capture had warnings), 1 when the
capture cannot be read or an output cannot be written (one ``pcap-report: error: ...`` line on
stderr, no traceback), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .analyses.summary import headline
from .capture import load
from .errors import PcapToolsError
from .report import write_report

PROG = "pcap-report"

_COMPRESSED = (".gz", ".bz2", ".xz", ".zst")
_CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")

EPILOG = """\
examples:
  pcap-report capture.pcapng
        writes capture.report.html in the current directory
  pcap-report capture.pcap.gz -o /tmp/report.html --json /tmp/summary.json
        compressed captures are read directly; --json also writes the headline numbers
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

exit status: 0 report written (warnings included), 1 capture unreadable (with several
captures: any of them; the others' reports are still written) or output not writable,
2 bad usage.
"""


def default_output(capture: str | Path) -> Path:
    """``<capture stem>.report.html`` in the working directory: ``x.pcapng`` and
    ``x.pcap.gz`` both give ``x.report.html``."""
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
        help="capture file to analyse; several files or a directory give one report per "
        "capture and an index",
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
        help="processes reading captures in parallel when there are several (default: one "
        "per core)",
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
        "-q", "--quiet", action="store_true", help="no progress bar and no final summary line"
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run pcap-report with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with 2 on bad usage
    err = sys.stderr
    if args.compare is not None:
        if len(args.capture) != 1 or os.path.isdir(args.capture[0]):
            parser.error("--compare takes exactly one other capture: pcap-report A --compare B")
        return _main_compare(args, err)
    if args.labels is not None:
        parser.error("--labels goes with --compare")
    if len(args.capture) > 1 or os.path.isdir(args.capture[0]):
        return _main_many(args, err)
    args.capture = args.capture[0]
    out = Path(args.output) if args.output else default_output(args.capture)

    bar, progress = _progress(err, args.capture, enabled=not args.quiet and _isatty(err))
    try:
        cap = load(args.capture, keylog=args.keylog, packets=not args.no_packets, progress=progress,
                   show_secrets=args.show_secrets)
    except (PcapToolsError, OSError) as exc:
        if bar is not None:
            bar.close()  # clear the bar before the error line
        return _fail(err, _message(exc, args.capture))
    if bar is not None:
        bar.close()

    try:
        head = headline(cap)
        write_report(cap, out, title=args.title)
        if args.json_path:
            with open(args.json_path, "w", encoding="utf-8") as f:
                json.dump(head, f, indent=2)
                f.write("\n")
        if args.export:
            _export(cap, args)
    except OSError as exc:
        return _fail(err, _message(exc, getattr(exc, "filename", None) or out))

    if not args.quiet:
        print(
            f"analysed {head['frames']:,} frames, {_n(head['tcp_connections'], 'connection')}, "
            f"{_n(head['warnings'], 'warning')} -> {out}",
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
    caps = []
    for path in paths:
        bar, progress = _progress(err, path, enabled=not args.quiet and _isatty(err))
        try:
            caps.append(load(path, keylog=args.keylog, packets=not args.no_packets,
                             progress=progress, show_secrets=args.show_secrets))
        except (PcapToolsError, OSError) as exc:
            if bar is not None:
                bar.close()
            return _fail(err, _message(exc, path))
        if bar is not None:
            bar.close()
    a, b = caps
    labels = ("A", "B")
    if args.labels:
        names = [x.strip() for x in args.labels.split(",")]
        if len(names) != 2 or not all(names):
            return _fail(err, f"--labels {args.labels!r}: give two names, e.g. --labels h1,h2")
        labels = (names[0], names[1])
    try:
        write_comparison(a, b, out, labels=labels, title=args.title)
        if args.json_path:
            table = compare(a, b).astype(object)
            rows = table.where(table.notna(), None).to_dict("records")
            doc = {"labels": list(labels), "a": headline(a), "b": headline(b), "comparison": rows}
            with open(args.json_path, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
    except OSError as exc:
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
    from .many import capture_files, load_many

    files = capture_files(args.capture)
    if not files:
        return _fail(err, f"{', '.join(args.capture)}: no capture files found")
    out_dir = Path(args.output) if args.output else Path("pcap-reports")
    bar = None
    progress = None
    if not args.quiet and _isatty(err):
        from tqdm import tqdm

        bar = tqdm(total=len(files), unit="file", file=err, desc="reading", leave=False)

        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)

    try:
        many = load_many(files, workers=args.workers, keylog=args.keylog,
                         packets=not args.no_packets, progress=progress,
                         show_secrets=args.show_secrets)
    except (PcapToolsError, OSError, ValueError) as exc:
        if bar is not None:
            bar.close()
        return _fail(err, _message(exc, args.capture[0]))
    if bar is not None:
        bar.close()
    for why in many.errors.values():
        print(f"{PROG}: error: {why}", file=err)

    entries: list[dict[str, Any]] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, cap in many.captures.items():
            head = headline(cap)
            report = out_dir / default_output(name.replace(os.sep, "__"))
            title = f"{args.title}: {name}" if args.title else None
            write_report(cap, report, title=title)
            entries.append({"capture": name, "report": report.name, **head})
        index = out_dir / "index.html"
        index.write_text(_index_html(entries, many.errors, args.title), encoding="utf-8")
        if args.json_path:
            with open(args.json_path, "w", encoding="utf-8") as f:
                json.dump({"captures": entries, "errors": many.errors}, f, indent=2)
                f.write("\n")
        if args.export:
            _export(many, args)
    except OSError as exc:
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
            ("tcp_connections", "TCP connections"), ("retransmitted_segments", "retransmissions"),
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
        size: int | None = os.path.getsize(path)
    except OSError:
        size = None  # load() will say why
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
