"""Cold connections: those that have sent one payload-less SYN and nothing else (yet).

A port scan or SYN flood is millions of them, and most connections of any capture spend a
moment in this state before the SYN-ACK. :class:`~.tracker.TcpTracker` keeps such a
connection here as one packed row (~0.45 KB with its addresses and address-pair key)
instead of the analyzer's conversation and the tracker's record (~2.7 KB of Python objects).
When a
second segment of the address pair comes (the SYN-ACK, a retransmitted SYN, an RST, an ICMP
error quoting it) the tracker takes the SYN back (:meth:`ColdSyns.pop`) and replays it
through the full analysis with the ``tcp_stream`` number it was given, then goes on as if the
connection had never been cold. A connection still cold at the end of the capture gets its
``connections`` and ``tcp_handshakes`` rows from :func:`cold_connection_columns` and
:func:`cold_handshake_columns`: what the full path gives for one payload-less SYN, built as
whole columns (``tests/tcp/test_cold_syns.py`` checks the two give the same tables).

Only a SYN that the full path would turn into no analysis flag, no warning and no event goes
cold: SYN set and FIN, RST, ACK clear, no payload, a non-zero window (a zero window is a
Zeek ``W`` in the history), from an address pair with no connection (:func:`cold_eligible`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..net.packet import ACK, FIN, RST, SYN, TcpSegment
from .analysis import SegmentAnalysis
from .options import parse_options

_SFRA = SYN | FIN | RST | ACK

_FIELDS = (("stream", "q"), ("frame", "q"), ("ts", "q"), ("frame_len", "I"),
           ("ip_version", "B"), ("ttl", "B"), ("ip_id", "i"), ("sport", "H"), ("dport", "H"),
           ("seq", "I"), ("ack", "I"), ("flags", "H"), ("window", "H"), ("header_len", "H"),
           ("overhead_len", "I"), ("df", "B"), ("opts", "I"))
"""one cold SYN, packed (``opts``: index into :attr:`ColdSyns.options`): 61 bytes"""
_ROW = struct.Struct("<" + "".join(code for _, code in _FIELDS))
_DTYPE = np.dtype([(name, "<" + code) for name, code in _FIELDS])

_NO_KINDS: tuple[str, ...] = ()


def cold_eligible(seg: TcpSegment) -> bool:
    """Whether ``seg``, the first segment of an address pair, may stay cold (see the module
    docstring)."""
    return seg.flags & _SFRA == SYN and not seg.seg_len and seg.window != 0


class ColdSyns:
    """The cold connections of one tracker: a packed row each (:data:`_ROW`), in
    ``tcp_stream`` order, and ``keys``: address-pair key (both directions, as the analyzer
    keys them) -> row of the connections still cold. A row taken back by :meth:`pop` stays
    (its ``live`` flag cleared) so that row numbers never move."""

    __slots__ = ("_opt_ids", "buf", "dst", "keys", "live", "n_live", "options", "src")

    def __init__(self) -> None:
        self.buf = bytearray()
        """the rows, packed (:data:`_ROW`)"""
        self.src: list[bytes] = []
        self.dst: list[bytes] = []
        self.keys: dict[tuple[bytes, int, bytes, int], int] = {}
        self.live = bytearray()
        """1 while the row's connection is cold"""
        self.n_live = 0
        self.options: list[bytes] = []
        """distinct option bytes (a flood repeats one set)"""
        self._opt_ids: dict[bytes, int] = {}

    def __len__(self) -> int:
        return self.n_live

    def add(self, seg: TcpSegment, stream: int) -> SegmentAnalysis | None:
        """Keep ``seg`` (:func:`cold_eligible`) as the cold connection ``stream``; return the
        analysis :meth:`~.analysis.TcpAnalyzer.feed` gives a connection's first SYN (no
        conversation yet: ``conv`` is None). None, with nothing kept, for a field out of the
        row's range (the caller analyses the segment as any other)."""
        opts = seg.options
        oid = self._opt_ids.get(opts)
        if oid is None:
            oid = len(self.options)
        try:
            self.buf += _ROW.pack(stream, seg.frame, seg.ts_ns, seg.frame_len, seg.ip_version,
                                  seg.ttl, seg.ip_id, seg.sport, seg.dport, seg.seq, seg.ack,
                                  seg.flags, seg.window, seg.header_len, seg.overhead_len,
                                  1 if seg.df else 0, oid)
        except (struct.error, TypeError):
            return None
        if oid == len(self.options):
            self._opt_ids[opts] = oid
            self.options.append(opts)
        row = len(self.live)
        self.src.append(seg.src)
        self.dst.append(seg.dst)
        self.live.append(1)
        self.n_live += 1
        keys = self.keys
        keys[(seg.src, seg.sport, seg.dst, seg.dport)] = row
        keys[(seg.dst, seg.dport, seg.src, seg.sport)] = row
        return SegmentAnalysis(stream, None, True, 0, None, seg.window, _NO_KINDS, None, None,
                               None, None, 0, True)

    def find(self, seg: TcpSegment) -> int:
        """The row of the cold connection of ``seg``'s address pair (-1: none)."""
        if not self.n_live:
            return -1
        return self.keys.get((seg.src, seg.sport, seg.dst, seg.dport), -1)

    def pop(self, row: int) -> tuple[TcpSegment, int]:
        """Take the cold connection of ``row`` back: its SYN as the decoder made it, and its
        ``tcp_stream``. The row is no longer cold."""
        (stream, frame, ts, frame_len, ver, ttl, ip_id, sport, dport, seq, ack, flags, window,
         header_len, overhead_len, df, oid) = _ROW.unpack_from(self.buf, row * _ROW.size)
        src, dst = self.src[row], self.dst[row]
        seg = TcpSegment(frame, ts, frame_len, ver, src, dst, ttl, ip_id, sport, dport, seq, ack,
                         flags, window, header_len, self.options[oid], 0, b"", overhead_len,
                         bool(df))
        keys = self.keys
        keys.pop((src, sport, dst, dport), None)
        keys.pop((dst, dport, src, sport), None)  # (the same key for a SYN sent to itself)
        self.live[row] = 0
        self.n_live -= 1
        return seg, stream

    def rows_by_stream(self) -> tuple[np.ndarray, np.ndarray]:
        """(tcp_stream, row) of every connection still cold, in tcp_stream order."""
        rows = np.flatnonzero(np.frombuffer(self.live, dtype=np.uint8))
        return self.fields(rows)("stream"), rows

    def fields(self, rows: np.ndarray) -> Callable[[str], np.ndarray]:
        """The fields of ``rows``: a function of a field name giving its int64 column."""
        rec = np.frombuffer(self.buf, dtype=_DTYPE)[rows]
        return lambda name: rec[name].astype(np.int64)


