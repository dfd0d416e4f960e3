"""The front door: :func:`load` reads a capture once and returns a :class:`Capture`.

``load(path, **options)`` checks its arguments and hands the work to one of three runners:

- one process, tables in memory: :func:`pcaptools.pipeline.run`, the single streaming pass
  (``io -> net -> tcp -> protocols -> tables``; see :mod:`pcaptools.pipeline`);
- ``workers=N``: :func:`pcaptools.parallel.run_parallel` (N processes, each running the pass
  on its shard of the connections);
- ``out=directory``: :func:`pcaptools.export.load_streamed` (the pass, handing finished rows to
  Parquet files while reading).

:func:`load_with` does the same with a :class:`~pcaptools.pipeline.LoadOptions`. The names a
Capture is made of (:class:`Capture`, :class:`CaptureSummary`, :data:`TABLES`) live in
:mod:`pcaptools.result` and are re-exported here, their documented home.
"""

from __future__ import annotations

import os
from typing import IO

from ._eventcap import DEFAULT_MAX_EVENTS_PER_CONNECTION, DEFAULT_MAX_RECORD_ROWS
from .export import StreamedCapture, load_streamed
from .io.pcapng import SECRETS_TLS_KEYLOG
from .parallel import run_parallel
from .pipeline import (
    LoadOptions,
    ProgressCallback,
    is_stream,
    load_capture,
    not_for_streams,
)
from .result import TABLES, Capture, CaptureSummary

__all__ = [
    "SECRETS_TLS_KEYLOG",
    "TABLES",
    "Capture",
    "CaptureSummary",
    "LoadOptions",
    "ProgressCallback",
    "StreamedCapture",
    "is_stream",
    "load",
    "load_with",
]


