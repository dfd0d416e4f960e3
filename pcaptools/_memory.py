"""Giving freed memory back to the operating system.

Building a table of millions of rows in chunks frees many mid-sized arrays; glibc's
allocator keeps the freed heap pages (they count in the process's resident memory) unless
asked to return them. :func:`trim` asks (``malloc_trim(0)``, which also releases free pages
inside the heap); elsewhere than on glibc it does nothing. Arrow's own pool (mimalloc or
jemalloc, where the ``string`` columns live) is asked the same.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

_TRIM: Callable[[int], int] | None = None
if sys.platform.startswith("linux"):
    try:
        _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # (not glibc: musl has no malloc_trim)
        _TRIM = None


def trim() -> None:
    """Return the allocators' free memory to the operating system: glibc's (else nothing),
    and that of Arrow's pool when pyarrow is loaded (the ``string`` columns live there)."""
    if _TRIM is not None:
        _TRIM(0)
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()
