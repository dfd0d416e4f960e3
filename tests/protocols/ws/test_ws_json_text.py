"""WsMessage.json_text: the whole text of a JSON-looking message, bounded, only when it is
known in full; and the realtime_events rows (and ws.bad_json) the builder makes of it."""

from __future__ import annotations

import zlib

from pcaptools.diagnostics import Diagnostics
from pcaptools.tables.realtime_tables import REALTIME_EVENTS, RealtimeEventsBuilder
from tests.protocols.ws.helpers import (
    C2S,
    S2C,
    cframe,
    close_payload,
    feed,
    frame,
    messages_of,
    observer,
)

EVENT = b'{"type":"response.audio.delta","response_id":"r1","delta":"' + b"QUFB" * 40 + b'"}'


def _messages(segments: list[tuple[object, bytes]], **kw: object) -> list[object]:
    obs, _ = observer(**kw)  # type: ignore[arg-type]
    return messages_of(feed(obs, segments))  # type: ignore[arg-type]


def test_json_text_whole_whatever_the_fragmentation() -> None:
    half = len(EVENT) // 2
    segs = [(C2S, cframe(1, b"  \n" + EVENT[:half], fin=False)),
            (C2S, cframe(0, EVENT[half:])),
            (S2C, frame(1, EVENT)),
            (S2C, frame(1, b"plain text {not json}")),
            (S2C, frame(2, EVENT)),  # binary: never text
            (C2S, cframe(8, close_payload(1000))), (S2C, frame(8, close_payload(1000)))]
    got = {(m.direction, m.index): m.json_text for m in _messages(segs)}  # type: ignore[attr-defined]
    assert got == {(C2S, 0): EVENT, (S2C, 0): EVENT, (S2C, 1): None, (S2C, 2): None}


def test_json_text_is_bounded_and_none_when_not_known() -> None:
    segs = [(S2C, frame(1, EVENT)), (S2C, frame(1, b'{"type":"x"}'))]
    small = _messages(segs, max_json_bytes=64)
    assert [m.json_text for m in small] == [None, b'{"type":"x"}']  # type: ignore[attr-defined]
    assert small[0].json_type == "response.audio.delta"  # type: ignore[attr-defined]
    assert [m.json_text for m in _messages(segs, max_json_bytes=0)] == [None, None]  # type: ignore[attr-defined]
    # cut off by the end of the connection: not known in full
    cut = frame(1, EVENT)[:-10]
    assert [m.json_text for m in _messages([(S2C, cut)])] == [None]  # type: ignore[attr-defined]


def test_json_text_of_a_compressed_message_is_inflated() -> None:
    z = zlib.compressobj(wbits=-15)
    payload = z.compress(EVENT) + z.flush(zlib.Z_SYNC_FLUSH)
    assert payload.endswith(b"\x00\x00\xff\xff")
    msgs = _messages([(S2C, frame(1, payload[:-4], rsv=4))],
                     extensions="permessage-deflate")
    assert [m.json_text for m in msgs] == [EVENT]  # type: ignore[attr-defined]


def test_rows_for_what_could_not_be_read() -> None:
    big = b'{"type": "big", "pad": "' + b"x" * 200 + b'"}'
    segs = [(S2C, frame(1, EVENT)), (S2C, frame(1, b'{"type": "broken", "x": ')),
            (S2C, frame(1, b"[1, 2]")), (S2C, frame(1, big))]
    obs, _ = observer(max_json_bytes=300)
    diag = Diagnostics()
    b = RealtimeEventsBuilder(diag)
    b.add_all(feed(obs, segs))
    df = b.frame()
    REALTIME_EVENTS.check(df)
    assert df["status"].astype(str).tolist() == ["ok", "bad_json", "ok"]
    assert df["type"].tolist() == ["response.audio.delta", "broken", "big"]
    assert df["audio_bytes"].tolist()[0] == 120 and df["message_index"].tolist() == [0, 1, 3]
    assert [r.code for r in diag.rows] == ["ws.bad_json"]
    obs, _ = observer(max_json_bytes=100)
    b = RealtimeEventsBuilder(Diagnostics())
    b.add_all(feed(obs, segs[3:]))
    df = b.frame()
    assert df["status"].astype(str).tolist() == ["too_large"]
    assert df["type"].tolist() == ["big"] and df["json_bytes"].tolist() == [len(big)]
