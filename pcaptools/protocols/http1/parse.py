"""HTTP/1.x message syntax (RFC 9112), as pure functions of bytes: start lines, header
sections, body framing and chunk-size lines; :class:`~.observer.Http1Observer` keeps the
state (where each direction is in a message) and calls these.

None of these raise on wire data: what does not parse returns None (or, for a malformed
``Content-Length``, an error text), and the observer reports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...redaction import redact_url

__all__ = [
    "Headers",
    "body_framing",
    "chunk_size",
    "header_value",
    "is_start_line",
    "parse_header_fields",
    "parse_request_line",
    "parse_retry_after",
    "parse_status_line",
    "quote_line",
    "upgrade_token",
]

Headers = tuple[tuple[str, str], ...]
"""(lower-cased name, value) in wire order"""

#: the blank line ending a header section
HEAD_END = re.compile(rb"\r?\n\r?\n")
REQUEST_LINE = re.compile(
    rb"([!#$%&'*+.^_`|~0-9A-Za-z-]{1,32})[ \t]+(\S+)[ \t]+HTTP/([0-9])\.([0-9])[ \t]*\r?"
)
#: an HTTP/0.9 simple request (RFC 1945 §4.1): ``GET <target>``, no version, no header section
SIMPLE_REQUEST = re.compile(rb"GET[ \t]+([^\s]+)[ \t]*\r?")
STATUS_LINE = re.compile(rb"HTTP/([0-9])\.([0-9])[ \t]+([0-9]{3})(?:[ \t]+([^\r\n]*))?[ \t]*\r?")
#: a request line at a line start, or one with a common method anywhere (a request right after
#: a body has no line end before it)
HUNT_REQUEST = re.compile(
    rb"(?:(?:^|(?<=\n))[A-Z][A-Z_-]{1,19}|(?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH|CONNECT|TRACE))"
    rb" [^\s]+ HTTP/1\.[0-9]\r?\n"
)
HUNT_RESPONSE = re.compile(rb"HTTP/1\.[0-9] [1-5][0-9]{2}[ \r\n]")
CHUNK_SIZE_LINE = re.compile(rb"[ \t]*([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r?")


# --------------------------------------------------------------------------- start line


def is_start_line(line: bytes, request: bool) -> bool:
    """``line`` (without its ``\\n``) is a request line (``request``) or a status line."""
    return (REQUEST_LINE if request else STATUS_LINE).fullmatch(line) is not None


def parse_request_line(line: bytes) -> tuple[str, str, str] | None:
    """``METHOD target HTTP/x.y`` -> (method, target, version ``x.y``); None if it is not one."""
    m = REQUEST_LINE.fullmatch(line)
    if m is None:
        return None
    return (
        m.group(1).decode("latin-1"),
        m.group(2).decode("latin-1"),
        f"{m.group(3).decode()}.{m.group(4).decode()}",
    )


def parse_status_line(line: bytes) -> tuple[str, int, str] | None:
    """``HTTP/x.y NNN reason`` -> (version ``x.y``, status, reason); None if it is not one."""
    m = STATUS_LINE.fullmatch(line)
    if m is None:
        return None
    return (
        f"{m.group(1).decode()}.{m.group(2).decode()}",
        int(m.group(3)),
        (m.group(4) or b"").decode("latin-1").strip(),
    )


# --------------------------------------------------------------------------- header section


def parse_header_fields(lines: Iterable[bytes]) -> Headers:
    """The field lines of a header section (after the start line) -> (lower-cased name, value)
    in wire order. Obsolete line folding joins the previous value; lines without a colon
    are ignored, as lenient parsers do."""
    headers: list[tuple[str, str]] = []
    for raw in lines:
        line = raw.rstrip(b"\r")
        if not line:
            continue
        if line[:1] in (b" ", b"\t") and headers:  # obs-fold
            k, v = headers[-1]
            headers[-1] = (k, (v + " " + line.strip().decode("latin-1")).strip())
            continue
        colon = line.find(b":")
        if colon <= 0:
            continue  # not a header field: ignored, as lenient parsers do
        headers.append(
            (
                line[:colon].strip().decode("latin-1").lower(),
                line[colon + 1 :].strip().decode("latin-1"),
            )
        )
    return tuple(headers)


def header_value(headers: Headers, name: str) -> str | None:
    """First value of header ``name`` (already lower-cased) in ``headers``, or None."""
    for k, v in headers:
        if k == name:
            return v
    return None


def upgrade_token(value: str) -> str:
    """The first protocol of an ``Upgrade`` header value, lower-cased (``h2c``, ``websocket``)."""
    return value.split(",")[0].strip().lower()


# --------------------------------------------------------------------------- body framing


def body_framing(headers: Headers) -> int | str | None:
    """How a message's body is delimited (RFC 9112 §6.3): ``"chunked"``, ``"close"`` (until
    the connection ends), a Content-Length, None (no body indication), or an error text for
    a malformed or conflicting Content-Length."""
    te = None
    cls: list[str] = []
    for k, v in headers:
        if k == "transfer-encoding":
            te = v if te is None else f"{te}, {v}"
        elif k == "content-length":
            cls += [x.strip() for x in v.split(",")]
    if te is not None:
        codings = [c.strip().lower() for c in te.split(",") if c.strip()]
        return "chunked" if codings and codings[-1] == "chunked" else "close"
    if cls:
        if not all(c.isascii() and c.isdigit() for c in cls) or len(set(cls)) > 1:
            return f"bad Content-Length {', '.join(cls)[:40]!r}"
        return int(cls[0])
    return None


def chunk_size(buf: bytes | bytearray, pos: int, end: int) -> int | None:
    """The size on the chunk-size line ``buf[pos:end]`` (extensions ignored); None if the line
    is not one."""
    m = CHUNK_SIZE_LINE.fullmatch(buf, pos, end)
    return None if m is None else int(m.group(1), 16)


# --------------------------------------------------------------------------- header values


def parse_retry_after(value: str | None, date: str | None = None) -> float | None:
    """``Retry-After`` -> seconds. Delta-seconds as is; an HTTP-date minus the response's
    ``Date`` header (when given). None when absent or unparsable."""
    if value is None:
        return None
    v = value.strip()
    if v.isascii() and v.isdigit():
        return float(v)
    if date is None:
        return None
    from email.utils import parsedate_to_datetime

    try:
        return (parsedate_to_datetime(v) - parsedate_to_datetime(date)).total_seconds()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def quote_line(line: bytes, limit: int = 60) -> str:
    """A start line for a warning: credentials in its URL redacted (the line is untrusted and
    warnings reach the report), then cut to ``limit`` characters, as a bytes literal."""
    text = redact_url(line.decode("latin-1")) or ""
    return repr(text[:limit].encode("latin-1", "replace"))
