"""The derived analyses on the Capture: ``cap.latency()``, ``cap.disconnects()``,
``cap.overhead()``, ``cap.heartbeats()`` take the options of the functions they call and
return the same tables; ``disconnects()`` prints its connection counts, also when empty."""

from __future__ import annotations

import inspect
import json

import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses import disconnects, overhead
from pcaptools.analyses.disconnects import DisconnectsFrame
from pcaptools.analyses.heartbeats import heartbeats
from pcaptools.analyses.latency import stream_latency
from pcaptools.result import Capture
from tests.conftest import CAPTURES


@pytest.fixture(scope="module")
def ws() -> Capture:
    path = CAPTURES / "ws-blackhole.pcap"
    if not path.is_file():
        pytest.skip("captures/ws-blackhole.pcap is absent")
    return pcaptools.load(path)


@pytest.fixture(scope="module")
def h2() -> Capture:
    path = CAPTURES / "h2-sse-chat.pcapng"
    if not path.is_file():
        pytest.skip("captures/h2-sse-chat.pcapng is absent")
    return pcaptools.load(path, keylog=path.with_suffix(".keys"))


def _options(fn: object, skip: int) -> list[inspect.Parameter]:
    return list(inspect.signature(fn).parameters.values())[skip:]  # type: ignore[arg-type]


@pytest.mark.parametrize(("method", "function", "skip"), [
    (Capture.latency, stream_latency, 1),
    (Capture.disconnects, disconnects, 1),
    (Capture.overhead, overhead, 1),
    # heartbeats(ws_frames, http2_frames, tcp_events, *, connections, capture_end,
    # quic_frames, quic_connections, ...): the capture gives the tables and the connections
    # (which bound each wait)
    (Capture.heartbeats, heartbeats, 7),
])
def test_same_options_as_the_function(method: object, function: object, skip: int) -> None:
    mine = _options(method, 1)  # (self)
    theirs = _options(function, skip)
    assert [(p.name, p.kind, p.default) for p in mine] == \
        [(p.name, p.kind, p.default) for p in theirs]


def test_same_tables_as_the_functions(ws: Capture, h2: Capture) -> None:
    lat = h2.latency()
    pd.testing.assert_frame_equal(lat, stream_latency(h2))
    # the recorded plan: one row per request, the chat ones with their scripted token counts
    plan = json.loads((CAPTURES / "h2-sse-chat.pcapng.facts.json").read_text())["truth"]["plan"]
    assert len(lat) == len(plan)
    chats = sorted(int(r["lab"]["tokens"]) for r in plan if "lab" in r)
    assert sorted(lat.loc[lat["ttft_ms"].notna(), "token_events"].astype(int)) == chats
    pd.testing.assert_frame_equal(ws.disconnects(idle_gap_s=5), disconnects(ws, idle_gap_s=5))
    pd.testing.assert_frame_equal(h2.overhead(by_direction=True), overhead(h2, by_direction=True))
    hb = ws.heartbeats()
    pd.testing.assert_frame_equal(
        hb, heartbeats(ws.ws_frames, ws.http2_frames, ws.tcp_events, connections=ws.connections))
    # the path vanished after the fourth ping: its pong never came
    assert hb["outcome"].astype(str).tolist() == ["answered"] * 4 + ["unanswered"]
    assert ws.heartbeats(answer_timeout_ms=60_000)["outcome"].astype(str).tolist()[-1] == "cut_off"


def test_disconnects_says_its_counts(ws: Capture, h2: Capture) -> None:
    clean = h2.disconnects()
    assert isinstance(clean, DisconnectsFrame) and len(clean) == 0
    assert clean.attrs["clean_connections"] == 1
    line = "disconnects: 0 of 1 TCP connection ended badly (1 closed cleanly with FIN)"
    assert repr(clean).splitlines()[0] == line
    assert clean._repr_html_().startswith(f"<p>{line}</p>")
    bad = ws.disconnects()
    assert repr(bad).splitlines()[0] == "disconnects: 1 of 1 TCP connection ended badly " \
        "(peer_vanished: 1)"
    # what is derived from it is a plain DataFrame, printed as pandas prints it
    part = bad[["tcp_stream", "verdict"]]
    assert type(part) is pd.DataFrame and not repr(part).startswith("disconnects:")
    assert type(bad.copy()) is pd.DataFrame
