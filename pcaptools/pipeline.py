"""The single streaming pass over one capture: :func:`run` takes a :class:`LoadOptions` and
returns the :class:`~pcaptools.result.CaptureSummary` and the tables.

    capture file -> io.open_capture (RawFrame) -> net.PacketDecoder (TcpSegment, ...)
                 -> tcp.TcpTracker (stream index, analysis, connection records)
                 -> protocols (observers, through ConnectionObserver / DnsTcpObserver)
                 -> tables (schema'd DataFrames)

One streaming pass; state is kept per connection, never per packet, except for the
optional ``packets`` table (one row per frame, 120 bytes each in packed rows, 128 in the
table: switch it off with ``packets=False`` for captures of many millions of frames).

The pass is a chain of one-concern steps, each a function of this module:

1. :func:`_set_up`: the sinks (diagnostics, key log, decoder, TCP tracker with its observer
   factory and event hand-off, flow counter, and the builder of every table source registered
   in :mod:`pcaptools.tables.registry`: the event hand-off gives each observer call's events
   to every source that consumes one of them, the frame loop feeds the ICMP and packets
   builders);
2. :func:`_read`: the frame loop (locals bound before it, nothing extra per frame), which
   fills the :class:`~pcaptools.result.CaptureSummary`;
3. :func:`_assemble`: the tables from the builders, one loop in registration order; then the
   TCP tracker drops its per-connection records (:meth:`~pcaptools.tcp.tracker.TcpTracker.release`);
4. :func:`_finish_tables`: coverage, (when not streaming) ws_heartbeats, and the redaction of
   credentials: every column a table schema marks (``Column.secret``) goes through
   :func:`pcaptools.redaction.redact_frame` unless ``show_secrets``; while streaming, every
   chunk a builder hands over goes through it first (:class:`_RedactedDrain`). The builders
   and observers keep the values as seen: this is the one place where they are hidden, so
   every output (tables, warnings, report, ``--json``, Parquet/CSV, the streaming export,
   workers) gets the redacted forms.

Callers: the front door :func:`pcaptools.capture.load` (one process), the workers of
:mod:`pcaptools.parallel` (``shard``), :mod:`pcaptools.many`, :mod:`pcaptools.distributed`, and
the streaming export (:func:`pcaptools.export.load_streamed`, which passes ``open_sink``: the
builders then hand finished rows to it while reading). This module imports nothing from
those layers.
"""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import pandas as pd

from ._eventcap import DEFAULT_MAX_EVENTS_PER_CONNECTION, DEFAULT_MAX_RECORD_ROWS, EventCap
from ._memory import large_blocks_mapped, trim
from .diagnostics import Diagnostics, ShardDiagnostics
from .errors import UnsupportedInputError
from .frameloop import feed_frames
from .io import open_capture
from .io.pcapng import SECRETS_TLS_KEYLOG
from .net.checksum import PARTIAL, ChecksumChecker
from .net.decode import PacketDecoder
from .net.packet import UdpDatagram
from .protocols.dispatch import ConnectionObserver
from .protocols.registry import REGISTRY, UdpRoute
from .protocols.tls import KeyLog
from .redaction import redact_frame
from .result import Capture, CaptureSummary
from .tables.coverage import (
    CONNECTION_COLUMNS,
    COVERAGE,
    CoverageContext,
    FlowCounter,
    coverage_chunks,
    coverage_table,
    in_frame_order,
)
from .tables.heartbeats import websocket_heartbeats
from .tables.icmp_tables import IcmpErrorsBuilder
from .tables.packets import PacketsBuilder
from .tables.registry import SOURCES, TABLES, BuildContext, Built
from .tables.schema import ChunkPump, Drainable
from .tcp.frozen import FreezePolicy
from .tcp.stream import StreamObserver
from .tcp.tracker import TcpTracker

__all__ = [
    "LoadOptions",
    "PassResult",
    "ProgressCallback",
    "SinkOpener",
    "is_stream",
    "load_capture",
    "not_for_streams",
    "run",
    "run_tables",
]

