# Cython declarations for packet.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py (and with the sources of every module that cimports it), so a stale
# build is never loaded.
#
# What it buys: TcpSegment (one per TCP frame) becomes an extension type, made by a compiled
# __init__ instead of a Python one, whose fields the modules that cimport it read as C struct
# fields. Every field stays a Python object: the values read back are the values stored.

import cython


cdef class TcpSegment:
    cdef public object frame
    cdef public object ts_ns
    cdef public object frame_len
    cdef public object ip_version
    cdef public object src
    cdef public object dst
    cdef public object ttl
    cdef public object ip_id
    cdef public object sport
    cdef public object dport
    cdef public object seq
    cdef public object ack
    cdef public object flags
    cdef public object window
    cdef public object header_len
    cdef public object options
    cdef public object seg_len
    cdef public object payload
    cdef public object overhead_len
    cdef public object df


@cython.locals(s=TcpSegment)
cpdef TcpSegment new_segment(object frame, object ts_ns, object frame_len, object ip_version,
                             object src, object dst, object ttl, object ip_id, object sport,
                             object dport, object seq, object ack, object flags, object window,
                             object header_len, object options, object seg_len, object payload,
                             object overhead_len, object df)
