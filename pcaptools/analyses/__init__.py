"""Analyses: pure functions of a Capture's tables (no capture is read again).

    from pcaptools.analyses import disconnects, overhead
    disconnects(cap)   # connections that did not end cleanly, with a verdict and a timeline
    overhead(cap)      # wire bytes by layer and purpose, per connection, and goodput
    conn_log(cap)      # one row per connection as Zeek logs it (Zeek's boundaries and letters)
"""

from __future__ import annotations

from .conn_log import CONN_LOG, conn_log
from .disconnects import DISCONNECTS, disconnects
from .overhead import OVERHEAD, overhead

__all__ = ["CONN_LOG", "DISCONNECTS", "OVERHEAD", "conn_log", "disconnects", "overhead"]
