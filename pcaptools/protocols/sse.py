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
  digits only); other fields are ignored;
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
from dataclasses import dataclass
from typing import Any

from ..diagnostics import Diagnostics
from ._base import Direction

__all__ = ["DEFAULT_MAX_LINE_BYTES", "SseEvent", "SseParser", "llm_fields"]

#: default bound on one line (and on the data of one event), in bytes
DEFAULT_MAX_LINE_BYTES = 1 << 20

_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True, slots=True, kw_only=True)
class SseEvent:
    """One dispatched server-sent event."""

    ts_ns: int
    """capture time of the packet that delivered the blank line ending the event"""
    frame: int
    """Wireshark frame number of that packet"""
    direction: Direction
    """direction of the response carrying the stream (normally SERVER_TO_CLIENT)"""
    tcp_stream: int
    """Wireshark tcp.stream of the connection"""
    stream_id: int | None
    """HTTP/2 stream identifier; None for HTTP/1.x"""
    request_index: int | None
    """HTTP/1.x: position of the request on its connection (1 = first); None for HTTP/2"""
    index: int
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
    """length of ``data`` in UTF-8 bytes"""
    json_ok: bool | None
    """True: data parsed as JSON; False: looked like JSON but did not parse; None: not JSON-like"""
    delta_text: str | None
    """streamed text of an LLM chunk (see :func:`llm_fields`), None if not an LLM text chunk"""
    done: bool
    """True when data is the ``[DONE]`` end marker of OpenAI-compatible streams"""
    finish_reason: str | None
    """``choices[0].finish_reason`` / ``delta.stop_reason`` when present"""


def llm_fields(data: str) -> tuple[bool | None, str | None, bool, str | None]:
    """Interpret event data as an LLM streaming chunk.

    Returns ``(json_ok, delta_text, done, finish_reason)``. ``json_ok`` is None when the data
    does not start like JSON (so plain-text streams cost nothing and raise no anomaly), False
    when it starts with ``{``/``[`` but is not valid JSON. Formats understood:
    OpenAI chat completions (``choices[0].delta.content``), completions (``choices[0].text``),
    the Responses API (``type == response.output_text.delta`` -> ``delta``) and Anthropic
    messages (``delta.text`` of ``content_block_delta``). Never raises.
    """
    s = data.strip()
    if s == "[DONE]":
        return None, None, True, None
    if not s or s[0] not in "{[":
        return None, None, False, None
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        return False, None, False, None
    if not isinstance(obj, dict):
        return True, None, False, None
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
        "_event_type",
        "_has_data",
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
        tcp_stream: int = -1,
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
        self._bom_checked = False
        self._skip_lf = False
        self._skip_line = False
        self._drop_event = False
        self._data: list[str] = []
        self._data_len = 0
        self._has_data = False
        self._event_type = ""
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
        old = len(buf)  # what is left of earlier chunks holds no line end: scan only new bytes
        buf += data
        if not self._bom_checked:
            if len(buf) < 3 and _BOM.startswith(bytes(buf)):
                return []
            self._bom_checked = True
            if buf.startswith(_BOM):
                del buf[:3]
                old = 0
        if self._skip_lf:
            if not buf:
                return []
            self._skip_lf = False
            if buf[0] == 0x0A:
                del buf[:1]
                old = 0
        out: list[SseEvent] = []
        pos = 0
        n = len(buf)
        for m in _LINE_END.finditer(buf, old):
            start, end = m.span()
            if end == n and buf[start] == 0x0D and end - start == 1:
                # a CR at the end of the buffer: the line ends here; an LF that may follow
                # in the next chunk belongs to this line end
                self._skip_lf = True
            if self._skip_line:
                self._skip_line = False
            else:
                self._line(bytes(buf[pos:start]), ts_ns, frame, out)
            pos = end
        if pos:
            del buf[:pos]
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

    def close(self, ts_ns: int, frame: int, *, at_eof: bool = False) -> None:
        """End of the body. An event without its terminating blank line is discarded (WHATWG)
        and reported as ``sse.incomplete_event``, unless ``at_eof`` (the capture ended, not the
        stream)."""
        pending = bool(self._buf) and not self._skip_line
        if (self._has_data or pending) and not self._drop_event and not at_eof:
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
        self._data = []
        self._data_len = 0
        self._has_data = False
        self._drop_event = True

    def _reset_event(self) -> None:
        self._data = []
        self._data_len = 0
        self._has_data = False
        self._event_type = ""
        self._retry = None
        self._drop_event = False

    def _line(self, raw: bytes, ts_ns: int, frame: int, out: list[SseEvent]) -> None:
        if not raw:
            self._dispatch(ts_ns, frame, out)
            return
        if self._drop_event:
            return
        if raw[0] == 0x3A:  # ':' comment
            return
        colon = raw.find(b":")
        if colon < 0:
            name, value = raw, b""
        else:
            name = raw[:colon]
            value = raw[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            self._data_len += len(value) + 1
            if self._data_len > self._max:
                self._report(
                    "sse.unterminated_event",
                    f"event data longer than {self._max} bytes; event dropped",
                    ts_ns,
                    frame,
                )
                self._drop_current()
                return
            self._data.append(value.decode("utf-8", "replace"))
            self._has_data = True
        elif name == b"event":
            self._event_type = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():  # bytes.isdigit: ASCII digits only
            self._retry = int(value)

    def _dispatch(self, ts_ns: int, frame: int, out: list[SseEvent]) -> None:
        if self._drop_event or not self._has_data:
            self._reset_event()
            return
        data = "\n".join(self._data)
        json_ok, delta_text, done, finish = llm_fields(data)
        if json_ok is False:
            self._report(
                "sse.bad_json",
                f"event {self.count}: data is not valid JSON: {data[:80]!r}",
                ts_ns,
                frame,
            )
        out.append(
            SseEvent(
                ts_ns=ts_ns,
                frame=frame,
                direction=self._direction,
                tcp_stream=self._tcp_stream,
                stream_id=self._stream_id,
                request_index=self._request_index,
                index=self.count,
                event_type=self._event_type or "message",
                event_id=self._last_id,
                retry_ms=self._retry,
                data=data,
                data_bytes=self._data_len - 1 if self._data_len else 0,
                json_ok=json_ok,
                delta_text=delta_text,
                done=done,
                finish_reason=finish,
            )
        )
        self.count += 1
        self._reset_event()
