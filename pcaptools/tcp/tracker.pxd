# Cython declarations for tracker.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# What it buys: TcpTracker, its per-connection records (Connection, DirStats), _Guarded
# (called for every chunk of payload) and _Streams (a connection's reassemblers and observer,
# read for every segment with payload) become extension types, so TcpTracker.segment reads and
# writes a connection's state as C struct fields and calls the analyzer, the history, the
# sequence follower, the loss state and the reassemblers (connstate.pxd, gaps.pxd, losses.pxd,
# reassembly.pxd) as C methods and structs. Tests that replace TcpTracker methods do it in a
# subclass (tests/tcp/_tracker_patch.py): an extension type's methods cannot be set on the
# class.
# Every record field stays a Python object except where its .pxd says otherwise, and except
# DirStats' counters and header values, C integers (long long) that Python code reads back as
# ints of the same value: ttl and its range (8-bit, -1 for none), ip_id (16-bit, -1), the byte
# and packet counts of one direction (sums of 32-bit frame lengths: 2**31 frames of 4 GiB
# before int64 overflows) and the largest segments (16-bit IP lengths). Each is written from a
# TcpSegment's C field (packet.pxd) with no int object; last_frame and last_ts stay objects
# (they hold the segment's own frame and ts_ns objects, stored without making an int).

import cython

from pcaptools.net.packet cimport TcpSegment
from pcaptools.tcp.analysis cimport SegmentAnalysis, TcpAnalyzer
from pcaptools.tcp.connstate cimport ConnHistory
from pcaptools.tcp.gaps cimport SeqFollower
from pcaptools.tcp.losses cimport LossDirection
from pcaptools.tcp.reassembly cimport Reassembler


cdef class _Guarded:
    cdef public object _diag
    cdef public object _obs
    cdef public object _tcp_stream
    cdef public bint failed

    cpdef feed(self, chunk)


cdef class _Streams:
    cdef public _Guarded observer
    cdef public tuple reasm
    cdef public list seq_hi
    cdef public list closed


cdef class DirStats:
    cdef public object last_frame
    cdef public object last_ts
    cdef public long long ttl
    cdef public long long ttl_min
    cdef public long long ttl_max
    cdef public long long ip_id
    cdef public long long ip_id_first
    cdef public long long handshake_bytes
    cdef public long long teardown_bytes
    cdef public long long pure_ack_packets
    cdef public long long pure_ack_bytes
    cdef public long long max_seg
    cdef public long long max_acked
    cdef public long long no_df_packets
    cdef public object big
    cdef public object shrink
    cdef public long long packets
    cdef public long long payload_bytes
    cdef public long long wire_bytes
    cdef public long long resent_bytes


cdef class Connection:
    cdef public object conv
    cdef public object first_frame
    cdef public object first_ts
    cdef public ConnHistory history
    cdef public tuple side
    cdef public object last_frame
    cdef public object last_ts
    cdef public object retransmissions
    cdef public object fin
    cdef public object rst_frame
    cdef public object rst_ts
    cdef public object rst_by_client
    cdef public object handshake
    cdef public object streams
    cdef public object packed
    cdef public SeqFollower follow
    cdef public object syn_pending
    cdef public object syn_pending_peer
    cdef public object rst_ttl
    cdef public object rst_ip_id
    cdef public object idle_max_ns
    cdef public object idle_max_start_frame
    cdef public object idle_max_end_frame
    cdef public object idle_max_end_ts
    cdef public object idle_last_ns
    cdef public object idle_last_start_frame
    cdef public object idle_last_end_frame
    cdef public object idle_last_end_ts
    cdef public tuple loss


cdef class TcpTracker:
    cdef public object diag
    cdef public object observer_factory
    cdef public object emit
    cdef public object max_buffer_bytes
    cdef public TcpAnalyzer analyzer
    cdef public list connections
    cdef public object cold
    cdef public bint _warming
    cdef public object events
    cdef public object losses
    cdef public set quoted_streams
    cdef public object freeze_policy
    cdef public object frozen
    cdef public object packer
    cdef public dict _packed
    cdef public object packs
    cdef public object _ended_q
    cdef public object _idle_q
    cdef public long long _countdown
    cdef public object _records
    cdef public object row_maker

    @cython.locals(d=cython.longlong, flags=cython.longlong, seg_len=cython.longlong,
                   frame_len=cython.longlong, side=tuple, a=SegmentAnalysis, pend=list,
                   hl=cython.longlong, hist=ConnHistory, conn=Connection, sd=DirStats,
                   peer=DirStats, loss=tuple, ld=LossDirection, lp=LossDirection)
    cpdef segment(self, TcpSegment seg)

    @cython.locals(flags=cython.longlong, out=list, hi=list)
    cpdef _follow(self, Connection conn, SeqFollower f, TcpSegment seg, SegmentAnalysis a, long long d)

    @cython.locals(flags=cython.longlong, seq_hi=list, out=list, items=list, mine=Reassembler,
                   other=Reassembler, peer=Reassembler, obs=_Guarded)
    cpdef _bytes(self, Connection conn, _Streams st, TcpSegment seg, SegmentAnalysis a,
                 long long d)


cpdef object _unwrap(object hi, object rel)
