"""`load()` runs the whole pipeline once over a capture and returns a :class:`Capture`.

    capture file -> io.open_capture (RawFrame) -> net.PacketDecoder (TcpSegment, ...)
                 -> tcp.TcpTracker (stream index, analysis, connection records)
                 -> tables (schema'd DataFrames)

One streaming pass; state is kept per connection, never per packet, except for the
optional ``packets`` table (one row per frame, ~170 bytes each in typed arrays: switch
it off with ``packets=False`` for captures of many millions of frames).
"""

from __future__ import annotations

import gc
import html
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pandas as pd

from ._eventcap import DEFAULT_MAX_EVENTS_PER_CONNECTION, DEFAULT_MAX_RECORD_ROWS, EventCap
from .analyses.heartbeats import websocket_heartbeats
from .diagnostics import Diagnostics, ShardDiagnostics
from .errors import UnsupportedInputError
from .io import open_capture
from .io.pcapng import SECRETS_TLS_KEYLOG
from .net.decode import PacketDecoder
from .net.packet import IpPacket, TcpSegment, UdpDatagram
from .protocols.dispatch import ConnectionObserver
from .protocols.dns import DnsTracker
from .protocols.doh import DohCollector
from .protocols.registry import REGISTRY
from .protocols.tls import KeyLog
from .redaction import redact_ws_connections
from .tables.coverage import FlowCounter, coverage_table
from .tables.dns_tables import dns_table
from .tables.foundation import PACKETS
from .tables.http_tables import HttpTablesBuilder
from .tables.icmp_tables import IcmpErrorsBuilder, path_mtu_table
from .tables.packets import PacketsBuilder
from .tables.registry import TABLES as TABLES  # every table of a Capture, registered there
from .tables.tcp_tables import (
    connections_table,
    events_table,
    handshakes_table,
    losses_table,
    warnings_table,
)
from .tables.tls_tables import TlsTablesBuilder
from .tables.ws_tables import WS_TABLES, WsTablesBuilder
from .tcp.stream import StreamObserver
from .tcp.tracker import RETRANSMISSION_KINDS, TcpTracker

ProgressCallback = Callable[[int, int], None]
"""called as progress(bytes_read, file_size) every few thousand frames"""


@dataclass(slots=True)
class CaptureSummary:
    """Headline facts about the capture file itself (also the one row per capture of
    ``captures.parquet`` in exports, where ``extra`` is JSON text and ``linktypes`` a
    comma-separated list)."""

    path: str
    """the path given to load()"""
    file_size: int
    """bytes on disk (compressed size for a compressed file)"""
    format: str
    """pcap or pcapng"""
    compression: str | None
    """gzip, bzip2, xz, zstd, or None"""
    linktypes: list[int]
    """pcap/pcapng link-layer types (LINKTYPE_*) of the interfaces"""
    frames: int = 0
    """frames read (Wireshark's last frame.number)"""
    first_ts_ns: int | None = None
    """time of the first frame, integer ns since the epoch"""
    last_ts_ns: int | None = None
    """time of the last frame, integer ns since the epoch"""
    wire_bytes: int = 0
    """frame.len summed over every frame, bytes"""
    tcp_frames: int = 0
    """frames carrying a TCP segment"""
    udp_frames: int = 0
    """frames carrying a UDP datagram"""
    other_ip_frames: int = 0
    """IP frames with another transport (ICMP, ...)"""
    non_ip_frames: int = 0
    """frames without IP (ARP, LLDP, an unsupported link type...)"""
    tls_secrets: int = 0
    """pcapng Decryption Secrets Blocks read"""
    extra: dict[str, object] = field(default_factory=dict)
    """more facts, by key: ``warning_counts`` (code -> occurrences, also those beyond the row
    cap), ``tcp_data_segments`` (TCP segments with payload), ``keylog`` (absolute path of the
    key log given to load(), for :meth:`Capture.wireshark`), ``workers`` (processes of a
    ``workers=N`` load); after :meth:`Capture.subset`: ``subset`` and
    ``subset_display_filter`` (its filter in words and as a Wireshark display filter),
    ``subset_connections`` (connections kept), ``subset_of_frames`` (frames of the whole
    capture), ``subset_origin_ts_ns`` (the whole capture's first frame time, the origin of
    ``start``/``end``), ``subset_counts`` (set when frame counts were estimated without a
    packets table)"""

    @property
    def duration_s(self) -> float:
        if self.first_ts_ns is None or self.last_ts_ns is None:
            return 0.0
        return (self.last_ts_ns - self.first_ts_ns) / 1e9