def load(
    path: str | os.PathLike[str] | IO[bytes],
    *,
    keylog: str | os.PathLike[str] | None = None,
    packets: bool = True,
    tls_records: bool = True,
    payloads: bool = True,
    progress: ProgressCallback | None = None,
    max_warnings_per_code: int = 1000,
    max_decompressed_bytes: int | None = None,
    show_secrets: bool = False,
    max_packet_rows: int | None = 2_000_000,
    max_events_per_connection: int | None = DEFAULT_MAX_EVENTS_PER_CONNECTION,
    max_record_rows: int | None = DEFAULT_MAX_RECORD_ROWS,
    workers: int = 1,
    shard: tuple[int, int] | None = None,
    out: str | os.PathLike[str] | None = None,
    chunk_rows: int = 65536,
    check_checksums: bool = False,
) -> Capture:
    """Read ``path`` once and return a :class:`Capture` with every table filled.

    ``path`` is a capture file, a FIFO, or a binary file object (``sys.stdin.buffer`` for
    ``tcpdump -w - | ...``, a socket's ``makefile("rb")``; a path is always a path: ``"-"``
    means standard input only to ``pcap-report``); streams are read without seeking,
    compressed ones too, and give the same tables as the file they carry (``summary.path`` is
    the stream's name, ``summary.file_size`` the bytes read, ``summary.extra["stream"]`` True).
    A stream cannot be read by ``workers`` > 1 or by :meth:`Capture.wireshark`:
    :class:`~pcaptools.errors.UnsupportedInputError`.

    Raises :class:`~pcaptools.errors.CaptureOpenError` /
    :class:`~pcaptools.errors.CaptureFormatError` only when the file cannot be read as a capture
    at all. Anything wrong inside it (a record cut off, a malformed header, an unsupported link
    type) becomes a row of ``Capture.warnings`` and the rest of the capture is still analysed.

    ``keylog``: an NSS key log file (SSLKEYLOGFILE) for TLS decryption; key logs embedded in a
    pcapng (Decryption Secrets Blocks) are used as well, both at once. Raises
    :class:`~pcaptools.errors.KeylogError` if the file cannot be read.
    ``show_secrets=False`` redacts credentials in every column a table schema marks
    (``Column.secret``): secret header values (Authorization, Cookie, ``*-token``, ``*-key``,
    ``*-secret``...), credential query parameters (``?code=``, ``?access_token=``...) and
    userinfo passwords in every path, URL and authority, credential-like WebSocket
    subprotocols, and credential JSON members, URLs and header lines in free text (SSE data,
    WebSocket previews and close reasons, warning details): :mod:`pcaptools.redaction`;
    ``True`` keeps them.
    ``max_decompressed_bytes`` stops reading after that many bytes of the (decompressed) file, with
    a ``capture.decompression_limit`` row: a guard against decompression bombs (None: no limit).
    ``max_packet_rows`` caps the ``packets`` table: frames numbered above it get no row, the
    first of them a ``table.packets_truncated`` warning, and every other table still covers every
    frame (None: no cap). The default bounds the table to ~0.65 GB of peak memory (~330 bytes a
    row while it is built): a pcap costs as little as 16 bytes a frame (docs/robustness.md).
    ``max_events_per_connection`` caps the per-record rows (TLS records, HTTP/2 frames, SSE
    events, WebSocket frames and messages) one connection adds; past it, one
    ``table.events_truncated`` row. ``max_record_rows`` caps each of those five tables; past
    it, one ``table.records_truncated`` row (not with ``out``). Both are on by default
    (1,000,000 and 2,000,000; None: no cap), and ``summary.extra["rows_dropped"]`` counts
    what they dropped exactly (see :mod:`pcaptools._eventcap`).
    ``out=directory`` streams every table to ``directory/<table>.parquet`` while reading, in row
    groups of ``chunk_rows`` rows (the layout of :meth:`Capture.to_parquet`), so the peak
    memory does not grow with the number of packets, and returns a
    :class:`~pcaptools.export.StreamedCapture` (the smaller per-connection tables in memory,
    the others read from their file when used; connections, tcp_handshakes and coverage are
    written a chunk of connections at a time at the end); ``max_packet_rows`` does not apply
    then. Not with
    ``workers`` > 1 or ``shard``.
    ``packets=False`` skips the one table that grows with the number of frames;
    ``tls_records=False`` skips the per-record TLS table; ``payloads=False`` skips all payload
    work (TLS, HTTP, SSE and DNS tables stay empty; TCP tables are unchanged).
    ``workers=N`` (N > 1) analyses the capture on N processes (:mod:`pcaptools.parallel`): every
    process reads and decodes every frame, each one follows and parses 1/N of the TCP
    connections (by address pair); the tables are the same, their rows ordered as described
    there. ``shard=(k, n)`` is that worker's part: its own connections and, for ``k == 0``,
    what belongs to no TCP connection, with ``tcp_stream`` numbers of its own (not
    Wireshark's until :func:`pcaptools.parallel.merge_shards` renumbers the parts).

    Every option is also a documented field of :class:`~pcaptools.pipeline.LoadOptions`:
    ``load_with(path, LoadOptions(...))`` is the same call.
    """
    return load_with(path, LoadOptions(
        keylog=keylog, packets=packets, tls_records=tls_records, payloads=payloads,
        progress=progress, max_warnings_per_code=max_warnings_per_code,
        max_decompressed_bytes=max_decompressed_bytes, show_secrets=show_secrets,
        max_packet_rows=max_packet_rows, max_events_per_connection=max_events_per_connection,
        max_record_rows=max_record_rows, workers=workers, shard=shard, out=out,
        chunk_rows=chunk_rows, check_checksums=check_checksums,
    ))


def load_with(path: str | os.PathLike[str] | IO[bytes], options: LoadOptions) -> Capture:
    """:func:`load` with its options as one :class:`~pcaptools.pipeline.LoadOptions`
    (``load(path, **kw)`` is ``load_with(path, LoadOptions(**kw))``): the checks, then the
    runner the options ask for (module docstring)."""
    o = options
    if o.out is not None and (o.workers > 1 or o.shard is not None):
        raise ValueError("load(out=...) reads with one process: no workers or shard")
    if (o.workers > 1 or o.shard is not None) and is_stream(path):
        raise not_for_streams(path, o.workers, o.shard)
    if o.workers > 1 and o.shard is None:
        assert isinstance(path, (str, os.PathLike))  # (streams were refused above)
        return run_parallel(path, o, workers=o.workers)
    if o.out is not None:
        return load_streamed(path, o)
    return load_capture(path, o)
