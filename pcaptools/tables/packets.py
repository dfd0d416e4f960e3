"""Builder of the ``packets`` table: one row per frame, stored in typed column arrays.

The one table that grows with the number of frames, so it has a row cap
(:meth:`PacketsBuilder.add_capped`, ``load(max_packet_rows=...)``): past it, frames get no row
and one ``table.packets_truncated`` warning says from which frame on. Measured on the
tiny-record bomb of ``docs/robustness.md``: ~171 bytes a row in the final DataFrame, ~330 bytes
a row of peak RSS while the table is built and converted.

The same builder records the ``tcp_sack_blocks`` table (one row per SACK block). Only a segment
whose TCP options can hold a SACK block has its options decoded: an ACK whose header is longer
than 20 bytes and is not exactly the usual NOP, NOP, timestamps layout (32 bytes with kind 8 as
its third byte). On Linux traffic (timestamps on) that is one header-length compare and one
one-byte slice per segment; a SACK block row is a tuple of nine values (~200 bytes), made
only for the few segments of a loss recovery.
"""

from __future__ import annotations

import sys

import pandas as pd

from .._columns import NA, CodeColumn, Records, boolean, categorical, float_ms, nullable
from ..diagnostics import Diagnostics
from ..io.frame import RawFrame
from ..net.packet import TCP_FLAGS, IpPacket, TcpSegment, UdpDatagram
from ..tcp.analysis import SegmentAnalysis
from ..tcp.options import sack_blocks
from ..tcp.tracker import addr_text
from .foundation import PACKETS, TCP_SACK_BLOCKS
from .schema import RowBuffer

#: (bit, letter) in Wireshark's order, highest bit first: N C E U A P R S F
_FLAG_LETTERS = tuple((bit, name[0]) for bit, name in reversed(TCP_FLAGS))
_FLAG_TEXT = ["".join(ch for bit, ch in _FLAG_LETTERS if f & bit) for f in range(0x200)]

_INT_COLS = ("frame", "ts", "frame_len", "cap_len", "interface", "ip_version", "ip_proto", "sport",
             "dport", "tcp_stream", "tcp_flags", "seq", "ack", "seq_raw", "ack_raw", "tcp_len",
             "window", "resent", "ack_rtt", "acks_frame")
_CODE_COLS = ("src", "dst", "direction", "flags")
_M32 = 0xFFFFFFFF
_DIRS = ("client_to_server", "server_to_client")

try:  # (True in the compiled build only: see _put_tcp_row)
    import cython

    _COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is not installed: pure Python
    _COMPILED = False
#: a TCP segment's row is written in place by :func:`_put_tcp_row` (compiled build, on a
#: little-endian machine: the byte order of the rows' format), not packed by struct
_IN_PLACE = _COMPILED and sys.byteorder == "little"
_ROW_BYTES = 8 * len(_INT_COLS) + 4 * len(_CODE_COLS)
_BLANK_ROW = bytes(_ROW_BYTES)


