"""The realtime_events table: WebSocket text messages that are JSON objects, read as the
events of a realtime API (OpenAI Realtime and the many APIs shaped like it: every message is
``{"type": "<event name>", ...}``, audio travels as base64 strings).

:class:`RealtimeEventsBuilder` reads the :class:`~pcaptools.protocols.websocket.WsMessage`
events of the pass (other event types are ignored). A text message gets a row when it starts
like a JSON object (``{`` after whitespace); the observer hands its whole text over up to
``max_json_bytes`` (:data:`~pcaptools.protocols.websocket.DEFAULT_MAX_JSON_BYTES`), and it is
parsed with :func:`json.loads`. The row keeps what the realtime analyses
(:mod:`pcaptools.analyses.realtime`) need and nothing that grows with the payload: the
``type``, the ids, the decoded size of the message's base64 audio (never the audio itself),
the length of its text delta, and ``fields``: every short scalar member (strings up to
:data:`MAX_FIELD_CHARS` characters, numbers, booleans, null) of the object and of the objects
nested in it (up to :data:`MAX_FIELD_DEPTH` levels, :data:`MAX_FIELDS` members), as one JSON
object keyed by dotted path (``session.audio.output.format.rate``). So an API that names its
events with another member than ``type`` is still readable (the analyses' generic mode:
``type_field="event"``), and the session's audio format can be read from ``session.update``.

Rows for what could not be read say so (``status``) instead of guessing: ``bad_json`` (also a
``ws.bad_json`` warning), ``too_large`` (longer than ``max_json_bytes``: only the preview's
``type`` is known), ``incomplete`` (bytes lost, message cut off, not valid UTF-8 or not
inflated).

Memory: one row per JSON message, of bounded size (the fields are capped); the rows of a
connection are capped with its ws_messages rows (the same events: ``max_events_per_connection``
and ``max_record_rows`` drop them before any builder sees them).

Credential-looking members (``api_key``, ``token``, ``client_secret``...:
:func:`pcaptools.redaction.is_secret_json_key`, and every string inside such an object, e.g.
``client_secret.value``) are kept in ``fields`` as ``<redacted: N bytes>`` unless
``show_secrets``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from typing import Any, Final

import pandas as pd

from .._columns import NA, Records, TextColumns, nullable, sorted_categorical
from ..diagnostics import Diagnostics
from ..protocols._base import Direction
from ..protocols.websocket import WsMessage
from ..redaction import is_secret_json_key, redacted
from .schema import TS_DTYPE, Column, TableSchema

_orjson_loads: Any
_orjson_dumps: Any
try:
    from orjson import dumps as _orjson_dumps
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - orjson is a dependency; json alone gives the same
    _orjson_loads = _orjson_dumps = None

__all__ = [
    "AUDIO_KEYS",
    "MAX_FIELDS",
    "MAX_FIELDS_CHARS",
    "MAX_FIELD_CHARS",
    "MAX_FIELD_DEPTH",
    "REALTIME_EVENTS",
    "RealtimeEventsBuilder",
    "base64_size",
    "summarise_event",
]

MAX_FIELD_CHARS: Final = 128
"""strings longer than this are not kept in ``fields`` (their length is, as audio or text)"""
MAX_FIELD_DEPTH: Final = 6
"""nesting levels of objects read into ``fields``"""
MAX_FIELDS: Final = 48
"""members kept in ``fields`` per message"""
MAX_FIELDS_CHARS: Final = 1024
"""characters of ``fields`` per message (members past it are not kept): a row stays small
whatever the message holds"""
AUDIO_KEYS: Final = ("delta", "audio", "chunk", "data", "payload")
"""member names preferred as the audio: of the base64 strings longer than
:data:`MAX_FIELD_CHARS` characters (96 bytes, 2 ms of pcm16 at 24 kHz), one under these names
wins, else the longest (a shorter string is text: ``"delta": "Okay"`` is valid base64)"""

_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")

REALTIME_EVENTS = TableSchema(
    name="realtime_events",
    grain="one row per WebSocket text message that starts like a JSON object (realtime API "
          "events: OpenAI Realtime style {\"type\": ...})",
    key=("tcp_stream", "stream_id", "direction", "message_index"),
    columns=(
        Column("frame", "int64", None, "packet that completed the message (ws_messages.frame)"),
        Column("ts", TS_DTYPE, None, "time of that packet"),
        Column("first_frame", "int64", None, "packet that delivered the message's first byte"),
        Column("first_ts", TS_DTYPE, None, "time of first_frame"),
        Column("tcp_stream", "int64", None, "Wireshark tcp.stream index of the connection"),
        Column("stream_id", "Int64", None, "HTTP/2 stream of the WebSocket (RFC 8441); NA over "
                                           "HTTP/1.1"),
        Column("direction", "category", None, "client_to_server or server_to_client"),
        Column("message_index", "int64", None, "ws_messages.index of the message"),
        Column("status", "category", None,
               "ok; bad_json (not valid JSON: warning ws.bad_json); too_large (longer than "
               "max_json_bytes, 1 MiB by default: only the preview's type is known); "
               "incomplete (bytes lost, cut off, not UTF-8 or not inflated)"),
        Column("json_bytes", "int64", "bytes",
               "text size (decompressed when permessage-deflate was used)"),
        Column("type", "string", None,
               "the top-level \"type\" member (for too_large and incomplete: the first "
               "\"type\" of the preview); NA when there is none"),
        Column("event_id", "string", None, "top-level event_id"),
        Column("response_id", "string", None,
               "top-level response_id, else response.id (response.created / response.done)"),
        Column("item_id", "string", None, "top-level item_id, else item.id"),
        Column("audio_field", "string", None,
               "dotted path of the base64 string taken as audio: of the base64 strings over "
               f"{MAX_FIELD_CHARS} characters, one named delta, audio, chunk, data or payload, "
               "else the longest; NA when none"),
        Column("audio_bytes", "Int64", "bytes",
               "decoded size of audio_field (from its length and padding; the audio itself "
               "is not kept)"),
        Column("text_chars", "Int64", "chars",
               "characters of the top-level text member: delta (when it is not the audio), "
               "else transcript, else text; NA when none"),
        Column("fields", "string", None,
               "JSON object of the short scalar members by dotted path (strings up to "
               f"{MAX_FIELD_CHARS} characters, numbers, booleans, null; {MAX_FIELD_DEPTH} "
               f"levels, at most {MAX_FIELDS} members and about {MAX_FIELDS_CHARS} "
               "characters, in message order; credential-looking ones redacted unless "
               "show_secrets); NA unless status is ok"),
    ),
)


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_c_encoder: Any = json.encoder.c_make_encoder  # type: ignore[attr-defined]


def _py_fields_json(fields: dict[str, Any]) -> str:
    """``json.dumps(fields, ensure_ascii=False, separators=(",", ":"))`` without a new
    JSONEncoder per call (dumps builds one for any non-default argument)"""
    return _encoder.encode(fields)


if _c_encoder is not None:
    # What ``_encoder.encode(fields)`` runs (JSONEncoder.iterencode with _one_shot: the C
    # encoder with the encoder's own settings), without building that C encoder and its
    # float formatter again per call: once per realtime event. ``fields`` is one flat dict of
    # str keys and scalar values (never circular: no markers; nothing else of iterencode
    # applies).
    _c_fields = _c_encoder(
        None, _encoder.default, json.encoder.encode_basestring, None, _encoder.key_separator,
        _encoder.item_separator, _encoder.sort_keys, _encoder.skipkeys, _encoder.allow_nan)

    def _json_fields(fields: dict[str, Any]) -> str:
        return "".join(_c_fields(fields, 0))
else:  # pragma: no cover - CPython without the _json accelerator
    _json_fields = _py_fields_json


def _fields_json(fields: dict[str, Any]) -> str:
    """``json.dumps(fields, ensure_ascii=False, separators=(",", ":"))``: by orjson when it is
    installed and ``fields`` has no float, else by json's encoder. For str, int, bool and None
    values orjson writes the same text (the same escapes, checked for every code point to
    U+0800 and around the surrogates in tests/analyses/test_realtime_equivalence.py) in half
    the time, the check for floats included; floats it writes its own way (``1e16``, NaN as
    ``null``), and what it refuses (integers beyond 64 bits, lone surrogates: TypeError) json
    writes."""
    if _orjson_dumps is not None:
        for v in fields.values():
            if type(v) is float:
                return _json_fields(fields)
        try:
            text: bytes = _orjson_dumps(fields)
        except TypeError:
            return _json_fields(fields)
        return text.decode()
    return _json_fields(fields)

_decoder = json.JSONDecoder()
_DIGITS: Final = b"0123456789"
_ORJSON_MAX_BYTES: Final = 1024
"""the longest text :func:`_loads` gives orjson: counting the digits (``bytes.translate``, about
1 ns a byte) costs as much as json's own scan on long texts (a 32 KB base64 audio event: 31
against 38 us), so those go to json alone, as before"""
_scan_once: Any = _decoder.scan_once  # type: ignore[attr-defined]


def _loads(text: bytes) -> Any:
    """``json.loads(text)`` (same object, same exception) for a WsMessage.json_text: UTF-8
    bytes starting like a JSON object. The usual case (``{`` first, the second byte not NUL, so
    json.detect_encoding says utf-8; fewer than 200 brackets, so no nesting near the recursion
    limit) is parsed by orjson when it is installed and the text is at most
    :data:`_ORJSON_MAX_BYTES` long with fewer than 19 digits in all, else decoded and scanned
    directly; when orjson refuses the text, or the scan does not
    end exactly at the end of the text, or fails, or for anything else, json.loads itself is
    called and gives the verdict. (orjson accepts a subset of what json accepts and gives the
    same objects, floats included, except integers beyond 64 bits, which it reads as floats:
    an integer with fewer than 19 digits is never one.)"""
    if (text[:1] == b"{" and text[1:2] != b"\x00"
            and text.count(b"{") + text.count(b"[") < 200):
        if (_orjson_loads is not None and len(text) <= _ORJSON_MAX_BYTES
                and len(text) - len(text.translate(None, _DIGITS)) < 19):
            try:
                return _orjson_loads(text)
            except ValueError:  # (orjson.JSONDecodeError)
                pass
        try:
            s = text.decode("utf-8", "surrogatepass")
            obj, end = _scan_once(s, 0)
            if end == len(s):
                return obj
        except (ValueError, StopIteration, RecursionError):
            pass
    return json.loads(text)


_SECRET_KEYS: dict[str, bool] = {}
""":func:`is_secret_json_key` of the member names seen (a pure function of the name; the
names of realtime events repeat), up to :data:`_SECRET_KEYS_MAX` names"""
_SECRET_KEYS_MAX: Final = 4096


def _is_secret_key(k: str) -> bool:
    r = _SECRET_KEYS.get(k)
    if r is None:
        r = is_secret_json_key(k)
        if len(_SECRET_KEYS) < _SECRET_KEYS_MAX:
            _SECRET_KEYS[k] = r
    return r


def base64_size(s: str) -> int | None:
    """Decoded size of standard base64 text ``s`` (length a multiple of 4, at most two ``=``);
    None when ``s`` is not base64 (base64url or unpadded text is not taken as audio)."""
    n = len(s)
    if n == 0 or n % 4 or _B64.fullmatch(s) is None:
        return None
    return n // 4 * 3 - (2 if s.endswith("==") else 1 if s.endswith("=") else 0)


def _walk(o: dict[str, Any], prefix: str, depth: int, secret: bool, show_secrets: bool,
          fields: dict[str, Any], room: int, audio: tuple[int, str, int] | None
          ) -> tuple[int, tuple[int, str, int] | None]:
    """Reads the members of ``o`` into ``fields`` (see :func:`summarise_event`); returns the
    characters of ``fields`` still free and the audio candidate (priority, path, bytes)."""
    for k, v in o.items():
        if not isinstance(k, str):
            continue
        path = prefix + k
        if isinstance(v, str):  # (tested first: the usual member; no str is a dict)
            n = len(v)
            if n > MAX_FIELD_CHARS:
                size = base64_size(v)
                if size is not None:
                    # a member named like audio first, then the longest string
                    prio = (2 if k in AUDIO_KEYS else 1) * (1 << 40) + n
                    if audio is None or prio > audio[0]:
                        audio = (prio, path, size)
                continue
            if not show_secrets:
                hide = secret or _SECRET_KEYS.get(k)  # (_is_secret_key, its cache inline)
                if hide is None:
                    hide = _is_secret_key(k)
                if hide:
                    v = redacted(v)
                    n = len(v)
            cost = len(path) + n + 6
        elif isinstance(v, dict):
            if depth < MAX_FIELD_DEPTH:
                room, audio = _walk(v, path + ".", depth + 1, secret or _is_secret_key(k),
                                    show_secrets, fields, room, audio)
            continue
        elif v is None or isinstance(v, (bool, int, float)):
            cost = len(path) + 14
        else:
            continue  # arrays are not read
        if cost <= room and len(fields) < MAX_FIELDS:
            fields[path] = v
            room -= cost
    return room, audio


def summarise_event(obj: dict[str, Any], *, show_secrets: bool = False
                    ) -> tuple[str | None, str | None, str | None, str | None, str | None,
                               int | None, int | None, str]:
    """(type, event_id, response_id, item_id, audio_field, audio_bytes, text_chars, fields
    JSON) of one parsed event object (see :data:`REALTIME_EVENTS`)."""
    return _summarise(obj, show_secrets)


def _summarise(obj: dict[str, Any], show_secrets: bool
               ) -> tuple[str | None, str | None, str | None, str | None, str | None,
                          int | None, int | None, str]:
    """:func:`summarise_event` (positional, so that the compiled builder calls it as a C
    function on a ``dict``, whose ``get`` calls are then C calls: ``realtime_tables.pxd``)."""
    fields: dict[str, Any] = {}
    audio = _walk(obj, "", 1, False, show_secrets, fields, MAX_FIELDS_CHARS, None)[1]
    typ = obj.get("type")
    event_id = obj.get("event_id")
    response_id = obj.get("response_id")
    if not (isinstance(response_id, str) and response_id):
        resp = obj.get("response")
        response_id = resp.get("id") if isinstance(resp, dict) else None
    item_id = obj.get("item_id")
    if not (isinstance(item_id, str) and item_id):
        item = obj.get("item")
        item_id = item.get("id") if isinstance(item, dict) else None
    audio_field = audio[1] if audio is not None else None
    text_chars: int | None = None
    for k in ("delta", "transcript", "text"):
        v = obj.get(k)
        if isinstance(v, str) and k != audio_field:
            text_chars = len(v)
            break
    return (typ if isinstance(typ, str) else None,
            event_id if isinstance(event_id, str) else None,
            response_id if isinstance(response_id, str) else None,
            item_id if isinstance(item_id, str) else None,
            audio_field, audio[2] if audio is not None else None, text_chars,
            _fields_json(fields))


_ROW_FIELDS = (
    ("frame", "q"), ("ts", "q"), ("first_frame", "q"), ("first_ts", "q"), ("tcp_stream", "q"),
    ("stream_id", "q"), ("message_index", "q"), ("json_bytes", "q"), ("audio_bytes", "q"),
    ("text_chars", "q"), ("direction", "b"), ("status", "b"),
)  # fmt: skip
"""the fields of a row, widest first (rows are padded to 8 bytes: every field aligned)"""
_ROW_BLANK = bytes(88)
"""a row of zeros (the row's 82 bytes padded to 8)"""

try:  # (True in the compiled build only: see _put_event_row)
    import cython

    _COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is not installed: pure Python
    _COMPILED = False
#: a row is written in place by :func:`_put_event_row` (compiled build, on a little-endian
#: machine: the byte order of the rows' format), not packed by struct
_IN_PLACE = _COMPILED and sys.byteorder == "little"
_TEXT = ("type", "event_id", "response_id", "item_id", "audio_field", "fields")
_DIRECTIONS = tuple(d.label for d in Direction)
"""the direction labels by Direction value (sorted: the categories as pandas orders them)"""
_STATUSES = ("bad_json", "incomplete", "ok", "too_large")
"""the status values (sorted), coded by position"""
_STATUS_CODE = {s: i for i, s in enumerate(_STATUSES)}


class RealtimeEventsBuilder:
    """Collects the realtime_events rows from WsMessage events (others are ignored): the
    numbers (and the direction and status, as codes) packed one struct call a row
    (:class:`~pcaptools._columns.Records`), the text values in Arrow blocks
    (:class:`~pcaptools._columns.TextColumns`)."""

    def __init__(self, diag: Diagnostics | None = None, *, show_secrets: bool = False) -> None:
        self.diag = diag if diag is not None else Diagnostics()
        self.show_secrets = show_secrets
        self._rec = Records(_ROW_FIELDS, align=8)
        self._buf = self._rec.buf
        self._pack = self._rec.pack
        self._limit = self._rec.limit
        self._text = TextColumns(_TEXT)
        self._text_block = self._text.block_rows
        self._append = self._text.append
        self._first = self._text.first
        """(the Records and TextColumns parts add() uses, bound once: neither object replaces
        them)"""

    def add_all(self, events: Iterable[object]) -> None:
        for e in events:
            if type(e) is WsMessage and e.type == "text":
                self.add(e)

    def add(self, e: WsMessage) -> None:
        # (a named tuple: its fields in one unpacking, not one attribute lookup each)
        (ts, frame, d, tcp_stream, sid, index, _typ, _fragments, first_ts, first_frame, _wire,
         payload, lost, compressed, decompress, dbytes, complete, _end, utf8_ok, preview,
         _truncated, json_type, text) = e
        s: tuple[Any, ...]
        if text is None:
            if preview is None or preview.lstrip()[:1] != "{":
                return
            status = ("too_large" if complete and not lost and utf8_ok
                      and (not compressed or decompress == "ok") else "incomplete")
            size = dbytes if compressed and dbytes is not None else payload
            s = (json_type, None, None, None, None, None, None, None)
        else:
            size = len(text)
            try:
                obj = _loads(text)
            except (ValueError, RecursionError) as exc:
                obj = exc
            if isinstance(obj, dict):
                status = "ok"
                s = _summarise(obj, self.show_secrets)
            else:  # (text starting with "{" parses to an object or fails)
                self.diag.add("ws.bad_json", f"text message {index} starts like JSON but is "
                              f"not valid JSON: {str(obj)[:200]}", ts_ns=ts, frame=frame,
                              tcp_stream=tcp_stream, direction=d.label)
                status = "bad_json"
                s = (json_type, None, None, None, None, None, None, None)
        # the row: numbers packed, text values appended to their columns
        typ, event_id, response_id, item_id, audio_field, audio_bytes, text_chars, fields = s
        if _IN_PLACE:
            _put_event_row(
                self._buf, frame, ts, first_frame, first_ts, tcp_stream,
                NA if sid is None else sid, index, size,
                NA if audio_bytes is None else audio_bytes,
                NA if text_chars is None else text_chars, d, _STATUS_CODE[status])
        else:
            self._buf += self._pack(
                frame, ts, first_frame, first_ts, tcp_stream,
                NA if sid is None else sid, index, size,
                NA if audio_bytes is None else audio_bytes,
                NA if text_chars is None else text_chars, d, _STATUS_CODE[status])
        a_type, a_event, a_response, a_item, a_audio, a_fields = self._append
        a_type(typ)
        a_event(event_id)
        a_response(response_id)
        a_item(item_id)
        a_audio(audio_field)
        a_fields(fields)
        if len(self._buf) >= self._limit:
            self._rec.seal()
        if len(self._first) >= self._text_block:
            self._text.flush()

    def frame(self) -> pd.DataFrame:
        """The rows held as the realtime_events table; they are handed over."""
        rec = self._rec
        rec.seal()
        cols: dict[str, Any] = {name: rec.column(name) for name in (
            "frame", "ts", "first_frame", "first_ts", "tcp_stream", "message_index",
            "json_bytes")}
        for name in ("stream_id", "audio_bytes", "text_chars"):
            cols[name] = nullable(rec.column(name))
        cols["direction"] = sorted_categorical(rec.column("direction"), _DIRECTIONS)
        cols["status"] = sorted_categorical(rec.column("status"), _STATUSES)
        cols.update(self._text.take())  # Arrow strings (or lists where they would not convert)
        return REALTIME_EVENTS.frame(columns=cols, copy=False)

    def pending(self) -> dict[str, int]:
        """rows held (for the streaming export)"""
        return {"realtime_events": len(self._text)}

    def drain(self, table: str) -> pd.DataFrame:
        if table != "realtime_events":
            raise ValueError(f"RealtimeEventsBuilder cannot drain {table!r}")
        return self.frame()


def _put_event_row(buf: bytearray, frame: int, ts: int, first_frame: int, first_ts: int,
                   tcp_stream: int, stream_id: int, message_index: int, json_bytes: int,
                   audio_bytes: int, text_chars: int, direction: int, status: int) -> int:
    """Append a realtime_events row to ``buf`` as ``Records.pack`` would (:data:`_ROW_FIELDS`
    in order, little endian; the padding stays zero), written in place through C pointers:
    compiled build only (``_IN_PLACE``; realtime_tables.pxd types every argument as its
    field's C type, so a value that does not fit raises OverflowError where struct raises
    struct.error). Pure Python packs the row with struct; the tables are the same either way
    (tests/test_accel.py)."""
    n = len(buf)
    buf.extend(_ROW_BLANK)
    at = buf  # (a char * to the bytearray's storage in the compiled build)
    q = cython.cast(cython.p_longlong, at + n)  # type: ignore[operator]  # (char * + n)
    q[0] = frame
    q[1] = ts
    q[2] = first_frame
    q[3] = first_ts
    q[4] = tcp_stream
    q[5] = stream_id
    q[6] = message_index
    q[7] = json_bytes
    q[8] = audio_bytes
    q[9] = text_chars
    b = cython.cast(cython.p_schar, q + 10)
    b[0] = direction
    b[1] = status
    return 0
