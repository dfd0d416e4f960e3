# Cython declarations for frameloop.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py and with the sources of net/decode.py and tables/packets.py
# (whose extension types it cimports), so a stale build is never loaded, and the finder loads
# it only together with a compiled decoder and packets builder.
#
# What it buys: the loop runs as C, not as bytecode; the decoder's decode() and the packets
# builder's add_capped() are called as C methods of their extension types.
#
# Why the C types cannot change a result: the only C integers are the frame counters (one per
# frame at most: a capture would need 2**63 frames to overflow them), the sum of the frames'
# orig_len (a 32-bit field each: 2**31 frames of 4 GiB before int64 overflows) and the
# worker share numbers (own_k < own_n, a handful of processes). Timestamps stay Python ints.
# shard_of(): k is two CRC-32s (< 2**32) XORed with two 16-bit ports, so k * 0x9E3779B1 is
# below 2**64 in an unsigned long long, and & 0xFFFFFFFF, >> 16 and % n (n >= 1) are what
# Python's ints give.

import cython

from pcaptools.io.frame cimport RawFrame
from pcaptools.net.decode cimport PacketDecoder
from pcaptools.net.packet cimport TcpSegment
from pcaptools.tables.packets cimport PacketsBuilder
from pcaptools.tcp.analysis cimport SegmentAnalysis
from pcaptools.tcp.tracker cimport TcpTracker


cdef class FrameCounts:
    cdef public long long n
    cdef public long long tcp_n
    cdef public long long udp_n
    cdef public long long other_n
    cdef public long long nonip_n
    cdef public long long wire
    cdef public long long data_segs
    cdef public object first_ts
    cdef public object last_ts
    cdef public list opened


@cython.locals(k=cython.ulonglong)
cpdef long long shard_of(object src, long long sport, object dst, long long dport, long long n)


@cython.locals(c=FrameCounts, n=cython.longlong, tcp_n=cython.longlong, udp_n=cython.longlong,
               other_n=cython.longlong, nonip_n=cython.longlong, wire=cython.longlong,
               data_segs=cython.longlong, secrets_seen=cython.Py_ssize_t,
               all_mine=cython.bint, mine=cython.bint, opened=list, convs=list,
               reader_secrets=list, supported=cython.bint,
               raw=RawFrame, a=SegmentAnalysis, seg=TcpSegment)
cpdef FrameCounts feed_frames(object reader, object diag, PacketDecoder decoder, TcpTracker tracker,
                              object flows, object udp_route, object icmp_builder,
                              PacketsBuilder pb, long long own_k, long long own_n,
                              object checksums, object secrets, object every_4096)
