"""Builder of the ``packets`` table: one row per frame, stored in typed column arrays.

The one table that grows with the number of frames, so it has a row cap
(:meth:`PacketsBuilder.add_capped`, ``load(max_packet_rows=...)``): past it, frames get no row
and one ``table.packets_truncated`` warning says from which frame on. Measured on the
tiny-record bomb of ``docs/robustness.md``: 128 bytes a row in the final DataFrame (the same on
the TCP traffic of the benchmarks' ``big.pcap``), ~140 bytes a row of peak RSS while the table is
built and converted. The columns whose values the protocols bound are as narrow as those values
(``Int32`` ports, lengths and window, ``Int16`` flags and protocol numbers, ``Int8`` IP
version, ``int32`` cap_len and interface): 43 bytes a row less than 64-bit columns (171).

The same builder records the ``tcp_sack_blocks`` table (one row per SACK block). Only a segment
whose TCP options can hold a SACK block has its options decoded: an ACK whose header is longer
than 20 bytes and is not exactly the usual NOP, NOP, timestamps layout (32 bytes with kind 8 as
its third byte). On Linux traffic (timestamps on) that is one header-length compare and one
one-byte slice per segment; a SACK block row is a tuple of nine values (~200 bytes), made
only for the few segments of a loss recovery.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from .._columns import (
    NA,
    NA8,
    NA16,
    NA32,
    CodeColumn,
    Records,
    boolean,
    categorical,
    first_seen_codes,
    float_ms,
    nullable,
)
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

#: the fields of a row as :class:`~pcaptools._columns.Records` packs them, widest first so
#: that every field is aligned (rows are padded to 8 bytes): (name, struct code). The narrow
#: ones are as wide as their table column (foundation.PACKETS) or, for a code or a flag, as
#: their values need; a missing value is the type's smallest value (NA, NA32, NA16, NA8).
#: The ``flags`` column is not stored: it is made from ``tcp_flags`` when the table is.
_FIELDS = (
    ("frame", "q"), ("ts", "q"), ("frame_len", "q"), ("tcp_stream", "q"), ("seq", "q"),
    ("ack", "q"), ("seq_raw", "q"), ("ack_raw", "q"), ("ack_rtt", "q"), ("acks_frame", "q"),
    ("cap_len", "i"), ("interface", "i"), ("sport", "i"), ("dport", "i"), ("tcp_len", "i"),
    ("window", "i"), ("src", "i"), ("dst", "i"),
    ("ip_proto", "h"), ("tcp_flags", "h"),
    ("ip_version", "b"), ("resent", "b"), ("direction", "b"),
)
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
_TCP_LEN_MAX = 0x7FFFFFFF
"""the largest tcp.len the Int32 column holds: beyond it only an IPv6 Jumbo Payload claiming more
than 2 GiB (no link carries one), whose row gets NA and a ``table.packets_value_too_large``
warning (the other tables keep the length as the decoder gives it)"""
_ROW_BYTES = 120
"""bytes of a packed row: 10 int64, 8 int32, 2 int16 and 3 int8 fields, 1 byte of padding"""
_BLANK_ROW = bytes(_ROW_BYTES)


class PacketsBuilder:
    """Appends one row per frame; memory 120 bytes per frame (packed records)."""

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
        self.records = Records(_FIELDS, chunk_rows=chunk_rows, align=8)
        assert self.records.row_bytes == _ROW_BYTES  # (the layout _put_tcp_row writes)
        """the rows not yet handed over by :meth:`frame`"""
        self.codes = {n: CodeColumn() for n in ("direction", "flags")}
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
        self._flag_seen: dict[int, int] = {}
        """9-bit TCP flags value -> its code in the flags column (first-seen order)"""
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

    def _too_long(self, raw: RawFrame, seg_len: int) -> int:
        """The tcp_len cell of a segment whose length does not fit the column: NA (NA32), and
        a warning that says so."""
        if self._diag is not None:
            self._diag.add(
                "table.packets_value_too_large",
                f"frame {raw.frame:,}: tcp.len {seg_len:,} does not fit the packets table's "
                "tcp_len column (Int32): NA there (an IPv6 Jumbo Payload claiming more than "
                "2 GiB; no link carries one)",
                frame=raw.frame, ts_ns=raw.ts_ns,
            )
        return NA32

    def __len__(self) -> int:
        """rows held (added and not yet handed over by :meth:`frame`)"""
        return len(self.records)

    def add(self, raw: RawFrame, pkt: TcpSegment | UdpDatagram | IpPacket | None,
            a: SegmentAnalysis | None) -> None:
        """Append the row of one frame: one struct.pack per frame (the values of all columns)."""
        buf = self._buf
        if pkt is None:
            buf += self._pack(raw.frame, raw.ts_ns, raw.orig_len,
                              NA if a is None else a.tcp_stream, NA, NA, NA, NA, NA, NA,
                              len(raw.data), raw.interface, NA32, NA32, NA32, NA32, -1, -1,
                              NA16, NA16, NA8, NA8,
                              -1 if a is None else self._dir_codes[0 if a.from_client else 1])
        else:
            t = type(pkt)
            tcp = a is not None and (t is TcpSegment or isinstance(pkt, TcpSegment))
            if tcp:
                seg: TcpSegment = pkt  # type: ignore[assignment]
                s_addr, d_addr = seg.src, seg.dst  # (C fields in the compiled build)
            else:
                s_addr, d_addr = pkt.src, pkt.dst
            cache = self._addr_cache
            src = cache.get(s_addr)
            if src is None:
                src = self._addr(s_addr)
            dst = cache.get(d_addr)
            if dst is None:
                dst = self._addr(d_addr)
            if tcp and a is not None:  # (a is not None when tcp: said again for mypy)
                flags = seg.flags
                seg_len = seg.seg_len
                tcp_len = seg_len
                if seg_len > _TCP_LEN_MAX:
                    tcp_len = self._too_long(raw, seg_len)
                rel_ack = a.rel_ack
                rtt = a.ack_rtt_ns
                acks = a.acked_frame
                if _IN_PLACE:
                    _put_tcp_row(
                        buf, raw.frame, raw.ts_ns, raw.orig_len, a.tcp_stream, a.rel_seq,
                        NA if rel_ack is None else rel_ack, seg.seq,
                        seg.ack if flags & 0x10 else NA, NA if rtt is None else rtt,
                        NA if acks is None else acks, len(raw.data), raw.interface, seg.sport,
                        seg.dport, tcp_len, a.window, src, dst, flags, seg.ip_version,
                        NA8 if seg_len == 0 else int(a.resent_bytes == seg_len),
                        self._dir_codes[0 if a.from_client else 1])
                else:
                    buf += self._pack(
                        raw.frame, raw.ts_ns, raw.orig_len, a.tcp_stream, a.rel_seq,
                        NA if rel_ack is None else rel_ack, seg.seq,
                        seg.ack if flags & 0x10 else NA, NA if rtt is None else rtt,
                        NA if acks is None else acks, len(raw.data), raw.interface, seg.sport,
                        seg.dport, tcp_len, a.window, src, dst, 6, flags, seg.ip_version,
                        NA8 if seg_len == 0 else int(a.resent_bytes == seg_len),
                        self._dir_codes[0 if a.from_client else 1])
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
                    proto, sport, dport = pkt.proto, NA32, NA32
                # a not None here: an ICMP error (or cut-short header) quoting a TCP header:
                # tshark gives the frame the connection's tcp.stream; nothing else of the
                # quoted header is shown here
                buf += self._pack(
                    raw.frame, raw.ts_ns, raw.orig_len, NA if a is None else a.tcp_stream,
                    NA, NA, NA, NA, NA, NA, len(raw.data), raw.interface, sport, dport, NA32,
                    NA32, src, dst, proto, NA16, pkt.ip_version, NA8,
                    -1 if a is None else self._dir_codes[0 if a.from_client else 1])
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
        the table plus the raw values (120 bytes a row), not twice the table."""
        rec = self.records
        rec.seal()
        c = self.codes
        cols: dict[str, object] = {}
        for n in ("frame", "ts", "frame_len", "cap_len", "interface"):
            cols[n] = rec.column(n)
        cols["resent"] = boolean(rec.column("resent"))
        cols["ack_rtt_ms"] = float_ms(rec.column("ack_rtt"))
        for n in ("ip_version", "ip_proto", "sport", "dport", "tcp_stream", "seq", "ack",
                  "seq_raw", "ack_raw", "tcp_len", "window", "acks_frame"):
            cols[n] = nullable(rec.column(n))
        tcp_flags = rec.column("tcp_flags")
        # flags: the letters of the 9 flag bits, coded in the order the values first appear
        # (as coding them a row at a time would); NA where tcp_flags is (0x200: no 9 bits)
        nine = tcp_flags & 0x1FF
        nine[tcp_flags == NA16] = 0x200
        fl = c["flags"]
        cols["flags"] = categorical(fl.codes, first_seen_codes(
            nine, self._flag_seen, lambda f: fl.code(_FLAG_TEXT[f]), missing=0x200,
            dtype=np.int16))
        del nine
        cols["tcp_flags"] = nullable(tcp_flags)
        cols["direction"] = categorical(c["direction"].codes, rec.column("direction"))
        texts = self._addr_texts
        texts += [addr_text(p) for p in self._addrs[len(texts):]]
        addrs = pd.Index(texts, dtype=object)
        for n in ("src", "dst"):  # (the addresses in code order)
            cols[n] = pd.Categorical.from_codes(rec.column(n), categories=addrs)
        return PACKETS.frame(columns=cols, copy=False)


