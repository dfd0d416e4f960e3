# Cython declarations for packet.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py (and with the sources of every module that cimports it), so a stale
# build is never loaded.
#
# What it buys: TcpSegment (one per TCP frame) becomes an extension type, made by a compiled
# __init__ instead of a Python one, whose fields the modules that cimport it read as C struct
# fields.
#
# The header fields are C integers (``long long``; ``df`` a ``bint``), so the decoder, which
# reads them from the frame as C integers (decode.pxd), makes no Python int for them, and the
# TCP modules that cimport TcpSegment read them without one. Each is bounded by the format
# far below 2**63: orig_len and the lengths derived from it (frame_len, seg_len,
# overhead_len) come from 32-bit record fields and 16-bit IP lengths, ports, IP id, window
# and flags are 16-bit (at most) header fields (ip_id -1 for IPv6), ttl 8-bit, header_len at
# most 60, seq and ack unsigned 32-bit. Python code reads them back as ints of the same
# value (a bool for df, as before). frame, ts_ns, the addresses, options and payload stay
# Python objects: the tracker stores the frame number and timestamp in object fields of its
# records, where a C field here would make a new int at every store.

import cython


cdef class TcpSegment:
    cdef public object frame
    cdef public object ts_ns
    cdef public long long frame_len
    cdef public long long ip_version
    cdef public object src
    cdef public object dst
    cdef public long long ttl
    cdef public long long ip_id
    cdef public long long sport
    cdef public long long dport
    cdef public long long seq
    cdef public long long ack
    cdef public long long flags
    cdef public long long window
    cdef public long long header_len
    cdef public object options
    cdef public long long seg_len
    cdef public object payload
    cdef public long long overhead_len
    cdef public bint df


@cython.locals(s=TcpSegment)
cpdef TcpSegment new_segment(object frame, object ts_ns, long long frame_len,
                             long long ip_version, object src, object dst, long long ttl,
                             long long ip_id, long long sport, long long dport, long long seq,
                             long long ack, long long flags, long long window,
                             long long header_len, object options, long long seg_len,
                             object payload, long long overhead_len, bint df)
