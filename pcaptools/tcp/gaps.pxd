# Cython declarations for gaps.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py, so a stale build is never loaded.
#
# What it buys: _Dir and SeqFollower become extension types, so the tracker calls
# SeqFollower.segment / acked (twice a segment of every connection no observer parses: all
# of them with ``payloads=False``) as C methods and their state is read as struct fields.
# Sequence positions stay Python ints: they are unwrapped (64-bit and beyond), not bounded by
# the header, so no C integer type could hold every value a capture can produce.

import cython


cdef class _Dir:
    cdef public object base
    cdef public object fin
    cdef public object nxt
    cdef public list ranges


cdef class SeqFollower:
    cdef public tuple dirs
    cdef public list hi
    cdef public bint released

    @cython.locals(d=_Dir, r=list, merged=list)
    cpdef segment(self, long long x, object seq, object seg_len, object captured, bint syn,
                  bint fin, list out)

    @cython.locals(d=_Dir, r=list)
    cpdef acked(self, long long x, object ack, list out)


@cython.locals(r=list, i=cython.Py_ssize_t)
cdef _absorb(_Dir d)
