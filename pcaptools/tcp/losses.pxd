# Cython declarations for losses.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py, so a stale build is never loaded.
#
# What it buys: LossDirection becomes an extension type, so the tracker reads and writes the
# tcp_losses state of every segment (hi, ack_last, same_acks, ack_opts, holes, pending) as C
# struct fields. Every field stays a Python object (sequence positions are unwrapped, not
# bounded by the header).


cdef class LossDirection:
    cdef public object ack_last
    cdef public object ack_opts
    cdef public object capture_drop_bytes
    cdef public object capture_drops
    cdef public object episode_end
    cdef public object episode_recovery
    cdef public object hi
    cdef public list holes
    cdef public object lost
    cdef public object lost_after
    cdef public object lost_before
    cdef public list pending
    cdef public object reordered
    cdef public object same_acks
    cdef public object spurious
    cdef public object unresolved