class PacketsBuilder:
    """Appends one row per frame; memory ~176 bytes per frame (packed records)."""

    def __init__(self, max_rows: int | None = None, diag: Diagnostics | None = None, *,
                 chunk_rows: int = 65536) -> None:
        """``max_rows``: :meth:`add_capped` adds rows for frames 1 to ``max_rows`` only (so at
        most that many rows; None: no cap); its ``table.packets_truncated`` row goes to ``diag``.
        :meth:`add` itself never checks. ``chunk_rows``: rows are packed in a bytearray and
        turned into numpy columns every that many rows (:class:`~pcaptools._columns.Records`)."""
        self.max_rows = max_rows
        self.last_frame = (1 << 63) - 1 if max_rows is None else max_rows
        """frame number of the last frame add_capped gives a row"""
        self.truncated_at: int | None = None
        """frame number of the first frame that got no row (None: nothing dropped)"""
        self._diag = diag
        self.records = Records([(n, "q") for n in _INT_COLS] + [(n, "i") for n in _CODE_COLS],
                               chunk_rows=chunk_rows)
        assert self.records.row_bytes == _ROW_BYTES  # (the layout _put_tcp_row writes)
        """the rows not yet handed over by :meth:`frame`"""
        self.codes = {n: CodeColumn() for n in _CODE_COLS if n not in ("src", "dst")}
        """the values of the direction and flags columns and their codes (only ``codes`` is
        used)"""
        self._addr_cache: dict[bytes, int] = {}
        """packed address -> its code in src and dst (one code space, so an address has the
        same code in both)"""
        self._addrs: list[bytes] = []
        """the packed addresses in code order"""
        self._addr_texts: list[str] = []
        """their text, made when the table is (a port scan's million addresses are not a
        million strings kept through the pass)"""
        self._dir_codes = (self.codes["direction"].code("client_to_server"),
                           self.codes["direction"].code("server_to_client"))
        self._flag_codes: list[int] = [-1] * 0x200
        self.sack_rows = RowBuffer(TCP_SACK_BLOCKS)
        """the ``tcp_sack_blocks`` rows not yet handed over (:meth:`sack_frame`)"""
        # bound once: add() runs per packet
        self._buf = self.records.buf
        self._pack = self.records.pack
        self._limit = self.records.limit

    def _addr(self, packed: bytes) -> int:
        code = self._addr_cache[packed] = len(self._addrs)
        self._addrs.append(packed)
        return code

    def _flags(self, flags: int) -> int:
        code = self._flag_codes[flags] = self.codes["flags"].code(_FLAG_TEXT[flags])
        return code

    def __len__(self) -> int:
        """rows held (added and not yet handed over by :meth:`frame`)"""
        return len(self.records)

    def add(self, raw: RawFrame, pkt: TcpSegment | UdpDatagram | IpPacket | None,
            a: SegmentAnalysis | None) -> None:
        """Append the row of one frame: one struct.pack per frame (the values of all columns)."""
        buf = self._buf
        if pkt is None:
            buf += self._pack(raw.frame, raw.ts_ns, raw.orig_len, len(raw.data), raw.interface,
                              NA, NA, NA, NA, NA if a is None else a.tcp_stream,
                              NA, NA, NA, NA, NA, NA, NA, NA, NA, NA, -1, -1,
                              -1 if a is None else self._dir_codes[0 if a.from_client else 1], -1)
        else:
            cache = self._addr_cache
            src = cache.get(pkt.src)
            if src is None:
                src = self._addr(pkt.src)
            dst = cache.get(pkt.dst)
            if dst is None:
                dst = self._addr(pkt.dst)
            t = type(pkt)
            if a is not None and (t is TcpSegment or isinstance(pkt, TcpSegment)):
                seg: TcpSegment = pkt  # type: ignore[assignment]
                flags = seg.flags
                fcode = self._flag_codes[flags & 0x1FF]
                if fcode < 0:
                    fcode = self._flags(flags & 0x1FF)
                seg_len = seg.seg_len
                rel_ack = a.rel_ack
                rtt = a.ack_rtt_ns
                acks = a.acked_frame
                if _IN_PLACE:
                    _put_tcp_row(
                        buf, raw.frame, raw.ts_ns, raw.orig_len, len(raw.data), raw.interface,
                        seg.ip_version, seg.sport, seg.dport, a.tcp_stream,
                        flags, a.rel_seq, NA if rel_ack is None else rel_ack,
                        seg.seq, seg.ack if flags & 0x10 else NA, seg_len,
                        a.window, NA if seg_len == 0 else int(a.resent_bytes == seg_len),
                        NA if rtt is None else rtt, NA if acks is None else acks,
                        src, dst, self._dir_codes[0 if a.from_client else 1], fcode)
                else:
                    buf += self._pack(
                        raw.frame, raw.ts_ns, raw.orig_len, len(raw.data), raw.interface,
                        seg.ip_version, 6, seg.sport, seg.dport, a.tcp_stream,
                        flags, a.rel_seq, NA if rel_ack is None else rel_ack,
                        seg.seq, seg.ack if flags & 0x10 else NA, seg_len,
                        a.window, NA if seg_len == 0 else int(a.resent_bytes == seg_len),
                        NA if rtt is None else rtt, NA if acks is None else acks,
                        src, dst, self._dir_codes[0 if a.from_client else 1], fcode)
                # SACK blocks: decode the options only where a SACK option can be (see the
                # module docstring): not on option-less headers, not on NOP NOP TS only
                hl = seg.header_len
                if hl == 32:
                    if seg.options[2:3] != b"\x08" and flags & 0x10:
                        self._sacks(raw, seg, a)
                elif hl > 20 and flags & 0x10:
                    self._sacks(raw, seg, a)
            else:
                if isinstance(pkt, (TcpSegment, UdpDatagram)):
                    proto = 6 if isinstance(pkt, TcpSegment) else 17
                    sport, dport = pkt.sport, pkt.dport
                else:
                    proto, sport, dport = pkt.proto, NA, NA
                # a not None here: an ICMP error (or cut-short header) quoting a TCP header:
                # tshark gives the frame the connection's tcp.stream; nothing else of the
                # quoted header is shown here
                buf += self._pack(
                    raw.frame, raw.ts_ns, raw.orig_len, len(raw.data), raw.interface,
                    pkt.ip_version, proto, sport, dport, NA if a is None else a.tcp_stream,
                    NA, NA, NA, NA, NA, NA, NA, NA, NA, NA, src, dst,
                    -1 if a is None else self._dir_codes[0 if a.from_client else 1], -1)
        if len(buf) >= self._limit:
            self.records.seal()

    def _sacks(self, raw: RawFrame, seg: TcpSegment, a: SegmentAnalysis) -> None:
        """The ``tcp_sack_blocks`` rows of one ACK: edges relative to the data sender's ISN,
        as Wireshark shows ``tcp.options.sack_le`` / ``sack_re``."""
        blocks = sack_blocks(seg.options)
        rel_ack = a.rel_ack
        if not blocks or rel_ack is None:
            return
        base = (seg.ack - rel_ack) & _M32
        rel = [((left - base) & _M32, (right - base) & _M32) for left, right in blocks]
        le0, re0 = rel[0]
        # RFC 2883 §4: a D-SACK block is the first one, below the cumulative ACK or inside
        # the second block (sequence-space comparisons)
        dsack = (0 < ((rel_ack - le0) & _M32) < 0x80000000) or (
            len(rel) > 1 and ((le0 - rel[1][0]) & _M32) < 0x80000000
            and ((rel[1][1] - re0) & _M32) < 0x80000000)
        d = _DIRS[0 if a.from_client else 1]
        rows = self.sack_rows
        frame, ts, stream = raw.frame, raw.ts_ns, a.tcp_stream
        rows.append((frame, ts, stream, d, rel_ack, 0, le0, re0, dsack))
        for i in range(1, len(rel)):
            rows.append((frame, ts, stream, d, rel_ack, i, rel[i][0], rel[i][1], False))

    def add_capped(self, raw: RawFrame, pkt: TcpSegment | UdpDatagram | IpPacket | None,
                   a: SegmentAnalysis | None, mine: bool = True) -> None:
        """:meth:`add` for frames numbered up to ``max_rows``; the first frame beyond gets one
        ``table.packets_truncated`` warning, later ones nothing (``Capture.summary.frames``
        says how many frames there are). The cap is on the frame number, not on a count of
        rows, so the workers of a parallel load, each adding its share of the frames
        (``mine``), agree on which get rows; every worker is offered every frame, so the one
        that keeps file-level warnings writes the row at the same frame as a single process."""
        if raw.frame <= self.last_frame:
            if mine:
                self.add(raw, pkt, a)
        elif self.truncated_at is None:
            self.truncated_at = raw.frame
            if self._diag is not None:
                self._diag.add(
                    "table.packets_truncated",
                    f"the packets table stops at frame {self.last_frame:,} "
                    f"(load(max_packet_rows={self.max_rows})): frame {raw.frame:,} and every "
                    "later frame have no packets row; every other table covers all frames",
                    frame=raw.frame, ts_ns=raw.ts_ns,
                )

    def pending(self) -> dict[str, int]:
        """Rows held, for :class:`~pcaptools.tables.schema.ChunkPump` (streaming export)."""
        return {"packets": len(self.records), "tcp_sack_blocks": len(self.sack_rows)}

    def drain(self, table: str = "packets") -> pd.DataFrame:
        """:meth:`frame` or :meth:`sack_frame` (the rows held, handed over): the streaming
        hook. The addresses are forgotten after each chunk (the next chunk's ``src`` and
        ``dst`` categories are its own addresses, in the order they come): the builder holds
        no state per address of the whole capture, and the chunks read back as one table
        have the categories :meth:`frame` gives it whole (first-seen order:
        ``pcaptools.export.ParquetSink``)."""
        if table == "tcp_sack_blocks":
            return self.sack_frame()
        df = self.frame()
        self._addr_cache = {}
        self._addrs = []
        self._addr_texts = []
        return df

    def sack_frame(self) -> pd.DataFrame:
        """The ``tcp_sack_blocks`` table of the rows added so far, handed over (the builder
        keeps none of them)."""
        return self.sack_rows.drain()

    def frame(self) -> pd.DataFrame:
        """The ``packets`` table of the rows added so far. They are handed over: the builder
        is then empty (category codes are kept), so a streaming caller gets each chunk once.
        Each column is converted on its own and its raw values freed, so the peak memory is
        the table plus the raw values (~176 bytes a row), not twice the table."""
        rec = self.records
        rec.seal()
        c = self.codes
        cols: dict[str, object] = {}
        for n in ("frame", "ts", "frame_len", "cap_len", "interface"):
            cols[n] = rec.column(n)
        cols["resent"] = boolean(rec.column("resent"))
        cols["ack_rtt_ms"] = float_ms(rec.column("ack_rtt"))
        for n in ("ip_version", "ip_proto", "sport", "dport", "tcp_stream", "tcp_flags", "seq", "ack",
                  "seq_raw", "ack_raw", "tcp_len", "window", "acks_frame"):
            cols[n] = nullable(rec.column(n))
        texts = self._addr_texts
        texts += [addr_text(p) for p in self._addrs[len(texts):]]
        addrs = pd.Index(texts, dtype=object)
        for n in _CODE_COLS:
            codes = rec.column(n)
            if n in c:
                cols[n] = categorical(c[n].codes, codes)
            else:  # (src, dst: the addresses in code order)
                cols[n] = pd.Categorical.from_codes(codes, categories=addrs)
        return PACKETS.frame(columns=cols, copy=False)


