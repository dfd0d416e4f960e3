"""The frame loop of a load: every frame of the capture to the decoder, then to the TCP
tracker, the UDP route or the ICMP builder, and to the packets table.

:func:`pcaptools.pipeline.load_capture` sets the sinks up and makes the tables; this module is
the one loop between them, run once per frame, so that ``scripts/build_accel.py`` can compile
it with its types (``frameloop.pxd``: C integer counters, and direct calls into the compiled
decoder and packets builder). The ``.py`` file is the reference and runs unchanged without
the build.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from .diagnostics import Diagnostics
from .io.frame import RawFrame
from .net.checksum import BAD, ChecksumChecker
from .net.decode import PacketDecoder
from .net.packet import IpPacket, TcpSegment, UdpDatagram
from .tables.coverage import FlowCounter
from .tables.icmp_tables import IcmpErrorsBuilder
from .tables.packets import PacketsBuilder
from .tcp.analysis import SegmentAnalysis
from .tcp.tracker import TcpTracker


class FrameSource(Protocol):
    """What the loop needs of an open capture (:class:`pcaptools.io.open.CaptureReader`)."""

    @property
    def secrets(self) -> list[tuple[int, bytes]]:
        """(type, data) of every Decryption Secrets Block read so far (grows while reading)"""

    def frames(self) -> Iterable[RawFrame]:
        """every frame, in file order"""


class FrameCounts:
    """What the loop counted (the :class:`~pcaptools.result.CaptureSummary` fields)."""

    __slots__ = ("data_segs", "first_ts", "last_ts", "n", "nonip_n", "other_n", "tcp_n",
                 "udp_n", "wire")

    def __init__(self) -> None:
        self.n = self.tcp_n = self.udp_n = self.other_n = self.nonip_n = 0
        self.wire = 0
        """frame.len summed"""
        self.data_segs = 0
        """TCP segments with payload (tcp.len > 0)"""
        self.first_ts: int | None = None
        self.last_ts: int | None = None


def feed_frames(
    reader: FrameSource,
    diag: Diagnostics,
    decoder: PacketDecoder,
    tracker: TcpTracker,
    flows: FlowCounter,
    udp_route: Callable[[UdpDatagram], None] | None,
    icmp_builder: IcmpErrorsBuilder,
    pb: PacketsBuilder | None,
    own_k: int,
    own_n: int,
    checksums: ChecksumChecker | None,
    secrets: Callable[[int], int],
    every_4096: Callable[[], None] | None,
) -> FrameCounts:
    """Reads every frame of ``reader`` into the sinks. ``secrets(seen)`` is called when the
    reader has read Decryption Secrets Blocks beyond the first ``seen`` (before the frame after
    them is fed) and returns how many it has taken; ``every_4096`` (progress, the streaming
    export's pump) after every 4,096th frame. ``own_k``/``own_n``: this worker's share of the
    connections (``a.tcp_stream % own_n == own_k``) gets packets rows."""
    c = FrameCounts()
    n = tcp_n = udp_n = other_n = nonip_n = wire = data_segs = 0
    first_ts = last_ts = None
    secrets_seen = 0
    all_mine = own_n == 1
    decode = decoder.decode
    count_udp, count_other = flows.udp, flows.other
    reader_secrets = reader.secrets
    for raw in reader.frames():
        if len(reader_secrets) > secrets_seen:  # a Decryption Secrets Block was just read
            secrets_seen = secrets(secrets_seen)
        n += 1
        wire += raw.orig_len
        if first_ts is None:
            first_ts = raw.ts_ns
        last_ts = raw.ts_ns
        pkt = decode(raw)
        a: SegmentAnalysis | None = None
        if pkt is None:
            nonip_n += 1
            supported = decoder.supports(raw.linktype)
            flows.non_ip(raw, malformed=supported and diag.last_frame == raw.frame,
                         supported=supported)
        elif type(pkt) is TcpSegment:
            tcp_n += 1
            seg: TcpSegment = pkt
            a = tracker.segment(seg)
            if checksums is not None and checksums.check(
                    raw.data, seg.frame, seg.ts_ns, seg.ip_version, seg.src, seg.dst, seg.sport,
                    seg.dport) == BAD:
                tracker.bad_checksum(seg, a)
            if seg.seg_len:
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
                if pkt.icmp is not None:
                    icmp_builder.add(pkt, a)
        if pb is not None:  # (every worker sees the cap: the warning is worker 0's)
            pb.add_capped(raw, pkt, a, all_mine or (a.tcp_stream % own_n == own_k
                                                    if a is not None else own_k == 0))
        if not n & 4095 and every_4096 is not None:
            every_4096()
    c.n, c.tcp_n, c.udp_n, c.other_n, c.nonip_n = n, tcp_n, udp_n, other_n, nonip_n
    c.wire, c.data_segs, c.first_ts, c.last_ts = wire, data_segs, first_ts, last_ts
    return c
