# Cython declarations for pcap.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py, so a stale build is never loaded.
#
# PcapParser becomes an extension type, so _next_batch (once per block of records) reads the
# parser's state as C struct fields and slices records with C integers: offsets and lengths
# within one block (Py_ssize_t), the 32-bit fields of a record header (read from the buffer
# by _u32 through an ``unsigned char *``, in the file's byte order: no tuple and no int object
# per record; ``_COMPILED`` is true only in the compiled module, pure Python runs the struct
# unpacking), and the timestamp in nanoseconds (seconds < 2**32 times 10**9 plus a fraction
# < 2**32 times at most 1000 stays below 2**63). Frame numbers and timestamps go into the
# RawFrame as Python ints of the same value, orig_len as a C integer (frame.pxd).

import cython

cdef bint _COMPILED


cdef class PcapParser:
    cdef public bint _ahead
    cdef public list _batch
    cdef public object _batch_iter
    cdef public object _batch_start
    cdef public object _diag
    cdef public long long _frac_ns
    cdef public long long _last_ts
    cdef public object _linktype
    cdef public Py_ssize_t _maxlen
    cdef public object _offset
    cdef public str _order
    cdef public Py_ssize_t _rechdr
    cdef public object _src
    cdef public bint _le
    cdef public object _unpack
    cdef public object frame_count
    cdef public object interface
    cdef public bint nanosecond

    @cython.locals(out=list, buf=bytes, pos=Py_ssize_t, rechdr=Py_ssize_t, maxlen=Py_ssize_t,
                   frac_ns=cython.longlong, frame=Py_ssize_t, last_ts=cython.longlong,
                   last_head=Py_ssize_t, sec=cython.ulonglong, frac=cython.ulonglong,
                   incl=cython.ulonglong, end=Py_ssize_t, ts=cython.longlong,
                   p=cython.p_uchar, le=cython.bint, linktype=cython.longlong)
    cpdef _next_batch(self)


@cython.locals(hi=cython.ulonglong)
cpdef unsigned long long _u32(unsigned char *p, Py_ssize_t i, bint le)
