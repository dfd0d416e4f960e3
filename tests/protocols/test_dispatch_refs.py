"""ConnectionObserver keeps no reference cycle: a connection's observers are freed by
reference counting as soon as the TCP layer lets them go (not left, with everything they
hold, for the cycle collector), in every state the observer can be let go in; and once the
cleartext detector has chosen, chunks go straight to the observer it chose."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.detect import HttpDetector
from pcaptools.protocols.dispatch import ConnectionObserver
from pcaptools.protocols.http1 import Http1Observer
from pcaptools.tcp.stream import Direction, StreamChunk

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
REQUEST = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CLIENT_HELLO_START = b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x03"


def _chunk(d: Direction, data: bytes, frame: int, offset: int = 0) -> StreamChunk:
    return StreamChunk(direction=d, data=data, ts_ns=frame * 1000, frame=frame, offset=offset)


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The cycle collector off, then a collection that keeps what it would free in
    ``gc.garbage`` (read by the test)."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


def _never_fed(obs: ConnectionObserver) -> None:
    obs.close(C2S, 1000, 1)


def _undecided(obs: ConnectionObserver) -> None:
    obs.feed(_chunk(C2S, b"GE", 1))  # (too short to say TLS or not: held)


def _detector_undecided(obs: ConnectionObserver) -> None:
    obs.feed(_chunk(C2S, b"GET / HT", 1))  # (not TLS; not yet HTTP/1.x either)
    assert isinstance(obs.inner, HttpDetector) and obs.inner.kind is None


def _http1_exchange(obs: ConnectionObserver) -> None:
    assert obs.feed(_chunk(C2S, REQUEST, 1)) == []
    obs.feed(_chunk(S2C, ANSWER, 2))
    obs.close(C2S, 3000, 3)
    obs.close(S2C, 4000, 4)
    assert obs.done and obs.kind == "cleartext"
    assert isinstance(obs.inner, HttpDetector) and isinstance(obs.inner.inner, Http1Observer)


def _not_http(obs: ConnectionObserver) -> None:
    obs.feed(_chunk(C2S, b"\x00\x01binary protocol", 1))
    assert not obs.wants_bytes and obs.feed(_chunk(C2S, b"more", 2, 18)) == []


def _tls(obs: ConnectionObserver) -> None:
    obs.feed(_chunk(C2S, CLIENT_HELLO_START, 1))
    assert obs.kind == "tls"


@pytest.mark.parametrize(
    "use", [_never_fed, _undecided, _detector_undecided, _http1_exchange, _not_http, _tls]
)
def test_let_go_observers_are_freed_without_the_cycle_collector(
    no_collector: None, use: Callable[[ConnectionObserver], None]
) -> None:
    obs = ConnectionObserver(tcp_stream=3, diag=Diagnostics(), keylog=None)
    use(obs)
    del obs
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    left = {type(o).__name__ for o in gc.garbage}
    assert not left & {"ConnectionObserver", "HttpDetector", "Http1Observer", "TlsObserver",
                       "Held"}


def test_the_chosen_http_observer_is_fed_directly_with_the_same_events() -> None:
    """Once the detector chose, ``feed`` is the HTTP observer's own: the events are those of
    an observer fed through the detector."""
    diag = Diagnostics()
    obs = ConnectionObserver(tcp_stream=0, diag=diag, keylog=None)
    ref = HttpDetector(tcp_stream=0, diag=Diagnostics())
    got = obs.feed(_chunk(C2S, REQUEST, 1)) + obs.feed(_chunk(S2C, ANSWER, 2))
    want = ref.feed(_chunk(C2S, REQUEST, 1)) + ref.feed(_chunk(S2C, ANSWER, 2))
    assert isinstance(obs.inner, HttpDetector) and obs.inner.inner is not None
    assert obs._inner_feed == obs.inner.inner.feed
    got += obs.close(C2S, 3000, 3) + obs.close(S2C, 4000, 4)
    want += ref.close(C2S, 3000, 3) + ref.close(S2C, 4000, 4)
    assert got == want and len(got) == 1
    assert obs.done
