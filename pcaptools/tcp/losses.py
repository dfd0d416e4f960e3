"""Segments a sender had to send again, seen from any vantage point (the ``tcp_losses`` table).

tshark's ``tcp.analysis.retransmission`` flags a segment whose bytes the *capture* saw
before. That is only half of the losses: a segment lost *before* the capture point (seen
from the receiver's side) never shows twice; it shows as a hole in the sequence space that
a later segment fills, and tshark flags that fill ``out_of_order`` (or nothing). This
module follows each direction's sequence space as ranges (the highest byte seen and the
holes below it, never the payload) and classifies every segment that fills a hole or
repeats bytes already seen:

* **hole filled** (``lost_where = before_capture``): the fill is a resend when its TCP
  timestamp (TSval) is later than that of the segment that opened the hole; without
  timestamps, when its IPv4 identification is later (hosts that number packets per
  connection or globally); without either, when it came at least one handshake RTT (3 ms
  when unknown, tshark's out-of-order threshold) after the hole opened. Otherwise it is the
  original arriving late (reordering): no row, counted in :attr:`LossDirection.reordered`.
* **bytes seen twice**: a resend whose first copy passed the capture point. It is
  ``spurious`` when tshark calls it spurious (the peer had already acknowledged it when it
  was resent) or when the peer later reports the bytes twice with a D-SACK block (RFC 2883,
  looked for in the peer's ACKs for a while after the resend), else a loss
  ``after_capture``. At the receiver's side too: a first copy captured there but never
  acknowledged was discarded by the receiver (e.g. a late copy failing the PAWS check), so
  the sender did have to resend it.
* **hole acknowledged but never seen** (``kind = capture_drop``): the receiver had the bytes,
  the capture did not: packets the capture missed, not a network loss (a
  ``tcp.capture_drop`` warning row).
* **hole still open at the end** (``kind = unresolved``): neither filled nor acknowledged
  within the capture (``tcp.unresolved_gap``).

The vantage point (``connections.capture_vantage``) comes from the handshake: SYN to SYN-ACK
is the whole RTT and SYN-ACK to ACK almost nothing at the client, the reverse at the server
(:func:`vantage`). It says where "before" and "after" the capture point are.

Recovery (for loss and spurious rows) is told from what the capture shows at the resend:
``fast_retransmit`` when the peer had sent at least 2 duplicate ACKs (tshark's rule);
``rto`` when the oldest unacknowledged data is resent without duplicate ACKs;
``tail_loss_probe`` when the highest segment is resent without duplicate ACKs while older
data is still unacknowledged; ``unknown`` otherwise (e.g. a single segment in flight, where a
timeout and a probe look the same). Later resends of the same recovery episode (below the
highest byte sent when it began) take the episode's mechanism. ``recovery_ms`` is the time
from the first copy to the resend, or, when the first copy was never captured, from the
segment that opened the hole to the one that filled it.

Memory: two small records per connection; holes are kept per direction up to
:data:`MAX_LOSS_HOLES` (beyond, the oldest is given up as ``unresolved`` with a
``tcp.loss_holes_limit`` row), resends waiting for a D-SACK up to :data:`MAX_DSACK_PENDING`.
Per data segment in order, the cost is one comparison; per ACK, three.

Known limits: a resend that is itself lost before the capture point leaves one hole and one
row at the receiver's side (two at the sender's side); a segment lost before the capture
point at the very end of a burst opens no hole (nothing after it is captured) and its resend
looks like new data; SYN and FIN retransmissions are not rows (see ``tcp_handshakes``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .options import parse_options

if TYPE_CHECKING:
    from ..diagnostics import Diagnostics
    from ..net.packet import TcpSegment
    from .analysis import SegmentAnalysis, TcpDirection

__all__ = ["MAX_DSACK_PENDING", "MAX_LOSS_HOLES", "LossDirection", "LossRecorder", "vantage"]

_M32 = 0xFFFFFFFF
_HALF = 0x80000000

#: holes (sequence ranges not captured yet) remembered per direction
MAX_LOSS_HOLES = 1000

#: resends seen twice remembered per direction while a D-SACK may still declare them spurious
MAX_DSACK_PENDING = 64
#: how long (at least) a resend waits for a D-SACK
DSACK_WAIT_NS = 1_000_000_000

#: minimum RTO of common stacks (Linux); a resend earlier than this is not a timeout
_MIN_RTO_NS = 200_000_000

_DIRS = ("client_to_server", "server_to_client")
#: the options of a header with timestamps only (NOP, NOP, TS): no SACK block
NOP_NOP_TS = b"\x01\x01\x08\x0a"
_NOT_DATA_KINDS = frozenset({"keep_alive", "zero_window_probe"})


class LossDirection:
    """Sequence-space state of one direction for the loss table."""

    __slots__ = (
        "ack_last",
        "ack_opts",
        "capture_drop_bytes",
        "capture_drops",
        "episode_end",
        "episode_recovery",
        "hi",
        "holes",
        "lost",
        "lost_after",
        "lost_before",
        "pending",
        "reordered",
        "same_acks",
        "spurious",
        "unresolved",
    )

    def __init__(self) -> None:
        self.hi = -1
        """unwrapped relative sequence number after the highest payload byte seen (-1: none)"""
        self.holes: list[list[int]] = []
        """[start, end, gap_frame, gap_ts, tsval (-1: none), ip_id (0: none)], ascending"""
        self.lost = 0
        """rows of kind loss"""
        self.lost_before = 0
        self.lost_after = 0
        self.spurious = 0
        self.capture_drops = 0
        self.capture_drop_bytes = 0
        self.unresolved = 0
        self.reordered = 0
        """holes filled by the original arriving late (not losses)"""
        self.episode_end = -1
        """recovery episode: resends below this take episode_recovery"""
        self.episode_recovery = "unknown"
        self.ack_last = -1
        """last relative ACK number the peer sent for this direction's data"""
        self.same_acks = 0
        self.ack_opts = b""
        """TCP option bytes of the peer's last ACK (read only when a resend is classified)"""
        """payload-less ACKs from the peer in a row repeating ack_last (window changes included)"""
        self.pending: list[list[int]] = []
        """resends seen twice, waiting for a D-SACK: [row index, raw seq, raw end, ts_ns]"""


