# Cython declarations for packets.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# PacketsBuilder becomes an extension type, so add() (once per frame) reads the builder's
# state as C struct fields. The only C integers in add() are the TCP flags (12 bits) and
# tcp.len (bounded by a frame length); _put_tcp_row takes every value of the row as a C
# integer of its field's width (a value that does not fit raises OverflowError).

import cython

from pcaptools.io.frame cimport RawFrame
from pcaptools.net.packet cimport TcpSegment
from pcaptools.tcp.analysis cimport SegmentAnalysis


cdef class PacketsBuilder:
    cdef public object max_rows
    cdef public object last_frame
    cdef public object truncated_at
    cdef public object _diag
    cdef public object records
    cdef public dict codes
    cdef public dict _addr_cache
    cdef public list _addrs
    cdef public list _addr_texts
    cdef public tuple _dir_codes
    cdef public dict _flag_seen
    cdef public bytearray _buf
    cdef public object _pack
    cdef public object _limit
    cdef public object sack_rows

    @cython.locals(cache=dict, flags=cython.longlong, seg_len=cython.longlong,
                   tcp_len=cython.longlong, hl=cython.longlong, seg=TcpSegment, tcp=cython.bint)
    cpdef add(self, RawFrame raw, pkt, SegmentAnalysis a)

    cpdef add_capped(self, RawFrame raw, pkt, SegmentAnalysis a, mine=*)


cdef bint _IN_PLACE


@cython.locals(n=Py_ssize_t, at=cython.p_char, q=cython.p_longlong, i=cython.p_int,
               h=cython.p_short, b=cython.p_schar)
cdef int _put_tcp_row(bytearray buf, long long frame, long long ts, long long frame_len,
                      long long tcp_stream, long long seq, long long ack, long long seq_raw,
                      long long ack_raw, long long ack_rtt, long long acks_frame, int cap_len,
                      int interface, int sport, int dport, int tcp_len, int window, int src,
                      int dst, short tcp_flags, signed char ip_version, signed char resent,
                      signed char direction) except -1