def _put_tcp_row(buf: bytearray, frame: int, ts: int, frame_len: int, cap_len: int,
                 interface: int, ip_version: int, sport: int, dport: int, tcp_stream: int,
                 tcp_flags: int, seq: int, ack: int, seq_raw: int, ack_raw: int, tcp_len: int,
                 window: int, resent: int, ack_rtt: int, acks_frame: int, src: int, dst: int,
                 direction: int, flags: int) -> int:
    """Append the ``packets`` row of a TCP segment to ``buf`` as ``Records.pack`` would (the
    :data:`_INT_COLS` as int64, then the :data:`_CODE_COLS` as int32, little endian; ip_proto
    6), written in place through C pointers: compiled build only (``_IN_PLACE``; packets.pxd
    types every argument, so no Python int is made for the row). Pure Python packs the row
    with struct instead (:meth:`PacketsBuilder.add`); the tables are the same either way
    (tests/test_accel.py)."""
    n = len(buf)
    buf.extend(_BLANK_ROW)
    at = buf  # (a char * to the bytearray's storage in the compiled build)
    q = cython.cast(cython.p_longlong, at + n)  # type: ignore[operator]  # (char * + n)
    q[0] = frame
    q[1] = ts
    q[2] = frame_len
    q[3] = cap_len
    q[4] = interface
    q[5] = ip_version
    q[6] = 6
    q[7] = sport
    q[8] = dport
    q[9] = tcp_stream
    q[10] = tcp_flags
    q[11] = seq
    q[12] = ack
    q[13] = seq_raw
    q[14] = ack_raw
    q[15] = tcp_len
    q[16] = window
    q[17] = resent
    q[18] = ack_rtt
    q[19] = acks_frame
    c = cython.cast(cython.p_int, q + 20)
    c[0] = src
    c[1] = dst
    c[2] = direction
    c[3] = flags
    return 0
