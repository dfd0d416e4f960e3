# Cython declarations for reassembly.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py (and with the sources of every module that cimports it), so a
# stale build is never loaded.
#
# What it buys: Reassembler (two per parsed connection) becomes an extension type, so the
# tracker (tracker.pxd cimports it) calls in_order (once per in-order payload segment) and
# acked (once per ACK) as C methods, and they read the reassembler's state as C struct fields
# instead of slot descriptors. Every field stays a Python object (stream offsets are unwrapped
# positions, not bounded by a header field), the lists are typed as lists: the values read
# back are the values stored. segment() (keyword-only arguments) stays a Python method.

from pcaptools.tcp.chunk cimport StreamChunk, new_chunk


cdef class Reassembler:
    cdef public object _base
    cdef public object _fin_off
    cdef public object _gaps
    cdef public object _high
    cdef public object _hist
    cdef public object _hist_bytes
    cdef public list _missing
    cdef public list _pieces
    cdef public list _starts
    cdef public object buffered_bytes
    cdef public object delivered_bytes
    cdef public object direction
    cdef public object dropped_bytes
    cdef public object duplicate_bytes
    cdef public object gap_bytes
    cdef public object inconsistent_bytes
    cdef public object max_buffer_bytes
    cdef public object max_history_bytes
    cdef public object next_offset

    cpdef in_order(self, seq_rel, data, ts_ns, frame)

    cpdef acked(self, ack_rel, ts_ns, frame)
