# Cython declarations for observer.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py and with the sources of state.py (whose extension types it
# cimports), so a stale build is never loaded, and the finder loads it only together with a
# compiled state module.
#
# What it buys: WebSocketObserver becomes an extension type, and the per-frame path (feed,
# _consume, _begin, _payload, _frame_done, _end_message) reads the direction and message
# state (state.pxd: _Dir, _Msg) as C struct fields and calls the others as C methods.
#
# Why the C types cannot change a result: the only C integers are offsets and lengths within
# the chunk being parsed (``Py_ssize_t``: bounded by its length), a frame header's first byte
# and its fields (opcode, FIN, RSV bits: 8 bits), the header length (2-14) and the message
# opcode (0-15). The announced payload length, the caps the caller passed and every counter
# summed from announced lengths stay Python ints (see state.pxd for the state's fields).
# ``bint`` locals hold what the .py computes as a bool, converted back to True/False where
# it goes into an event. _frame_done's ``complete`` is positional-or-keyword in the .py (a
# cpdef method cannot have keyword-only arguments); every caller passes it by keyword.

import cython

from pcaptools.protocols.websocket.state cimport _Dir, _Msg
from pcaptools.tcp.chunk cimport StreamChunk


cdef class WebSocketObserver:
    cdef public object tcp_stream
    cdef public object stream_id
    cdef public object diag
    cdef public object handshake
    cdef public object _max_frame
    cdef public object _max_out
    cdef public object _preview_chars
    cdef public object _preview_cap
    cdef public object _max_json
    cdef public object _deflate
    cdef public tuple _no_takeover
    cdef public bint _rsv_free
    cdef public tuple _dirs
    cdef public bint _ended
    cdef public object _first_close
    cdef public object _last

    @cython.locals(st=_Dir)
    cpdef list feed(self, StreamChunk chunk)

    @cython.locals(pos=cython.Py_ssize_t, n=cython.Py_ssize_t, mode=cython.longlong,
                   take=cython.Py_ssize_t, need=cython.Py_ssize_t, hb=bytearray)
    cpdef _consume(self, _Dir st, data, ts, frame, list out)

    @cython.locals(b0=cython.longlong, masked=cython.bint, hlen=cython.longlong,
                   minimal=cython.bint, opcode=cython.longlong, fin=cython.longlong,
                   rsv=cython.longlong, allowed=cython.longlong, m=_Msg)
    cpdef _begin(self, _Dir st, buf, Py_ssize_t i, start, ts, frame, list out)

    @cython.locals(m=_Msg)
    cpdef _Msg _new_message(self, _Dir st, opcode, start)

    cpdef _taint(self, _Dir st, _Msg m)

    @cython.locals(m=_Msg)
    cpdef _payload(self, _Dir st, data, Py_ssize_t pos, Py_ssize_t take)

    @cython.locals(b0=cython.longlong, opcode=cython.longlong, fin=cython.bint, m=_Msg)
    cpdef _frame_done(self, _Dir st, ts, frame, list out, complete=*)

    @cython.locals(complete=cython.bint)
    cpdef _end_message(self, _Dir st, _Msg m, ts, frame, reason, list out)