# ------------------------------------------------------------------ table rows


def _na_int(n: int) -> Any:
    return pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool))


def _na_bool(n: int) -> Any:
    return pd.arrays.BooleanArray(np.zeros(n, bool), np.ones(n, bool))


def _pos_or_na(v: np.ndarray) -> Any:
    """v where > 0, else NA (the tables' ``_pos``)"""
    return pd.arrays.IntegerArray(v.copy(), v <= 0)


def _nonneg_or_na(v: np.ndarray) -> Any:
    return pd.arrays.IntegerArray(v.copy(), v < 0)


def _addr_texts(addrs: list[bytes], rows: np.ndarray, addr_text: Any) -> list[str]:
    memo: dict[bytes, str] = {}
    out = []
    for r in rows.tolist():
        b = addrs[r]
        s = memo.get(b)
        if s is None:
            s = memo[b] = addr_text(b)
        out.append(s)
    return out


def cold_connection_columns(cold: ColdSyns, rows: np.ndarray, addr_text: Any
                            ) -> dict[str, Any]:
    """The ``connections`` columns of the cold connections ``rows`` (what the tracker's
    record of a connection that sent one payload-less SYN gives: ``tcp_tables``)."""
    n = len(rows)
    col = cold.fields(rows)
    frame, ts = col("frame"), col("ts")
    flen = col("frame_len")
    ttl, ip_id = col("ttl"), col("ip_id")
    zeros, fzero = np.zeros(n, np.int64), np.zeros(n, np.float64)
    na = _na_int(n)
    ttl_na = _nonneg_or_na(ttl)
    return {
        "tcp_stream": col("stream"), "ip_version": col("ip_version"),
        "client_addr": _addr_texts(cold.src, rows, addr_text),
        "client_port": col("sport"),
        "server_addr": _addr_texts(cold.dst, rows, addr_text),
        "server_port": col("dport"),
        "client_inferred": np.zeros(n, bool),
        "first_frame": frame, "last_frame": frame, "first_ts": ts, "last_ts": ts,
        "duration_ms": fzero,
        "client_packets": np.ones(n, np.int64), "server_packets": zeros,
        "client_bytes": zeros, "server_bytes": zeros,
        "client_wire_bytes": flen, "server_wire_bytes": zeros,
        "client_resent_bytes": zeros, "server_resent_bytes": zeros,
        "retransmissions": zeros,
        "conn_state": ["S0"] * n, "history": ["S"] * n,
        "end_reason": ["open_at_eof"] * n, "end_by": [None] * n,
        "end_frame": na, "end_ts": na,
        "client_last_frame": _pos_or_na(frame),
        "client_last_ts": pd.arrays.IntegerArray(ts.copy(), frame <= 0),
        "server_last_frame": na, "server_last_ts": na,
        "client_fin_frame": na, "client_fin_ts": na, "server_fin_frame": na, "server_fin_ts": na,
        "rst_frame": na, "rst_ts": na, "rst_by": [None] * n, "rst_ttl": na, "rst_ip_id": na,
        "client_ttl_min": ttl_na, "client_ttl_max": ttl_na,
        "server_ttl_min": na, "server_ttl_max": na,
        "client_ip_id": _nonneg_or_na(ip_id), "server_ip_id": na,
        "client_first_ip_id": _pos_or_na(ip_id), "server_first_ip_id": na,
        "max_idle_ms": fzero, "max_idle_start_frame": na, "max_idle_end_frame": na,
        "max_idle_end_ts": na,
        "last_idle_ms": np.full(n, np.nan), "last_idle_start_frame": na,
        "last_idle_end_frame": na, "last_idle_end_ts": na,
        "client_unacked_frame": frame, "client_unacked_ts": ts,
        "server_unacked_frame": na, "server_unacked_ts": na,
        "client_tcp_handshake_bytes": flen, "server_tcp_handshake_bytes": zeros,
        "client_tcp_teardown_bytes": zeros, "server_tcp_teardown_bytes": zeros,
        "client_pure_ack_packets": zeros, "server_pure_ack_packets": zeros,
        "client_pure_ack_bytes": zeros, "server_pure_ack_bytes": zeros,
        "client_max_seg_bytes": zeros, "server_max_seg_bytes": zeros,
        "client_max_acked_seg_bytes": zeros, "server_max_acked_seg_bytes": zeros,
        "client_df": _na_bool(n), "server_df": _na_bool(n),
        "capture_vantage": ["unknown"] * n,
        "client_lost_segments": zeros, "server_lost_segments": zeros,
        "client_spurious_resends": zeros, "server_spurious_resends": zeros,
        "client_capture_drop_bytes": zeros, "server_capture_drop_bytes": zeros,
    }


