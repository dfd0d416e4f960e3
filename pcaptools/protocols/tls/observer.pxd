# Cython declarations for observer.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py and with the sources of records.py (whose RecordReader it
# cimports), so a stale build is never loaded, and the finder loads it only together with a
# compiled records module.
#
# What it buys: TlsObserver, its per-direction state (_Dir) and its sessions (_Session)
# become extension types, so the per-chunk and per-record path (feed, _record, _app_data)
# reads and updates them, the direction's RecordReader and the chunk fed (a StreamChunk,
# tcp/chunk.pxd), as C struct fields.
#
# Why the C types cannot change a result: _Session's fields are all Python objects (the
# extension type only fixes where they are stored). _Dir's C integers hold small bounded
# values: the protection mode (0-2), the records seen and the KeyUpdate generation (counts
# of records, fewer than the bytes of a capture) and the sequence numbers still to search
# (at most MAX_SEQ_SEARCH); ``early`` and ``closed`` are only ever assigned True/False. The
# plaintext offset, stream offsets, record fields, timestamps and frame numbers stay Python
# ints; the only C locals are a chunk's length and the bytes a record still needs (both
# bounded by a chunk or a record). _Dir borrows StreamCursor's align()/skip() instead of
# subclassing it (an extension type cannot subclass a Python class): they read and move only
# ``next_offset``. Python-visible names keep their Python types (``public`` attributes read
# back as int, bool, list, bytearray or the object stored).

import cython

from pcaptools.protocols.tls.records cimport RecordReader
from pcaptools.tcp.chunk cimport StreamChunk


cdef class _Dir:
    cdef public object app_dec
    cdef public long long app_gen
    cdef public object app_secret
    cdef public bint closed
    cdef public object dec
    cdef public object decomp
    cdef public bint early
    cdef public bytearray hs_buf
    cdef public object hs_dec
    cdef public list next_dec
    cdef public object next_offset
    cdef public long long nrec
    cdef public long long protect
    cdef public object pt_offset
    cdef public RecordReader reader
    cdef public long long seq_search


cdef class _Session:
    cdef public object index
    cdef public object ch
    cdef public object ch_frame
    cdef public object ch_ts
    cdef public object ch_dir
    cdef public object ch_count
    cdef public object sh
    cdef public object hrr_sh
    cdef public object sh_frame
    cdef public object sh_ts
    cdef public object hrr
    cdef public object version
    cdef public object tls13
    cdef public object suite
    cdef public object secrets
    cdef public object alpn_selected
    cdef public object early_accepted
    cdef public object cert_len
    cdef public object cert_bytes
    cdef public object key_share_group
    cdef public object nst
    cdef public object server_cert_seen
    cdef public object abbreviated
    cdef public object server_ccs
    cdef public object client_ccs
    cdef public object client_opaque_after_sh
    cdef public object fin_frame
    cdef public object fin_ts
    cdef public object fin_inferred
    cdef public object app_frame
    cdef public object app_ts
    cdef public object hs_bytes
    cdef public object hs_done
    cdef public object app_bytes
    cdef public object alerts
    cdef public object protected_records
    cdef public object decrypted_records
    cdef public object failed_records
    cdef public object reason
    cdef public object pending12
    cdef public object emitted
    cdef public object first_ts
    cdef public object first_frame


cdef class TlsObserver:
    cdef public object tcp_stream
    cdef public object _diag
    cdef public object _keylog
    cdef public object _inner_factory
    cdef public object _inner
    cdef public bint _inner_started
    cdef public tuple _dirs
    cdef public list _sessions
    cdef public bint _broken

    @cython.locals(d=_Dir, reader=RecordReader, n=cython.Py_ssize_t, need=cython.Py_ssize_t)
    cpdef list feed(self, StreamChunk chunk)

    @cython.locals(s=_Session, length=cython.Py_ssize_t)
    cpdef _record(self, _Dir d, dirn, off, ctype, version, frag, ts, frame, list out)

    cpdef _app_data(self, _Session s, _Dir d, dirn, pt, early, ts, frame, list out)
