"""Giving freed memory back to the operating system.

Building a table of millions of rows in chunks frees many mid-sized arrays; glibc's
allocator keeps the freed heap pages (they count in the process's resident memory) unless
asked to return them. :func:`trim` asks (``malloc_trim(0)``, which also releases free pages
inside the heap); elsewhere than on glibc it does nothing. Arrow's own pool (mimalloc or
jemalloc, where the ``string`` columns live) is asked the same.

:func:`large_blocks_mapped` keeps the large blocks out of the heap during a pass: glibc
serves a block above its mmap threshold (128 KiB at first) with a mapping of its own, given
back the moment it is freed, but raises the threshold to the size of every such block freed
(up to 32 MiB). After the first column array or row buffer of a load is freed, every later
one (the 512 KiB chunks of packed rows, a table's column arrays, the growing row buffers) is
carved out of the heap, and a freed one stays resident there until :func:`trim`, or for good
where a live block sits above it. On ``big.pcap`` of the benchmarks (403,688 frames) that was
~35 MB of a 375 MB peak. It also makes the system allocator Arrow's default pool for the pass
(the ``string`` columns are built in Arrow while the capture is read): Arrow's bundled
mimalloc keeps the segments it has used, ~18 MB more resident at the end of a load of
``big.pcap`` (325 MB against 306 MB with the system pool, 2026-12-07), which
``release_unused()`` does not give back. An Arrow buffer is freed by the pool that allocated
it, so the arrays of the tables stay valid after the default pool is restored. The report's
analyses make and drop many large arrays too: rendering the report of ``big.pcap`` in the
block peaks at 366 MB for the whole ``pcap-report`` run instead of 404 MB (2026-12-07).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_TRIM: Callable[[int], int] | None = None
_MALLOPT: Callable[[int, int], int] | None = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL("libc.so.6")
        _TRIM = _libc.malloc_trim
        _MALLOPT = _libc.mallopt
    except (OSError, AttributeError):  # (not glibc: musl has no malloc_trim)
        _TRIM = _MALLOPT = None

M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter number of the mmap threshold (``malloc.h``)"""
MMAP_THRESHOLD = 128 * 1024
"""the threshold :func:`large_blocks_mapped` fixes during a pass: glibc's own initial value"""
MMAP_THRESHOLD_AFTER = 32 * 1024 * 1024
"""the threshold it leaves once the pass is over: the highest glibc's dynamic threshold reaches
on 64-bit systems (``DEFAULT_MMAP_THRESHOLD_MAX``), i.e. where a process that allocates and frees
large arrays (pandas, numpy) settles by itself: those blocks then come from the heap again"""


def trim() -> None:
    """Return the allocators' free memory to the operating system: glibc's (else nothing),
    and that of Arrow's pool when pyarrow is loaded (the ``string`` columns live there)."""
    if _TRIM is not None:
        _TRIM(0)
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()


_pass_lock = threading.Lock()
_passes = 0
"""passes inside :func:`large_blocks_mapped` now (threads may load at the same time: the first
one in sets the allocators, the last one out restores them)"""
_arrow_pool_before: object = None
"""Arrow's default pool when the first of the passes began (restored by the last)"""


def _begin_pass() -> bool:
    """The first pass in: fix glibc's threshold, make the system allocator Arrow's pool."""
    global _arrow_pool_before
    if _MALLOPT is None:
        fixed = False
    else:
        fixed = bool(_MALLOPT(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    pa = sys.modules.get("pyarrow")
    if pa is not None and "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        _arrow_pool_before = pa.default_memory_pool()
        pa.set_memory_pool(pa.system_memory_pool())
    return fixed


def _end_pass() -> None:
    """The last pass out: the threshold glibc would have reached, Arrow's pool as it was."""
    global _arrow_pool_before
    if _MALLOPT is not None:
        _MALLOPT(M_MMAP_THRESHOLD, MMAP_THRESHOLD_AFTER)
    pa = sys.modules.get("pyarrow")
    if pa is not None and _arrow_pool_before is not None:
        pa.set_memory_pool(_arrow_pool_before)
    _arrow_pool_before = None


@contextmanager
def large_blocks_mapped() -> Iterator[bool]:
    """During the ``with`` block (one pass of :func:`pcaptools.load`, or the analyses of
    one :func:`~pcaptools.report.html.render_report`), fix glibc's mmap
    threshold at :data:`MMAP_THRESHOLD` (what ``MALLOC_MMAP_THRESHOLD_=131072`` in the
    environment does; see the module docstring): every block above 128 KiB is then mapped on its
    own and unmapped when freed; and make the system allocator Arrow's default pool (unless
    ``ARROW_DEFAULT_MEMORY_POOL`` chooses one). After it, the threshold is
    :data:`MMAP_THRESHOLD_AFTER` (a fixed threshold cannot be made dynamic again; that is the
    value the dynamic one reaches), so the user's own large arrays are served from the heap as
    glibc would serve them, and Arrow's pool is the one it was. With passes in several threads
    at once, the first one in sets both and the last one out restores them. Left alone when the
    environment sets ``MALLOC_MMAP_THRESHOLD_`` (the user's choice) or ``PCAPTOOLS_KEEP_MALLOC``
    (any value); the threshold elsewhere than on glibc. Yields True when the threshold is fixed
    during the block."""
    global _passes
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "PCAPTOOLS_KEEP_MALLOC" in os.environ:
        yield False
        return
    with _pass_lock:
        _passes += 1
        fixed = _begin_pass() if _passes == 1 else _MALLOPT is not None
    try:
        yield fixed
    finally:
        with _pass_lock:
            _passes -= 1
            if _passes == 0:
                _end_pass()