class Capture:
    """All tables of one capture. Attributes are pandas DataFrames with documented schemas
    (``docs/tables.md``); a table that was switched off is an empty DataFrame with its columns."""

    def __init__(self, summary: CaptureSummary, tables: dict[str, pd.DataFrame]) -> None:
        self.summary = summary
        self.tables = tables
        for name in TABLES:
            # (not tables.get(name, default): that would build every empty default frame)
            setattr(self, name, tables[name] if name in tables else TABLES[name].frame([]))

    connections: pd.DataFrame
    tcp_handshakes: pd.DataFrame
    tcp_events: pd.DataFrame
    tcp_losses: pd.DataFrame
    tls_handshakes: pd.DataFrame
    tls_records: pd.DataFrame
    http_requests: pd.DataFrame
    http2_frames: pd.DataFrame
    http2_streams: pd.DataFrame
    http2_connections: pd.DataFrame
    sse_events: pd.DataFrame
    ws_connections: pd.DataFrame
    ws_frames: pd.DataFrame
    ws_messages: pd.DataFrame
    ws_heartbeats: pd.DataFrame
    dns: pd.DataFrame
    icmp_errors: pd.DataFrame
    path_mtu: pd.DataFrame
    packets: pd.DataFrame
    warnings: pd.DataFrame
    coverage: pd.DataFrame

    @property
    def retransmissions(self) -> pd.DataFrame:
        """tcp_events rows that tshark's ``tcp.analysis.retransmission`` filter matches
        (kind retransmission, fast_retransmission or spurious_retransmission)."""
        ev = self.tcp_events
        return ev[ev["kind"].isin(RETRANSMISSION_KINDS)].reset_index(drop=True)

    def to_parquet(self, directory: str | os.PathLike[str], **kw: Any) -> dict[str, Path]:
        """One ``<table>.parquet`` per table (+ ``captures.parquet``): see
        :func:`pcaptools.export.to_parquet`."""
        from .export import to_parquet  # export imports this module

        return to_parquet(self, directory, **kw)

    def to_csv(self, directory: str | os.PathLike[str], **kw: Any) -> dict[str, Path]:
        """One ``<table>.csv`` per table (+ ``captures.csv``): see :func:`pcaptools.export.to_csv`."""
        from .export import to_csv

        return to_csv(self, directory, **kw)

    def __repr__(self) -> str:
        s = self.summary
        return (f"<Capture {Path(s.path).name!r}: {s.frames} frames, {len(self.connections)} TCP connections, "
                f"{len(self.warnings)} warnings>")

    def _repr_html_(self) -> str:
        s = self.summary
        rows = "".join(
            f"<tr><td><code>cap.{html.escape(n)}</code></td><td>{len(df)}</td>"
            f"<td>{html.escape(TABLES[n].grain)}</td></tr>"
            for n, df in self.tables.items() if n in TABLES
        )
        return (
            f"<div><b>Capture</b> {html.escape(Path(s.path).name)}: {s.frames} frames over "
            f"{s.duration_s:.3f} s, {len(self.connections)} TCP connections, "
            f"{len(self.warnings)} warnings<table><tr><th>table</th><th>rows</th><th>one row per</th></tr>"
            f"{rows}</table></div>"
        )

    def subset(self, **kw: Any) -> Capture:
        """The part of this capture about some connections and/or a time window, every table
        cut consistently: ``cap.subset(host=..., port=..., sni=..., stream=..., start=...,
        end=...)``. See :func:`pcaptools.select.subset`."""
        from .select import subset  # select imports this module

        return subset(self, **kw)

    def wireshark(self, fields: str | list[str] | tuple[str, ...],
                  display_filter: str | None = None, **kw: Any) -> pd.DataFrame:
        """Any Wireshark field of this capture's frames, as a typed DataFrame (runs tshark on
        ``summary.path`` with the key log given to :func:`load`): see
        :func:`pcaptools.wireshark.wireshark` for the options (``keylog=`` overrides the key log).
        On a :meth:`subset`, its display filter is ANDed with ``display_filter``."""
        from .wireshark import wireshark

        if self.summary.extra.get("stream"):
            raise UnsupportedInputError(
                f"{self.summary.path} was read from a stream (pipe, FIFO or file object): tshark "
                "cannot read it a second time; save the capture to a file (e.g. tcpdump -w - | "
                "tee cap.pcap | pcap-report -) and load that to use wireshark()"
            )
        kw.setdefault("keylog", self.summary.extra.get("keylog"))
        sub = self.summary.extra.get("subset_display_filter")
        if isinstance(sub, str) and sub:
            display_filter = f"({sub}) and ({display_filter})" if display_filter else sub
        return wireshark(self.summary.path, fields, display_filter, **kw)


