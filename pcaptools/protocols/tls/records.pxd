# Cython declarations for records.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py (and with the sources of observer.py, which cimports it), so
# a stale build is never loaded.
#
# What it buys: RecordReader becomes an extension type (observer.pxd cimports it), so the
# record loop (feed, _synced), once per chunk of a TLS connection, keeps its state in C
# struct fields and splits records on C integers.
#
# Why the C types cannot change a result: the ``long long`` fields and locals hold only
# bounded values: the mode (0-3); the resynchronisation budget (at most RESYNC_BUDGET, 64 KiB,
# decreased by bytes skipped from the buffer, bytes held in memory); a record header's
# content type (8 bits), version (16 bits) and length (16 bits; only lengths up to
# MAX_RECORD_LENGTH are kept); the bytes a record still needs (at most its length + 5); the
# records read and the bytes fed to this reader (counts of bytes actually seen); positions
# within the chunk being parsed. Stream offsets and the skipped bytes (which add up the
# sizes of gaps) stay Python ints.
# Python-visible names keep their Python types (``public`` attributes read back as int,
# bytearray, list or the tuple stored); ``__slots__`` stays a class attribute.

import cython


cdef class RecordReader:
    cdef public long long budget
    cdef public bytearray buf
    cdef public long long bytes_seen
    cdef public tuple head
    cdef public long long length
    cdef public long long mode
    cdef public long long need
    cdef public object offset
    cdef public list parts
    cdef public long long records
    cdef public object skipped

    @cython.locals(n=cython.Py_ssize_t, need=cython.Py_ssize_t, mode=cython.longlong,
                   out=list, notes=list, parts=list, buf=bytearray)
    cpdef tuple feed(self, data, offset)

    @cython.locals(n=cython.Py_ssize_t, length=cython.Py_ssize_t, ctype=cython.longlong,
                   version=cython.longlong, end=cython.Py_ssize_t)
    cpdef _synced(self, bytes data, Py_ssize_t pos, offset, list out, list notes)