"""pcapng Decryption Secrets Block type of an NSS key log"""

ProgressCallback = Callable[[int, int], None]
"""called as progress(bytes_read, file_size) every few thousand frames"""

SinkOpener = Callable[[Sequence[object]], ChunkPump]
"""``open_sink(builders)`` of the streaming export: the :class:`~pcaptools.tables.schema.ChunkPump`
the frame loop polls, fed by ``builders`` (the ``Built.drain`` of every registered table source
that has one, in registration order: the TCP tracker, the TLS, HTTP and WebSocket table
builders, the packets builder)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadOptions:
    """Every option of :func:`pcaptools.capture.load` (its keyword arguments, with the same
    names and defaults), as one value the pipeline, the workers and the exports pass on."""

    keylog: str | os.PathLike[str] | None = None
    """an NSS key log file (SSLKEYLOGFILE) for TLS decryption; key logs embedded in a pcapng
    (Decryption Secrets Blocks) are used as well, both at once. Raises
    :class:`~pcaptools.errors.KeylogError` if the file cannot be read."""
    packets: bool = True
    """False skips the one table that grows with the number of frames (``packets``)"""
    tls_records: bool = True
    """False skips the per-record TLS table (``tls_records``)"""
    payloads: bool = True
    """False skips all payload work (TLS, HTTP, SSE and DNS tables stay empty; TCP tables are
    unchanged)"""
    progress: ProgressCallback | None = None
    """called as ``progress(bytes_read, file_size)`` every few thousand frames (file_size 0
    while a stream's size is unknown), and once at the end; with ``workers`` > 1 by the
    part read in the calling process (:func:`pcaptools.parallel.run_parallel`)"""
    max_warnings_per_code: int = 1000
    """rows of ``Capture.warnings`` kept per anomaly code (the rest are counted in
    ``summary.extra["warning_counts"]`` and one closing row)"""
    max_decompressed_bytes: int | None = None
    """stops reading after that many bytes of the (decompressed) file, with a
    ``capture.decompression_limit`` row: a guard against decompression bombs (None: no limit)"""
    show_secrets: bool = False
    """False redacts credentials in every column a table schema marks (``Column.secret``):
    secret header values (Authorization, Cookie, ``*-token``, ``*-key``, ``*-secret``...),
    credential query parameters (``?code=``, ``?access_token=``...) and userinfo passwords in
    every path, URL and authority, credential-like WebSocket subprotocols, and credential JSON
    members, URLs and header lines in free text (SSE data, WebSocket previews and close
    reasons, warning details): :mod:`pcaptools.redaction`; True keeps them."""
    max_packet_rows: int | None = 2_000_000
    """caps the ``packets`` table: frames numbered above it get no row, the first of them a
    ``table.packets_truncated`` warning, and every other table still covers every frame (None:
    no cap). The default bounds the table to ~0.65 GB of peak memory (~330 bytes a row while it
    is built): a pcap costs as little as 16 bytes a frame (docs/robustness.md). Not with
    ``out``."""
    max_events_per_connection: int | None = DEFAULT_MAX_EVENTS_PER_CONNECTION
    """caps the per-record rows (TLS records, HTTP/2 frames, SSE events, WebSocket frames and
    messages) one connection adds; past it, one ``table.events_truncated`` row (None: no cap;
    ``summary.extra["rows_dropped"]`` counts what was dropped, see :mod:`pcaptools._eventcap`)"""
    max_record_rows: int | None = DEFAULT_MAX_RECORD_ROWS
    """caps each of those five per-record tables; past it, one ``table.records_truncated`` row
    (None: no cap; not with ``out``)"""
    workers: int = 1
    """N > 1 analyses the capture on N processes (:mod:`pcaptools.parallel`): every process
    reads and decodes every frame, each one follows and parses 1/N of the TCP connections;
    the tables are the same, their rows ordered as described there"""
    shard: tuple[int, int] | None = None
    """``(k, n)``: one worker's part of a ``workers=n`` load: only the TCP connections whose
    address pair is worker ``k``'s (:func:`pcaptools.frameloop.shard_of`) and, for ``k == 0``,
    what belongs to no TCP connection get rows. Its ``tcp_stream`` numbers count its own
    connections only (``summary.extra["tcp_stream_opened"]``: the frame where each began):
    :func:`pcaptools.parallel.merge_shards` renumbers them as one process does"""
    out: str | os.PathLike[str] | None = None
    """a directory: stream every table to ``out/<table>.parquet`` while reading, in row groups
    of ``chunk_rows`` rows (the layout of :meth:`~pcaptools.result.Capture.to_parquet`), so the
    peak memory does not grow with the number of packets; ``load`` then returns a
    :class:`~pcaptools.export.StreamedCapture`. Not with ``workers`` > 1 or ``shard``."""
    chunk_rows: int = 65536
    """rows per Parquet row group with ``out``"""
    check_checksums: bool = False
    """True validates every TCP checksum (IPv4 and IPv6 pseudo-header; off by default, as in
    tshark): a bad one adds a ``tcp_events`` row of kind ``bad_checksum`` and a
    ``tcp.bad_checksum`` warning; partial checksums (offloaded to the NIC, every loopback
    packet) are counted, not flagged (one ``tcp.checksum_offloaded`` row); the counts per status
    are in ``summary.extra["tcp_checksums"]`` (:mod:`pcaptools.net.checksum`). Every other
    table follows tshark and analyses bad segments as any other; ``analyses.conn_log`` drops
    them, as Zeek does"""


@dataclass(slots=True)
class PassResult:
    """What :func:`run` returns."""

    summary: CaptureSummary
    tables: dict[str, pd.DataFrame]
    """every table by name; while streaming (``open_sink``) the per-connection tables and the
    rows of the others not yet handed over, without ws_heartbeats"""
    capture_end: int | None
    """time of the last frame (integer ns), None for an empty capture"""
    pump: ChunkPump | None
    """the streaming export's pump (``open_sink``), else None"""
    written: frozenset[str] = frozenset()
    """while streaming: the tables written whole to the pump's sink at the end, a chunk at a
    time (one row per connection: connections, tcp_handshakes, coverage), not in ``tables``"""


@contextmanager
def _gc_relaxed(gen0: int = 1_000_000, older: int = 1000) -> Iterator[None]:
    """Run the pass with a rarer young-generation collection: the loop allocates
    millions of short-lived objects that reference counting frees at once, and Python's
    default threshold (700) makes the cycle collector scan them ~9% of the time for
    nothing. What a young collection does scan is what is still alive since the last one:
    above all the objects of the connections in progress (~75 each: the record, the
    reassemblers, the observers), freed by reference counting once a connection is frozen
    or let go. Below the number alive at once, every such object is scanned once young
    and again later; at 1,000,000 most are gone before the next collection (the numbers:
    ``benchmarks/PROFILE.md``, "the cost of a parsed connection"). The older generations
    hold the per-connection records, alive until the tables are built: each of their
    collections visits every one of them (seconds at a million connections), so they are
    scanned ``older`` times more rarely. Cycles are still collected (later); the old
    thresholds come back after."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], gen0), max(old[1], older), max(old[2], older))
    try:
        yield
    finally:
        gc.set_threshold(*old)


def is_stream(path: str | os.PathLike[str] | IO[bytes]) -> bool:
    """True when ``path`` is read once, without seeking: a file object, or a path that is
    not a regular file (a FIFO, ``/dev/stdin``). A missing path is not a stream."""
    if hasattr(path, "read"):
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def not_for_streams(path: object, workers: int,
                    shard: tuple[int, int] | None = None) -> UnsupportedInputError:
    """The error of a ``workers``/``shard`` load of a stream (read once per process)."""
    call = f"load(shard={shard})" if shard is not None and workers <= 1 else \
        f"load(workers={workers})"
    return UnsupportedInputError(
        f"{call} reads the capture once per process, which a stream (pipe, "
        f"FIFO or file object: {getattr(path, 'name', path)}) cannot do: use workers=1, or "
        "save the stream to a file first"
    )


_Consumer = Callable[[list[object]], None]
"""a table builder's ``add_all``: takes the events of one observer call"""
#: emit's routing plans kept per load: sequences of event types up to this long ...
_MAX_PLAN_LEN = 32
#: ... and at most this many of them (a longer or later sequence is planned on every call)
_MAX_PLANS = 4096


class _Sinks:
    """Everything the frame loop feeds, built by :func:`_set_up`."""

    __slots__ = ("built", "checksums", "decoder", "diag", "event_cap", "flows", "icmp_builder",
                 "keys", "own_k", "own_n", "pb", "tracker", "udp_finish", "udp_route")

    diag: Diagnostics
    keys: KeyLog
    decoder: PacketDecoder
    built: dict[str, Built | None]
    """every registered table source's builder (None: off for this load), by source name, in
    registration order (:data:`pcaptools.tables.registry.SOURCES`)"""
    own_k: int
    own_n: int
    udp_route: Callable[[UdpDatagram], None] | None
    """every UDP datagram goes here (protocols.registry.UdpRoute.route), None: no UDP parsing"""
    udp_finish: Callable[[int, int], None] | None
    """the end of the capture for the datagram observers (UdpRoute.finish)"""
    icmp_builder: IcmpErrorsBuilder
    """the ``icmp`` source's builder (the frame loop feeds it)"""
    event_cap: EventCap
    tracker: TcpTracker
    flows: FlowCounter
    pb: PacketsBuilder | None
    """the ``packets`` source's builder (the frame loop feeds it), None with packets=False"""
    checksums: ChecksumChecker | None
    """TCP checksum validation (check_checksums=True), else None"""


def _set_up(o: LoadOptions, *, streaming: bool) -> _Sinks:
    """Step 1: the diagnostics sink, key log, decoder, the TCP tracker with its observer
    factory and event hand-off, and the builder of every registered table source
    (``streaming``: the caps that need the whole table in memory are off)."""
    s = _Sinks()
    diag = s.diag = (Diagnostics(max_rows_per_code=o.max_warnings_per_code) if o.shard is None
                     else ShardDiagnostics(o.shard, max_rows_per_code=o.max_warnings_per_code))
    keys = s.keys = KeyLog.from_file(o.keylog, diag) if o.keylog is not None else KeyLog()
    s.decoder = PacketDecoder(diag)
    own_k, own_n = o.shard if o.shard is not None else (0, 1)
    s.own_k, s.own_n = own_k, own_n
    # the datagram observers of the registry (DNS over UDP is worker 0's; DNS over TCP and
    # HTTPS belongs to each connection's worker)
    udp: UdpRoute | None = REGISTRY.udp_route(diag, keys) if o.payloads else None
    s.udp_route = udp.route if udp is not None and own_k == 0 else None
    s.udp_finish = udp.finish if udp is not None and own_k == 0 else None

    event_cap = s.event_cap = EventCap(
        o.max_events_per_connection, diag,
        max_rows=o.max_record_rows if not streaming else None,
        skip=frozenset() if o.tls_records else frozenset({"tls_records"}))
    cap_events = event_cap if event_cap.active else None

    def conn_addrs(tcp_stream: int) -> tuple[int, bytes, int, bytes, int] | None:
        c = tracker.conversation(tcp_stream)
        if c is None:  # (None: cold, or the record dropped)
            return None
        return (c.ip_version, c.client_addr, c.client_port, c.server_addr, c.server_port)

    # the builders that take events (set below, before reading), in registration order, each
    # with the event types its source consumes (None: it declares none, so it gets them all).
    # An observer call's events go only to the builders that keep one of them (the others
    # would look at each event and ignore it): each type gets one bit per builder that keeps
    # it, each combination of bits the builders it calls, both found once. Observers return
    # the same few sequences of event types over and over (a TLS record with a WebSocket frame
    # and its message, an HTTP/2 DATA frame with its SSE events), so what a list is routed to
    # and what it adds to the caps' counts (EventCap.plan) is found once per sequence of
    # types (``plans``; at most _MAX_PLANS sequences of up to _MAX_PLAN_LEN events are kept)
    # and the list goes on without a Python step per event
    takers: list[tuple[_Consumer, tuple[type, ...] | None]] = []
    bits: dict[type, int] = {}
    calls: dict[int, tuple[_Consumer, ...]] = {}
    plans: dict[tuple[type, ...], tuple[tuple[_Consumer, ...], int, tuple[tuple[str, int], ...],
                                         int]] = {}

    def bits_of(t: type) -> int:
        b = 0
        for i, (_, kept) in enumerate(takers):
            if kept is None or issubclass(t, kept):
                b |= 1 << i
        bits[t] = b
        return b

    def route(types: Iterable[type]) -> tuple[_Consumer, ...]:
        """the builders that keep one of ``types``, in registration order"""
        mask = 0
        for t in types:
            b = bits.get(t)
            mask |= bits_of(t) if b is None else b
        to = calls.get(mask)
        if to is None:
            to = calls[mask] = tuple(add_all for i, (add_all, _) in enumerate(takers)
                                     if mask >> i & 1)
        return to

    def plan(key: tuple[type, ...]) -> tuple[tuple[_Consumer, ...], int,
                                             tuple[tuple[str, int], ...], int]:
        p = (route(set(key)), *event_cap.plan(key))
        if len(key) <= _MAX_PLAN_LEN and len(plans) < _MAX_PLANS:
            plans[key] = p
        return p

    def emit(events: list[object]) -> None:
        if events:
            key = tuple(map(type, events))
            p = plans.get(key)
            to, first, gains, n = plan(key) if p is None else p
            if n and cap_events is not None:
                kept = cap_events.take(events, first, gains, n)
                if kept is not events:  # some were dropped: route what is left
                    if not kept:
                        return
                    events = kept
                    to = route(set(map(type, kept)))
            for add_all in to:
                add_all(events)

    def observer(tcp_stream: int, midstream: bool) -> StreamObserver | None:
        addrs = conn_addrs(tcp_stream)
        by_port = REGISTRY.tcp_port(addrs[4], addrs[2]) if addrs is not None else None
        if by_port is not None and addrs is not None and udp is not None:  # DNS over TCP
            obs: StreamObserver = by_port.factory(
                tcp_stream=tcp_stream, diag=diag, addrs=addrs, midstream=midstream,
                observers=udp.observers)
            return obs
        return ConnectionObserver(tcp_stream=tcp_stream, diag=diag, keylog=keys,
                                  midstream=midstream)

    tracker = s.tracker = TcpTracker(diag, observer_factory=observer if o.payloads else None,
                                     emit=emit, spill_cold=streaming,
                                     freeze_policy=FreezePolicy())
    ctx = BuildContext(diag=diag, tracker=tracker, udp=udp, conn_addrs=conn_addrs,
                       payloads=o.payloads, packets=o.packets, tls_records=o.tls_records,
                       show_secrets=o.show_secrets,
                       max_packet_rows=o.max_packet_rows if not streaming else None,
                       streaming=streaming)
    built = s.built = {name: src.build(ctx) for name, src in SOURCES.items()}
    takers[:] = [(b.add_all, SOURCES[name].consumes or None) for name, b in built.items()
                 if b is not None and b.add_all is not None]
    icmp, packets = built["icmp"], built["packets"]
    assert icmp is not None
    s.icmp_builder = icmp.get(IcmpErrorsBuilder)
    s.pb = packets.get(PacketsBuilder) if packets is not None else None
    s.flows = FlowCounter(diag)
    s.checksums = ChecksumChecker() if o.check_checksums else None
    return s


def _read(path: str | os.PathLike[str] | IO[bytes], o: LoadOptions, s: _Sinks,
          pump: ChunkPump | None) -> CaptureSummary:
    """Step 2: the frame loop. Reads ``path`` once, feeds every frame to the sinks and returns
    the filled :class:`CaptureSummary` (``last_ts_ns`` is the capture's end)."""
    diag, keys, decoder, tracker = s.diag, s.keys, s.decoder, s.tracker
    progress, keylog = o.progress, o.keylog
    with open_capture(path, diag, max_decompressed_bytes=o.max_decompressed_bytes) as reader:
        summary = CaptureSummary(
            path=str(reader.path) if hasattr(path, "read") else str(path),
            file_size=reader.file_size, format=reader.format,
            compression=reader.compression, linktypes=[],
        )
        if keylog is not None:  # for Capture.wireshark()
            summary.extra["keylog"] = os.path.abspath(keylog)

        def secrets(seen: int) -> int:
            for stype, data in reader.secrets[seen:]:
                seen += 1
                if stype == SECRETS_TLS_KEYLOG:
                    keys.add_text(data, diag, source=f"pcapng Decryption Secrets Block #{seen}")
                else:
                    diag.add("capture.secrets_unsupported",
                             f"Decryption Secrets Block #{seen} of type 0x{stype:08x} ignored")
            return seen

        def every_4096() -> None:
            if progress is not None:
                progress(reader.bytes_read, reader.file_size if reader.size_known else 0)
            if pump is not None:
                pump.poll()

        c = feed_frames(reader, diag, decoder, tracker, s.flows, s.udp_route, s.icmp_builder,
                        s.pb, s.own_k, s.own_n, s.checksums, secrets,
                        every_4096 if progress is not None or pump is not None else None)
        n, last_ts = c.n, c.last_ts
        decoder.finish()
        tracker.finish(last_ts or 0, n)
        if s.udp_finish is not None:
            s.udp_finish(last_ts or 0, n)
        if progress is not None:
            progress(reader.bytes_read, reader.file_size)
        if not reader.size_known:  # a stream: its size is what was read of it
            summary.file_size = reader.file_size
            summary.extra["stream"] = True
        summary.linktypes = sorted({i.linktype for i in reader.interfaces})
        summary.tls_secrets = len(reader.secrets)
    summary.frames, summary.tcp_frames, summary.udp_frames = c.n, c.tcp_n, c.udp_n
    summary.other_ip_frames, summary.non_ip_frames, summary.wire_bytes = \
        c.other_n, c.nonip_n, c.wire
    summary.first_ts_ns, summary.last_ts_ns = c.first_ts, c.last_ts
    summary.extra["tcp_data_segments"] = c.data_segs
    if s.own_n > 1:  # (a worker's own tcp_stream numbers: parallel.merge_shards)
        summary.extra["tcp_stream_opened"] = c.opened
    checksums = s.checksums
    if checksums is not None:
        summary.extra["tcp_checksums"] = checksums.summary()
        if checksums.first_partial is not None:
            n_part = checksums.counts[PARTIAL]
            diag.add_in_frame_order(
                "tcp.checksum_offloaded",
                f"{n_part} TCP segment(s) carry a partial checksum (the pseudo-header sum only: "
                "checksumming offloaded to the NIC, or loopback): not verified, not counted as "
                "bad", frame=checksums.first_partial[0], ts_ns=checksums.first_partial[1])
    summary.extra["warning_counts"] = dict(s.diag.counts)
    summary.extra.update(s.event_cap.summary())
    return summary


def _assemble(s: _Sinks, write: _EndWriter | None = None) -> dict[str, pd.DataFrame]:
    """Step 3: every table from its source's builder, in registration order but the
    ``packets`` source first (a table its
    builder leaves out, or of a source that is off, is the empty frame of its schema: so
    ws_heartbeats, derived from ws_frames in :func:`_finish_tables` or by the streaming
    export), except coverage, which :func:`_finish_tables` adds. ``write`` (streaming): a
    source with :attr:`~pcaptools.tables.registry.Built.write_frames` writes its biggest
    tables there a chunk at a time; they are left out of the result."""
    frames: dict[str, pd.DataFrame] = {}
    # (the packets source first, its builder let go at once: its per-address state is gone
    # before the per-connection tables are made, the memory peak of a port scan)
    for name in sorted(s.built, key=lambda n: n != "packets"):
        built = s.built[name]
        if built is not None:
            made = built.frames() if write is None or built.write_frames is None \
                else built.write_frames(write)
            frames.update(made)
            if name == "packets":
                s.built[name] = s.pb = None
            if any(len(df) for df in made.values()):
                # (what making them freed, given back before the next source's tables: Arrow's
                # pool keeps the buffers of the string columns' conversions, ~10 MB on
                # big.pcap, and the heap the row tuples of the small tables)
                trim()
    written = write.written if write is not None else set()
    return {name: frames[name] if name in frames else schema.frame([])
            for name, schema in TABLES.items() if name != "coverage" and name not in written}


def _finish_tables(tables: dict[str, pd.DataFrame], o: LoadOptions, s: _Sinks,
                   pump: ChunkPump | None, capture_end: int | None,
                   write: _EndWriter | None = None) -> None:
    """Step 5: the coverage table, when not streaming ws_heartbeats (derived from ws_frames),
    and, unless ``show_secrets``, the redaction of every table's credential columns.
    With ``write`` (streaming) and the connections table written by it, the coverage table is
    written there too, a chunk of connections at a time (:func:`_write_coverage`)."""
    flows = s.flows if s.own_k == 0 else None
    extra = pump.sink.streams if pump is not None else None  # type: ignore[attr-defined]
    if write is not None and "connections" in write.written:
        _write_coverage(tables, o, flows, extra, write)
    else:
        tables["coverage"] = coverage_table(tables, flows, payloads=o.payloads,
                                            extra_streams=extra)
    names = list(TABLES)
    for name in names[names.index("coverage") + 1:]:  # (tables registered after coverage)
        if name in tables:
            tables[name] = tables.pop(name)
    if pump is None:
        tables["ws_heartbeats"] = websocket_heartbeats(
            tables["ws_frames"], connections=tables["connections"], capture_end=capture_end
        )
    if not o.show_secrets:
        for name, df in tables.items():
            secret = TABLES[name].secret_columns if name in TABLES else ()
            if secret:
                tables[name] = redact_frame(df, secret)


class _EndWriter:
    """The :data:`~pcaptools.tables.registry.TableWriter` of the end of a streaming pass:
    chunks to the pump's sink, redacted unless ``show_secrets``; ``written`` names the
    tables it wrote."""

    __slots__ = ("pump", "show_secrets", "written")

    def __init__(self, pump: ChunkPump, show_secrets: bool) -> None:
        self.pump, self.show_secrets = pump, show_secrets
        self.written: set[str] = set()

    def __call__(self, table: str, chunk: pd.DataFrame) -> None:
        self.written.add(table)
        secret = TABLES[table].secret_columns if table in TABLES else ()
        if secret and not self.show_secrets and len(chunk):
            chunk = redact_frame(chunk, secret)
        self.pump.sink.write(table, chunk)

    def read_back(self, table: str, columns: list[str]) -> Any:
        """What the sink wrote of ``table``, a ``pyarrow.parquet.ParquetFile``
        (:meth:`pcaptools.export.ParquetSink.read_back`)."""
        return self.pump.sink.read_back(table, columns)  # type: ignore[attr-defined]


def _write_coverage(tables: dict[str, pd.DataFrame], o: LoadOptions, flows: FlowCounter | None,
                    extra: dict[str, set[int]] | None, write: _EndWriter) -> None:
    """The coverage table of a streaming pass whose connections table is written already: its
    columns read back a row group (a chunk of connections) at a time, each chunk's coverage
    rows written out with the flow rows before the next chunk (:func:`coverage_chunks`). A
    capture whose connections do not come in first-frame order (none known) reads the
    columns whole instead."""
    ctx = CoverageContext(tables, payloads=o.payloads, extra_streams=extra)
    cols = list(CONNECTION_COLUMNS)
    pf = write.read_back("connections", cols)
    t = pf.read(columns=["first_frame", "client_packets", "server_packets"])
    frames = np.asarray(t.column("client_packets")) + np.asarray(t.column("server_packets"))
    firsts = np.asarray(t.column("first_frame"), np.int64)[frames > 0]
    del t, frames
    groups: Iterator[pd.DataFrame]
    if in_frame_order(firsts):
        groups = (pf.read_row_group(i, columns=cols).to_pandas()
                  for i in range(pf.num_row_groups))
    else:
        groups = iter([pf.read(columns=cols).to_pandas()])
    n = 0
    for chunk in coverage_chunks(ctx, flows, firsts, groups):
        write("coverage", chunk)
        n += len(chunk)
    if not n:
        write("coverage", COVERAGE.frame([]))


class _RedactedDrain:
    """A table builder's :class:`~pcaptools.tables.schema.Drainable` whose chunks come out
    redacted (the streaming export's share of step 5)."""

    __slots__ = ("inner",)

    def __init__(self, inner: Drainable) -> None:
        self.inner = inner

    def pending(self) -> Mapping[str, int]:
        return self.inner.pending()

    def drain(self, table: str) -> pd.DataFrame:
        df = self.inner.drain(table)
        secret = TABLES[table].secret_columns if table in TABLES else ()
        return redact_frame(df, secret) if secret and len(df) else df


def run(path: str | os.PathLike[str] | IO[bytes], options: LoadOptions, *,
        open_sink: SinkOpener | None = None) -> PassResult:
    """The single pass over ``path`` with ``options`` (``options.workers`` and
    ``options.out`` are the callers' business: this reads with one process, and streams
    only through ``open_sink``). Raises what :func:`pcaptools.capture.load` raises for a
    file that cannot be read as a capture or a key log that cannot be read; anything wrong
    inside the capture becomes a warnings row."""
    s = _set_up(options, streaming=open_sink is not None)
    pump = None
    if open_sink is not None:  # streaming export: builders hand over finished rows while reading
        drains = [b.drain for b in s.built.values() if b is not None and b.drain is not None]
        if not options.show_secrets:
            drains = [_RedactedDrain(d) if isinstance(d, Drainable)
                      and not isinstance(d, TcpTracker) else d for d in drains]
        pump = open_sink(drains)
    write = _EndWriter(pump, options.show_secrets) if pump is not None else None
    # (large blocks mapped during the pass, not kept in the heap once freed: _memory)
    with _gc_relaxed(), large_blocks_mapped():
        try:
            summary = _read(path, options, s, pump)
            tables = _assemble(s, write)
        except BaseException:
            s.tracker.drop_cold()  # (its database closed now, not at some later collection)
            raise
        s.tracker.release()  # (the connection records are in the tables now)
        if pump is None:  # (and the builders' rows: only a streaming export drains them after)
            s.built, s.pb = {}, None
        trim()
        _finish_tables(tables, options, s, pump, summary.last_ts_ns, write)
    return PassResult(summary=summary, tables=tables, capture_end=summary.last_ts_ns, pump=pump,
                      written=frozenset(write.written) if write is not None else frozenset())


def run_tables(path: str, options: LoadOptions) -> tuple[CaptureSummary, dict[str, pd.DataFrame]]:
    """:func:`run` without streaming, as the (picklable) summary and tables a worker process
    sends back (:mod:`pcaptools.parallel`, :mod:`pcaptools.many`)."""
    res = run(path, options)
    return res.summary, res.tables


def load_capture(path: str | os.PathLike[str] | IO[bytes], options: LoadOptions) -> Capture:
    """The :class:`~pcaptools.result.Capture` of one in-memory :func:`run` (what
    ``load(path)`` returns without ``workers`` or ``out``)."""
    res = run(path, options)
    return Capture(res.summary, res.tables)
