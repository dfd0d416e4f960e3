# Cython declarations for tls_tables.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# What it buys: a tls_records row is written into the Records buffer through C pointers
# (_put_record_row), not packed by struct.pack. Each argument is converted to its field's C
# type when the function is called: a value that does not fit raises OverflowError
# (struct.error in pure Python), so no value is ever narrowed silently. The builder is an
# extension type: add() reads its state as C struct fields, not by attribute lookups.

import cython


cdef class TlsTablesBuilder:
    cdef public object keep_records
    cdef public list sessions
    cdef public object _rec
    cdef public dict _codes
    cdef public dict _names
    cdef public dict _dirs
    cdef public dict _codes_of
    cdef public bytearray _buf
    cdef public object _pack
    cdef public Py_ssize_t _limit


cdef bint _IN_PLACE


@cython.locals(n=Py_ssize_t, at=cython.p_char, q=cython.p_longlong, i=cython.p_int,
               b=cython.p_schar)
cdef int _put_record_row(bytearray buf, long long frame, long long ts, long long tcp_stream,
                         long long session, long long offset, int length,
                         int plaintext_length, int direction, int content_type, int version,
                         int inner_content_type, signed char encrypted,
                         signed char decrypted) except -1
