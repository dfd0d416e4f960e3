# Cython declarations for connstate.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# What it buys: _Endpoint and ConnHistory become extension types, so the tracker calls
# ConnHistory.plain (once a segment for most segments) as a C method, and plain reads the
# endpoint state as struct fields. The states are the small constants above, the seen-letters
# mask fits 32 bits; an endpoint's data_bytes (the sum of its segments' lengths, each from a
# 16-bit IP length or a 32-bit record length: 2**31 segments of 4 GiB before int64 overflows)
# is a C integer, read back as an int of the same value; sequence numbers stay Python ints.

import cython


cdef class _Endpoint:
    cdef public long long data_bytes
    cdef public object last_fin
    cdef public object last_rst
    cdef public object last_syn
    cdef public long long prev_state
    cdef public object scaled
    cdef public long long state


cdef class ConnHistory:
    cdef public list _hist
    cdef public _Endpoint _orig
    cdef public _Endpoint _resp
    cdef public long long _seen
    cdef public bint _started
    cdef public bint client_inferred

    @cython.locals(ep=_Endpoint, shift=cython.longlong)
    cpdef plain(self, bint from_client, long long flags, long long seg_len)
