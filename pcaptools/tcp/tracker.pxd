# Cython declarations for tracker.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# Only _Guarded (called for every chunk of payload) becomes an extension type. TcpTracker
# stays a Python class on purpose: the tests replace its methods (monkeypatch on the class),
# which an extension type forbids.

import cython

from pcaptools.net.packet cimport TcpSegment
from pcaptools.tcp.analysis cimport SegmentAnalysis, TcpAnalyzer
from pcaptools.tcp.connstate cimport ConnHistory
from pcaptools.tcp.gaps cimport SeqFollower


cdef class _Guarded:
    cdef public object _diag
    cdef public object _obs
    cdef public object _tcp_stream
    cdef public bint failed


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
                   frame_len=cython.longlong, counts=list, a=SegmentAnalysis, pend=list,
                   hl=cython.longlong, hist=ConnHistory)
    cpdef segment(self, TcpSegment seg)

    @cython.locals(flags=cython.longlong, out=list, hi=list)
    cpdef _follow(self, conn, SeqFollower f, TcpSegment seg, SegmentAnalysis a, long long d)

    @cython.locals(flags=cython.longlong, seq_hi=list, out=list, items=list)
    cpdef _bytes(self, conn, st, TcpSegment seg, SegmentAnalysis a, long long d)
