# Cython declarations for chunk.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py (and with the sources of every module that cimports it), so a stale
# build is never loaded.
#
# What it buys: StreamChunk (one per delivered piece of a stream) becomes an extension type,
# made by new_chunk with one C allocation and five C field stores, whose fields the modules
# that cimport it read as C struct fields. Every field stays a Python object (readonly to
# Python, as the frozen dataclass was): the values read back are the values stored.
# ``_COMPILED`` is true only in the compiled module.

import cython


cdef class StreamChunk:
    cdef readonly object direction
    cdef readonly object data
    cdef readonly object ts_ns
    cdef readonly object frame
    cdef readonly object offset


cdef bint _COMPILED


@cython.locals(c=StreamChunk)
cpdef StreamChunk new_chunk(object direction, object data, object ts_ns, object frame,
                            object offset)