def cold_handshake_columns(cold: ColdSyns, rows: np.ndarray) -> dict[str, Any]:
    """The ``tcp_handshakes`` columns of the cold connections ``rows`` (a SYN, no answer)."""
    n = len(rows)
    col = cold.fields(rows)
    na = _na_int(n)
    # the client's options, parsed once per distinct option bytes
    parsed = [parse_options(o) for o in cold.options]
    oid = col("opts")

    def per_option(value: Any, dtype: str) -> Any:
        vals = [value(p) for p in parsed]
        if dtype == "Int64":
            data = np.array([0 if v is None else v for v in vals], np.int64)[oid]
            mask = np.array([v is None for v in vals], bool)[oid]
            return pd.arrays.IntegerArray(data, mask)
        return pd.arrays.BooleanArray(np.array(vals, bool)[oid], np.zeros(n, bool))

    return {
        "tcp_stream": col("stream"), "syn_frame": col("frame"),
        "syn_ts": col("ts"), "syn_count": np.ones(n, np.int64),
        "synack_frame": na, "synack_ts": na, "synack_count": np.zeros(n, np.int64),
        "ack_frame": na, "ack_ts": na,
        "irtt_ms": np.full(n, np.nan), "syn_to_synack_ms": np.full(n, np.nan),
        "result": ["no_answer"] * n,
        "client_mss": per_option(lambda p: p.mss, "Int64"), "server_mss": na,
        "client_wscale": per_option(lambda p: p.wscale, "Int64"), "server_wscale": na,
        "client_sack_perm": per_option(lambda p: p.sack_perm, "boolean"),
        "server_sack_perm": _na_bool(n),
        "client_timestamps": per_option(lambda p: p.timestamps is not None, "boolean"),
        "server_timestamps": _na_bool(n),
        "tfo_cookie_request": per_option(lambda p: p.tfo == b"", "boolean"),
        "tfo_cookie_len": per_option(lambda p: len(p.tfo) if p.tfo else None, "Int64"),
        "syn_data_bytes": np.zeros(n, np.int64),
    }
