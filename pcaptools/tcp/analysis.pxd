# Cython declarations for analysis.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# What it buys: TcpDirection / TcpConversation / TcpAnalyzer become extension types, so the
# per-segment state is read and written as C struct fields, and the sequence arithmetic of
# TcpAnalyzer.feed / _feed runs on C integers.
#
# Why the C integer types cannot change a result:
#  * every sequence/ack number held in a ``long long`` is masked to 32 bits
#    (``seg.seq & _M32`` or ``(...) & _M32``), the window is the 16-bit header field (or the
#    initial 0xFFFFFFFF), shifts are by the window scale (<= 14, _parse_wscale caps it),
#    segment lengths and flag bits are small: no expression below leaves the int64 range,
#    and ``&`` / comparisons on int64 give what Python's unbounded ints give;
#  * timestamps, frame numbers and unwrapped (64-bit) positions stay Python objects: they
#    are not bounded by the format (tests feed negative timestamps, pcapng can exceed int64)
#    and ``& _M64`` needs unbounded ints.
# SegmentAnalysis (one per segment) holds the fields that are always integers as C integers:
# tcp_stream (a count of connections), rel_seq (masked to 32 bits), window (a 16-bit field
# shifted by at most 14, or 0xFFFFFFFF), resent_bytes (at most the segment's length), and
# from_client / new_stream as bint (read back as bool, as they were); rel_ack, the duplicate
# ACK and RTT fields, which are None when absent, stay objects.
# Python-visible names keep their Python types (``public`` attributes read back as int/bool/
# list, ``__slots__`` stays a class attribute); only _M32 and the flag-bit constants below
# become C constants, and no other module imports them.

import cython

from pcaptools.net.packet cimport TcpSegment

cdef long long _M32, _HALF
cdef long long _RETRANS, _LOST, _ACK_LOST, _KEEP_ALIVE, _DUP_ACK, _ZERO_WIN, _ZWP, _ZWP_ACK
cdef long long _KA_ACK, _OOO, _FAST, _WIN_UPDATE, _WIN_FULL, _REUSED, _SPURIOUS, _SFRA


cdef class TcpDirection:
    cdef public long long base_seq
    cdef public bint base_set
    cdef public long long win_scale
    cdef public long long window
    cdef public bint is_first_ack
    cdef public long long nextseq
    cdef public object nextseq_ts
    cdef public long long maxseqtobeacked
    cdef public long long lastack
    cdef public object lastack_ts
    cdef public object lastnondupack
    cdef public long long dupacknum
    cdef public long long lastflags
    cdef public list unacked
    cdef public bint ua_mono
    cdef public bint unacked_limit_hit
    cdef public list seen_starts
    cdef public list seen_ends
    cdef public object seen_hi


cdef class TcpConversation:
    cdef public object tcp_stream
    cdef public object ip_version
    cdef public object client_addr
    cdef public object client_port
    cdef public object server_addr
    cdef public object server_port
    cdef public object client_inferred
    cdef public object irtt_ns
    cdef public object ts_mru_syn
    cdef public TcpDirection c2s
    cdef public TcpDirection s2c


@cython.locals(ns=cython.longlong, d=cython.longlong)
cpdef int _ack_one(list e, long long ack) except -1


@cython.locals(hit=object, base=cython.longlong, span=cython.longlong, a=cython.longlong,
               n=cython.Py_ssize_t, i=cython.Py_ssize_t, e=list, ns=cython.longlong,
               kept=list, keep=list, mono=cython.bint, prev_next=cython.longlong,
               r=cython.int, d=cython.longlong)
cpdef _ack_segments(TcpDirection rev, list rua, long long ack)


cdef class SegmentAnalysis:
    cdef public long long tcp_stream
    cdef public object conv
    cdef public bint from_client
    cdef public long long rel_seq
    cdef public object rel_ack
    cdef public long long window
    cdef public object kinds
    cdef public object dup_ack_num
    cdef public object dup_ack_frame
    cdef public object ack_rtt_ns
    cdef public object acked_frame
    cdef public long long resent_bytes
    cdef public bint new_stream



@cython.locals(a=SegmentAnalysis)
cpdef SegmentAnalysis new_analysis(long long tcp_stream, object conv, bint from_client,
                                   long long rel_seq, object rel_ack, long long window,
                                   object kinds,
                                   object dup_ack_num, object dup_ack_frame, object ack_rtt_ns,
                                   object acked_frame, long long resent_bytes, bint new_stream)

cdef class TcpAnalyzer:
    cdef public object _diag
    cdef public dict _table
    cdef public list conversations
    cdef public long long reserved
    # (the address pair feed_known found last: its ports are 16-bit header fields, -1 when
    # none; the addresses stay objects)
    cdef public TcpConversation _last_conv
    cdef public object _last_src
    cdef public object _last_dst
    cdef public long long _last_sport
    cdef public long long _last_dport

    cpdef _forget_last(self)

    @cython.locals(conv=TcpConversation, fwd=TcpDirection, rev=TcpDirection,
                   from_client=cython.bint, flags=cython.longlong, seq=cython.longlong,
                   ack=cython.longlong, seglen=cython.longlong, win=cython.longlong,
                   fnext=cython.longlong, bits=cython.longlong, rmax=cython.longlong,
                   rnext=cython.longlong, fmax=cython.longlong, nextseq=cython.longlong,
                   rlast=cython.longlong, rws=cython.longlong, shift=cython.longlong,
                   d=cython.longlong, ws=cython.longlong, hl=cython.longlong,
                   ua=list, rua=list, starts=list, ends=list)
    cpdef feed_known(self, TcpSegment seg)

    cpdef feed(self, TcpSegment seg)

    @cython.locals(fwd=TcpDirection, rev=TcpDirection, from_client=cython.bint,
                   new_stream=cython.bint, flags=cython.longlong, seq=cython.longlong,
                   ack=cython.longlong, bits=cython.longlong, syn=cython.longlong,
                   seglen=cython.longlong, win=cython.longlong, fnext=cython.longlong,
                   sfr=cython.longlong, fwin=cython.longlong, d=cython.longlong,
                   rws=cython.longlong, shift=cython.longlong, edge=cython.longlong,
                   rmax=cython.longlong, rnext=cython.longlong, sna=cython.bint,
                   rlast=cython.longlong, nxt=cython.longlong, nextseq=cython.longlong,
                   fmax=cython.longlong, rel_seq=cython.longlong, window=cython.longlong,
                   ws=cython.longlong, ua=list, rua=list)
    cpdef _feed(self, TcpSegment seg, TcpConversation conv)
