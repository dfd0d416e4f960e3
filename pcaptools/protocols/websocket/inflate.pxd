# Cython declarations for inflate.py (an "augmenting .pxd": the .py file is the source and
# runs unchanged without Cython). Used only by scripts/build_accel.py; pcaptools/_accel.py
# hashes this file with the .py and with the sources of state.py (whose extension types it
# cimports), so a stale build is never loaded, and the finder loads it only together with a
# compiled state module.
#
# What it buys: the functions take the direction and message state (state.pxd: _Dir, _Msg)
# as extension types, so inflate(), once per compressed payload piece, reads and updates
# them as C struct fields. No C integer is introduced here: the budget, steps and lengths
# stay Python ints (``max_out`` is whatever the caller passed), so nothing can differ from
# the .py; ``no_takeover`` is only tested for truth.

from pcaptools.protocols.websocket.state cimport _Dir, _Msg

cpdef start_inflate(_Dir st, _Msg m, no_takeover)
cpdef stop_inflating(_Dir st, _Msg m, status, no_takeover)
cpdef tuple _drain(_Dir st, _Msg m, z, data, max_out, no_takeover)
cpdef tuple inflate(_Dir st, _Msg m, data, max_out, no_takeover)
cpdef tuple end_inflate(_Dir st, _Msg m, complete, max_out, no_takeover)
