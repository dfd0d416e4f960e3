# Cython declarations for ws_tables.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# What it buys: a ws_frames and a ws_messages row are written into the Records buffer through
# C pointers (_put_frame_row, _put_message_row), not packed by struct.pack (which converts
# each of ~20 Python ints through the generic byte-array conversion for a little-endian
# field). Each argument is converted to its field's C type when the function is called: a
# value that does not fit raises OverflowError (struct.error in pure Python), so no value is
# ever narrowed silently.
#
# The builders are extension types, so their add() (once per frame, message) reads the
# builder's state as C struct fields, not by attribute lookups; ``n`` and the buffer limits
# are lengths of objects in memory (Py_ssize_t, as len() gives them).

import cython


cdef class _FrameColumns:
    cdef public object _rec
    cdef public bytearray _buf
    cdef public object _pack
    cdef public Py_ssize_t _limit
    cdef public dict codes
    cdef public dict _dir_code
    cdef public dict _op_code
    cdef public dict sparse
    cdef public Py_ssize_t n

    cpdef add(self, e)


cdef class _MessageColumns:
    cdef public object _rec
    cdef public bytearray _buf
    cdef public object _pack
    cdef public Py_ssize_t _limit
    cdef public object text
    cdef public Py_ssize_t _text_block
    cdef public list _first
    cdef public tuple labels
    cdef public tuple _append

    cpdef add(self, e)


cdef class WsTablesBuilder:
    cdef public _FrameColumns frames
    cdef public _MessageColumns messages
    cdef public list connections
    cdef public dict _handlers


cdef bint _IN_PLACE


@cython.locals(n=Py_ssize_t, at=cython.p_char, q=cython.p_longlong, i=cython.p_int,
               b=cython.p_schar)
cdef int _put_frame_row(bytearray buf, long long frame, long long ts, long long tcp_stream,
                        long long stream_id, long long index, long long start_frame,
                        long long start_ts, long long payload_len, long long lost_bytes,
                        long long message_index, int close_code, signed char fin,
                        signed char rsv, signed char opcode, signed char masked,
                        signed char header_bytes, signed char complete,
                        signed char direction) except -1


@cython.locals(n=Py_ssize_t, at=cython.p_char, q=cython.p_longlong, h=cython.p_short,
               b=cython.p_schar)
cdef int _put_message_row(bytearray buf, long long frame, long long ts, long long tcp_stream,
                          long long stream_id, long long index, long long fragments,
                          long long first_frame, long long first_ts, long long wire_bytes,
                          long long payload_bytes, long long lost_bytes,
                          long long decompressed_bytes, short typ, short decompress,
                          short end_reason, signed char compressed, signed char complete,
                          signed char utf8_ok, signed char preview_truncated,
                          signed char direction) except -1
