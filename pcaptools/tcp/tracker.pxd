# Cython declarations for tracker.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py, so a stale build is never loaded.
#
# Only _Guarded (called for every chunk of payload) becomes an extension type. TcpTracker
# stays a Python class on purpose: the tests replace its methods (monkeypatch on the class),
# which an extension type forbids.

cdef class _Guarded:
    cdef public object _diag
    cdef public object _obs
    cdef public object _tcp_stream
    cdef public bint failed
