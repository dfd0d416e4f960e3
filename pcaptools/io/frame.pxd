# Cython declarations for frame.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py, so a stale build is never loaded.
#
# What it buys: RawFrame (one per frame) becomes an extension type, made by a compiled
# __init__ instead of a Python one. Every field stays a Python object: the values read back
# are the values stored.

cdef class RawFrame:
    cdef public object frame
    cdef public object ts_ns
    cdef public object linktype
    cdef public object data
    cdef public object orig_len
    cdef public object interface
