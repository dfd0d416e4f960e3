# Cython declarations for sse.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py, so a stale build is never loaded.
#
# What it buys: SseParser is an extension type, so feed() and _lines() (once per body chunk,
# and per line of every event) read and store the parser's state as C struct fields, not by
# attribute lookups. Every field stays a Python object (the extension type only fixes where it
# is stored), but the line buffer and the event's data lines, typed as the bytearray and the
# list they always are.

cdef class SseParser:
    cdef public object _bom_checked
    cdef public bytearray _buf
    cdef public list _data
    cdef public object _data_len
    cdef public object _diag
    cdef public object _direction
    cdef public object _drop_event
    cdef public object _event_cache
    cdef public object _event_type
    cdef public object _last_id
    cdef public object _max
    cdef public object _request_index
    cdef public object _retry
    cdef public object _skip_lf
    cdef public object _skip_line
    cdef public object _stream_id
    cdef public object _tcp_stream
    cdef public object count
