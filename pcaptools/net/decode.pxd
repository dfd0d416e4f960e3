# Cython declarations for decode.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# PacketDecoder becomes an extension type and decode() (once per frame) runs its offset and
# header arithmetic on C integers. Every one of them is bounded: header fields unpacked from
# 8/16/32-bit fields (EtherType, IP total/payload length, fragment word, protocol, TCP
# data-offset/flags word), offsets and lengths within one frame, and orig_len (a 32-bit field
# of the pcap/pcapng record). On the fast path (an IPv4 header without options or an IPv6
# header, then TCP) the header fields are read from the frame through an ``unsigned char *``
# (_be16, _be32: the caller has checked the bounds) into C integers, and go into the
# TcpSegment's C fields (packet.pxd) without a Python int; ``_COMPILED`` is true only in the
# compiled module (pure Python runs the struct unpacking). Sequence and acknowledgement
# numbers are unsigned 32-bit values in a long long (_be32 shifts a long long, not a promoted
# char). Frame numbers, timestamps and addresses go into the TcpSegment as Python objects.
#
# (An extension type has no inspectable __init__ signature: the fragment defaults are module
# constants, MAX_FRAGMENT_DATAGRAMS and friends, which pcaptools.limits reads.)

import cython

from pcaptools.io.frame cimport RawFrame
from pcaptools.net.packet cimport new_segment


cdef bint _COMPILED


cdef long long _be16(unsigned char *p, Py_ssize_t i)


@cython.locals(hi=cython.longlong)
cdef long long _be32(unsigned char *p, Py_ssize_t i)


cdef class PacketDecoder:
    cdef public object _diag
    cdef public object _frag
    cdef public dict _links
    cdef public object unsupported

    @cython.locals(et=cython.longlong, off=cython.longlong, n=cython.longlong,
                   first=cython.longlong, tlen=cython.longlong,
                   frag=cython.longlong, proto=cython.longlong,
                   offflags=cython.longlong,
                   orig=cython.longlong, end=cython.longlong, thl=cython.longlong,
                   hdr_end=cython.longlong, seg_len=cython.longlong, plen=cython.longlong,
                   nh=cython.longlong, ident=cython.longlong, ttl=cython.longlong,
                   sport=cython.longlong, dport=cython.longlong, seq=cython.longlong,
                   ack=cython.longlong, window=cython.longlong, hlim=cython.longlong,
                   p=cython.p_uchar)
    cpdef decode(self, RawFrame raw)
