# Cython declarations for decode.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# PacketDecoder becomes an extension type and decode() (once per frame) runs its offset and
# header arithmetic on C integers. Every one of them is bounded: header fields unpacked from
# 8/16/32-bit fields (EtherType, IP total/payload length, fragment word, protocol, TCP
# data-offset/flags word), offsets and lengths within one frame, and orig_len (a 32-bit field
# of the pcap/pcapng record). Frame numbers, timestamps, addresses, sequence numbers and
# windows go into the TcpSegment as the Python objects they were unpacked as.
#
# (An extension type has no inspectable __init__ signature: the fragment defaults are module
# constants, MAX_FRAGMENT_DATAGRAMS and friends, which pcaptools.limits reads.)

import cython

from pcaptools.io.frame cimport RawFrame
from pcaptools.net.packet cimport new_segment


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
                   nh=cython.longlong)
    cpdef decode(self, RawFrame raw)
