"""Credentials pcaptools did not redact before issue 18, on a recorded capture and in unit
tests: OAuth ``code=`` query parameters, the userinfo password of HTTP/2 ``:authority`` and
of URLs, ``Private-Token`` / ``X-Amz-Security-Token`` / any ``*-token`` header, and
credential-looking JSON fields (``api_key``, ``token``, ``password``, ``authorization``,
``secret``...) in SSE data and WebSocket text previews.

``captures/secrets.pcap`` (scenario ``secrets`` of ``scripts/record_captures.py``, servers and
client in ``scripts/servers/secretskit.py``) carries every kind in cleartext; its facts list
each value under ``truth.secrets``. tshark 4.0 shows them all; pcaptools shows
``<redacted: N bytes>`` in every table, warning, report, JSON, CSV and Parquet output unless
``show_secrets``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pcaptools
from pcaptools.capture import Capture
from pcaptools.cli import main as cli_main
from pcaptools.protocols.sse import SseParser
from pcaptools.redaction import (
    is_secret_header,
    is_secret_json_key,
    redact_authority,
    redact_headers,
    redact_json_text,
    redact_url,
)
from pcaptools.report import write_report
from tests.conftest import CAPTURES
from tests.oracle import tshark_fields

CAP = CAPTURES / "secrets.pcap"
ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- the functions


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("/oauth/callback?code=abc123&state=s", "/oauth/callback?code=<redacted: 6 bytes>&state=s"),
        ("/cb?code_verifier=v1&client_assertion=eyJ",
         "/cb?code_verifier=<redacted: 2 bytes>&client_assertion=<redacted: 3 bytes>"),
        ("https://ghp_0123456789abcdefABCDEF0123@github.com/o/r",
         "https://<redacted: 30 bytes>@github.com/o/r"),  # a token as the user name
        ("https://alice@host/x", "https://alice@host/x"),  # a plain user name is kept
        ("/x?encode=1&barcode=2", "/x?encode=1&barcode=2"),
    ],
)
def test_redact_url_issue_18(url: str, want: str) -> None:
    assert redact_url(url) == want
    assert redact_url(want) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("user:pw@h:443", "user:<redacted: 2 bytes>@h:443"),
        ("user:@h", "user:@h"),
        ("ghp_0123456789abcdefABCDEF0123@h", "<redacted: 30 bytes>@h"),
        ("bob@h", "bob@h"),
        ("h:8080", "h:8080"),
        ("a:b:c@d@h", "a:<redacted: 5 bytes>@h"),  # the last @ ends the userinfo
    ],
)
def test_redact_authority(value: str, want: str) -> None:
    assert redact_authority(value) == want
    assert redact_authority(want) == want
    assert redact_authority(None) is None


@pytest.mark.parametrize(
    "name",
    ["Private-Token", "X-Amz-Security-Token", "x-vault-token", "X-CSRF-Token", "X-CSRFToken",
     "x-goog-iam-authorization-token", "X-Api-Token", "X-Client-Secret", "x-my-api-key",
     "Ocp-Apim-Subscription-Key", "X-Hub-Signature", "Authorization", "cookie2"],
)
def test_secret_headers(name: str) -> None:
    assert is_secret_header(name)
    assert redact_headers(((name, "v1"),)) == ((name, "<redacted: 2 bytes>"),)


@pytest.mark.parametrize(
    "name",
    ["Sec-WebSocket-Key", "Sec-WebSocket-Accept", "Content-Type", "Idempotency-Key",
     "X-Request-Id", "Host", "Accept-Encoding", "X-Tokens-Used"],
)
def test_plain_headers_are_kept(name: str) -> None:
    assert not is_secret_header(name)


def test_authority_headers() -> None:
    h = ((":authority", "u:pw@h"), ("host", "v:x@h"), ("host", "h:80"))
    assert redact_headers(h) == ((":authority", "u:<redacted: 2 bytes>@h"),
                                 ("host", "v:<redacted: 1 bytes>@h"), ("host", "h:80"))


@pytest.mark.parametrize(
    "key",
    ["api_key", "apiKey", "API-KEY", "x-api-key", "token", "access_token", "refreshToken",
     "id_token", "password", "Passwd", "authorization", "Authorization", "secret",
     "client_secret", "aws_secret_access_key", "private_key", "auth", "bearer", "jwt",
     "credentials", "session_token", "subscription_key"],
)
def test_secret_json_keys(key: str) -> None:
    assert is_secret_json_key(key)


@pytest.mark.parametrize(
    "key",
    ["type", "key", "max_tokens", "prompt_tokens", "tokens", "input_tokens", "content",
     "user", "username", "model", "id", "authority", "passage", "keyword", "sort_key"],
)
def test_plain_json_keys(key: str) -> None:
    assert not is_secret_json_key(key)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('{"api_key":"sk-1","n":2}', '{"api_key":"<redacted: 4 bytes>","n":2}'),
        ('{ "Password" : 1234 , "ok": true}', '{ "Password" : "<redacted: 4 bytes>" , "ok": true}'),
        ('{"token":null,"secret":false}', '{"token":null,"secret":false}'),
        ('{"client_secret":{"value":"ek_1","n":[1,"x"]}}',
         '{"client_secret":{"value":"<redacted: 4 bytes>","n":["<redacted: 1 bytes>",'
         '"<redacted: 1 bytes>"]}}'),
        ('{"tokens":["a","b"],"authorization":"Bearer x\\"y"}',
         '{"tokens":["a","b"],"authorization":"<redacted: 11 bytes>"}'),
        # an OpenAI logprobs token is text, not a credential
        ('{"logprobs":{"content":[{"token":"Hi","logprob":-0.1},{"token": "!" , "logprob":0}]}}',
         '{"logprobs":{"content":[{"token":"Hi","logprob":-0.1},{"token": "!" , "logprob":0}]}}'),
        # cut off by the preview: the partial value is hidden too
        ('{"type":"x","password":"hunt', '{"type":"x","password":"<redacted: 4 bytes>'),
        ('{"type":"x","password":"ab\\', '{"type":"x","password":"<redacted: 2 bytes>'),
        ('[{"apiKey":"k"},{"user":"u"}]', '[{"apiKey":"<redacted: 1 bytes>"},{"user":"u"}]'),
        ('{"type":"response.delta","delta":"my password is"}',
         '{"type":"response.delta","delta":"my password is"}'),
        ("api_key=sk-1 (not JSON)", "api_key=sk-1 (not JSON)"),
        ("[DONE]", "[DONE]"),
        ("", ""),
    ],
)
def test_redact_json_text(text: str, want: str) -> None:
    got = redact_json_text(text)
    assert got == want
    assert redact_json_text(got) == got  # idempotent
    try:
        json.loads(text)
    except ValueError:
        return
    json.loads(got)  # valid JSON stays valid


def test_redact_json_text_never_raises_on_odd_text() -> None:
    for t in ['{"a', '"', '{"token":', '{"token":"', "{{{{", ":::", '{"x":}', "\\", '"\\"',
              '{"token" "x"}', '{"password":"' + "x" * 10_000]:
        assert isinstance(redact_json_text(t), str)
    assert redact_json_text(None) is None


def test_sse_bad_json_warning_never_quotes_a_credential() -> None:
    from pcaptools.diagnostics import Diagnostics
    from pcaptools.protocols._base import Direction

    diag = Diagnostics()
    p = SseParser(diag=diag, tcp_stream=0, direction=Direction.SERVER_TO_CLIENT)
    p.feed(b'data: {"api_key": "sk-LeakedInAWarning0123", oops}\n\n', 1, 1)
    (row,) = diag.rows
    assert row.code == "sse.bad_json"
    assert "sk-LeakedInAWarning0123" not in row.detail
    assert "<redacted: 23 bytes>" in row.detail


# --------------------------------------------------------------------------- the recorded capture


def _kit() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "secretskit", ROOT / "scripts" / "servers" / "secretskit.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rec() -> dict[str, Any]:
    if not CAP.is_file():
        pytest.skip("captures/secrets.pcap is absent")
    facts = json.loads(CAP.with_name(CAP.name + ".facts.json").read_text(encoding="utf-8"))
    return {"secrets": facts["truth"]["secrets"], "cap": pcaptools.load(CAP),
            "raw": pcaptools.load(CAP, show_secrets=True)}


def _everything(cap: Capture) -> str:
    return "\n".join([*(df.to_csv() for df in cap.tables.values()), repr(cap),
                      cap._repr_html_(), repr(cap.summary)])


def _absent(text: str, secrets: dict[str, str], where: str) -> None:
    leaked = [k for k, v in secrets.items() if v in text]
    assert not leaked, f"{leaked} in {where}"


def _r(key: str, s: dict[str, str]) -> str:
    return f"<redacted: {len(s[key])} bytes>"


def test_recorded_capture_every_credential_is_redacted(rec: dict[str, Any]) -> None:
    s, cap = rec["secrets"], rec["cap"]
    assert len(s) == 22
    _absent(_everything(cap), s, "the tables")
    # HTTP/1.1: OAuth code= and three *-token headers (frame 6), a user:password@ URL (16)
    req = cap.http_requests.set_index("request_frame")
    assert req.loc[6, "path"] == f"/oauth/callback?code={_r('oauth_code', s)}&state=st-1"
    h = dict(req.loc[6, "request_headers"])
    assert (h["private-token"], h["x-amz-security-token"], h["x-vault-token"]) == (
        _r("private_token", s), _r("amz_security_token", s), _r("vault_token", s))
    assert h["host"] == "192.0.2.20:8080"
    assert req.loc[16, "path"] == (
        f"http://alice:{_r('url_password', s)}@192.0.2.20:8080/v1/events")
    # the WebSocket Upgrade's X-Api-Token; Sec-WebSocket-Key (a nonce) kept
    up = dict(req.loc[55, "request_headers"])
    assert up["x-api-token"] == _r("ws_header_token", s)
    assert len(up["sec-websocket-key"]) == 24 and "redacted" not in up["sec-websocket-key"]
    # HTTP/2: :authority userinfo, code= in :path, *-token headers
    (st,) = cap.http2_streams.itertuples()
    assert st.authority == f"bob:{_r('h2_authority_password', s)}@192.0.2.20:8081"
    assert st.path == f"/v1/stream?code={_r('h2_code', s)}&stream=true"
    hh = dict(st.request_headers)
    assert hh[":authority"] == st.authority and hh[":path"] == st.path
    assert (hh["private-token"], hh["x-amz-security-token"]) == (
        _r("h2_private_token", s), _r("h2_amz_security_token", s))
    fr = cap.http2_frames[cap.http2_frames["frame"] == 40]
    assert fr["path"].dropna().tolist() == [st.path]
    # no warnings at all: the capture is clean
    assert len(cap.warnings) == 0


def test_recorded_capture_json_fields_match_what_the_server_sent(rec: dict[str, Any]) -> None:
    """The server's events (secretskit.sse_events / h2_events, the same values as the
    capture's truth) redacted with redact_json_text are exactly the sse_events data; the
    redacted JSON still parses and keeps its other members."""
    kit = _kit()
    s, cap = rec["secrets"], rec["cap"]
    sent = [e if isinstance(e, str) else json.dumps(e, separators=(",", ":"))
            for e in [*kit.sse_events(s), *kit.h2_events(s)]]
    assert cap.sse_events["data"].tolist() == [redact_json_text(t) for t in sent]
    assert rec["raw"].sse_events["data"].tolist() == sent
    assert cap.sse_events["json_ok"].tolist()[:5] == [True] * 5
    d = [json.loads(t) for t in cap.sse_events["data"] if t != "[DONE]"]
    assert d[0] == {"type": "session", "api_key": _r("sse_api_key", s), "user": "alice"}
    assert d[1] == {"type": "auth", "token": _r("sse_token", s), "expires_in": 3600}
    assert d[2]["credentials"]["password"] == _r("sse_password", s)
    assert d[3]["authorization"] == f"<redacted: {len('Bearer ' + s['sse_authorization'])} bytes>"
    assert d[3]["choices"][0]["logprobs"]["content"][0]["token"] == "Hi"  # an LLM token
    assert d[4] == {"type": "config", "secret": _r("sse_secret", s), "max_tokens": 16}
    assert d[5] == {"type": "h2", "secret": _r("h2_sse_secret", s)}
    assert d[6] == {"type": "h2", "apiKey": _r("h2_sse_api_key", s)}
    # the LLM text is untouched
    assert cap.sse_events["delta_text"].dropna().tolist() == ["Hi"]
    assert cap.sse_events["frame"].tolist() == [20, 22, 24, 26, 28, 30, 46, 46]


def test_recorded_capture_against_tshark(rec: dict[str, Any], tshark: str) -> None:
    """tshark 4.0 shows every value in clear; pcaptools' columns are tshark's values with
    exactly the credentials replaced."""
    s, cap = rec["secrets"], rec["cap"]
    opts = ("-d", "tcp.port==8081,http2")
    wire = "\n".join("\t".join(r) for r in tshark_fields(
        CAP, ("http.request.uri", "http.request.line", "http2.headers.authority",
              "http2.headers.path", "http2.header.value", "websocket.payload.text"), opts))
    assert [k for k, v in s.items() if v not in wire] == [
        k for k in s if k.startswith(("sse_", "h2_sse_"))]  # bodies: not among these fields
    # request targets, frame by frame
    rows = tshark_fields(CAP, ("frame.number", "http.request.uri"), opts, "http.request")
    ours = dict(zip(cap.http_requests["request_frame"], cap.http_requests["path"], strict=True))
    assert {int(f): redact_url(u) for f, u in rows} == ours
    # HTTP/1.1 header lines: the secret ones (is_secret_header) hidden, the rest as sent
    rows = tshark_fields(CAP, ("frame.number", "http.request.line"), opts, "http.request")
    for f, lines in rows:
        want = []
        for ln in lines.split(","):
            k, _, v = ln.removesuffix("\\r\\n").partition(": ")
            want.append((k.lower(), redacted_or(v, is_secret_header(k))))
        got = cap.http_requests.set_index("request_frame").loc[int(f), "request_headers"]
        assert list(got) == want, f
    # HTTP/2 :authority and :path
    ((auth, path),) = tshark_fields(CAP, ("http2.headers.authority", "http2.headers.path"), opts,
                                    "http2.headers.authority")
    (st,) = cap.http2_streams.itertuples()
    assert (st.authority, st.path) == (redact_authority(auth), redact_url(path))
    # WebSocket text messages
    rows = tshark_fields(CAP, ("frame.number", "websocket.payload.text"), opts,
                         "websocket.payload.text")
    msgs = cap.ws_messages
    assert msgs["frame"].tolist() == [int(f) for f, _ in rows]
    assert msgs["preview"].tolist() == [redact_json_text(t) for _, t in rows]
    assert rec["raw"].ws_messages["preview"].tolist() == [t for _, t in rows]
    assert msgs["json_type"].tolist() == ["session.update", "session.created", "auth.refresh",
                                          "auth.refresh"]


def redacted_or(v: str, secret: bool) -> str:
    return f"<redacted: {len(v)} bytes>" if secret else v


def test_recorded_capture_show_secrets_keeps_every_value(rec: dict[str, Any]) -> None:
    s, raw = rec["secrets"], rec["raw"]
    text = _everything(raw)
    assert [k for k, v in s.items() if v not in text] == []
    assert "redacted" not in text


def test_recorded_capture_outputs_never_show_them(rec: dict[str, Any], tmp_path: Path) -> None:
    """The HTML report, --json, CSV and Parquet exports, and load(out=...) streaming."""
    import pyarrow.parquet as pq

    s, cap = rec["secrets"], rec["cap"]
    out, js = tmp_path / "r.html", tmp_path / "r.json"
    assert cli_main([str(CAP), "-o", str(out), "--json", str(js), "-q"]) == 0
    page = out.read_text(encoding="utf-8")
    _absent(page, s, "the CLI report")
    _absent(js.read_text(encoding="utf-8"), s, "--json")
    assert "&lt;redacted:" in page
    write_report(cap, tmp_path / "api.html")
    _absent((tmp_path / "api.html").read_text(encoding="utf-8"), s, "write_report")
    for p in cap.to_csv(tmp_path / "csv").values():
        _absent(Path(p).read_text(encoding="utf-8"), s, str(p))
    cap.to_parquet(tmp_path / "pq")
    streamed = pcaptools.load(CAP, out=tmp_path / "stream", chunk_rows=1)
    for d in (tmp_path / "pq", tmp_path / "stream"):
        files = sorted(d.glob("*.parquet"))
        assert {f.stem for f in files} >= {"sse_events", "ws_messages", "http2_streams"}
        for f in files:
            _absent(pq.read_table(f).to_pandas().to_csv(), s, f.name)
    assert streamed.sse_events["data"].tolist() == cap.sse_events["data"].tolist()
    page2 = tmp_path / "raw.html"
    assert cli_main([str(CAP), "-o", str(page2), "-q", "--show-secrets"]) == 0
    assert s["oauth_code"] in page2.read_text(encoding="utf-8")


def test_recorded_capture_with_workers(rec: dict[str, Any]) -> None:
    two = pcaptools.load(CAP, workers=2)
    _absent(_everything(two), rec["secrets"], "a parallel load")
    assert two.sse_events["data"].tolist() == rec["cap"].sse_events["data"].tolist()
    assert two.ws_messages["preview"].tolist() == rec["cap"].ws_messages["preview"].tolist()


# --------------------------------------------------------------------------- properties

_KEYS = ["a", "type", "token", "api_key", "apiKey", "max_tokens", "password", "client_secret",
         "user", "authorization"]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), c, max_size=4),
    max_leaves=12,
)


def _expected(v: Any, secret: bool = False) -> Any:
    """``v`` with what redact_json_text hides replaced (a string by the length of its JSON
    escaped form, a number by the length of its digits)."""
    if isinstance(v, dict):
        return {k: _expected(x, secret or is_secret_json_key(k)) for k, x in v.items()}
    if isinstance(v, list):
        return [_expected(x, secret) for x in v]
    if secret and isinstance(v, str):
        return f"<redacted: {len(json.dumps(v)) - 2} bytes>"
    if secret and isinstance(v, int) and not isinstance(v, bool):
        return f"<redacted: {len(json.dumps(v))} bytes>"
    return v


@given(_JSON, st.booleans())
def test_redact_json_text_hides_exactly_the_credential_values(v: Any, compact: bool) -> None:
    text = json.dumps(v, separators=(",", ":") if compact else None)
    got = redact_json_text(text)
    assert json.loads(got) == _expected(v)
    assert redact_json_text(got) == got


@given(st.text(max_size=200))
def test_redact_json_text_never_raises(text: str) -> None:
    assert isinstance(redact_json_text(text), str)
    assert isinstance(redact_json_text('{"password":' + text), str)
