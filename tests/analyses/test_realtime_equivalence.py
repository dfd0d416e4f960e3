"""The realtime_events builder's shortcuts (issue #20) give what the plain code gave:
:func:`summarise_event` against the implementation it replaced (kept here as the reference),
and the JSON fast path against :func:`json.loads`, on hypothesis-made events and texts."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pcaptools.redaction import is_secret_json_key, redacted
from pcaptools.tables.realtime_tables import (
    AUDIO_KEYS,
    MAX_FIELD_CHARS,
    MAX_FIELD_DEPTH,
    MAX_FIELDS,
    MAX_FIELDS_CHARS,
    _fields_json,
    _loads,
    base64_size,
    summarise_event,
)


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def reference_summary(obj: dict[str, Any], *, show_secrets: bool = False) -> tuple[Any, ...]:
    """summarise_event as it was before the issue #20 pass (closure walk, json.dumps)"""
    fields: dict[str, Any] = {}
    audio: tuple[int, str, int] | None = None
    room = MAX_FIELDS_CHARS

    def walk(o: dict[str, Any], prefix: str, depth: int, secret: bool) -> None:
        nonlocal audio, room
        for k, v in o.items():
            if not isinstance(k, str):
                continue
            path = prefix + k
            if isinstance(v, dict):
                if depth < MAX_FIELD_DEPTH:
                    walk(v, path + ".", depth + 1, secret or is_secret_json_key(k))
                continue
            if isinstance(v, str):
                if len(v) > MAX_FIELD_CHARS:
                    size = base64_size(v)
                    if size is not None:
                        cand = ((2 if k in AUDIO_KEYS else 1) * (1 << 40) + len(v), path, size)
                        if audio is None or cand[0] > audio[0]:
                            audio = cand
                if len(v) > MAX_FIELD_CHARS:
                    continue
                if not show_secrets and (secret or is_secret_json_key(k)):
                    v = redacted(v)
            elif not (v is None or isinstance(v, (bool, int, float))):
                continue
            cost = len(path) + (len(v) if isinstance(v, str) else 8) + 6
            if len(fields) < MAX_FIELDS and cost <= room:
                fields[path] = v
                room -= cost

    walk(obj, "", 1, False)
    resp, item = obj.get("response"), obj.get("item")
    response_id = _str(obj.get("response_id")) or (
        _str(resp.get("id")) if isinstance(resp, dict) else None)
    item_id = _str(obj.get("item_id")) or (_str(item.get("id")) if isinstance(item, dict)
                                           else None)
    audio_field = audio[1] if audio is not None else None
    text_chars: int | None = None
    for k in ("delta", "transcript", "text"):
        v = obj.get(k)
        if isinstance(v, str) and k != audio_field:
            text_chars = len(v)
            break
    return (_str(obj.get("type")), _str(obj.get("event_id")), response_id, item_id,
            audio_field, audio[2] if audio is not None else None, text_chars,
            json.dumps(fields, ensure_ascii=False, separators=(",", ":")))


_KEYS = st.sampled_from(["type", "event_id", "response_id", "item_id", "response", "item", "id",
                         "delta", "audio", "transcript", "text", "api_key", "token",
                         "client_secret", "value", "a.b", "a", "b", "é"]) | st.text(max_size=12)
_B64 = st.integers(33, 120).map(lambda n: "QUJD" * n + "QQ==")
_SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
            | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=140) | _B64)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=6),
    max_leaves=60,
)
_EVENTS = st.dictionaries(_KEYS, _VALUES, max_size=12)


@given(_EVENTS, st.booleans())
def test_summarise_event_is_unchanged(obj: dict[str, Any], show: bool) -> None:
    assert summarise_event(obj, show_secrets=show) == reference_summary(obj, show_secrets=show)


def _verdict(f: Any, text: bytes) -> tuple[str, Any]:
    try:
        return "ok", repr(f(text))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


@given(_EVENTS, st.sampled_from(["", " ", "\n", "x", "}", "\x00"]),
       st.sampled_from(["", "\x00", " "]))
def test_loads_is_json_loads(obj: dict[str, Any], tail: str, second: str) -> None:
    text = json.dumps(obj, ensure_ascii=bool(len(tail) % 2)) + tail
    if second:
        text = text[:1] + second + text[1:]
    raw = text.encode("utf-8", "surrogatepass")
    assert _verdict(_loads, raw) == _verdict(json.loads, raw)


def test_loads_edge_cases() -> None:
    for raw in (b"{}", b"{", b"{\x00}", b'{"a":1} ', b'{"a":1}x', b'{"a":NaN}', b'{"a":"\\ud800"}',
                b'{"a":' + b"[" * 3000 + b"]" * 3000 + b"}", b'{"a":' + b"[" * 150 + b"]" * 150
                + b"}", b'{"a":1,"a":2}', b"\xef\xbb\xbf{}", b' {"a":1}', b"{\xff}",
                # numbers at the edges of orjson's (its path: fewer than 19 digits in all)
                b'{"a":123456789012345678}', b'{"a":-123456789012345678}',
                b'{"a":9223372036854775808}', b'{"a":18446744073709551616}',
                b'{"a":-9223372036854775809}', b'{"a":1e400}', b'{"a":-1e-400}',
                b'{"a":1.7976931348623159e308}', b'{"a":2.4703282292062328e-324}',
                b'{"a":2.4703282292062327e-324}', b'{"a":-0,"b":-0.0,"c":0e0}',
                b'{"a":"\xed\xa0\x80"}', b'{"a":"\\u0000\\u00e9\xc3\xa9"}',
                b'{"a":1,"b":"2026-12-07","c":"12:00:00","d":0.5}',
                # longer than orjson is given, json's path alone
                b'{"audio":"' + b"QUJD" * 400 + b'","n":18446744073709551616,"f":0.1}',
                b'{"audio":"' + b"QUJD" * 400 + b'"'):
        assert _verdict(_loads, raw) == _verdict(json.loads, raw), raw


_FLAT = st.dictionaries(
    st.text(max_size=8),
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40),
    max_size=8)


@given(_FLAT)
def test_fields_json_is_json_dumps(fields: dict[str, Any]) -> None:
    assert _fields_json(fields) == json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def test_fields_json_escapes_every_character_as_json_does() -> None:
    for cp in [*range(0x800), *range(0xD7F0, 0xE010), *range(0xFFF0, 0x10010), 0x10FFFF]:
        fields = {"k" + chr(cp): chr(cp) + 'x"\\', "n": cp}
        assert _fields_json(fields) == json.dumps(
            fields, ensure_ascii=False, separators=(",", ":")), hex(cp)
