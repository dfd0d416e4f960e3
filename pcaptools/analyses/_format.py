"""Number formatting shared by the analyses and the report (below :mod:`.summary` and
:mod:`.disconnects`, which both use it; ``pcaptools.analyses.summary.fmt_ms`` re-exports it)."""

from __future__ import annotations

__all__ = ["fmt_ms"]


def fmt_ms(v: float) -> str:
    """12.4 ms, 0.042 ms, 1,204 ms: one decimal from 1 ms, three significant digits below."""
    if v >= 1000:
        return f"{v:,.0f} ms"
    if v >= 1:
        return f"{v:.1f} ms"
    return f"{v:.3g} ms"
