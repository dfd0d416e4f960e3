# Cython declarations for frame.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py, so a stale build is never loaded.
#
# What it buys: RawFrame (one per frame) becomes an extension type, made by a compiled
# __init__ instead of a Python one. linktype (16 bits in both formats), orig_len (a 32-bit
# record field) and interface (a 32-bit pcapng interface id) are C integers, read back as ints
# of the same value; frame, ts_ns and data stay Python objects.

cdef class RawFrame:
    cdef public object frame
    cdef public object ts_ns
    cdef public long long linktype
    cdef public object data
    cdef public long long orig_len
    cdef public long long interface
