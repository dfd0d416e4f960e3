# Cython declarations for pcapng.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py, so a stale build is never loaded.
#
# PcapngParser becomes an extension type, so _next_batch (once per block read ahead) reads the
# parser's state as C struct fields and slices packet blocks with C integers: offsets and
# lengths within one block (Py_ssize_t), the 32-bit fields of a block header (long long, read
# from the buffer as C integers by pcap._u32, in the file's byte order, with no Python object:
# the struct unpacking of the .py is what pure Python runs, ``_COMPILED``), and
# the time in nanoseconds, computed in C only when _fast_ts has shown it cannot overflow (the
# high tick word at most hi_max, the offset below 2**62); any other time is a Python int from
# _ticks_ns, range-checked before it is stored. Frame numbers, times and lengths go into the
# RawFrame as Python ints of the same value. _block (every block read through read()) stays
# Python code.

import cython

from pcaptools.io.pcap cimport _u32

cdef bint _COMPILED


cdef class PcapngParser:
    cdef public bint _ahead
    cdef public list _batch
    cdef public object _batch_buf
    cdef public object _batch_iter
    cdef public Py_ssize_t _batch_pos
    cdef public object _batch_start
    cdef public str _bo
    cdef public object _diag
    cdef public object _epb_head
    cdef public object _epb_unpack
    cdef public object _hdr_unpack
    cdef public list _ifaces
    cdef public object _last_ts
    cdef public object _offset
    cdef public object _order_ref
    cdef public object _section
    cdef public object _src
    cdef public object _tail_head
    cdef public object _u32
    cdef public set _unknown_types
    cdef public object frame_count
    cdef public object interfaces
    cdef public object secrets

    @cython.locals(buf=bytes, pos=Py_ssize_t, start=Py_ssize_t, out=list, ifaces=list,
                   n_ifaces=Py_ssize_t, frame=Py_ssize_t, last_ts=cython.longlong,
                   ref=cython.longlong, cur=cython.longlong, ns_per_tick=cython.longlong,
                   snaplen=cython.longlong, maxlen=cython.longlong, hi_max=cython.longlong,
                   off_c=cython.longlong, last_head=Py_ssize_t, btype=cython.longlong,
                   blen=cython.longlong, iface_id=cython.longlong, hi=cython.longlong,
                   lo=cython.longlong, caplen=cython.longlong, orig=cython.longlong,
                   end=Py_ssize_t, opts=Py_ssize_t, ts=cython.longlong, got_head=bint,
                   trailer=cython.longlong, nbtype=cython.longlong, nblen=cython.longlong,
                   niface=cython.longlong, nhi=cython.longlong, nlo=cython.longlong,
                   ncap=cython.longlong, norig=cython.longlong,
                   p=cython.p_uchar, le=cython.bint)
    cpdef _next_batch(self)
