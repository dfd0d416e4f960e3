"""Redaction at one point (issue 18): every column a table schema marks with ``Column.secret``
is redacted by ``load()`` after the pass, so every output shows the same redacted values.

``captures/secrets-more.pcap`` (scenario ``secrets-more`` of ``scripts/record_captures.py``,
``scripts/servers/secretskit.py client-more``) carries, in cleartext, what ``secrets.pcap``
does not: ``access_token`` / ``refresh_token`` / ``client_secret`` / ``id_token`` /
``password`` query parameters, ``Host`` userinfo, ``*-key`` / ``*-secret`` / ``*-token``
request and response headers, a ``Referer`` with userinfo, a ``302`` ``Location`` with
``code=``, ``Set-Cookie``, JSON fields (``apikey``, ``access_token``, ``refresh_token``, a
nested ``client_secret`` and ``password``), a presigned URL and a plain-text
``Authorization:`` line in SSE data, a WebSocket ``?access_token=``, a key in
``Sec-WebSocket-Protocol``, a preview cut inside a token, and a Close reason holding one.
Its facts list every value under ``truth.secrets``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pcaptools
from pcaptools.capture import Capture
from pcaptools.cli import main as cli_main
from pcaptools.redaction import (
    SECRET_KINDS,
    is_secret_header,
    redact_authority,
    redact_column,
    redact_frame,
    redact_headers,
    redact_text,
    redact_url,
)
from tests.conftest import CAPTURES
from tests.oracle import tshark_fields

CAP = CAPTURES / "secrets-more.pcap"
ROOT = Path(__file__).resolve().parents[2]
OPTS = ("-d", "tcp.port==8081,http2")
#: the WebSocket preview (256 characters) ends 12 characters into this one
CUT = "ws_long_access_token"


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
        pytest.skip("captures/secrets-more.pcap is absent")
    facts = json.loads(CAP.with_name(CAP.name + ".facts.json").read_text(encoding="utf-8"))
    s = dict(facts["truth"]["secrets"])
    return {"secrets": s, "cap": pcaptools.load(CAP),
            "raw": pcaptools.load(CAP, show_secrets=True),
            # what must never show: every value, and the part of the cut one in the preview
            "never": {**s, f"{CUT}[:12]": s[CUT][:12]}}


def _r(value: str) -> str:
    return f"<redacted: {len(value)} bytes>"


def _everything(cap: Capture) -> str:
    return "\n".join([*(df.to_csv() for df in cap.tables.values()), repr(cap),
                      cap._repr_html_(), repr(cap.summary)])


def _absent(text: str, never: dict[str, str], where: str) -> None:
    leaked = [k for k, v in never.items() if v in text]
    assert not leaked, f"{leaked} in {where}"


# --------------------------------------------------------------------------- the capture


def test_no_value_in_any_table_and_all_with_show_secrets(rec: dict[str, Any]) -> None:
    s = rec["secrets"]
    assert len(s) == 42
    _absent(_everything(rec["cap"]), rec["never"], "the tables")
    raw = _everything(rec["raw"])
    # show_secrets keeps every value: the one ws_messages' preview cuts is whole in the
    # realtime_events row of its JSON message (#17)
    assert [k for k, v in s.items() if v not in raw] == []
    assert s[CUT][:12] in raw and "redacted" not in raw
    assert len(rec["cap"].warnings) == 0


def test_http1_columns(rec: dict[str, Any]) -> None:
    s, cap = rec["secrets"], rec["cap"]
    req = cap.http_requests.set_index("request_frame")
    assert req.loc[6, "host"] == f"carol:{_r(s['host_password'])}@192.0.2.20:8080"
    assert req.loc[6, "path"] == (
        f"/oauth/authorize?access_token={_r(s['q_access_token'])}&refresh_token="
        f"{_r(s['q_refresh_token'])}&client_secret={_r(s['q_client_secret'])}&id_token="
        f"{_r(s['q_id_token'])}&password={_r(s['q_password'])}&client_id=app-1")
    h = dict(req.loc[6, "request_headers"])
    assert h["host"] == req.loc[6, "host"]
    assert (h["x-client-key"], h["x-webhook-secret"], h["x-csrf-token"]) == (
        _r(s["hdr_client_key"]), _r(s["hdr_webhook_secret"]), _r(s["hdr_csrf_token"]))
    assert h["idempotency-key"] == _kit().IDEMPOTENCY_KEY  # a request id, not a secret
    assert h["referer"] == (f"http://erin:{_r(s['referer_password'])}@192.0.2.20:8080/login"
                            f"?password={_r(s['referer_query_password'])}")
    r = dict(req.loc[6, "response_headers"])
    assert req.loc[6, "status"] == 302
    assert r["location"] == (f"http://192.0.2.20:8080/done?code={_r(s['location_code'])}"
                             f"&id_token={_r(s['location_id_token'])}&state=st-2")
    assert r["set-cookie"] == _r(f"session={s['set_cookie_session']}; HttpOnly")
    assert r["x-session-token"] == _r(s["resp_session_token"])
    assert req.loc[16, "path"] == f"http://dave:{_r(s['url_password2'])}@192.0.2.20:8080/v2/events"
    assert req.loc[54, "path"] == f"/ws2?access_token={_r(s['ws_query_access_token'])}"
    up = dict(req.loc[54, "request_headers"])
    assert up["sec-websocket-protocol"] == (
        f"realtime, {_r('openai-insecure-api-key.' + s['ws_subprotocol_key'])}")
    assert len(up["sec-websocket-key"]) == 24 and "redacted" not in up["sec-websocket-key"]


def test_http2_columns(rec: dict[str, Any]) -> None:
    s, cap = rec["secrets"], rec["cap"]
    (st,) = cap.http2_streams.itertuples()
    assert st.authority == f"frank:{_r(s['h2_authority_password2'])}@192.0.2.20:8081"
    assert st.path == (
        f"/v2/stream?access_token={_r(s['h2_q_access_token'])}&refresh_token="
        f"{_r(s['h2_q_refresh_token'])}&client_secret={_r(s['h2_q_client_secret'])}&id_token="
        f"{_r(s['h2_q_id_token'])}&password={_r(s['h2_q_password'])}&client_id=app-1")
    q, r = dict(st.request_headers), dict(st.response_headers)
    assert (q[":authority"], q[":path"]) == (st.authority, st.path)
    assert (q["x-client-key"], q["x-webhook-secret"]) == (
        _r(s["h2_client_key"]), _r(s["h2_webhook_secret"]))
    assert r["x-session-token"] == _r(s["h2_resp_session_token"])
    fr = cap.http2_frames.dropna(subset=["path"])
    assert fr["path"].tolist() == [st.path]
    assert [dict(h) for h in cap.http2_frames["headers"].dropna()] == [q, r]


def test_sse_data_is_the_servers_events_redacted(rec: dict[str, Any]) -> None:
    kit = _kit()
    s, cap = rec["secrets"], rec["cap"]
    sent = [e if isinstance(e, str) else json.dumps(e, separators=(",", ":"))
            for e in [*kit.sse_more_events(s), *kit.h2_more_events(s)]]
    assert rec["raw"].sse_events["data"].tolist() == sent
    got = cap.sse_events["data"].tolist()
    assert got == [redact_text(t) for t in sent]
    d = [json.loads(t) for t in got[:5]]
    assert d[0] == {"type": "session", "apikey": _r(s["sse_apikey"]), "user": "carol"}
    assert d[1] == {"type": "oauth", "access_token": _r(s["sse_access_token"]),
                    "refresh_token": _r(s["sse_refresh_token"]), "expires_in": 3600}
    assert d[2]["client_secret"]["value"] == _r(s["sse_client_secret"])
    assert d[3]["items"] == [{"name": "a", "password": _r(s["sse_nested_password"])}]
    assert d[3]["authorization"] == _r(s["sse_authorization2"])
    assert d[4]["url"] == (f"https://blob.example/img.png?se=2026-12-02&sig="
                           f"{_r(s['sse_url_sig'])}&sp=r")  # a presigned URL in a JSON string
    assert got[5] == f"Authorization: {_r('Bearer ' + s['sse_text_bearer'])}"  # plain text
    assert json.loads(got[6])["refresh_token"] == _r(s["h2_sse_refresh_token"])
    assert json.loads(got[7])["user"]["password"] == _r(s["h2_sse_password"])
    assert cap.sse_events["frame"].tolist() == rec["raw"].sse_events["frame"].tolist()


def test_websocket_columns(rec: dict[str, Any]) -> None:
    s, cap = rec["secrets"], rec["cap"]
    (c,) = cap.ws_connections.itertuples()
    assert c.path == f"/ws2?access_token={_r(s['ws_query_access_token'])}"
    assert c.protocol == "realtime"
    assert c.offered_protocols == (
        f"realtime, {_r('openai-insecure-api-key.' + s['ws_subprotocol_key'])}")
    reason = json.dumps({"error": "expired", "token": _r(s["ws_close_token"])},
                        separators=(",", ":"))
    assert (c.server_close_code, c.server_close_reason) == (4001, reason)
    assert cap.ws_frames["close_reason"].dropna().tolist() == [reason, reason]
    first, second = cap.ws_messages["preview"].tolist()
    assert json.loads(first) == {"type": "session.update", "session": {
        "apikey": _r(s["ws_apikey"]), "client_secret": {"value": _r(s["ws_client_secret2"])}}}
    # the preview ends 12 characters into the token: those 12 are hidden, not shown
    raw_second = rec["raw"].ws_messages["preview"].tolist()[1]
    assert len(raw_second) == 256 and raw_second.endswith(s[CUT][:12])
    assert second == raw_second[:-12] + "<redacted: 12 bytes>"
    assert cap.ws_messages["preview_truncated"].tolist() == [False, True]


def test_against_tshark(rec: dict[str, Any], tshark: str) -> None:
    """tshark 4.0 shows every value in clear; pcaptools' columns are tshark's values with
    exactly the credentials replaced (one tshark run)."""
    cap = rec["cap"]
    fields = ("frame.number", "http.request.uri", "http.host", "http.referer", "http.location",
              "http2.headers.authority", "http2.headers.path", "websocket.payload.text",
              "websocket.payload.close.reason")
    rows = [dict(zip(fields, r, strict=True)) for r in tshark_fields(
        CAP, fields, OPTS, "http.request || http.location || http2.headers.path || "
                           "websocket.payload.text || websocket.payload.close.reason")]
    req = cap.http_requests.set_index("request_frame")
    uris = [r for r in rows if r["http.request.uri"]]
    assert {int(r["frame.number"]): (redact_url(r["http.request.uri"]),
                                     redact_authority(r["http.host"])) for r in uris} == {
        int(f): (req.loc[f, "path"], req.loc[f, "host"]) for f in req.index}
    (ref,) = [r["http.referer"] for r in rows if r["http.referer"]]
    assert dict(req.loc[6, "request_headers"])["referer"] == redact_url(ref)
    (loc,) = [r["http.location"] for r in rows if r["http.location"]]
    assert dict(req.loc[6, "response_headers"])["location"] == redact_url(loc)
    ((auth, path),) = [(r["http2.headers.authority"], r["http2.headers.path"]) for r in rows
                       if r["http2.headers.path"]]
    (st,) = cap.http2_streams.itertuples()
    assert (st.authority, st.path) == (redact_authority(auth), redact_url(path))
    texts = [(int(r["frame.number"]), r["websocket.payload.text"]) for r in rows
             if r["websocket.payload.text"]]
    assert cap.ws_messages["frame"].tolist() == [f for f, _ in texts]
    assert rec["raw"].ws_messages["preview"].tolist() == [t[:256] for _, t in texts]
    reasons = [(int(r["frame.number"]), r["websocket.payload.close.reason"]) for r in rows
               if r["websocket.payload.close.reason"]]
    fr = cap.ws_frames.dropna(subset=["close_reason"])
    assert fr["frame"].tolist() == [f for f, _ in reasons]
    assert fr["close_reason"].tolist() == [redact_text(t) for _, t in reasons]


def test_every_output(rec: dict[str, Any], tmp_path: Path) -> None:
    """The HTML report and --json (CLI), CSV and Parquet exports, the streaming export
    (load(out=...), one row per chunk): none holds any value. (Parallel loads and
    write_report: test_robustness_secrets_capture.py, on secrets.pcap.)"""
    import pyarrow.parquet as pq

    never, cap = rec["never"], rec["cap"]
    out, js = tmp_path / "r.html", tmp_path / "r.json"
    assert cli_main([str(CAP), "-o", str(out), "--json", str(js), "-q"]) == 0
    page = out.read_text(encoding="utf-8")
    _absent(page, never, "the CLI report")
    assert "&lt;redacted:" in page
    _absent(js.read_text(encoding="utf-8"), never, "--json")
    for p in cap.to_csv(tmp_path / "csv").values():
        _absent(Path(p).read_text(encoding="utf-8"), never, str(p))
    cap.to_parquet(tmp_path / "pq")
    streamed = pcaptools.load(CAP, out=tmp_path / "stream", chunk_rows=1)
    for d in (tmp_path / "pq", tmp_path / "stream"):
        files = sorted(d.glob("*.parquet"))
        assert {f.stem for f in files} >= {"sse_events", "ws_messages", "http2_frames",
                                           "http_requests", "ws_frames", "warnings"}
        for f in files:
            _absent(pq.read_table(f).to_pandas().to_csv(), never, f"{d.name}/{f.name}")
    for t in ("sse_events", "ws_messages", "ws_frames", "http2_frames", "http_requests"):
        assert len(streamed.read(t)) == len(cap.tables[t]), t
    assert streamed.read("sse_events")["data"].tolist() == cap.sse_events["data"].tolist()
    assert streamed.read("ws_messages")["preview"].tolist() == cap.ws_messages["preview"].tolist()
    assert streamed.read("ws_frames")["close_reason"].dropna().tolist() == (
        cap.ws_frames["close_reason"].dropna().tolist())


# --------------------------------------------------------------------------- the functions


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Authorization: Bearer abc", "Authorization: <redacted: 10 bytes>"),
        ("x\nX-Api-Key:  k1 \nHost: h", "x\nX-Api-Key:  <redacted: 2 bytes> \nHost: h"),
        ("see https://h/p?a=1&sig=s3cr&b=2", "see https://h/p?a=1&sig=<redacted: 4 bytes>&b=2"),
        ('{"u":"https://h/?x=1\\u0026token=t0k"}',
         '{"u":"https://h/?x=1\\u0026token=<redacted: 3 bytes>"}'),
        ("ftp://bob:pw9@h/x and more", "ftp://bob:<redacted: 3 bytes>@h/x and more"),
        ('{"token":"t","n":1}', '{"token":"<redacted: 1 bytes>","n":1}'),
        # ordinary words and parameters are kept
        ("error code=5; token budget exceeded", "error code=5; token budget exceeded"),
        ("/x?encode=1&barcode=2", "/x?encode=1&barcode=2"),
        ("Content-Type: text/plain", "Content-Type: text/plain"),
        ("Sec-WebSocket-Key: dGhlIHNhbXBsZQ==", "Sec-WebSocket-Key: dGhlIHNhbXBsZQ=="),
        ("mail bob@example.com", "mail bob@example.com"),
        ("", ""),
    ],
)
def test_redact_text(text: str, want: str) -> None:
    got = redact_text(text)
    assert got == want
    assert redact_text(got) == got  # idempotent


def test_redact_text_never_raises() -> None:
    for t in ["?", "&=", "?a=", "a://:@", ":" * 50, "x:\n" * 50, "\\u0026token=", "@@@"]:
        assert isinstance(redact_text(t), str)
    assert redact_text(None) is None


@pytest.mark.parametrize(
    ("name", "secret"),
    [("X-Client-Key", True), ("X-Custom-Key", True), ("Subscription_Key", True),
     ("X-Webhook-Secret", True), ("Private-Token", True), ("X-Session-Token", True),
     ("Sec-WebSocket-Key", False), ("Idempotency-Key", False), ("X-Idempotency-Key", False),
     ("Keep-Alive", False), ("X-Keyword", False)],
)
def test_header_rule(name: str, secret: bool) -> None:
    assert is_secret_header(name) is secret
    got = redact_headers(((name, "v1"),))
    assert got == ((name, "<redacted: 2 bytes>" if secret else "v1"),)


def test_redact_column_keeps_dtype_index_and_missing_values() -> None:
    s = pd.Series(pd.array(['{"token":"ab"}', None, "plain", "/p?key=k"], dtype="string"),
                  index=[5, 6, 7, 8], name="data")
    got = redact_column(s, "text")
    assert got is not None
    assert got.dtype == s.dtype and list(got.index) == [5, 6, 7, 8] and got.name == "data"
    assert got.tolist()[0] == '{"token":"<redacted: 2 bytes>"}'
    assert got.isna().tolist() == [False, True, False, False]
    assert got.tolist()[2:] == ["plain", "/p?key=<redacted: 1 bytes>"]
    assert redact_column(s.iloc[[1, 2]], "text") is None  # nothing to hide: None
    h = pd.Series([(("cookie", "c1"),), None, (("accept", "x"),)], dtype=object)
    got = redact_column(h, "headers")
    assert got is not None and got.dtype == object
    assert got.tolist() == [(("cookie", "<redacted: 2 bytes>"),), None, (("accept", "x"),)]
    df = pd.DataFrame({"path": s, "n": [1, 2, 3, 4]})
    out = redact_frame(df, [("path", "url"), ("absent", "url")])
    assert out is not df and df["path"].iloc[3] == "/p?key=k"  # the input is not changed
    assert out["path"].iloc[3] == "/p?key=<redacted: 1 bytes>"
    assert redact_frame(df.iloc[:3], [("path", "url")]) is not None


#: column names that hold what a client or server wrote (URLs, authorities, headers,
#: bodies, free text): a table that has one must say how it is redacted (Column.secret)
_WIRE_TEXT = frozenset({"path", "url", "target", "host", "authority", "origin", "referer",
                        "location", "headers", "request_headers", "response_headers", "data",
                        "preview", "body", "detail", "offered_protocols", "protocol",
                        "close_reason", "client_close_reason", "server_close_reason",
                        "goaway_debug", "query"})
#: named like one, but written by pcaptools or numeric
_NOT_WIRE = {("coverage", "detail"), ("coverage", "protocol")}


def test_every_wire_text_column_is_marked() -> None:
    """A new table with a column named like a URL, header list, body or free text must mark
    it (or be listed here with the reason it cannot carry a credential)."""
    missing = [f"{t}.{c.name}" for t, sch in pcaptools.TABLES.items() for c in sch.columns
               if c.name in _WIRE_TEXT and c.secret is None and (t, c.name) not in _NOT_WIRE
               and c.dtype in ("string", "object")]
    assert missing == []
    kinds = {c.secret for sch in pcaptools.TABLES.values() for c in sch.columns}
    assert kinds - {None} <= set(SECRET_KINDS)


_PIECES = st.sampled_from(["?", "&", ";", "=", ":", "@", "://", "\n", " ", '"', "\\u0026",
                           "token", "code", "sig", "X-Api-Key", "Authorization", "http",
                           "user", "pw", '{"password":', "}", "abc", "<redacted: 3 bytes>"])


@given(st.lists(_PIECES, max_size=24).map("".join) | st.text(max_size=60))
def test_redact_text_is_idempotent_and_keeps_plain_text(text: str) -> None:
    got = redact_text(text)
    assert isinstance(got, str)
    assert redact_text(got) == got
    if "redacted" not in got:
        assert got == text  # nothing hidden: byte for byte the same


def test_redact_text_on_long_hostile_text() -> None:
    """Inputs that make a backtracking pattern quadratic (long runs without the separator
    it waits for) are handled, with the same results as short ones."""
    letters = "a" * 100_000
    assert redact_text(letters + "@") == letters + "@"
    assert redact_text(letters + "://u:pw@h") == letters + "://u:<redacted: 2 bytes>@h"
    spaced = "X-Api-Key: k" + (" " * 1000 + "y") * 100 + "  "
    assert redact_text(spaced) == f"X-Api-Key: {redacted_len(len(spaced) - 13)}  "
    many = "?" + "b" * 50_000 + "=1" + "&token=t" * 1000
    got = redact_text(many)
    assert got is not None and got.count("&token=<redacted: 1 bytes>") == 1000


def redacted_len(n: int) -> str:
    return f"<redacted: {n} bytes>"


@given(st.lists(st.one_of(st.booleans(), st.none()), max_size=70), st.integers(0, 20))
def test_true_positions_match_arrow(values: list[bool | None], offset: int) -> None:
    """The prefilter's hit positions, read from the bits of a boolean Arrow array (also a
    slice, which starts inside a byte), are those ``pyarrow.compute.indices_nonzero`` gives."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pcaptools.redaction import _true_at

    for flags in (pa.array(values, type=pa.bool_()).fill_null(False),
                  pc.is_valid(pa.array(values, type=pa.bool_()))):
        part = flags.slice(min(offset, len(flags)))
        assert _true_at(part).tolist() == pc.indices_nonzero(part).to_numpy().tolist()
