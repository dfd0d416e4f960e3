"""Credentials that travel in HTTP and WebSocket metadata, and how pcaptools hides them.

Tables and the report show ``<redacted: N bytes>`` in place of a credential unless
``load(show_secrets=True)``: the length stays visible (an empty or truncated token is a
finding), the value does not. What counts as a credential:

- the values of the headers in :data:`SECRET_HEADERS` (Authorization, Cookie, API key
  headers...) or whose name ends like one of :data:`SECRET_HEADER_SUFFIXES`: every
  ``*-token`` header (``Private-Token``, ``X-Amz-Security-Token``, ``X-Vault-Token``...),
  every ``*-key`` / ``*_key`` (``X-Client-Key``, ``Ocp-Apim-Subscription-Key``...), every
  ``*-secret`` (``X-Webhook-Secret``), ``*-password``, ``*-credential(s)``,
  ``*-authorization``, ``*-signature``; except :data:`NOT_SECRET_HEADERS`
  (``Sec-WebSocket-Key``, a nonce, and ``Idempotency-Key``, a request id):
  :func:`is_secret_header`;
- URL query parameters named in :data:`SECRET_QUERY_PARAMS` or ending like one of
  :data:`SECRET_PARAM_SUFFIXES` (OAuth ``?code=``, ``?access_token=``, ``?refresh_token=``,
  ``?id_token=``, ``?client_secret=``, ``?password=``, ``?api_key=``,
  ``X-Amz-Signature``...), and the password of ``scheme://user:password@host`` URLs: in
  request targets, HTTP/2 ``:path`` and the URL-valued headers of :data:`URL_HEADERS`
  (Location, Referer...);
- the password of ``user:password@host`` in HTTP/2 ``:authority``, ``Host`` and the
  ``authority`` / ``host`` columns (:func:`redact_authority`); a user name alone that looks
  like a token (``ghp_...@github.com``) is hidden too;
- credential-looking JSON fields (``"api_key"``, ``"apikey"``, ``"token"``,
  ``"access_token"``, ``"refresh_token"``, ``"password"``, ``"authorization"``,
  ``"secret"``, ``"client_secret": {...}``..., nested too) inside SSE ``data`` and WebSocket
  text previews (:func:`redact_json_text`, :func:`is_secret_json_key`): the string or number
  values are replaced, the JSON around them kept byte for byte; found by pattern, so a
  preview cut inside a value hides the part it shows;
- in free text (the same SSE data and previews, WebSocket close reasons, GOAWAY debug data,
  warning details: :func:`redact_text`), those JSON members, credential query parameters and
  userinfo passwords of URLs anywhere in the text, and ``Name: value`` lines whose name is a
  secret header;
- ``Sec-WebSocket-Protocol`` entries that look like credentials (some APIs carry a bearer
  token as a subprotocol, e.g. ``openai-insecure-api-key.<key>``): see
  :func:`is_credential_subprotocol`. Plain protocol names (``realtime``, ``graphql-ws``)
  are kept.

Where it is applied: one point. Every table schema marks the columns that may carry a
credential with the kind of value they hold (``Column(secret=...)``, a key of
:data:`SECRET_KINDS`); the table builders keep the values as seen, and ``load()``
(``pipeline._finish_tables``, and each chunk of the streaming export) passes every table
through :func:`redact_frame` unless ``show_secrets=True``. So every output (tables, the
report, ``--json``, CSV / Parquet exports, ``load(out=...)``, ``workers=N``) shows the same
redacted values, and a new table is covered by marking its columns.

The functions are pure (str in, str out, never raise on any str) and live in this layer-0
module so that every layer can use them: the pipeline, and protocol observers for warning
details (which never carry a credential they recognise, whatever ``show_secrets`` says).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "NOT_SECRET_HEADERS",
    "SECRET_HEADERS",
    "SECRET_HEADER_SUFFIXES",
    "SECRET_JSON_KEYS",
    "SECRET_JSON_SUFFIXES",
    "SECRET_KINDS",
    "SECRET_PARAM_SUFFIXES",
    "SECRET_QUERY_PARAMS",
    "URL_HEADERS",
    "is_credential_subprotocol",
    "is_secret_header",
    "is_secret_json_key",
    "is_secret_param",
    "redact_authority",
    "redact_column",
    "redact_frame",
    "redact_headers",
    "redact_json_text",
    "redact_json_texts",
    "redact_subprotocols",
    "redact_text",
    "redact_url",
    "redact_ws_connections",
    "redacted",
]

#: header names whose values are credentials: redacted in every table unless
#: ``load(show_secrets=True)`` (compared lower-case; HTTP/2 names are lower-case on the wire)
SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
    "x-auth-token", "x-goog-api-key", "openai-organization", "anthropic-api-key",
    "cookie2", "set-cookie2", "ocp-apim-subscription-key", "x-functions-key", "x-api-token",
})  # fmt: skip

#: a header whose (lower-case) name ends like this is a credential too: every ``*-token``
#: header (Private-Token, X-Amz-Security-Token, X-Vault-Token, X-CSRF-Token...), ``*-api-key``,
#: ``*-secret``, ``*-password``... (``Sec-WebSocket-Key`` does not end like one: a nonce)
SECRET_HEADER_SUFFIXES = (
    "token", "-key", "_key", "apikey", "-secret", "_secret", "-password", "-passwd",
    "-credential", "-credentials", "-authorization", "-signature",
)  # fmt: skip

#: headers whose name ends like a credential's (:data:`SECRET_HEADER_SUFFIXES`) but whose
#: value is not one: the WebSocket handshake nonce and idempotency keys (a client-chosen
#: request id, needed to follow retries) are kept
NOT_SECRET_HEADERS = frozenset({"sec-websocket-key", "idempotency-key", "x-idempotency-key"})

#: headers whose values are authorities (``[user[:password]@]host[:port]``)
AUTHORITY_HEADERS = frozenset({":authority", "host"})

#: headers whose values are URLs (or paths): their query credentials are redacted
URL_HEADERS = frozenset({":path", "location", "content-location", "referer"})

#: query parameter names (lower-case, percent-decoded) whose values are credentials
SECRET_QUERY_PARAMS = frozenset({
    "key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "signature", "sig",
    "password", "passwd", "pwd", "secret", "client_secret", "jwt", "session", "sessionid",
    "session_id", "awsaccesskeyid", "x-amz-signature", "x-amz-credential",
    "x-amz-security-token", "x-goog-signature", "x-goog-credential",
    "code", "code_verifier", "assertion", "client_assertion", "otp", "passcode",
})  # fmt: skip

#: a parameter name ending like this is a credential too (refresh_token, aws_secret,
#: subscription-key, user[password]...)
SECRET_PARAM_SUFFIXES = (
    "token", "secret", "password", "signature", "credential", "credentials", "_key", "-key",
    ".key", "apikey",
)  # fmt: skip

#: JSON keys (lower-case, without ``-``, ``_``, ``.`` and spaces: ``apiKey``, ``api_key`` and
#: ``api-key`` are all ``apikey``) whose values are credentials
SECRET_JSON_KEYS = frozenset({
    "auth", "pwd", "pass", "passphrase", "bearer", "jwt", "cookie", "setcookie", "xapikey",
    "sessionid", "otp", "passcode",
})  # fmt: skip

#: a JSON key (normalised as for :data:`SECRET_JSON_KEYS`) ending like this is a credential:
#: ``token``, ``access_token``, ``refreshToken``, ``client_secret``, ``password``,
#: ``authorization``, ``private_key``, ``aws_secret_access_key``... (``max_tokens``,
#: ``prompt_tokens`` end in ``tokens``: not credentials)
SECRET_JSON_SUFFIXES = (
    "token", "secret", "password", "passwd", "apikey", "authorization", "credential",
    "credentials", "privatekey", "secretkey", "accesskey", "secretaccesskey", "signingkey",
    "sessionkey", "clientkey", "subscriptionkey", "signature",
)  # fmt: skip

_SUBPROTOCOL_HEADER = "sec-websocket-protocol"
_SPECIAL_HEADERS = SECRET_HEADERS | URL_HEADERS | AUTHORITY_HEADERS | {_SUBPROTOCOL_HEADER}
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^/?#@:]*):([^/?#@]*)@")
_USERINFO_NO_PW = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#@:]+)@")
_PARAM_SEP = re.compile(r"([&;])")
#: words that make a subprotocol entry a credential
_CREDENTIAL_WORDS = (
    "api-key", "api_key", "apikey", "token", "bearer", "auth", "secret", "password",
    "credential", "jwt",
)  # fmt: skip
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/=_\-]{20,}")
_LONG_ALNUM = re.compile(r"[A-Za-z0-9]{20,}")


_REDACTED = re.compile(r"<redacted: \d+ bytes>")


def redacted(value: str) -> str:
    """``<redacted: N bytes>`` for ``value`` (N: its length as it appeared); a value that is
    already of that form is returned as it is, so redacting twice changes nothing."""
    if _REDACTED.fullmatch(value):
        return value
    return f"<redacted: {len(value)} bytes>"


def is_secret_param(name: str) -> bool:
    """Is ``name`` (a query parameter name as on the wire) one that carries a credential?
    Case-insensitive, percent-decoded, ``a[b]`` read as ``a.b``."""
    n = unquote(name).strip().lower().replace("[", ".").replace("]", "")
    return n in SECRET_QUERY_PARAMS or n.endswith(SECRET_PARAM_SUFFIXES)


def redact_url(url: str | None) -> str | None:
    """``url`` (an absolute URL, a request target or a path) with the value of every credential
    query parameter (:func:`is_secret_param`) and the password of ``scheme://user:pw@host``
    replaced by :func:`redacted`. Everything else is kept byte for byte, ``None`` stays None;
    parameters are split at ``&`` and ``;``, the fragment (``#...``) is left alone, and a URL
    inside a parameter value (``?next=https://h/?token=...``) is redacted too."""
    if url is None or ("?" not in url and "@" not in url):
        return url
    out = url
    m = _USERINFO.match(out)
    if m is not None and _REDACTED.search(out, 0, m.end()):
        pass  # (already redacted: the form has a colon in it)
    elif m is not None and m.group(2) and not _REDACTED.fullmatch(m.group(2)):
        out = f"{m.group(1)}:{redacted(m.group(2))}@{out[m.end():]}"
    elif m is None:
        m = _USERINFO_NO_PW.match(out)
        if m is not None and _token_like_user(m.group(2)):
            out = f"{m.group(1)}{redacted(m.group(2))}@{out[m.end():]}"
    q = out.find("?")
    if q < 0:
        return out
    h = out.find("#", q)
    end = h if h >= 0 else len(out)
    parts = _PARAM_SEP.split(out[q + 1 : end])
    changed = False
    for i in range(0, len(parts), 2):
        name, eq, value = parts[i].partition("=")
        if not eq or not value:
            continue
        if is_secret_param(name):
            hidden = redacted(value)
            if hidden != value:
                parts[i] = f"{name}={hidden}"
                changed = True
        elif "?" in value:
            inner = redact_url(value)
            if inner != value:
                parts[i] = f"{name}={inner}"
                changed = True
    if not changed:
        return out
    return out[: q + 1] + "".join(parts) + out[end:]


def _token_like_user(user: str) -> bool:
    """A user name given without a password that is really a token (``ghp_...``, a key)."""
    return not _REDACTED.fullmatch(user) and is_credential_subprotocol(unquote(user))


def redact_authority(value: str | None) -> str | None:
    """An authority (``:authority``, ``Host``: ``[user[:password]@]host[:port]``) with the
    password of its userinfo replaced by :func:`redacted` (``user:<redacted: 7 bytes>@host``),
    or the whole userinfo when it is only a user name that looks like a token
    (:func:`is_credential_subprotocol`). Anything else is returned as it is."""
    if value is None or "@" not in value:
        return value
    userinfo, _, host = value.rpartition("@")
    if _REDACTED.search(userinfo):
        return value
    user, colon, pw = userinfo.partition(":")
    if colon:
        if not pw or _REDACTED.fullmatch(pw):
            return value
        return f"{user}:{redacted(pw)}@{host}"
    if user and _token_like_user(user):
        return f"{redacted(user)}@{host}"
    return value


def is_secret_header(name: str) -> bool:
    """Is the header ``name`` (any case) one whose value is a credential: in
    :data:`SECRET_HEADERS` or ending like one of :data:`SECRET_HEADER_SUFFIXES`?"""
    n = name.lower()
    return n in SECRET_HEADERS or (n.endswith(SECRET_HEADER_SUFFIXES)
                                   and n not in NOT_SECRET_HEADERS)


def is_secret_json_key(key: str) -> bool:
    """Is the JSON member name ``key`` one whose value is a credential (:data:`SECRET_JSON_KEYS`,
    :data:`SECRET_JSON_SUFFIXES`; compared lower-case without ``-``, ``_``, ``.``, spaces)?"""
    n = key.lower()
    for c in "-_. ":
        if c in n:
            n = n.replace(c, "")
    return n in SECRET_JSON_KEYS or n.endswith(SECRET_JSON_SUFFIXES)


#: cheap tests before :func:`redact_json_text` scans: some word of a credential name in the
#: text (lower-cased), then a member name that is one (``"name":``)
_JSON_WORDS = ("tok", "secret", "pass", "pwd", "auth", "key", "cred", "jwt", "bearer", "cookie",
               "otp", "sign", "session")
_JSON_KEY = re.compile(r'"([^"\\]{1,80})"\s*:')
_JSON_WORDS_RE = "|".join(_JSON_WORDS)
#: JSON tokens: a string (possibly cut off by the end of a preview), punctuation, a scalar
_JSON_TOKEN = re.compile(
    r'"((?:[^"\\]|\\.)*)(?:(")|\\?\Z)|[{}\[\]:,]|[^\s{}\[\]:,"]+'
)
#: an LLM ``logprobs`` entry: ``{"token": "Hello", "logprob": -0.31, ...}`` (OpenAI): that
#: ``token`` is text, not a credential
_LOGPROB_NEXT = re.compile(r'\s*,\s*"logprob"')
_JSON_LITERALS = frozenset({"true", "false", "null"})


def redact_json_text(text: str | None) -> str | None:
    """``text`` (JSON, or the start of it: a preview may be cut anywhere) with the values of
    credential members (:func:`is_secret_json_key`: ``"api_key": "sk-..."``, ``"password"``,
    ``"token"``...) replaced: a string by ``"<redacted: N bytes>"`` (N: its length as it
    appears, escapes included), a number likewise; inside an object or array that is the
    value of such a member (``"client_secret": {"value": "ek_..."}``), every string and number
    value. Member names, ``true`` / ``false`` / ``null`` and everything else are kept byte
    for byte, so valid JSON stays valid. A ``"token"`` directly followed by ``"logprob"`` is
    an LLM token (OpenAI logprobs) and is kept. Text that is not JSON is returned as it is
    (only ``"name": value`` pairs are looked at); never raises."""
    if not text or ":" not in text:
        return text
    low = text.lower()
    for w in _JSON_WORDS:
        if w in low:
            break
    else:
        return text
    for k in _JSON_KEY.findall(text):
        if is_secret_json_key(k):
            break
    else:
        return text
    edits: list[tuple[int, int, str]] = []
    # one entry per open container: (is an object, its values are credentials)
    stack: list[tuple[bool, bool]] = []
    expect_key = False
    key_secret = False  # the value about to come belongs to a credential member
    last_key = ""
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        c = tok[0]
        in_obj, inherited = stack[-1] if stack else (False, False)
        if c in "{[":
            stack.append((c == "{", key_secret or (inherited and not in_obj)))
            expect_key = c == "{"
            key_secret = False
        elif c in "}]":
            if stack:
                stack.pop()
            expect_key = False
            key_secret = False
        elif c == ",":
            expect_key = in_obj
            key_secret = False
        elif c == ":":
            expect_key = False
            key_secret = inherited or is_secret_json_key(last_key)
        elif expect_key and c == '"':
            last_key = m.group(1)
        else:  # a value
            secret = key_secret or (inherited and not in_obj)
            if secret and tok not in _JSON_LITERALS and not (
                last_key == "token" and _LOGPROB_NEXT.match(text, m.end())
            ):
                if c == '"':
                    closed = m.group(2) is not None
                    inner = tok[1 : m.end(1) - m.start()]
                    if not _REDACTED.fullmatch(inner):
                        edits.append((m.start(), m.end(),
                                      f'"{redacted(inner)}' + ('"' if closed else "")))
                else:
                    edits.append((m.start(), m.end(), f'"{redacted(tok)}"'))
            key_secret = False
    if not edits:
        return text
    out: list[str] = []
    pos = 0
    for a, b, r in edits:
        out.append(text[pos:a])
        out.append(r)
        pos = b
    out.append(text[pos:])
    return "".join(out)


def redact_json_texts(values: list[str | None]) -> list[str | None]:
    """:func:`redact_json_text` of every value (``values`` itself when nothing changed). With
    pyarrow the cheap test runs in C over the whole list (RE2), so only the few values that
    mention a credential word are looked at in Python: the per-event cost of redacting
    ``sse_events.data`` stays far below that of parsing the event."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # pragma: no cover - pyarrow is a dependency of the Parquet export
        pa = None
    idx: list[int]
    if pa is not None:
        try:
            arr = pa.array(values, type=pa.large_string(), from_pandas=True)
            mask = pc.match_substring_regex(arr, _JSON_WORDS_RE, ignore_case=True)
            idx = pc.indices_nonzero(mask.fill_null(False)).to_pylist()
        except (pa.ArrowException, TypeError, ValueError):
            idx = list(range(len(values)))
    else:  # pragma: no cover
        idx = list(range(len(values)))
    out: list[str | None] | None = None
    for i in idx:
        v = values[i]
        nv = redact_json_text(v)
        if nv is not v:
            if out is None:
                out = list(values)
            out[i] = nv
    return values if out is None else out


def is_credential_subprotocol(token: str) -> bool:
    """Does this ``Sec-WebSocket-Protocol`` entry look like a credential? Yes when it contains
    one of ``api-key``, ``token``, ``bearer``, ``auth``, ``secret``, ``password``,
    ``credential``, ``jwt`` (any case), or a token-like run: 20+ characters of the base64
    alphabet with digits in it and mixed case or 4+ digits (base64, hex, UUIDs, JWT parts),
    or 20+ letters and digits with no separator. Plain names (``realtime``, ``graphql-ws``,
    ``graphql-transport-ws``, ``v10.stomp``, ``wamp.2.json``, ``base64.channel.k8s.io``) are
    not."""
    low = token.lower()
    if any(w in low for w in _CREDENTIAL_WORDS):
        return True
    for run in _TOKEN_RUN.findall(token):
        digits = sum(c.isdigit() for c in run)
        if digits and (digits >= 4 or (run.lower() != run and run.upper() != run)):
            return True
        if _LONG_ALNUM.search(run):
            return True
    return False


def redact_subprotocols(value: str | None) -> str | None:
    """A ``Sec-WebSocket-Protocol`` value (comma-separated entries) with every entry that
    :func:`is_credential_subprotocol` flags replaced by :func:`redacted`; the other entries
    and the separators are kept as they were."""
    if value is None:
        return None
    entries = value.split(",")
    changed = False
    for i, e in enumerate(entries):
        t = e.strip()
        if t and is_credential_subprotocol(t):
            entries[i] = e.replace(t, redacted(t), 1)
            changed = True
    return ",".join(entries) if changed else value


def redact_headers(
    headers: tuple[tuple[str, str], ...] | None,
) -> tuple[tuple[str, str], ...] | None:
    """``headers`` with every credential hidden: the whole value of a secret header
    (:func:`is_secret_header`: :data:`SECRET_HEADERS`, ``*-token``...), credential query
    parameters in :data:`URL_HEADERS` values (``:path``, Location...), the userinfo password
    of ``:authority`` / ``Host`` (:func:`redact_authority`), credential entries of
    ``Sec-WebSocket-Protocol``. Returns ``headers`` itself when nothing was hidden (and None
    for None)."""
    if headers is None:
        return None
    out: list[tuple[str, str]] | None = None
    suffixes = SECRET_HEADER_SUFFIXES
    for i, (k, v) in enumerate(headers):
        name = k.lower()
        if name not in _SPECIAL_HEADERS:
            if not name.endswith(suffixes) or name in NOT_SECRET_HEADERS:
                continue
            nv = redacted(v)
        elif name in SECRET_HEADERS:
            nv = redacted(v)
        elif name == _SUBPROTOCOL_HEADER:
            nv = redact_subprotocols(v) or v
        elif name in AUTHORITY_HEADERS:
            nv = redact_authority(v) or v
        else:
            nv = redact_url(v) or v
        if nv != v:
            if out is None:
                out = list(headers)
            out[i] = (k, nv)
    return headers if out is None else tuple(out)


# --------------------------------------------------------------------------- free text

#: a query parameter anywhere in a text (also after a JSON-escaped ``&``, ``\u0026``): its
#: value runs to the next separator, quote, backslash or space
_TEXT_PARAM = re.compile(r'(?:[?&;]|\\u0026)([^=&;#?\s"\'<>\\]{1,100})=([^&;#\s"\'<>\\]+)')
_TEXT_USERINFO = re.compile(
    r'([A-Za-z][A-Za-z0-9+.\-]{0,31}://[^/?#@:\s"\'<>\\]{0,256}):([^/?#@\s"\'<>\\]{1,256})@')
#: a header line (at the start of the text or of a line): ``Name: value``
#: (every part bounded or greedy without backtracking: linear in the text's length)
_TEXT_HEADER = re.compile(r"(?m)^[ \t]*([!#$%&'*+.^_`|~0-9A-Za-z\-]{1,100})[ \t]*:[ \t]*"
                          r"([^\r\n]*)")


def redact_text(text: str | None) -> str | None:
    """Free text (a warning's detail, a WebSocket close reason, GOAWAY debug data, an SSE
    ``data`` line or a WebSocket message preview, JSON or not) with every credential found by
    its shape hidden: the value of a ``Name: value`` line whose name is a secret header
    (:func:`is_secret_header`), credential JSON members (:func:`redact_json_text`), and, in
    any URL or query string inside it, credential parameters (:func:`is_secret_param`) and the
    password of ``scheme://user:password@``. Everything else is kept byte for byte; redacting
    twice changes nothing; never raises."""
    if not text:
        return text
    out = text
    if ":" in out:
        out = _TEXT_HEADER.sub(_header_line, out)
        out = redact_json_text(out) or out
    if "=" in out:
        out = _TEXT_PARAM.sub(_param, out)
    if "@" in out:
        out = _TEXT_USERINFO.sub(_userinfo, out)
    return out


def _header_line(m: re.Match[str]) -> str:
    name, value = m.group(1), m.group(2).rstrip(" \t")
    if not value or not is_secret_header(name) or _REDACTED.fullmatch(value):
        return m.group()
    a = m.start(2) - m.start()
    g = m.group()
    return g[:a] + redacted(value) + g[a + len(value) :]


def _param(m: re.Match[str]) -> str:
    if not is_secret_param(m.group(1)):
        return m.group()
    g = m.group()
    return g[: m.start(2) - m.start()] + redacted(m.group(2))


def _userinfo(m: re.Match[str]) -> str:
    return f"{m.group(1)}:{redacted(m.group(2))}@"


# --------------------------------------------------------------------------- whole columns

#: what a table column marked with ``Column(secret=KIND)`` holds, and how it is redacted:
#: ``url`` (a request target, path or URL: :func:`redact_url`), ``authority`` (``Host`` /
#: ``:authority``: :func:`redact_authority`), ``headers`` (a header list:
#: :func:`redact_headers`), ``subprotocols`` (``Sec-WebSocket-Protocol``:
#: :func:`redact_subprotocols`), ``json`` (:func:`redact_json_text`), ``text`` (free text:
#: :func:`redact_text`)
SECRET_KINDS: dict[str, Callable[[Any], Any]] = {
    "url": redact_url,
    "authority": redact_authority,
    "headers": redact_headers,
    "subprotocols": redact_subprotocols,
    "json": redact_json_text,
    "text": redact_text,
}

#: cheap tests (RE2, run by pyarrow over a whole string column) before a value is looked at
#: in Python: a value they do not match has nothing the kind's function would hide
_PREFILTER = {
    "url": r"[?@]",
    "authority": "@",
    "json": _JSON_WORDS_RE,
    "text": _JSON_WORDS_RE + r"|[?&;][^=\s]{1,100}=|\\u0026|://[^/\s]*@",
}


def redact_column(values: pd.Series, kind: str) -> pd.Series | None:
    """``values`` (a table column) with :data:`SECRET_KINDS` ``[kind]`` applied to every value;
    None when nothing changed. A ``string`` column is scanned in C first (pyarrow RE2, see
    :data:`_PREFILTER`), so only the values that may hold a credential are looked at in
    Python, and the result is built in Arrow (no Python string per row). Dtype, index and
    name are kept. Raises KeyError for an unknown ``kind``."""
    import numpy as np
    import pandas as pd

    fn = SECRET_KINDS[kind]
    n = len(values)
    if not n:
        return None
    chunks = _arrow_chunks(values)
    if chunks is not None:
        import pyarrow as pa

        done = [_redact_chunk(c, kind, fn) for c in chunks]
        if all(d is None for d in done):
            return None
        new = pa.chunked_array([c if d is None else d for c, d in zip(chunks, done, strict=True)],
                               type=pa.large_string())
        return pd.Series(pd.arrays.ArrowStringArray(new), index=values.index, name=values.name)
    out: np.ndarray | None = None
    for i, v in enumerate(values.array):
        if isinstance(v, (str, tuple)):
            nv = fn(v)
            if nv != v:
                if out is None:
                    out = values.to_numpy(dtype=object, copy=True)
                out[i] = nv
    if out is None:
        return None
    return pd.Series(out, index=values.index, dtype=values.dtype, name=values.name)


def _true_at(flags: Any) -> Any:
    """The positions of the true values of a boolean Arrow array without nulls, read from its
    bits with numpy. (``pyarrow.compute.indices_nonzero`` and a boolean array's ``to_numpy``
    allocate from Arrow's C++ default pool, mimalloc, whatever pool pyarrow is set to: the
    first use of mimalloc during a load left ~8 MB more resident on ``big.pcap``, see
    :mod:`pcaptools._memory`.)"""
    import numpy as np

    bits = np.frombuffer(flags.buffers()[1], dtype=np.uint8)
    start = flags.offset
    return np.flatnonzero(np.unpackbits(bits, bitorder="little")[start:start + len(flags)])


def _redact_chunk(arrow: Any, kind: str, fn: Callable[[Any], Any]) -> Any:
    """One chunk (a large_string Arrow array) of :func:`redact_column`'s column redacted, or
    None when nothing in it changed: the values the :data:`_PREFILTER` RE2 pattern matches
    (every value without one) are looked at in Python, the changed ones replaced in Arrow."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    pattern = _PREFILTER.get(kind)
    if pattern is not None:
        idx = _true_at(pc.match_substring_regex(arrow, pattern, ignore_case=True).fill_null(False))
    else:
        idx = _true_at(pc.is_valid(arrow))
    if not len(idx):
        return None
    old = arrow.take(pa.array(idx)).to_pylist()
    changed = [(int(i), nv) for i, v in zip(idx, old, strict=True)
               if v is not None and (nv := fn(v)) != v]
    if not changed:
        return None
    mask = np.zeros(len(arrow), dtype=bool)
    mask[[i for i, _ in changed]] = True
    return pc.replace_with_mask(arrow, pa.array(mask),
                                pa.array([v for _, v in changed], type=arrow.type))


def _arrow_chunks(values: pd.Series) -> list[Any] | None:
    """The chunks of a pyarrow-backed ``string`` column as large_string Arrow arrays (not
    joined into one: a table built in blocks keeps its blocks, and a redacted column is
    made a chunk at a time, never a copy of the whole at once), else None."""
    import pandas as pd

    dt = values.dtype
    if not isinstance(dt, pd.StringDtype) or dt.storage != "pyarrow":
        return None
    import pyarrow as pa

    try:
        arr = pa.array(values.array)
        chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
        return [c if c.type == pa.large_string() else c.cast(pa.large_string())
                for c in chunks]
    except (pa.ArrowException, TypeError, ValueError):
        return None


def redact_frame(df: pd.DataFrame, columns: Iterable[tuple[str, str]]) -> pd.DataFrame:
    """``df`` with every ``(column, kind)`` of ``columns`` redacted (:func:`redact_column`;
    columns ``df`` lacks are skipped): ``df`` itself when nothing changed, else a shallow
    copy with the changed columns replaced (``df`` is never modified). This is what
    ``load()`` applies to every table, from the ``secret`` kinds its schema's columns declare
    (``TableSchema.secret_columns``), unless ``show_secrets=True``."""
    out = df
    for col, kind in columns:
        if col not in df.columns:
            continue
        new = redact_column(df[col], kind)
        if new is not None:
            if out is df:
                out = df.copy(deep=False)
            out[col] = new
    return out


#: ws_connections columns and how each is redacted (the table's schema declares the same)
_WS_COLUMNS = (("path", "url"), ("host", "authority"), ("offered_protocols", "subprotocols"),
               ("protocol", "subprotocols"))


def redact_ws_connections(df: pd.DataFrame) -> pd.DataFrame:
    """The ``ws_connections`` table with the credentials of its ``path`` (query), ``host``
    (userinfo) and ``offered_protocols`` / ``protocol`` (subprotocols) columns hidden: kept
    for callers of earlier versions; ``load()`` now redacts every table with
    :func:`redact_frame` and the schemas' ``secret`` columns."""
    return redact_frame(df, _WS_COLUMNS)
