"""``pcap-report``: read a capture, write the offline HTML report (and optionally the headline
numbers as JSON).

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

exit status: 0 report written (warnings included), 1 capture unreadable or output not
writable, 2 bad usage.
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
    p.add_argument("capture", help="capture file to analyse")
    p.add_argument(
        "-o",
        "--output",
        metavar="REPORT.html",
        help="where to write the report (default: <capture stem>.report.html "
        "in the current directory)",
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
        "--no-packets",
        action="store_true",
        help="do not build the per-frame table (saves memory on captures of many millions "
        "of frames; per-ACK RTTs are then not available)",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar and no final summary line"
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run pcap-report with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    args = build_parser().parse_args(argv)  # exits with 2 on bad usage
    out = Path(args.output) if args.output else default_output(args.capture)
    err = sys.stderr

    bar, progress = _progress(err, args.capture, enabled=not args.quiet and _isatty(err))
    try:
        cap = load(args.capture, keylog=args.keylog, packets=not args.no_packets, progress=progress)
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
    except OSError as exc:
        return _fail(err, _message(exc, getattr(exc, "filename", None) or out))

    if not args.quiet:
        print(
            f"analysed {head['frames']:,} frames, {_n(head['tcp_connections'], 'connection')}, "
            f"{_n(head['warnings'], 'warning')} -> {out}",
            file=err,
        )
    return 0


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
