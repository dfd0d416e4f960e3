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
from zlib import crc32

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


def shard_of(src: bytes, sport: int, dst: bytes, dport: int, n: int) -> int:
    """The worker (0 .. n-1) of a parallel load that follows the TCP connections of this
    address pair, the same for both directions, in every process (no ``hash()``: it is
    salted per process). The ports and addresses are mixed by a multiplicative hash whose
    high bits are taken, so that ports a client picks in steps of two (Linux ``connect()``
    prefers even ones) still spread over the workers."""
    k = (crc32(src) ^ crc32(dst) ^ sport ^ dport) & 0xFFFFFFFF
    return (((k * 0x9E3779B1) & 0xFFFFFFFF) >> 16) % n


class FrameCounts:
    """What the loop counted (the :class:`~pcaptools.result.CaptureSummary` fields)."""

    __slots__ = ("data_segs", "first_ts", "last_ts", "n", "nonip_n", "opened", "other_n",
                 "tcp_n", "udp_n", "wire")

    def __init__(self) -> None:
        self.n = self.tcp_n = self.udp_n = self.other_n = self.nonip_n = 0
        self.wire = 0
        """frame.len summed"""
        self.data_segs = 0
        """TCP segments with payload (tcp.len > 0)"""
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self.opened: list[int] = []
        """(a worker of a parallel load, ``own_n`` > 1) the frame that opened each of its
        ``tcp_stream`` numbers, in number order: a worker numbers only the connections it
        follows, :func:`pcaptools.parallel.merge_shards` renumbers them as one process does"""


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
    export's pump) after every 4,096th frame. ``own_k``/``own_n``: this worker of a parallel
    load follows only the TCP connections whose address pair is its own
    (:func:`shard_of`), and ICMP errors quoting them; it decodes every frame, and worker 0
    takes what belongs to no TCP connection. Its ``tcp_stream`` numbers count its own
    connections; ``FrameCounts.opened`` says where each began."""
    c = FrameCounts()
    n = tcp_n = udp_n = other_n = nonip_n = wire = data_segs = 0
    first_ts = last_ts = None
    secrets_seen = 0
    all_mine = own_n == 1
    mine = True
    opened = c.opened
    convs = tracker.analyzer.conversations
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
            mine = own_k == 0
            supported = decoder.supports(raw.linktype)
            flows.non_ip(raw, malformed=supported and diag.last_frame == raw.frame,
                         supported=supported)
        elif type(pkt) is TcpSegment:
            tcp_n += 1
            seg: TcpSegment = pkt
            if all_mine:
                a = tracker.segment(seg)
            else:
                mine = shard_of(seg.src, seg.sport, seg.dst, seg.dport, own_n) == own_k
                if mine:
                    a = tracker.segment(seg)
            if checksums is not None and checksums.check(
                    raw.data, seg.frame, seg.ts_ns, seg.ip_version, seg.src, seg.dst, seg.sport,
                    seg.dport) == BAD and a is not None:  # (None: another worker's)
                tracker.bad_checksum(seg, a)
            if seg.seg_len:
                data_segs += 1
        elif type(pkt) is UdpDatagram:
            udp_n += 1
            mine = own_k == 0
            count_udp(pkt)
            if udp_route is not None:
                udp_route(pkt)
        else:
            other_n += 1
            mine = own_k == 0
            if type(pkt) is IpPacket:
                count_other(pkt)
                q = pkt.quoted_tcp
                if q is not None:
                    if all_mine:
                        a = tracker.unanalysed(q, pkt.quoted_tcp_len)
                    else:
                        mine = shard_of(q.src, q.sport, q.dst, q.dport, own_n) == own_k
                        if mine:
                            a = tracker.unanalysed(q, pkt.quoted_tcp_len)
                if pkt.icmp is not None:  # (every worker counts it: the cap is the same)
                    icmp_builder.add(pkt, a, mine)
        if not all_mine:
            while len(opened) < len(convs):  # (this frame began a tcp_stream of this worker)
                opened.append(raw.frame)
        if pb is not None:  # (every worker sees the cap: the warning is worker 0's)
            pb.add_capped(raw, pkt, a, mine)
        if not n & 4095 and every_4096 is not None:
            every_4096()
    c.n, c.tcp_n, c.udp_n, c.other_n, c.nonip_n = n, tcp_n, udp_n, other_n, nonip_n
    c.wire, c.data_segs, c.first_ts, c.last_ts = wire, data_segs, first_ts, last_ts
    return c
