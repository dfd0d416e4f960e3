"""Run TcpAnalyzer over a capture and compare it, frame by frame, with tshark 4.0's TCP fields."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import open_capture
from pcaptools.io.frame import RawFrame
from pcaptools.net.decode import PacketDecoder
from pcaptools.net.packet import IpPacket, TcpSegment
from pcaptools.tcp.analysis import SegmentAnalysis, TcpAnalyzer
from pcaptools.tcp.tracker import TcpTracker
from tests.oracle import tshark_fields

FIELDS: tuple[str, ...] = (
    "frame.number",
    "tcp.stream",
    "tcp.seq",
    "tcp.ack",
    "tcp.window_size",
    "tcp.analysis.retransmission",
    "tcp.analysis.fast_retransmission",
    "tcp.analysis.spurious_retransmission",
    "tcp.analysis.out_of_order",
    "tcp.analysis.lost_segment",
    "tcp.analysis.ack_lost_segment",
    "tcp.analysis.duplicate_ack_num",
    "tcp.analysis.duplicate_ack_frame",
    "tcp.analysis.keep_alive",
    "tcp.analysis.keep_alive_ack",
    "tcp.analysis.zero_window",
    "tcp.analysis.zero_window_probe",
    "tcp.analysis.zero_window_probe_ack",
    "tcp.analysis.window_full",
    "tcp.analysis.window_update",
    "tcp.analysis.reused_ports",
    "tcp.analysis.ack_rtt",
    "tcp.analysis.acks_frame",
    "tcp.analysis.initial_rtt",
)
_IDX = {f: i for i, f in enumerate(FIELDS)}

#: our kind -> the tshark field whose presence marks it
FLAG_FIELDS: dict[str, str] = {
    "retransmission": "tcp.analysis.retransmission",
    "fast_retransmission": "tcp.analysis.fast_retransmission",
    "spurious_retransmission": "tcp.analysis.spurious_retransmission",
    "out_of_order": "tcp.analysis.out_of_order",
    "lost_segment": "tcp.analysis.lost_segment",
    "ack_lost_segment": "tcp.analysis.ack_lost_segment",
    "duplicate_ack": "tcp.analysis.duplicate_ack_num",
    "keep_alive": "tcp.analysis.keep_alive",
    "keep_alive_ack": "tcp.analysis.keep_alive_ack",
    "zero_window": "tcp.analysis.zero_window",
    "zero_window_probe": "tcp.analysis.zero_window_probe",
    "zero_window_probe_ack": "tcp.analysis.zero_window_probe_ack",
    "window_full": "tcp.analysis.window_full",
    "window_update": "tcp.analysis.window_update",
    "reused_ports": "tcp.analysis.reused_ports",
}


def _icmp_quoted_tcp(raw: RawFrame, pkt: IpPacket) -> tuple[TcpSegment, int] | None:
    """The TCP header quoted in an ICMP/ICMPv6 error, as tshark dissects it, and its length.

    Test-side stand-in until the decoder surfaces quoted headers: finds the outer IP header by
    its addresses, then the quoted IP + TCP header after the 8-byte ICMP header.
    """
    d = raw.data
    if pkt.proto == 1 and pkt.ip_version == 4:
        o = d.find(pkt.src + pkt.dst)
        while o >= 12 and not (d[o - 12] >> 4 == 4 and d[o - 3] == 1):
            o = d.find(pkt.src + pkt.dst, o + 1)
        if o < 12:
            return None
        ip = o - 12
        icmp = ip + (d[ip] & 0x0F) * 4
        if len(d) < icmp + 8 or d[icmp] not in (3, 4, 5, 11, 12):
            return None
    elif pkt.proto == 58 and pkt.ip_version == 6:
        o = d.find(pkt.src + pkt.dst)
        if o < 8 or d[o - 8] >> 4 != 6 or d[o - 2] != 58:
            return None
        icmp = o + 32
        if len(d) < icmp + 8 or d[icmp] not in (1, 2, 3, 4):
            return None
    else:
        return None
    q = icmp + 8
    if len(d) < q + 1:
        return None
    if d[q] >> 4 == 4 and len(d) >= q + 20 and d[q + 9] == 6:
        ihl = (d[q] & 0x0F) * 4
        tot = struct.unpack_from(">H", d, q + 2)[0]
        src, dst, tcp, end = d[q + 12 : q + 16], d[q + 16 : q + 20], q + ihl, min(len(d), q + tot)
        ver = 4
    elif d[q] >> 4 == 6 and len(d) >= q + 40 and d[q + 6] == 6:
        plen = struct.unpack_from(">H", d, q + 4)[0]
        src, dst, tcp, end = (
            d[q + 8 : q + 24],
            d[q + 24 : q + 40],
            q + 40,
            min(len(d), q + 40 + plen),
        )
        ver = 6
    else:
        return None
    captured = end - tcp
    if captured < 16:
        return None
    sport, dport, seq, ack, offflags, win = struct.unpack_from(">HHIIHH", d, tcp)
    hlen = (offflags >> 12) * 4
    seg = TcpSegment(
        raw.frame,
        raw.ts_ns,
        raw.orig_len,
        ver,
        bytes(src),
        bytes(dst),
        0,
        -1,
        sport,
        dport,
        seq,
        ack,
        offflags & 0x1FF,
        win,
        hlen,
        bytes(d[tcp + 20 : min(tcp + hlen, end)]),
        0,
        b"",
        0,
    )
    return seg, captured


def tcp_items(path: str | Path) -> Iterator[tuple[TcpSegment, int | None]]:
    """(segment, None) for every TCP segment; (quoted header, captured bytes) for ICMP-quoted ones.

    Read with the project's own reader and decoder.
    """
    diag = Diagnostics()
    decoder = PacketDecoder(diag)
    with open_capture(path, diag) as reader:
        for raw in reader.frames():
            pkt = decoder.decode(raw)
            if isinstance(pkt, TcpSegment):
                yield pkt, None
            elif isinstance(pkt, IpPacket) and pkt.proto in (1, 58):
                q = _icmp_quoted_tcp(raw, pkt)
                if q is not None:
                    yield q


def feed(tracker: TcpTracker, path: str | Path) -> int:
    """Every TCP segment of the capture to ``tracker`` (the ICMP-quoted headers as
    :meth:`~TcpTracker.unanalysed`), as the pipeline gives them; returns the last frame number
    (0: none)."""
    last = 0
    for seg, captured in tcp_items(path):
        last = seg.frame
        if captured is None:
            tracker.segment(seg)
        else:
            tracker.unanalysed(seg, captured)
    return last


def tcp_segments(path: str | Path) -> Iterator[TcpSegment]:
    """Every TCP segment of the capture (not the ICMP-quoted headers)."""
    for seg, captured in tcp_items(path):
        if captured is None:
            yield seg


def seconds_to_ns(text: str) -> int:
    """tshark's '0.002247000' (or '-0.000001000') -> integer nanoseconds, exactly."""
    neg = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    ns = int(whole or "0") * 1_000_000_000 + int((frac + "000000000")[:9])
    return -ns if neg else ns


