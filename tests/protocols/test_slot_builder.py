"""protocols._base.slot_builder: the event it builds is the one the dataclass builds, and a
field list that does not match the class fails at import time, not with a wrong event."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pytest

from pcaptools.protocols._base import Event, slot_builder
from pcaptools.tcp.stream import Direction


@dataclass(frozen=True, slots=True, kw_only=True)
class _Record(Event):
    ts_ns: int
    frame: int
    direction: Direction
    detail: str | None
    count: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class _Other(Event):
    ts_ns: int
    frame: int
    direction: Direction


@pytest.mark.parametrize("cls", [_Record, _Other])
def test_builds_the_same_event_as_the_dataclass(cls: type) -> None:
    names = tuple(f.name for f in fields(cls))
    values = [Direction.SERVER_TO_CLIENT if n == "direction" else f"v{i}"
              for i, n in enumerate(names)]
    built: object = slot_builder(cls, names)(values)
    assert type(built) is cls
    assert built == cls(**dict(zip(names, values, strict=True)))
    with pytest.raises(AttributeError):  # still frozen
        built.frame = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="takes"):
        slot_builder(cls, names)(values[:-1])


def test_refuses_fields_out_of_order_and_post_init() -> None:
    names = tuple(f.name for f in fields(_Record))
    with pytest.raises(TypeError, match="fields"):
        slot_builder(_Record, names[::-1])

    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="__post_init__"):
        slot_builder(Checked, ("a",))
