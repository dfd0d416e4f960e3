"""Builder of the ``packets`` table: one row per frame, stored in typed column arrays."""

from __future__ import annotations

import pandas as pd

from .._columns import NA, CodeColumn, IntColumn
from ..io.frame import RawFrame
from ..net.packet import IpPacket, TcpSegment, UdpDatagram
from ..tcp.analysis import SegmentAnalysis
from ..tcp.tracker import addr_text
from .foundation import PACKETS

_FLAG_LETTERS = ((0x100, "N"), (0x80, "C"), (0x40, "E"), (0x20, "U"), (0x10, "A"), (0x08, "P"),
                 (0x04, "R"), (0x02, "S"), (0x01, "F"))
_FLAG_TEXT = ["".join(ch for bit, ch in _FLAG_LETTERS if f & bit) for f in range(0x200)]

_INT_COLS = ("frame", "ts", "frame_len", "cap_len", "interface", "ip_version", "ip_proto", "sport",
             "dport", "tcp_stream", "tcp_flags", "seq", "ack", "seq_raw", "ack_raw", "tcp_len",
             "window", "resent", "ack_rtt", "acks_frame")
_CODE_COLS = ("src", "dst", "direction", "flags")


class PacketsBuilder:
    """Appends one row per frame; memory ~170 bytes per frame (typed arrays)."""

    def __init__(self) -> None:
        self.ints = {n: IntColumn() for n in _INT_COLS}
        self.codes = {n: CodeColumn() for n in _CODE_COLS}
        self._addr_cache: dict[bytes, int] = {}
        self._dir_codes = (self.codes["direction"].code("client_to_server"),
                           self.codes["direction"].code("server_to_client"))
        # bind array appends once: this runs per packet
        i = self.ints
        self._app = tuple(i[n].data.append for n in _INT_COLS)
        c = self.codes
        self._capp = tuple(c[n].data.append for n in _CODE_COLS)

    def _addr(self, packed: bytes, col: CodeColumn) -> int:
        # src and dst share one code space so an address has the same code in both
        code = self._addr_cache.get(packed)
        if code is None:
            code = self._addr_cache[packed] = len(self._addr_cache)
            text = addr_text(packed)
            self.codes["src"].codes[text] = code
            self.codes["dst"].codes[text] = code
        return code

    def add(self, raw: RawFrame, pkt: TcpSegment | UdpDatagram | IpPacket | None,
            a: SegmentAnalysis | None) -> None:
        (frame, ts, flen, clen, iface, ipv, proto, sport, dport, stream, tflags, seq, ack, seq_raw,
         ack_raw, tlen, win, resent, rtt, acks) = self._app
        src_app, dst_app, dir_app, flags_app = self._capp
        frame(raw.frame)
        ts(raw.ts_ns)
        flen(raw.orig_len)
        clen(len(raw.data))
        iface(raw.interface)
        if pkt is None:
            for f in (ipv, proto, sport, dport):
                f(NA)
            src_app(-1)
            dst_app(-1)
        else:
            ipv(pkt.ip_version)
            src_app(self._addr(pkt.src, self.codes["src"]))
            dst_app(self._addr(pkt.dst, self.codes["dst"]))
            if isinstance(pkt, TcpSegment):
                proto(6)
                sport(pkt.sport)
                dport(pkt.dport)
            elif isinstance(pkt, UdpDatagram):
                proto(17)
                sport(pkt.sport)
                dport(pkt.dport)
            else:
                proto(pkt.proto)
                sport(NA)
                dport(NA)
        if a is not None and not isinstance(pkt, TcpSegment):
            # an ICMP error (or cut-short header) quoting a TCP header: tshark gives the frame
            # the connection's tcp.stream; nothing else of the quoted header is shown here
            stream(a.tcp_stream)
            for f in (tflags, seq, ack, seq_raw, ack_raw, tlen, win, resent, rtt, acks):
                f(NA)
            dir_app(self._dir_codes[0 if a.from_client else 1])
            flags_app(-1)
            return
        if a is None or not isinstance(pkt, TcpSegment):
            for f in (stream, tflags, seq, ack, seq_raw, ack_raw, tlen, win, resent, rtt, acks):
                f(NA)
            dir_app(-1)
            flags_app(-1)
            return
        stream(a.tcp_stream)
        tflags(pkt.flags)
        flags_app(self.codes["flags"].code(_FLAG_TEXT[pkt.flags & 0x1FF]))
        dir_app(self._dir_codes[0 if a.from_client else 1])
        seq(a.rel_seq)
        ack(NA if a.rel_ack is None else a.rel_ack)
        seq_raw(pkt.seq)
        ack_raw(pkt.ack if pkt.flags & 0x10 else NA)
        tlen(pkt.seg_len)
        win(a.window)
        resent(NA if pkt.seg_len == 0 else int(a.resent_bytes == pkt.seg_len))
        rtt(NA if a.ack_rtt_ns is None else a.ack_rtt_ns)
        acks(NA if a.acked_frame is None else a.acked_frame)

    def frame(self) -> pd.DataFrame:
        i, c = self.ints, self.codes
        ts = i["ts"].to_numpy()
        cols = {
            "frame": i["frame"].to_numpy(),
            "ts": ts,
            "frame_len": i["frame_len"].to_numpy(),
            "cap_len": i["cap_len"].to_numpy(),
            "interface": i["interface"].to_numpy(),
            "src": c["src"].to_categorical(),
            "dst": c["dst"].to_categorical(),
            "direction": c["direction"].to_categorical(),
            "flags": c["flags"].to_categorical(),
            "resent": i["resent"].to_boolean(),
            "ack_rtt_ms": i["ack_rtt"].to_float_ms(),
        }
        for n in ("ip_version", "ip_proto", "sport", "dport", "tcp_stream", "tcp_flags", "seq", "ack",
                  "seq_raw", "ack_raw", "tcp_len", "window", "acks_frame"):
            cols[n] = i[n].to_nullable()
        return PACKETS.frame(columns=cols)