@dataclass
class Comparison:
    """Result of comparing one capture: mismatches keyed by (frame, what)."""

    tshark_frames: int = 0
    our_frames: int = 0
    streams: int = 0
    mismatches: dict[tuple[int, str], tuple[object, object]] = field(default_factory=dict)
    flag_frames: dict[str, int] = field(default_factory=dict)
    """kind -> number of frames tshark flags with it (our kinds; retransmission = plain only)"""
    ack_rtts: int = 0
    irtt_streams: int = 0

    def add(self, frame: int, what: str, theirs: object, ours: object) -> None:
        self.mismatches[(frame, what)] = (theirs, ours)


def analyse(
    path: str | Path,
    with_quoted: bool = False,
) -> tuple[TcpAnalyzer, list[tuple[TcpSegment, SegmentAnalysis, int | None]]]:
    """Feed every segment; return the analyzer and (segment, analysis, conv.irtt_ns after it).

    With ``with_quoted``, ICMP-quoted TCP headers go through ``feed_unanalysed`` and are listed too.
    """
    an = TcpAnalyzer(Diagnostics())
    out = []
    for seg, captured in tcp_items(path):
        if captured is None:
            a: SegmentAnalysis | None = an.feed(seg)
        elif with_quoted:
            a = an.feed_unanalysed(seg, captured)
        else:
            continue
        if a is not None:
            out.append((seg, a, a.conv.irtt_ns))
    return an, out


