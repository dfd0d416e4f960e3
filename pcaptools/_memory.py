"""Giving freed memory back to the operating system.

Building a table of millions of rows in chunks frees many mid-sized arrays; glibc's
allocator keeps the freed heap pages (they count in the process's resident memory) unless
asked to return them. :func:`trim` asks (``malloc_trim(0)``, which also releases free pages
inside the heap); elsewhere than on glibc it does nothing.
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
    """Return the allocator's free memory to the operating system (glibc; else nothing)."""
    if _TRIM is not None:
        _TRIM(0)
