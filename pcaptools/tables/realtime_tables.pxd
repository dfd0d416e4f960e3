# Cython declarations for realtime_tables.py (an "augmenting .pxd": the .py file is the source
# and runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# What it buys: _walk (once per JSON object of every realtime event, and per nested object)
# iterates the object's members as a C loop over the dict and keeps its character counts as
# C integers; _summarise (once per event) reads the members it reports with C dict lookups,
# called from the builder as a C function.
#
# Why the C types cannot change a result: ``depth`` (1 to MAX_FIELD_DEPTH), ``room`` (at most
# MAX_FIELDS_CHARS, only ever decreased by a ``cost`` not above it), a string's length ``n``
# and ``cost`` (a path's length plus a string's length plus 6 or 14) are lengths of objects in
# memory: they fit a Py_ssize_t as len() does. ``secret`` and ``show_secrets`` are only tested
# for truth (``secret or ...`` gives True, or the other operand, as in Python). ``o`` and
# ``fields`` are dicts (``o``: a parsed JSON object or a member that isinstance() found to be
# one; JSON objects are plain dicts), ``prefix`` a str; _summarise's ``obj`` is the parsed
# event, which the builder has checked is a dict.

import cython

@cython.locals(n=cython.Py_ssize_t, cost=cython.Py_ssize_t)
cpdef tuple _walk(dict o, str prefix, Py_ssize_t depth, bint secret, bint show_secrets,
                  dict fields, Py_ssize_t room, audio)


@cython.locals(fields=dict)
cpdef tuple _summarise(dict obj, bint show_secrets)


# A row is written into the Records buffer through C pointers (_put_event_row), not packed by
# struct.pack; each argument is converted to its field's C type when the function is called
# (a value that does not fit raises OverflowError, struct.error in pure Python).
cdef bint _IN_PLACE


@cython.locals(n=Py_ssize_t, at=cython.p_char, q=cython.p_longlong, b=cython.p_schar)
cdef int _put_event_row(bytearray buf, long long frame, long long ts, long long first_frame,
                        long long first_ts, long long tcp_stream, long long stream_id,
                        long long message_index, long long json_bytes, long long audio_bytes,
                        long long text_chars, signed char direction,
                        signed char status) except -1


# The builder is an extension type: add() (once per text message) reads its state as C struct
# fields, not by attribute lookups (the buffer limit and the text block size are lengths of
# objects in memory: Py_ssize_t).
cdef class RealtimeEventsBuilder:
    cdef public object diag
    cdef public object show_secrets
    cdef public object _rec
    cdef public bytearray _buf
    cdef public object _pack
    cdef public Py_ssize_t _limit
    cdef public object _text
    cdef public Py_ssize_t _text_block
    cdef public tuple _append
    cdef public list _first

    cpdef add(self, e)