def compare(path: str | Path) -> Comparison:
    """Compare every TCP frame of ``path`` with tshark (single pass, default preferences)."""
    rows = tshark_fields(str(path), FIELDS, (), "tcp")
    # rows without tcp.stream: a TCP header too short for tshark to look up its conversation
    # (e.g. 8 bytes quoted in an ICMP error); we give those no analysis either
    theirs = {int(r[0]): r for r in rows if r[1]}
    an, ours = analyse(path, with_quoted=True)
    res = Comparison(tshark_frames=len(theirs), our_frames=len(ours), streams=len(an.conversations))
    seen: set[int] = set()
    for seg, a, irtt in ours:
        f = seg.frame
        seen.add(f)
        r = theirs.get(f)
        if r is None:
            res.add(f, "frame_missing_in_tshark", None, f)
            continue
        g = r.__getitem__
        if int(g(1)) != a.tcp_stream:
            res.add(f, "tcp.stream", int(g(1)), a.tcp_stream)
        if int(g(2)) != a.rel_seq:
            res.add(f, "tcp.seq", int(g(2)), a.rel_seq)
        want_ack = a.rel_ack if a.rel_ack is not None else seg.ack
        if int(g(3)) != want_ack:
            res.add(f, "tcp.ack", int(g(3)), want_ack)
        if int(g(4)) != a.window:
            res.add(f, "tcp.window_size", int(g(4)), a.window)
        tk = {k for k, fld in FLAG_FIELDS.items() if g(_IDX[fld])}
        if tk & {"fast_retransmission", "spurious_retransmission"}:
            tk.discard("retransmission")  # tshark also sets the generic field on these
        for k in tk:
            res.flag_frames[k] = res.flag_frames.get(k, 0) + 1
        if tk != set(a.kinds):
            res.add(f, "kinds", sorted(tk), sorted(a.kinds))
        dn = g(_IDX["tcp.analysis.duplicate_ack_num"])
        if (int(dn) if dn else None) != a.dup_ack_num:
            res.add(f, "duplicate_ack_num", dn, a.dup_ack_num)
        dfr = g(_IDX["tcp.analysis.duplicate_ack_frame"])
        if (int(dfr) if dfr else None) != a.dup_ack_frame:
            res.add(f, "duplicate_ack_frame", dfr, a.dup_ack_frame)
        af = g(_IDX["tcp.analysis.acks_frame"])
        if (int(af) if af else None) != a.acked_frame:
            res.add(f, "acks_frame", af, a.acked_frame)
        rtt = g(_IDX["tcp.analysis.ack_rtt"])
        if rtt:
            res.ack_rtts += 1
        if (seconds_to_ns(rtt) if rtt else None) != a.ack_rtt_ns:
            res.add(f, "ack_rtt", rtt, a.ack_rtt_ns)
        # initial_rtt: tshark shows the stream's value (as it is after this frame) on frames that
        # carry any analysis item; check it where it is shown, and its absence where other
        # analysis items are shown.
        ir = g(_IDX["tcp.analysis.initial_rtt"])
        if ir:
            if seconds_to_ns(ir) != irtt:
                res.add(f, "initial_rtt", ir, irtt)
        elif (af or tk) and irtt is not None:
            res.add(f, "initial_rtt", None, irtt)
    for f in theirs.keys() - seen:
        res.add(f, "frame_missing_in_ours", f, None)
    res.irtt_streams = sum(1 for c in an.conversations if c.irtt_ns is not None)
    return res