def _tsval(seg: TcpSegment) -> int:
    if seg.header_len <= 20:
        return -1
    ts = parse_options(seg.options).timestamps
    return -1 if ts is None else ts[0]


def vantage(syn_ts: int | None, synack_ts: int | None, ack_ts: int | None) -> str:
    """Where the capture was taken, from the handshake times: ``client`` (SYN to SYN-ACK
    holds the round trip, SYN-ACK to ACK at most a quarter of it), ``server`` (the reverse),
    ``middle`` (both parts comparable) or ``unknown`` (handshake not fully captured)."""
    if syn_ts is None or synack_ts is None or ack_ts is None:
        return "unknown"
    a, b = synack_ts - syn_ts, ack_ts - synack_ts
    if a < 0 or b < 0:
        return "unknown"
    if 4 * b <= a:
        return "client"
    if 4 * a <= b:
        return "server"
    return "middle"


class LossRecorder:
    """Collects the ``tcp_losses`` rows for every connection (fed by the TCP tracker)."""

    def __init__(self, diag: Diagnostics) -> None:
        self.diag = diag
        self.rows: list[tuple[object, ...]] = []
        """(tcp_stream, direction, kind, seq, len, first_frame, first_ts, frame, ts,
        gap_frame, gap_ts, lost_where, spurious, recovery, recovery_ms, dup_acks, tshark_kind)"""

    # ---- data segments -------------------------------------------------------------------

    def data(
        self, ld: LossDirection, seg: TcpSegment, a: SegmentAnalysis, d: int,
        fwd: TcpDirection, peer: TcpDirection, irtt_ns: int | None,
    ) -> None:
        """A segment with payload that is not simply the next bytes in order (or opens the
        direction). ``fwd``/``peer``: the analyser's state of this direction and the other."""
        rel = a.rel_seq + 1 if seg.flags & 0x02 else a.rel_seq  # SYN data starts after the SYN
        n = seg.seg_len
        hi = ld.hi
        if hi < 0:
            ld.hi = rel + n
            return
        delta = (rel - hi) & _M32
        if delta >= _HALF:
            delta -= 0x100000000
        start = hi + delta
        end = start + n
        if start >= hi:
            if start > hi:
                self._open(ld, hi, start, seg, a)
            ld.hi = end
            return
        if a.kinds and _NOT_DATA_KINDS.intersection(a.kinds):
            return
        # below the highest byte: fills holes, repeats bytes, or both
        top = end if end < hi else hi
        filled = 0
        hole: list[int] | None = None
        holes = ld.holes
        if holes and start < holes[-1][1]:
            keep: list[list[int]] = []
            for h in holes:
                hs, he = h[0], h[1]
                if he <= start or hs >= top:
                    keep.append(h)
                    continue
                lo = hs if hs > start else start
                up = he if he < top else top
                filled += up - lo
                if hole is None:
                    hole = h
                if hs < lo:
                    keep.append([hs, lo, *h[2:]])
                if up < he:
                    keep.append([up, he, *h[2:]])
            ld.holes = keep
        if end > hi:
            ld.hi = end
        tshark_kind = _tshark_kind(a.kinds)
        if hole is not None:
            if not self._is_resend(seg, hole, irtt_ns):
                ld.reordered += 1
                return
            recovery = self._recovery(ld, start, end, hi, peer, seg, seg.ts_ns - hole[3])
            ld.lost += 1
            ld.lost_before += 1
            self.rows.append((
                a.tcp_stream, _DIRS[d], "loss", start, n, None, None, seg.frame, seg.ts_ns,
                hole[2], hole[3], "before_capture", False, recovery,
                (seg.ts_ns - hole[3]) / 1e6, ld.same_acks, tshark_kind,
            ))
            return
        # every byte below hi was seen before: a resend whose first copy was captured
        first = _first_copy(fwd, seg)
        first_frame = first_ts = None
        if first is not None:
            first_frame, first_ts = first
        spurious = tshark_kind == "spurious_retransmission"
        elapsed = seg.ts_ns - first_ts if first_ts is not None else None
        recovery = self._recovery(ld, start, end, hi, peer, seg, elapsed)
        if spurious:
            ld.spurious += 1
        else:
            ld.lost += 1
            ld.lost_after += 1
            pend = ld.pending
            pend.append([len(self.rows), seg.seq & _M32, (seg.seq + n) & _M32, seg.ts_ns])
            if len(pend) > MAX_DSACK_PENDING:
                del pend[0]
        self.rows.append((
            a.tcp_stream, _DIRS[d], "spurious" if spurious else "loss", start, n,
            first_frame, first_ts, seg.frame, seg.ts_ns, None, None,
            None if spurious else "after_capture", spurious, recovery,
            None if elapsed is None else elapsed / 1e6, ld.same_acks, tshark_kind,
        ))

    def _open(self, ld: LossDirection, start: int, end: int, seg: TcpSegment,
              a: SegmentAnalysis) -> None:
        holes = ld.holes
        ip_id = seg.ip_id if seg.ip_version == 4 and seg.ip_id > 0 else 0
        holes.append([start, end, seg.frame, seg.ts_ns, _tsval(seg), ip_id])
        if len(holes) > MAX_LOSS_HOLES:
            h = holes.pop(0)
            self.diag.add(
                "tcp.loss_holes_limit",
                f"more than {MAX_LOSS_HOLES} uncaptured ranges in one direction: the oldest "
                f"({h[1] - h[0]} bytes at relative seq {h[0]}) is given up as unresolved",
                ts_ns=seg.ts_ns, frame=seg.frame, tcp_stream=a.tcp_stream,
                direction=_DIRS[0 if a.from_client else 1],
            )
            self._unresolved(ld, a.tcp_stream, 0 if a.from_client else 1, h)

    @staticmethod
    def _is_resend(seg: TcpSegment, hole: list[int], irtt_ns: int | None) -> bool:
        """Is the segment filling ``hole`` sent after the one that opened it?"""
        if hole[4] >= 0:
            tv = _tsval(seg)
            if tv >= 0 and tv != hole[4]:
                return ((tv - hole[4]) & _M32) < _HALF
        if hole[5] and seg.ip_version == 4 and seg.ip_id > 0 and seg.ip_id != hole[5]:
            return ((seg.ip_id - hole[5]) & 0xFFFF) < 0x8000
        thres = irtt_ns if irtt_ns else 3_000_000
        return seg.ts_ns - hole[3] >= thres

    @staticmethod
    def _recovery(ld: LossDirection, start: int, end: int, hi: int, peer: TcpDirection,
                  seg: TcpSegment, elapsed: int | None) -> str:
        if ld.same_acks >= 2 or (ld.ack_opts and parse_options(ld.ack_opts).sack_blocks):
            rec = "fast_retransmit"
        else:
            tail = end >= hi
            oldest = _oldest(peer, seg)
            if start < ld.episode_end and ld.episode_recovery != "unknown":
                return ld.episode_recovery  # later resends of one recovery episode
            if oldest and not tail:
                rec = "rto"
            elif tail and (not oldest or (elapsed is not None and elapsed < _MIN_RTO_NS)):
                rec = "tail_loss_probe"
            else:
                rec = "unknown"
        ld.episode_end = hi
        ld.episode_recovery = rec
        return rec

    # ---- acknowledgements and the end ----------------------------------------------------

    def acked(self, ld: LossDirection, rel_ack: int, tcp_stream: int, d: int,
              seg: TcpSegment) -> None:
        """The peer acknowledged up to ``rel_ack`` (relative, of direction ``d``): holes below
        it were received without being captured."""
        holes = ld.holes
        hi = ld.hi
        delta = (rel_ack - hi) & _M32
        if delta >= _HALF:
            delta -= 0x100000000
        ack = hi + delta
        while holes and holes[0][0] < ack:
            h = holes[0]
            hs, he = h[0], h[1]
            cut = he if he <= ack else ack
            if cut < he:
                h[0] = cut
            else:
                holes.pop(0)
            n = cut - hs
            ld.capture_drops += 1
            ld.capture_drop_bytes += n
            self.rows.append((
                tcp_stream, _DIRS[d], "capture_drop", hs, n, None, None, None, None,
                h[2], h[3], None, None, None, None, None, None,
            ))
            self.diag.add(
                "tcp.capture_drop",
                f"{n} bytes at relative seq {hs} were acknowledged (frame {seg.frame}) but never "
                f"captured (gap seen at frame {h[2]}): the capture missed them, not the network",
                ts_ns=seg.ts_ns, frame=seg.frame, tcp_stream=tcp_stream, direction=_DIRS[d],
            )

    def dsack(self, ld: LossDirection, seg: TcpSegment, irtt_ns: int | None) -> None:
        """An ACK from the peer while resends of this direction wait: a D-SACK block (RFC 2883:
        the first SACK block, below the cumulative ACK or inside the second block) covering a
        resend says the receiver got that data twice: the resend was spurious."""
        pend = ld.pending
        wait = max(DSACK_WAIT_NS, 4 * irtt_ns) if irtt_ns else DSACK_WAIT_NS
        ts = seg.ts_ns
        while pend and ts - pend[0][3] > wait:
            del pend[0]
        hl = seg.header_len
        if not pend or hl <= 20 or (hl == 32 and seg.options[:4] == NOP_NOP_TS):
            return  # no options, or only timestamps
        blocks = parse_options(seg.options).sack_blocks
        if not blocks:
            return
        le, re = blocks[0]
        ack = seg.ack & _M32
        below = ((ack - re) & _M32) < _HALF  # re <= ack
        inside = len(blocks) > 1 and ((le - blocks[1][0]) & _M32) < _HALF \
            and ((blocks[1][1] - re) & _M32) < _HALF
        if not (below or inside):
            return
        span = (re - le) & _M32
        keep = []
        for p in pend:
            if ((p[1] - le) & _M32) < span and ((p[2] - le - 1) & _M32) < span:
                i = p[0]
                r = list(self.rows[i])
                r[2], r[11], r[12] = "spurious", None, True
                self.rows[i] = tuple(r)
                ld.lost -= 1
                ld.lost_after -= 1
                ld.spurious += 1
            else:
                keep.append(p)
        ld.pending = keep

    def _unresolved(self, ld: LossDirection, tcp_stream: int, d: int, h: list[int]) -> None:
        ld.unresolved += 1
        self.rows.append((
            tcp_stream, _DIRS[d], "unresolved", h[0], h[1] - h[0], None, None, None, None,
            h[2], h[3], None, None, None, None, None, None,
        ))

    def finish(self, ld: LossDirection, tcp_stream: int, d: int) -> None:
        """End of capture: the holes left are unresolved (one warning per direction)."""
        if not ld.holes:
            return
        h0 = ld.holes[0]
        self.diag.add(
            "tcp.unresolved_gap",
            f"{len(ld.holes)} uncaptured range(s) ({sum(h[1] - h[0] for h in ld.holes)} bytes, "
            f"first at relative seq {h0[0]}) were neither resent nor acknowledged before the "
            "capture ended: lost or not captured, the capture cannot tell",
            ts_ns=h0[3], frame=h0[2], tcp_stream=tcp_stream, direction=_DIRS[d],
        )
        for h in ld.holes:
            self._unresolved(ld, tcp_stream, d, h)
        ld.holes = []


def _tshark_kind(kinds: tuple[str, ...]) -> str | None:
    for k in kinds:
        if k in ("retransmission", "fast_retransmission", "spurious_retransmission",
                 "out_of_order"):
            return k
    return None


def _oldest(peer: TcpDirection, seg: TcpSegment) -> bool:
    """Does ``seg`` start at or below the peer's last acknowledgement (the oldest unacked data)?"""
    d = ((seg.seq & _M32) - peer.lastack) & _M32
    return d == 0 or d >= _HALF


def _first_copy(fwd: TcpDirection, seg: TcpSegment) -> tuple[int, int] | None:
    """(frame, ts) of the oldest earlier segment in tshark's unacknowledged list that holds
    ``seg``'s first byte (None when it was already acknowledged or not tracked)."""
    seq = seg.seq & _M32
    frame = seg.frame
    for e in fwd.unacked:
        if e[0] != frame and ((seq - e[1]) & _M32) < ((e[2] - e[1]) & _M32):
            return e[0], e[3]
    return None
