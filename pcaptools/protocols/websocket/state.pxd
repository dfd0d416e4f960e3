# Cython declarations for state.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py (and with the sources of every module that cimports it), so
# a stale build is never loaded.
#
# What it buys: _Dir (one direction's parser state) and _Msg (the message in progress) become
# extension types, so observer.py and inflate.py, which cimport them, read and write their
# state as C struct fields, once or more per WebSocket frame.
#
# Why the C types cannot change a result:
#  * the ``long long`` fields hold only values bounded by what they count: the parser mode
#    (0-3), the frame's first byte (8 bits), the header length (2-14); frames, messages,
#    pings, pongs and mask errors (at most one per frame, fewer than the bytes of a capture);
#    a message's content bytes, fragments, index and inflated output, and the bytes searched
#    for a frame boundary (bytes actually seen or produced: far below 2^63); the search
#    offset (an index into a buffer);
#  * a frame's ``remaining``, ``pos`` and ``lost`` are ``unsigned long long``: ``pos`` +
#    ``remaining`` is always the announced payload length, which the header encodes in at
#    most 64 bits (<= 2^64 - 1), ``lost`` <= ``pos``, and each is only ever decreased by at
#    most its value, so the C arithmetic is exact;
#  * what announced lengths or lost bytes can push past 2^63 stays a Python int: the
#    announced length itself, a message's wire, payload and lost bytes, a direction's
#    payload, wire, lost and skipped bytes (sums over frames or gaps); so do timestamps,
#    frame numbers, stream offsets and the caps a caller passes (``preview_cap``,
#    ``body_cap``);
#  * the ``bint`` fields are only ever assigned True/False and read back as True/False.
# Python-visible names keep their Python types (``public`` attributes read back as int,
# bool, bytes, bytearray or the object stored); ``__slots__`` stays a class attribute.
#
# _Dir borrows StreamCursor's align()/skip() instead of subclassing it (an extension type
# cannot subclass a Python class): they read and move only ``next_offset``.

import cython


cdef class _Msg:
    cdef public object body
    cdef public object body_cap
    cdef public bint compressed
    cdef public long long content_bytes
    cdef public object decompress
    cdef public object first_frame
    cdef public object first_ts
    cdef public long long fragments
    cdef public long long index
    cdef public object lost
    cdef public long long opcode
    cdef public object payload
    cdef public bytearray preview
    cdef public object preview_cap
    cdef public bint uninspected
    cdef public object utf8
    cdef public object utf8_ok
    cdef public object wire
    cdef public object z
    cdef public long long zdrain
    cdef public long long zout

    cpdef bint wants_content(self)

    @cython.locals(body=object, tail=object, buf=object, used=cython.Py_ssize_t)
    cpdef add_content(self, data)

    cpdef bint utf8_final(self)


cdef class _Dir:
    cdef public long long b0
    cdef public object close_code
    cdef public object close_frame
    cdef public object close_reason
    cdef public object close_ts
    cdef public bint closed
    cdef public object ctrl
    cdef public object d
    cdef public long long frames
    cdef public bytearray hbuf
    cdef public long long hlen
    cdef public object hstart
    cdef public object hunt_skipped
    cdef public long long hunt_total
    cdef public bytes key
    cdef public object length
    cdef public unsigned long long lost
    cdef public object lost_bytes
    cdef public long long mask_errors
    cdef public bint masked
    cdef public long long messages
    cdef public long long mode
    cdef public _Msg msg
    cdef public object next_offset
    cdef public object payload_bytes
    cdef public long long pings
    cdef public long long pongs
    cdef public unsigned long long pos
    cdef public unsigned long long remaining
    cdef public set reported
    cdef public long long scan_from
    cdef public bint sent_close
    cdef public bint skip_payload
    cdef public object skipped
    cdef public object start
    cdef public object wire_bytes
    cdef public object z
    cdef public bint z_broken
