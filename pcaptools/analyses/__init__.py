"""Analyses: pure functions of a Capture's tables (no capture is read again).

    from pcaptools.analyses import disconnects, overhead
    disconnects(cap)   # connections that did not end cleanly, with a verdict and a timeline
    overhead(cap)      # wire bytes by layer and purpose, per connection, and goodput
"""

from __future__ import annotations

from .disconnects import DISCONNECTS, disconnects
from .overhead import OVERHEAD, overhead

__all__ = ["DISCONNECTS", "OVERHEAD", "disconnects", "overhead"]
