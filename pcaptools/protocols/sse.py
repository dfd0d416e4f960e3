"""Server-sent events (``text/event-stream``): an incremental parser that follows the WHATWG rules.

The HTTP observers feed it the body bytes of a response whose content type is
``text/event-stream`` (HTTP/1.1 bodies after de-chunking, HTTP/2 DATA payloads) and get
:class:`SseEvent` objects back, one per dispatched event.

Parsing rules (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):

- one UTF-8 byte order mark at the very start of the stream is dropped; invalid UTF-8 is
  replaced by U+FFFD (never an error);
- lines end with CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of the
  next are one line end);
- a blank line dispatches the event being built, unless its data buffer is empty;
- ``:comment`` lines are ignored; ``field:value`` (one space after the colon removed) or a
  bare ``field`` (empty value); fields ``event``, ``data`` (lines joined with LF), ``id``
  (ignored when it contains NUL; the last id persists across events) and ``retry`` (ASCII
  digits only; one beyond 2**63 - 1, which no table column holds, is reported as
  ``sse.bad_retry`` and left out); other fields are ignored;
- at the end of the stream an event without its blank line is discarded (reported as
  ``sse.incomplete_event``).

Memory is bounded by ``max_line_bytes`` (default 1 MiB): a line, or the data of one event,
that grows beyond it without a terminator is dropped and reported as
``sse.unterminated_event``; the parser skips to the next line end (next blank line for an
over-long event) and carries on.

For each event whose data is JSON, :func:`llm_fields` extracts the streamed text of the
common LLM streaming formats (OpenAI chat/completions and responses, Anthropic messages);
data that starts like JSON (``{`` or ``[``) but does not parse is reported as ``sse.bad_json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from ..diagnostics import Diagnostics
from ..redaction import redact_json_text
from ._base import Direction, Event

_orjson_loads: Callable[[str], Any] | None
try:  # optional: 5-7x faster on the small JSON objects of LLM streams
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - orjson is an optional dependency
    _orjson_loads = None

__all__ = ["DEFAULT_MAX_LINE_BYTES", "SseEvent", "SseParser", "llm_fields"]

#: default bound on one line (and on the data of one event), in bytes
DEFAULT_MAX_LINE_BYTES = 1 << 20

_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")
_SURROGATE = re.compile("[\\ud800-\\udfff]")
"""a lone surrogate (JSON may escape one, ``"\\ud800"``): not text, cannot be stored as UTF-8"""


class _SseEventFields(NamedTuple):
    """The fields of :class:`SseEvent` (a NamedTuple cannot have another base)."""

    ts_ns: int
    """capture time of the packet that delivered the blank line ending the event"""
    frame: int
    """Wireshark frame number of that packet"""
    direction: Direction
    """direction of the response carrying the stream (normally SERVER_TO_CLIENT)"""
    tcp_stream: int | None
    """Wireshark tcp.stream of the connection; None over HTTP/3 (a QUIC connection)"""
    stream_id: int | None
    """HTTP/2 stream identifier (HTTP/3: the QUIC stream id); None for HTTP/1.x"""
    request_index: int | None
    """HTTP/1.x: position of the request on its connection (1 = first); None for HTTP/2"""
    index: int  # type: ignore[assignment]  # a field, not tuple.index
    """0-based number of this event within its response"""
    event_type: str
    """the ``event`` field, ``message`` when absent"""
    event_id: str | None
    """the last event ID in effect when dispatched (persists across events); None if never set"""
    retry_ms: int | None
    """the ``retry`` field of this event, if it had a valid one"""
    data: str
    """the data lines joined with LF (the trailing LF removed)"""
    data_bytes: int
    """length of the data lines as received, in bytes, joined with LF: the UTF-8 length of
    ``data`` unless the stream held invalid UTF-8 (each invalid sequence counts its own bytes
    here, and 3 bytes as the U+FFFD that replaces it in ``data``)"""
    json_ok: bool | None
    """True: data parsed as JSON; False: looked like JSON but did not parse; None: not JSON-like"""
    delta_text: str | None
    """streamed text of an LLM chunk (see :func:`llm_fields`), None if not an LLM text chunk"""
    done: bool
    """True when data is the ``[DONE]`` end marker of OpenAI-compatible streams"""
    finish_reason: str | None
    """``choices[0].finish_reason`` / ``delta.stop_reason`` when present"""


class SseEvent(_SseEventFields, Event):
    """One dispatched server-sent event.

    A named tuple rather than a dataclass: the parser makes one per event with a single C call
    and the table builder keeps it as its row as it is (events are the largest stream of
    objects in an LLM capture). Read it by attribute; build one with keywords. It is an
    :class:`~pcaptools.tcp.stream.Event` like every other event (no fields, no cost added).
    """

    __slots__ = ()


_MAX_RETRY = (1 << 63) - 1
"""the largest ``retry`` an event keeps (the sse_events.retry_ms column is Int64): a longer
run of digits is reported as ``sse.bad_retry`` and left out"""

_new_event = tuple.__new__  # SseEvent from a 16-tuple without the keyword-argument __new__

_NOT_JSON: tuple[bool | None, str | None, bool, str | None] = (None, None, False, None)
_DONE: tuple[bool | None, str | None, bool, str | None] = (None, None, True, None)
_BAD_JSON: tuple[bool | None, str | None, bool, str | None] = (False, None, False, None)
_JSON_NO_TEXT: tuple[bool | None, str | None, bool, str | None] = (True, None, False, None)


def llm_fields(data: str) -> tuple[bool | None, str | None, bool, str | None]:
    """Interpret event data as an LLM streaming chunk.

    Returns ``(json_ok, delta_text, done, finish_reason)``. ``json_ok`` is None when the data
    does not start like JSON (so plain-text streams cost nothing and raise no anomaly), False
    when it starts with ``{``/``[`` but is not valid JSON. Formats understood:
    OpenAI chat completions (``choices[0].delta.content``), completions (``choices[0].text``),
    the Responses API (``type == response.output_text.delta`` -> ``delta``) and Anthropic
    messages (``delta.text`` of ``content_block_delta``). Never raises. A lone surrogate escaped
    in the JSON (``"\\ud800"``) becomes U+FFFD in ``delta_text``/``finish_reason``, as invalid
    UTF-8 does in the event data (it is not text, and no table can store it).

    The JSON is parsed with orjson when it is installed and the text is short or shallow (the
    usual case); whatever orjson rejects is parsed again by :func:`json.loads`, whose verdict
    counts, so the result never depends on orjson being there. (orjson only accepts a subset
    of what json accepts, and gives the same objects; the depth bound keeps it from accepting
    the deep nestings on which json runs out of recursion.)
    """
    s = data.strip()
    if not s:
        return _NOT_JSON
    c = s[0]
    if c != "{" and c != "[":
        return _NOT_JSON
    if s == "[DONE]":
        return _DONE
    obj: Any
    try:
        if _orjson_loads is not None and (len(s) < 256 or s.count("[") + s.count("{") < 128):
            try:
                obj = _orjson_loads(s)
            except ValueError:  # orjson.JSONDecodeError: let json decide
                obj = json.loads(s)
        else:
            obj = json.loads(s)
    except (ValueError, RecursionError):
        return _BAD_JSON
    if type(obj) is not dict:
        return _JSON_NO_TEXT
    delta_text: str | None = None
    finish: str | None = None
    choices = obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        c0: dict[str, Any] = choices[0]
        delta = c0.get("delta")
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str):
                delta_text = content
        elif isinstance(c0.get("text"), str):
            delta_text = c0["text"]
        fr = c0.get("finish_reason")
        if isinstance(fr, str):
            finish = fr
    else:
        typ = obj.get("type")
        delta = obj.get("delta")
        if typ == "response.output_text.delta" and isinstance(delta, str):
            delta_text = delta
        elif isinstance(delta, dict):
            text = delta.get("text")
            if isinstance(text, str):
                delta_text = text
            sr = delta.get("stop_reason")
            if isinstance(sr, str):
                finish = sr
    if delta_text is not None and not delta_text.isascii():
        delta_text = _SURROGATE.sub("\ufffd", delta_text)
    if finish is not None and not finish.isascii():
        finish = _SURROGATE.sub("\ufffd", finish)
    return True, delta_text, False, finish


class SseParser:
    """Incremental ``text/event-stream`` parser for one response body. Never raises.

    ``feed(data, ts_ns, frame)`` returns the events completed by ``data``; ``gap()`` says
    bytes were lost (the event being built is dropped, parsing resumes after the next line
    end); ``close()`` ends the stream and reports an event left without its blank line.
    """

    __slots__ = (
        "_bom_checked",
        "_buf",
        "_data",
        "_data_len",
        "_diag",
        "_direction",
        "_drop_event",
        "_event_cache",
        "_event_type",
        "_last_id",
        "_max",
        "_request_index",
        "_retry",
        "_skip_lf",
        "_skip_line",
        "_stream_id",
        "_tcp_stream",
        "count",
    )

    def __init__(
        self,
        *,
        tcp_stream: int | None = -1,
        stream_id: int | None = None,
        request_index: int | None = None,
        direction: Direction = Direction.SERVER_TO_CLIENT,
        diag: Diagnostics | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self._tcp_stream = tcp_stream
        self._stream_id = stream_id
        self._request_index = request_index
        self._direction = direction
        self._diag = diag
        self._max = max_line_bytes
        self._buf = bytearray()
        """the start of a line whose end has not arrived (never holds a line end)"""
        self._bom_checked = False
        self._skip_lf = False
        self._skip_line = False
        self._drop_event = False
        self._data: list[bytes] = []
        """the data lines of the event being built, as received (decoded when dispatched)"""
        self._data_len = 0
        self._event_type = ""
        self._event_cache: tuple[bytes, str] = (b"", "")
        """the last event field decoded, so that events of one type share one string"""
        self._last_id: str | None = None
        self._retry: int | None = None
        self.count = 0
        """events dispatched so far"""

    # ------------------------------------------------------------------ input

    def feed(self, data: bytes, ts_ns: int, frame: int) -> list[SseEvent]:
        """Parse ``data`` (the next body bytes); return the events it completed."""
        if not data:
            return []
        buf = self._buf
        if not self._bom_checked:
            buf += data
            if len(buf) < 3 and _BOM.startswith(buf):
                return []
            self._bom_checked = True
            data = bytes(buf[3:]) if buf.startswith(_BOM) else bytes(buf)
            buf.clear()
        if self._skip_lf:
            # the last chunk ended with a CR (a line end, the buffer is empty): an LF at the
            # start of this one belongs to it
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if 13 in data:  # a CR (int needle: memchr)
            lines = _LINE_END.split(data)
            if data[-1:] == b"\r":
                self._skip_lf = True
        else:  # the usual case: LF line ends only
            lines = data.split(b"\n")
        rest = lines.pop()  # after the last line end: the start of an unfinished line
        out: list[SseEvent] = []
        if lines:
            if buf:
                lines[0] = bytes(buf) + lines[0]
                buf.clear()
            if self._skip_line:
                self._skip_line = False
                del lines[0]
            self._lines(lines, ts_ns, frame, out)
        if rest:
            buf += rest
        if len(buf) > self._max and not self._skip_line:
            self._report(
                "sse.unterminated_event",
                f"line longer than {self._max} bytes without a line end; dropped",
                ts_ns,
                frame,
            )
            self._skip_line = True
            self._drop_current()
        if self._skip_line:
            buf.clear()
        return out

    def gap(self, ts_ns: int, frame: int) -> None:
        """Bytes of the body were never captured: drop the partial line and event."""
        self._buf.clear()
        self._skip_lf = False
        self._bom_checked = True
        self._skip_line = True
        self._drop_current()

    def close(
        self, ts_ns: int, frame: int, *, at_eof: bool = False, complete: bool = True
    ) -> None:
        """End of the body. An event without its terminating blank line is discarded (WHATWG)
        and reported as ``sse.incomplete_event``, unless ``at_eof`` (the capture ended, not the
        stream). A cut message (``complete=False``) is treated as an ended one (the message
        cut itself is reported by the HTTP observer)."""
        pending = bool(self._buf) and not self._skip_line
        if (self._data or pending) and not self._drop_event and not at_eof:
            self._report(
                "sse.incomplete_event",
                f"stream ended inside an event ({self._data_len + len(self._buf)} bytes discarded)",
                ts_ns,
                frame,
            )
        self._buf.clear()
        self._reset_event()

    # ------------------------------------------------------------------ internals

    def _report(self, code: str, detail: str, ts_ns: int, frame: int) -> None:
        if self._diag is not None:
            where = (
                f"stream {self._stream_id}"
                if self._stream_id is not None
                else (
                    f"request {self._request_index}"
                    if self._request_index is not None
                    else "response"
                )
            )
            self._diag.add(
                code,
                f"{where}: {detail}",
                ts_ns=ts_ns,
                frame=frame,
                tcp_stream=self._tcp_stream,
                direction=self._direction.label,
            )

    def _drop_current(self) -> None:
        self._data.clear()
        self._data_len = 0
        self._drop_event = True

    def _reset_event(self) -> None:
        self._data.clear()
        self._data_len = 0
        self._event_type = ""
        self._retry = None
        self._drop_event = False

    def _lines(self, lines: list[bytes], ts_ns: int, frame: int, out: list[SseEvent]) -> None:
        """Interpret complete lines (line ends removed); append the events dispatched to ``out``.

        One loop with the usual lines (``data:``, ``id:``, blank) tested first and the dispatch
        inlined: a stream has three or four lines per event. ``self._data`` stays one list; the
        state of the event being built is kept in locals during the loop and stored back once
        at its end (nothing the loop calls reads it)."""
        data = self._data
        data_len = self._data_len
        drop = self._drop_event
        event_type = self._event_type
        retry = self._retry
        last_id = self._last_id
        count = self.count
        mx = self._max
        for raw in lines:
            if not raw:  # blank line: dispatch the event, unless it has no data
                if data and not drop:
                    if len(data) == 1:
                        text = data[0].decode("utf-8", "replace")
                    else:
                        text = "\n".join([v.decode("utf-8", "replace") for v in data])
                    json_ok, delta_text, done, finish = llm_fields(text)
                    if json_ok is False:
                        self._report(
                            "sse.bad_json",
                            f"event {count}: data is not valid JSON: "
                            f"{(redact_json_text(text[:4096]) or '')[:80]!r}",
                            ts_ns,
                            frame,
                        )
                    out.append(
                        _new_event(
                            SseEvent,
                            (
                                ts_ns,
                                frame,
                                self._direction,
                                self._tcp_stream,
                                self._stream_id,
                                self._request_index,
                                count,
                                event_type or "message",
                                last_id,
                                retry,
                                text,
                                data_len - 1,
                                json_ok,
                                delta_text,
                                done,
                                finish,
                            ),
                        )
                    )
                    count += 1
                data.clear()
                data_len = 0
                event_type = ""
                retry = None
                drop = False
                continue
            if drop:
                continue
            if raw.startswith(b"data: "):
                value = raw[6:]
            elif raw.startswith(b"data:"):
                value = raw[5:]
            elif raw.startswith(b"id: "):
                if 0 not in raw:  # an id with NUL is ignored (int needle: memchr)
                    last_id = raw[4:].decode("utf-8", "replace")
                continue
            elif raw[0] == 0x3A:  # ':' comment
                continue
            else:
                colon = raw.find(b":")
                if colon < 0:
                    name, value = raw, b""
                else:
                    name = raw[:colon]
                    colon += 2 if raw[colon + 1 : colon + 2] == b" " else 1
                    value = raw[colon:]
                if name != b"data":
                    if name == b"event":
                        cached = self._event_cache
                        if value == cached[0]:
                            event_type = cached[1]
                        else:
                            event_type = value.decode("utf-8", "replace")
                            self._event_cache = (value, event_type)
                    elif name == b"id":
                        if 0 not in value:
                            last_id = value.decode("utf-8", "replace")
                    elif name == b"retry" and value.isdigit():  # bytes.isdigit: ASCII digits only
                        retry = int(value)
                        if retry > _MAX_RETRY:  # (no Int64 column holds it)
                            self._report(
                                "sse.bad_retry",
                                f"event {count}: retry field of {len(value)} digits, beyond "
                                "what the table holds; left out (retry_ms NA)",
                                ts_ns,
                                frame,
                            )
                            retry = None
                    continue
            n = data_len + len(value) + 1
            if n > mx:
                self._report(
                    "sse.unterminated_event",
                    f"event data longer than {mx} bytes; event dropped",
                    ts_ns,
                    frame,
                )
                data.clear()  # (what _drop_current does)
                data_len = 0
                drop = True
                continue
            data_len = n
            data.append(value)
        self._data_len = data_len
        self._drop_event = drop
        self._event_type = event_type
        self._retry = retry
        self._last_id = last_id
        self.count = count
