"""The WebSocket opening handshake (RFC 6455 §4, RFC 7692 §5, RFC 8441 §5): what the Upgrade
request and its ``101`` (or an HTTP/2 extended CONNECT) negotiated, and whether it is
consistent. Pure functions of header lists; they never raise: problems are listed in
:attr:`~.events.WsHandshake.problems` and reported by the observer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Final

from ...redaction import redact_subprotocols
from ..http1.events import HttpRequest, HttpResponse
from .events import Headers, WsHandshake

__all__ = ["accept_for_key", "handshake_from_headers", "parse_extensions", "parse_handshake"]

_GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def accept_for_key(key: str) -> str:
    """The Sec-WebSocket-Accept value a server must answer to ``key`` (RFC 6455 §4.2.2)."""
    digest = hashlib.sha1(key.strip().encode("latin-1", "replace") + _GUID).digest()
    return base64.b64encode(digest).decode("ascii")


def parse_extensions(value: str | None) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """``Sec-WebSocket-Extensions`` -> ``[(name, [(param, value or None), ...]), ...]``
    (names and parameter names lower-cased, quoted values unquoted). Never raises; empty
    elements are skipped."""
    out: list[tuple[str, list[tuple[str, str | None]]]] = []
    if not value:
        return out
    for ext in _split_outside_quotes(value, ","):
        parts = [p.strip() for p in _split_outside_quotes(ext, ";")]
        if not parts or not parts[0]:
            continue
        params: list[tuple[str, str | None]] = []
        for p in parts[1:]:
            if not p:
                continue
            name, eq, v = p.partition("=")
            val: str | None = v.strip() if eq else None
            if val is not None and len(val) >= 2 and val[0] == val[-1] == '"':
                val = val[1:-1]
            params.append((name.strip().lower(), val))
        out.append((parts[0].lower(), params))
    return out


def _split_outside_quotes(s: str, sep: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in s:
        if ch == '"':
            quoted = not quoted
        if ch == sep and not quoted:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _joined(headers: Headers | None, name: str) -> str | None:
    if headers is None:
        return None
    vals = [v for k, v in headers if k == name]
    return ", ".join(vals) if vals else None


def _tokens(value: str | None) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]


def handshake_from_headers(
    request_headers: Headers | None,
    response_headers: Headers | None,
    *,
    path: str | None = None,
    http_version: str = "1.1",
    request_frame: int | None = None,
    request_ts_ns: int | None = None,
    response_frame: int | None = None,
    response_ts_ns: int | None = None,
) -> WsHandshake:
    """The handshake facts from lower-cased header lists (either may be missing). Never
    raises; inconsistencies are listed in ``problems``. Over HTTP/2 (``http_version="2"``)
    there is no key/accept pair (RFC 8441 §5)."""
    problems: list[tuple[str, str]] = []

    def bad(detail: str) -> None:
        problems.append(("ws.bad_handshake", detail))

    req, resp = request_headers, response_headers
    key = _joined(req, "sec-websocket-key")
    accept = _joined(resp, "sec-websocket-accept")
    version = _joined(req, "sec-websocket-version")
    accept_ok: bool | None = None
    if http_version != "2":
        if req is not None:
            if key is None:
                bad("the request has no Sec-WebSocket-Key")
            else:
                try:
                    raw = base64.b64decode(key.strip(), validate=True)
                except (binascii.Error, ValueError):
                    raw = b""
                if len(raw) != 16:
                    bad(f"Sec-WebSocket-Key {key[:40]!r} is not 16 bytes in base64")
        if key is not None and resp is not None:
            expected = accept_for_key(key)
            accept_ok = accept is not None and accept.strip() == expected
            if not accept_ok:
                problems.append(
                    (
                        "ws.accept_mismatch",
                        f"Sec-WebSocket-Accept {accept!r} for key {key!r}; expected {expected!r}",
                    )
                )
    if req is not None and version is not None and version.strip() != "13":
        bad(f"Sec-WebSocket-Version {version[:20]!r} (not 13)")
    offered_protocols = _joined(req, "sec-websocket-protocol")
    protocol = _joined(resp, "sec-websocket-protocol")
    if protocol is not None and req is not None and protocol.strip() not in _tokens(
        offered_protocols
    ):
        # (a warning never quotes a credential: some APIs send tokens as subprotocols)
        shown = redact_subprotocols(protocol) or ""
        bad(f"the server selected subprotocol {shown[:40]!r}, not offered")
    offered_ext = _joined(req, "sec-websocket-extensions")
    ext = _joined(resp, "sec-websocket-extensions")
    offered_names = {name for name, _ in parse_extensions(offered_ext)}
    pmd = False
    cnct = snct = False
    cmwb: int | None = None
    smwb: int | None = None
    others: list[str] = []
    for name, params in parse_extensions(ext):
        if req is not None and name not in offered_names:
            bad(f"the server accepted extension {name!r}, not offered")
        if name != "permessage-deflate":
            others.append(name)
            continue
        if pmd:
            bad("permessage-deflate accepted twice")
            continue
        pmd = True
        seen: set[str] = set()
        for pname, pval in params:
            if pname in seen:
                bad(f"permessage-deflate parameter {pname} repeated")
            seen.add(pname)
            if pname == "client_no_context_takeover" and pval is None:
                cnct = True
            elif pname == "server_no_context_takeover" and pval is None:
                snct = True
            elif pname in ("client_max_window_bits", "server_max_window_bits"):
                bits = int(pval) if pval is not None and pval.isascii() and pval.isdigit() else None
                if bits is None or not 8 <= bits <= 15:
                    bad(f"permessage-deflate {pname}={pval!r} (must be 8..15)")
                elif pname == "client_max_window_bits":
                    cmwb = bits
                else:
                    smwb = bits
            else:
                bad(f"unknown permessage-deflate parameter {pname!r}")
    return WsHandshake(
        request_frame=request_frame,
        request_ts_ns=request_ts_ns,
        response_frame=response_frame,
        response_ts_ns=response_ts_ns,
        http_version=http_version,
        path=path,
        host=_joined(req, "host") if http_version != "2" else _joined(req, ":authority"),
        origin=_joined(req, "origin"),
        version=version,
        key=key,
        accept=accept,
        accept_ok=accept_ok,
        offered_protocols=offered_protocols,
        protocol=protocol,
        offered_extensions=offered_ext,
        extensions=ext,
        permessage_deflate=pmd,
        client_no_context_takeover=cnct,
        server_no_context_takeover=snct,
        client_max_window_bits=cmwb,
        server_max_window_bits=smwb,
        other_extensions=tuple(others),
        problems=tuple(problems),
    )


def parse_handshake(request: HttpRequest | None, response: HttpResponse | None) -> WsHandshake:
    """:func:`handshake_from_headers` for an HTTP/1.1 Upgrade request and its 101."""
    resp_frame = resp_ts = None
    if response is not None:
        resp_frame = response.end_frame if response.end_frame is not None else response.head_frame
        resp_ts = response.end_ts_ns if response.end_ts_ns is not None else response.head_ts_ns
    return handshake_from_headers(
        request.headers if request is not None else None,
        response.headers if response is not None else None,
        path=request.target if request is not None else None,
        http_version="1.1",
        request_frame=request.end_frame if request is not None else None,
        request_ts_ns=request.end_ts_ns if request is not None else None,
        response_frame=resp_frame,
        response_ts_ns=resp_ts,
    )
