"""Replacing :class:`~pcaptools.tcp.tracker.TcpTracker` methods in a test.

In the compiled build TcpTracker is an extension type (``tcp/tracker.pxd``), whose methods
cannot be set on the class. A test makes a subclass with its replacements instead, and
``pcaptools.load()`` makes its tracker from it (:mod:`pcaptools.pipeline` names the class it
makes the tracker from); a test that makes a tracker itself makes it from the returned class.
"""

from __future__ import annotations

from typing import Any

import pytest

from pcaptools.tcp.tracker import TcpTracker


def patched_tracker(monkeypatch: pytest.MonkeyPatch, **attrs: Any) -> type[TcpTracker]:
    """A subclass of the tracker class ``load()`` uses now (TcpTracker, or a subclass an
    earlier call made: replacements stack), with ``attrs`` (methods, class attributes such as
    ``cold_syns``) replaced; ``load()`` uses it until the test ends."""
    import pcaptools.pipeline as pipeline

    sub = type("PatchedTcpTracker", (pipeline.TcpTracker,), attrs)
    monkeypatch.setattr(pipeline, "TcpTracker", sub)
    return sub


def count_freezes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The tcp_streams every TcpTracker freezes from now on (in the test), in order."""
    import pcaptools.pipeline as pipeline

    frozen: list[int] = []
    real = pipeline.TcpTracker._freeze

    def counting(self, conn, at_end=False):  # type: ignore[no-untyped-def]
        if not at_end:
            frozen.append(conn.conv.tcp_stream)
        real(self, conn, at_end)

    patched_tracker(monkeypatch, _freeze=counting)
    return frozen