@contextmanager
def _gc_relaxed(gen0: int = 100_000) -> Iterator[None]:
    """Run the frame loop with a rarer young-generation collection: the loop allocates
    millions of short-lived objects that reference counting frees at once, and Python's
    default threshold (700) makes the cycle collector scan them ~9% of the time for
    nothing. Cycles are still collected (later); the old threshold comes back after."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], gen0), *old[1:])
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
) -> Capture:
    """Read ``path`` once and return a :class:`Capture` with every table filled.

    ``path`` is a capture file, a FIFO, or a binary file object (``sys.stdin.buffer`` for
    ``tcpdump -w - | ...``, a socket's ``makefile("rb")``); streams are read without seeking,
    compressed ones too, and give the same tables as the file they carry (``summary.path`` is
    the stream's name, ``summary.file_size`` the bytes read, ``summary.extra["stream"]`` True).
    A stream cannot be read by ``workers`` > 1 or by :meth:`Capture.wireshark`:
    :class:`~pcaptools.errors.UnsupportedInputError`.

    Raises :class:`~pcaptools.errors.CaptureOpenError` / :class:`~pcaptools.errors.CaptureFormatError`
    only when the file cannot be read as a capture at all. Anything wrong inside it (a record cut
    off, a malformed header, an unsupported link type) becomes a row of ``Capture.warnings`` and the
    rest of the capture is still analysed.

    ``keylog``: an NSS key log file (SSLKEYLOGFILE) for TLS decryption; key logs embedded in a
    pcapng (Decryption Secrets Blocks) are used as well, both at once. Raises
    :class:`~pcaptools.errors.KeylogError` if the file cannot be read.
    ``show_secrets=False`` redacts credentials (Authorization, Cookie, Set-Cookie, API key headers:
    ``redaction.SECRET_HEADERS``) in every header column, credential query parameters
    (``?api_key=``, ``X-Amz-Signature``...) in every path and URL, and credential-like WebSocket
    subprotocols (:mod:`pcaptools.redaction`); ``True`` keeps them.
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
    :class:`~pcaptools.export.StreamedCapture` (per-connection tables in memory, the others
    read from their file when used); ``max_packet_rows`` does not apply then. Not with
    ``workers`` > 1 or ``shard``.
    ``packets=False`` skips the one table that grows with the number of frames;
    ``tls_records=False`` skips the per-record TLS table; ``payloads=False`` skips all payload
    work (TLS, HTTP, SSE and DNS tables stay empty; TCP tables are unchanged).
    ``workers=N`` (N > 1) analyses the capture on N processes (:mod:`pcaptools.parallel`): every
    process reads and follows all of TCP, each one parses the payloads of 1/N of the connections;
    the tables are the same, their rows ordered as described there. ``shard=(k, n)`` is that
    worker's part: only connections with ``tcp_stream % n == k`` (and, for ``k == 0``, what
    belongs to no connection) get rows.
    """
    if out is not None and (workers > 1 or shard is not None):
        raise ValueError("load(out=...) reads with one process: no workers or shard")
    if (workers > 1 or shard is not None) and is_stream(path):
        raise UnsupportedInputError(
            f"load(workers={workers}) reads the capture once per process, which a stream (pipe, "
            f"FIFO or file object: {getattr(path, 'name', path)}) cannot do: use workers=1, or "
            "save the stream to a file first"
        )
    if workers > 1 and shard is None:
        from .parallel import load_parallel  # parallel imports this module

        assert isinstance(path, (str, os.PathLike))  # (streams were refused above)

        return load_parallel(
            path, workers=workers, keylog=keylog, packets=packets, tls_records=tls_records,
            payloads=payloads, max_warnings_per_code=max_warnings_per_code,
            max_decompressed_bytes=max_decompressed_bytes, show_secrets=show_secrets,
            max_packet_rows=max_packet_rows, max_events_per_connection=max_events_per_connection,
            max_record_rows=max_record_rows,
        )
    diag = (Diagnostics(max_rows_per_code=max_warnings_per_code) if shard is None
            else ShardDiagnostics(shard, max_rows_per_code=max_warnings_per_code))
    keys = KeyLog.from_file(keylog, diag) if keylog is not None else KeyLog()
    decoder = PacketDecoder(diag)
    tls_builder = TlsTablesBuilder(records=tls_records)
    http_builder = HttpTablesBuilder(show_secrets=show_secrets)
    ws_builder = WsTablesBuilder(show_secrets=show_secrets)
    own_k, own_n = shard if shard is not None else (0, 1)
    # one observer per registered UDP protocol (protocols.registry); UDP is worker 0's, and
    # DNS over TCP and HTTPS (to the same DNS tracker) belongs to each connection's worker
    udp = REGISTRY.udp_route(diag) if payloads else None
    dns_tracker = udp.observer("dns", DnsTracker) if udp is not None else None
    udp_route = udp.route if udp is not None and own_k == 0 else None
    icmp_builder = IcmpErrorsBuilder(diag)

    event_cap = EventCap(max_events_per_connection, diag,
                         max_rows=max_record_rows if out is None else None,
                         skip=frozenset() if tls_records else frozenset({"tls_records"}))
    cap_events = event_cap if event_cap.active else None

    def conn_addrs(tcp_stream: int) -> tuple[int, bytes, int, bytes, int] | None:
        conns = tracker.connections
        if tcp_stream >= len(conns):
            return None
        c = conns[tcp_stream].conv
        return (c.ip_version, c.client_addr, c.client_port, c.server_addr, c.server_port)

    doh = DohCollector(dns_tracker, diag, conn_addrs) if dns_tracker is not None else None

    def emit(events: list[object]) -> None:
        if events:
            if cap_events is not None:
                events = cap_events(events)
            tls_builder.add(events)
            http_builder.add_all(events)
            ws_builder.add_all(events)
            if doh is not None:
                doh.add_all(events)

    def observer(tcp_stream: int, midstream: bool) -> StreamObserver | None:
        if tcp_stream % own_n != own_k:
            return None
        addrs = conn_addrs(tcp_stream)
        by_port = REGISTRY.tcp_port(addrs[4], addrs[2]) if addrs is not None else None
        if by_port is not None and addrs is not None and udp is not None:  # DNS over TCP
            obs: StreamObserver = by_port.factory(
                tcp_stream=tcp_stream, diag=diag, addrs=addrs, midstream=midstream,
                observers=udp.observers)
            return obs
        return ConnectionObserver(tcp_stream=tcp_stream, diag=diag, keylog=keys, midstream=midstream)

    tracker = TcpTracker(diag, observer_factory=observer if payloads else None, emit=emit)
    flows = FlowCounter(diag)
    pb = (PacketsBuilder(max_rows=max_packet_rows if out is None else None, diag=diag)
          if packets else None)
    pump = None
    if out is not None:  # streaming export: builders hand over finished rows while reading
        from .export import start_stream  # export imports this module

        pump = start_stream(out, [pb, tracker, tls_builder, http_builder, ws_builder],
                            chunk_rows=chunk_rows)
    secrets_seen = 0
    with (open_capture(path, diag, max_decompressed_bytes=max_decompressed_bytes) as reader,
          _gc_relaxed()):
        summary = CaptureSummary(
            path=str(reader.path) if hasattr(path, "read") else str(path),
            file_size=reader.file_size, format=reader.format,
            compression=reader.compression, linktypes=[],
        )
        if keylog is not None:  # for Capture.wireshark()
            summary.extra["keylog"] = os.path.abspath(keylog)
        n = tcp_n = udp_n = other_n = nonip_n = wire = data_segs = 0
        first_ts = last_ts = None
        decode = decoder.decode
        track = tracker.segment
        count_udp, count_other = flows.udp, flows.other
        for raw in reader.frames():
            if len(reader.secrets) > secrets_seen:  # a Decryption Secrets Block was just read
                for stype, data in reader.secrets[secrets_seen:]:
                    secrets_seen += 1
                    if stype == SECRETS_TLS_KEYLOG:
                        keys.add_text(data, diag, source=f"pcapng Decryption Secrets Block #{secrets_seen}")
                    else:
                        diag.add("capture.secrets_unsupported",
                                 f"Decryption Secrets Block #{secrets_seen} of type 0x{stype:08x} ignored")
            n += 1
            wire += raw.orig_len
            if first_ts is None:
                first_ts = raw.ts_ns
            last_ts = raw.ts_ns
            pkt = decode(raw)
            a = None
            if pkt is None:
                nonip_n += 1
                supported = decoder.supports(raw.linktype)
                flows.non_ip(raw, malformed=supported and diag.last_frame == raw.frame,
                             supported=supported)
            elif type(pkt) is TcpSegment:
                tcp_n += 1
                a = track(pkt)
                if pkt.seg_len:
                    data_segs += 1
            elif type(pkt) is UdpDatagram:
                udp_n += 1
                count_udp(pkt)
                if udp_route is not None:
                    udp_route(pkt)
            else:
                other_n += 1
                if type(pkt) is IpPacket:
                    count_other(pkt)
                    if pkt.quoted_tcp is not None:
                        a = tracker.unanalysed(pkt.quoted_tcp, pkt.quoted_tcp_len)
                if type(pkt) is IpPacket and pkt.icmp is not None:
                    icmp_builder.add(pkt, a)
            if pb is not None:  # (every worker sees the cap: the warning is worker 0's)
                pb.add_capped(raw, pkt, a, own_n == 1 or (a.tcp_stream % own_n == own_k
                                                          if a is not None else own_k == 0))
            if not n & 4095:
                if progress is not None:
                    progress(reader.bytes_read, reader.file_size if reader.size_known else 0)
                if pump is not None:
                    pump.poll()
        decoder.finish()
        tracker.finish(last_ts or 0, n)
        if progress is not None:
            progress(reader.bytes_read, reader.file_size)
        if not reader.size_known:  # a stream: its size is what was read of it
            summary.file_size = reader.file_size
            summary.extra["stream"] = True
        summary.linktypes = sorted({i.linktype for i in reader.interfaces})
        summary.tls_secrets = len(reader.secrets)
    summary.frames, summary.tcp_frames, summary.udp_frames = n, tcp_n, udp_n
    summary.other_ip_frames, summary.non_ip_frames, summary.wire_bytes = other_n, nonip_n, wire
    summary.first_ts_ns, summary.last_ts_ns = first_ts, last_ts
    summary.extra["tcp_data_segments"] = data_segs
    summary.extra["warning_counts"] = dict(diag.counts)
    summary.extra.update(event_cap.summary())
    tables = {
        "connections": connections_table(tracker),
        "tcp_handshakes": handshakes_table(tracker),
        "tcp_events": events_table(tracker),
        "tcp_losses": losses_table(tracker),
        "tls_handshakes": tls_builder.handshakes(),
        "tls_records": tls_builder.records(),
        **http_builder.tables(),
        **ws_builder.tables(),
        "ws_heartbeats": WS_TABLES["ws_heartbeats"].frame([]),  # derived from ws_frames below
        "dns": dns_table(dns_tracker),
        "icmp_errors": icmp_builder.frame(),
        "path_mtu": path_mtu_table(tracker, icmp_builder),
        "packets": pb.frame() if pb is not None else PACKETS.frame([]),
        "warnings": warnings_table(diag),
    }
    if shard is not None:
        for name in ("connections", "tcp_handshakes", "tcp_events", "path_mtu", "tcp_losses"):
            t = tables[name]
            tables[name] = t[t["tcp_stream"] % own_n == own_k].reset_index(drop=True)
        t = tables["icmp_errors"]  # (no connection: worker 0's)
        st = t["tcp_stream"]
        keep = (st % own_n == own_k).fillna(own_k == 0).to_numpy(bool)
        tables["icmp_errors"] = t[keep].reset_index(drop=True)
    tables["coverage"] = coverage_table(
        tables, flows if own_k == 0 else None, payloads=payloads,
        extra_streams=pump.sink.streams if pump is not None else None,  # type: ignore[attr-defined]
    )
    if not show_secrets:  # (ws_connections URL, host and subprotocol columns)
        tables["ws_connections"] = redact_ws_connections(tables["ws_connections"])
    if pump is not None:
        from .export import finish_stream

        return finish_stream(pump, summary, tables, capture_end=last_ts)
    tables["ws_heartbeats"] = websocket_heartbeats(
        tables["ws_frames"], connections=tables["connections"], capture_end=last_ts
    )
    return Capture(summary, tables)
