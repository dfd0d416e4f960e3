"""What one pass over a capture produces: :class:`CaptureSummary` (facts about the file),
:data:`TABLES` (every table a Capture holds, by attribute name, with its schema) and
:class:`Capture` (the tables of one capture).

This module sits in the pipeline layer, below the scale modules (``parallel``, ``export``,
``many``, ``select``, ``distributed``) that build and hold Captures, and below the front
door :func:`pcaptools.capture.load`, which re-exports these names (their documented home).
:meth:`Capture.to_parquet`, :meth:`Capture.to_csv` and :meth:`Capture.subset` delegate to
the scale layer, and :meth:`Capture.latency`, :meth:`Capture.disconnects` and
:meth:`Capture.overhead` to the analyses, with function-local imports: the one place this
module looks up (``tests/test_import_direction.py`` lists those edges).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import UnsupportedInputError
from .tables.heartbeats import DEFAULT_ANSWER_TIMEOUT_MS
from .tables.registry import TABLES as TABLES  # every table of a Capture, registered there
from .tcp.tracker import RETRANSMISSION_KINDS

__all__ = ["TABLES", "Capture", "CaptureSummary"]


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
    ``workers=N`` load), ``tcp_stream_opened`` (a ``load(shard=...)`` part only: the frame
    that began each of its own connections, which ``parallel.merge_shards`` numbers); after :meth:`Capture.subset`: ``subset`` and
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
    realtime_events: pd.DataFrame
    dns: pd.DataFrame
    quic_connections: pd.DataFrame
    quic_packets: pd.DataFrame
    quic_frames: pd.DataFrame
    http3_connections: pd.DataFrame
    http3_frames: pd.DataFrame
    http3_streams: pd.DataFrame
    http3_pushes: pd.DataFrame
    http3_sse_events: pd.DataFrame
    icmp_errors: pd.DataFrame
    path_mtu: pd.DataFrame
    packets: pd.DataFrame
    tcp_sack_blocks: pd.DataFrame
    warnings: pd.DataFrame
    coverage: pd.DataFrame

    @property
    def retransmissions(self) -> pd.DataFrame:
        """tcp_events rows that tshark's ``tcp.analysis.retransmission`` filter matches
        (kind retransmission, fast_retransmission or spurious_retransmission)."""
        ev = self.tcp_events
        return ev[ev["kind"].isin(RETRANSMISSION_KINDS)].reset_index(drop=True)

    # -- the derived analyses, on the capture (pure functions of these tables; each call
    # computes afresh). Their signatures are those of the functions they call, without the
    # capture (tests/test_capture_analyses.py compares them).

    def latency(self) -> pd.DataFrame:
        """One row per HTTP request (HTTP/1.1 and HTTP/2): DNS, TCP connect, TLS, time to
        first byte, time to first token, token gaps: :func:`pcaptools.analyses.latency.
        stream_latency` (schema ``STREAM_LATENCY`` in docs/tables.md)."""
        from .analyses.latency import stream_latency  # (upward: analyses read Captures)

        return stream_latency(self)

    def disconnects(
        self,
        *,
        idle_gap_s: float = 30.0,
        min_retransmissions: int = 3,
        heartbeat_grace: float = 2.0,
        reset_window_s: float = 5.0,
        fin_grace_s: float = 1.0,
        pmtu_min_retransmissions: int = 2,
        quic: bool = False,
        tcp: bool = True,
    ) -> pd.DataFrame:
        """One row per connection that did not end cleanly, with its verdict, evidence frames
        and Wireshark filter: :func:`pcaptools.analyses.disconnects` (its parameters are the
        rules' thresholds; ``quic=True``: QUIC connections too; ``quic=True, tcp=False``:
        only them). Its repr starts with the
        count of connections checked, clean and still open, so an empty result says what it
        means; ``attrs`` holds the same counts."""
        from .analyses.disconnects import disconnects

        return disconnects(
            self, idle_gap_s=idle_gap_s, min_retransmissions=min_retransmissions,
            heartbeat_grace=heartbeat_grace, reset_window_s=reset_window_s,
            fin_grace_s=fin_grace_s, pmtu_min_retransmissions=pmtu_min_retransmissions,
            quic=quic, tcp=tcp,
        )

    def conn_log(
        self,
        *,
        attempt_delay_s: float = 5.0,
        inactivity_timeout_s: float = 300.0,
        close_delay_s: float = 5.0,
        check_checksums: bool | None = None,
        likely_server_ports: frozenset[int] | set[int] | None = None,
    ) -> pd.DataFrame:
        """One row per connection as Zeek logs it (Zeek's connection boundaries, roles and
        letters; several rows can share a tcp_stream): :func:`pcaptools.analyses.conn_log`
        (schema ``CONN_LOG`` in docs/tables.md; the parameters are Zeek's timers)."""
        from .analyses.conn_log import conn_log

        return conn_log(
            self, attempt_delay_s=attempt_delay_s, inactivity_timeout_s=inactivity_timeout_s,
            close_delay_s=close_delay_s, check_checksums=check_checksums,
            likely_server_ports=likely_server_ports,
        )

    def overhead(self, *, by_direction: bool = False, quic: bool = False,
                 tcp: bool = True) -> pd.DataFrame:
        """Wire bytes by layer and purpose, per connection and in total, and goodput:
        :func:`pcaptools.analyses.overhead` (``quic=True``: QUIC connections too;
        ``tcp=False``: without the TCP connections)."""
        from .analyses.overhead import overhead

        return overhead(self, by_direction=by_direction, quic=quic, tcp=tcp)

    def heartbeats(self, *, answer_timeout_ms: float = DEFAULT_ANSWER_TIMEOUT_MS) -> pd.DataFrame:
        """Every heartbeat of the four mechanisms (WebSocket ping/pong, HTTP/2 PING, TCP
        keep-alive, QUIC PING) with its answer, in capture order: :func:`pcaptools.analyses.
        heartbeats.heartbeats` over ``ws_frames``, ``http2_frames``, ``tcp_events`` and
        ``quic_frames``, bounded by each connection's end (``ws_heartbeats`` holds the
        WebSocket rows only). ``answer_timeout_ms``: how long a ping may go unanswered before
        it counts as ``unanswered``."""
        from .tables.heartbeats import heartbeats  # (its home is analyses.heartbeats)

        return heartbeats(self.ws_frames, self.http2_frames, self.tcp_events,
                          connections=self.connections, answer_timeout_ms=answer_timeout_ms,
                          quic_frames=self.quic_frames, quic_connections=self.quic_connections)

    def request_timing(self, *, min_stall_ms: float = 100.0, cadence_factor: float = 3.0,
                       client_pause_ms: float | None = 500.0,
                       stall_table: pd.DataFrame | None = None,
                       latency: pd.DataFrame | None = None) -> pd.DataFrame:
        """Each request's time split into parts that add up to its total (DNS, connect, TLS,
        upload, network round trip, server wait, model wait, streaming, stalls) with a
        sentence: :func:`pcaptools.analyses.slow.request_timing` (``stall_table``:
        ``self.stalls()``, ``latency``: ``self.latency()``, if you have them)."""
        from .analyses.slow import request_timing

        return request_timing(self, min_stall_ms=min_stall_ms, cadence_factor=cadence_factor,
                              client_pause_ms=client_pause_ms, stall_table=stall_table,
                              latency=latency)

    def stalls(self, *, min_stall_ms: float = 100.0, cadence_factor: float = 3.0,
               client_pause_ms: float | None = 500.0,
               verdicts: pd.DataFrame | None = None,
               latency: pd.DataFrame | None = None) -> pd.DataFrame:
        """Every stall of a stream or connection with its cause and evidence frames:
        :func:`pcaptools.analyses.slow.stalls` (``verdicts``: ``self.disconnects()``,
        ``latency``: ``self.latency()``, if you have them already)."""
        from .analyses.slow import stalls

        return stalls(self, min_stall_ms=min_stall_ms, cadence_factor=cadence_factor,
                      client_pause_ms=client_pause_ms, verdicts=verdicts, latency=latency)

    def connection_series(self, tcp_stream: int | list[int] | None = None, *,
                          bin_ms: float | None = None) -> pd.DataFrame:
        """RTT, bytes in flight, receive window and throughput over time per TCP connection
        (needs packets=True): :func:`pcaptools.analyses.slow.connection_series`."""
        from .analyses.slow import connection_series

        return connection_series(self, tcp_stream, bin_ms=bin_ms)

    def to_parquet(self, directory: str | os.PathLike[str], **kw: Any) -> dict[str, Path]:
        """One ``<table>.parquet`` per table (+ ``captures.parquet``): see
        :func:`pcaptools.export.to_parquet`."""
        from .export import to_parquet  # (upward: export builds on this module)

        return to_parquet(self, directory, **kw)

    def to_csv(self, directory: str | os.PathLike[str], **kw: Any) -> dict[str, Path]:
        """One ``<table>.csv`` per table (+ ``captures.csv``): see
        :func:`pcaptools.export.to_csv`."""
        from .export import to_csv

        return to_csv(self, directory, **kw)

    def __repr__(self) -> str:
        s = self.summary
        return (f"<Capture {Path(s.path).name!r}: {s.frames} frames, "
                f"{len(self.connections)} TCP connections, {len(self.warnings)} warnings>")

    def _repr_html_(self) -> str:
        import html  # (lazily: only a notebook asks)

        s = self.summary
        rows = "".join(
            f"<tr><td><code>cap.{html.escape(n)}</code></td><td>{len(df)}</td>"
            f"<td>{html.escape(TABLES[n].grain)}</td></tr>"
            for n, df in self.tables.items() if n in TABLES
        )
        return (
            f"<div><b>Capture</b> {html.escape(Path(s.path).name)}: {s.frames} frames over "
            f"{s.duration_s:.3f} s, {len(self.connections)} TCP connections, "
            f"{len(self.warnings)} warnings<table>"
            f"<tr><th>table</th><th>rows</th><th>one row per</th></tr>"
            f"{rows}</table></div>"
        )

    def subset(self, **kw: Any) -> Capture:
        """The part of this capture about some connections and/or a time window, every table
        cut consistently: ``cap.subset(host=..., port=..., sni=..., stream=..., start=...,
        end=...)``. See :func:`pcaptools.select.subset`."""
        from .select import subset  # (upward: select builds on this module)

        return subset(self, **kw)

    def wireshark(self, fields: str | list[str] | tuple[str, ...],
                  display_filter: str | None = None, **kw: Any) -> pd.DataFrame:
        """Any Wireshark field of this capture's frames, as a typed DataFrame (runs tshark on
        ``summary.path`` with the key log given to :func:`~pcaptools.capture.load`): see
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