def _put_tcp_row(buf: bytearray, frame: int, ts: int, frame_len: int, tcp_stream: int,
                 seq: int, ack: int, seq_raw: int, ack_raw: int, ack_rtt: int, acks_frame: int,
                 cap_len: int, interface: int, sport: int, dport: int, tcp_len: int,
                 window: int, src: int, dst: int, tcp_flags: int, ip_version: int, resent: int,
                 direction: int) -> int:
    """Append the ``packets`` row of a TCP segment to ``buf`` as ``Records.pack`` would (the
    :data:`_FIELDS` in order, little endian, ip_proto 6; the padding stays zero), written in
    place through C pointers: compiled build only (``_IN_PLACE``; packets.pxd types every
    argument, so no Python int is made for the row). A C value is narrowed to its field's width
    without a check, so the caller passes only values that fit: the protocol fields bound the
    ports, flags and IP version, the reader the captured length and the interface, the capped
    shift the window, and :meth:`PacketsBuilder.add` checks tcp_len (a Jumbo Payload could
    claim more). Pure Python packs the row with struct instead (which would raise
    struct.error); the tables are the same either way (tests/test_accel.py)."""
    n = len(buf)
    buf.extend(_BLANK_ROW)
    at = buf  # (a char * to the bytearray's storage in the compiled build)
    q = cython.cast(cython.p_longlong, at + n)  # type: ignore[operator]  # (char * + n)
    q[0] = frame
    q[1] = ts
    q[2] = frame_len
    q[3] = tcp_stream
    q[4] = seq
    q[5] = ack
    q[6] = seq_raw
    q[7] = ack_raw
    q[8] = ack_rtt
    q[9] = acks_frame
    i = cython.cast(cython.p_int, q + 10)
    i[0] = cap_len
    i[1] = interface
    i[2] = sport
    i[3] = dport
    i[4] = tcp_len
    i[5] = window
    i[6] = src
    i[7] = dst
    h = cython.cast(cython.p_short, i + 8)
    h[0] = 6
    h[1] = tcp_flags
    b = cython.cast(cython.p_schar, h + 2)
    b[0] = ip_version
    b[1] = resent
    b[2] = direction
    return 0
