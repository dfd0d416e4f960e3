# Cython declarations for frames.py (an "augmenting .pxd": the .py file is the source and runs
# unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py hashes
# this file with the .py (and with the sources of every module that cimports it), so a stale
# build is never loaded.
#
# What it buys: unmask() XORs a masked payload with its key in a C loop, eight bytes at a
# time, where the Python code converts both to big integers and back (about 43 instructions a
# byte on the benchmark capture's client frames compiled as it is, about 3 now). ``_COMPILED`` is true only in the
# compiled module.
#
# Why the C types cannot change a result: ``i``, ``n`` and ``r`` index the payload and the
# 4-byte key (``Py_ssize_t``: bounded by the payload's length; the key's length is checked);
# the pointers read the payload and the key and write the new bytes object of ``n`` bytes,
# which no other code holds until it is returned. Each output byte is the input byte XOR the
# key byte at ((i + r) mod 4), what the big-integer XOR gives: the first ``n // 8 * 8`` bytes
# eight at a time, XORed with a 64-bit word whose bytes, in memory order, are the key from
# byte ``r`` on, twice (a byte's place in the word is its place in memory on any byte order),
# the rest one at a time. The 64-bit reads and writes are of the payload's and the new
# object's buffers (a bytes object's data is 8-byte aligned in CPython; x86-64 and ARM64 read
# unaligned words anyway).

import cython


cdef bint _COMPILED


@cython.locals(n=cython.Py_ssize_t, r=cython.Py_ssize_t, i=cython.Py_ssize_t,
               sp="const unsigned char *", dp="unsigned char *", kp="const unsigned char *",
               out=bytes, kw=cython.ulonglong, kb="unsigned char *", words=cython.Py_ssize_t,
               sw="const unsigned long long *", dw="unsigned long long *")
cpdef bytes unmask(data, key, Py_ssize_t pos)
