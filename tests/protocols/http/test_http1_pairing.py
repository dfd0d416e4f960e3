"""HTTP/1.x request/response pairing across capture gaps (issue 13 part 1).

Truth: ``captures/http1-keepalive.pcap`` (40 GETs on one keep-alive connection to nginx, two
HTTP/0.9 requests; nginx's access log is in its facts) and ``http1-keepalive-drops.pcap``, the
same file with 7 chosen frames removed (the facts name them, numbered as in the full
capture). Pairs are compared with tshark 4.0's ``http.request_in`` (two-pass), with the full
capture (a pair on the lossy copy must be a pair of the full one) and with nginx's log.
Hand-built conversations cover pipelining and the cases the recording does not.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pcaptools
from pcaptools.analyses.latency import stream_latency
from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import StreamChunk
from pcaptools.protocols.detect import detect
from pcaptools.protocols.http1 import Http1Observer, HttpExchange
from pcaptools.tables.http_tables import HTTP_REQUESTS
from tests.conftest import CAPTURES
from tests.oracle import tshark_fields
from tests.protocols.http.helpers import C2S, S2C

FULL = CAPTURES / "http1-keepalive.pcap"
DROPS = CAPTURES / "http1-keepalive-drops.pcap"


@functools.lru_cache(maxsize=4)
def _load(path: Path) -> pcaptools.Capture:
    return pcaptools.load(path)


def _facts(path: Path) -> dict[str, Any]:
    return json.loads(Path(f"{path}.facts.json").read_text())  # type: ignore[no-any-return]


def _pairs(df: pd.DataFrame) -> set[tuple[int, int, int]]:
    p = df[df["paired"]]
    return {
        (int(s), int(q), int(r))
        for s, q, r in zip(p["tcp_stream"], p["request_frame"], p["response_frame"], strict=True)
    }


def _tshark_pairs(
    path: Path,
) -> tuple[set[tuple[int, int, int]], dict[tuple[int, int, int], float]]:
    rows = tshark_fields(
        path,
        ("tcp.stream", "http.request_in", "frame.number", "http.time"),
        ("-2",),
        "http.response && http.request_in",
    )
    pairs = {(int(s), int(q), int(r)) for s, q, r, _ in rows}
    return pairs, {(int(s), int(q), int(r)): float(t) for s, q, r, t in rows}


def _removed() -> list[dict[str, Any]]:
    return _facts(DROPS)["derived"]["dropped_frames"]  # type: ignore[no-any-return]


def _to_full(frame: int) -> int:
    """A frame number of the -drops capture -> the same packet's number in the full one."""
    out = frame
    for f in sorted(d["frame"] for d in _removed()):
        if f <= out:
            out += 1
    return out


# --------------------------------------------------------------------------- recorded


def test_full_capture_pairs_every_request_with_its_response_as_nginx_logged_it() -> None:
    cap = _load(FULL)
    df = cap.http_requests
    HTTP_REQUESTS.check(df)
    ka = df[df["tcp_stream"] == 0].sort_values("request_index")
    log = _facts(FULL)["connections"][0]["server_log"]
    assert len(ka) == len(log) == 40
    assert ka["paired"].all() and ka["unpaired_reason"].isna().all()
    assert list(ka["position"]) == [r["conn_req"] for r in log] == list(range(1, 41))
    assert [f"GET {p} HTTP/1.1" for p in ka["path"]] == [r["request"] for r in log]
    assert list(ka["status"]) == [r["status"] for r in log]
    assert list(ka["response_body_bytes"]) == [r["body_bytes_sent"] for r in log]


def test_full_capture_pairs_equal_tshark(tshark: str) -> None:
    df = _load(FULL).http_requests
    want, _ = _tshark_pairs(FULL)
    assert len(want) == 40
    # tshark 4.0 pairs no HTTP/0.9 exchange (the two rows of streams 1 and 2)
    assert {p for p in _pairs(df) if p[0] == 0} == want


def test_drops_unpaired_rows_say_why() -> None:
    df = _load(DROPS).http_requests
    HTTP_REQUESTS.check(df)
    ka = df[df["tcp_stream"] == 0].sort_values("request_index")
    removed = {d["transfer"]: d["what"] for d in _removed()}
    assert removed == {
        1: "response",
        10: "response-head",
        15: "request",
        20: "response",
        21: "response",
        25: "response-body",
        40: "response",
    }
    unpaired = ka[~ka["paired"]]
    # transfers whose response (or its status line) was removed: the request stays, unpaired
    got = [
        (p, str(r), e)
        for p, r, e in zip(
            unpaired["path"].fillna("-"),
            unpaired["unpaired_reason"],
            unpaired["end_reason"],
            strict=True,
        )
    ]
    paths = _facts(DROPS)["truth"]["transfers"]
    assert got == [
        (paths[0], "response_not_captured", "desynced"),
        (paths[9], "response_not_captured", "desynced"),
        ("-", "request_not_captured", "complete"),  # the 404 answering the removed request 15
        (paths[19], "response_not_captured", "desynced"),
        (paths[20], "response_not_captured", "desynced"),
        (paths[39], "response_not_captured", "connection_closed"),
    ]
    assert unpaired["ttfb_ms"].isna().all() and unpaired["duration_ms"].isna().all()
    assert int(unpaired["status"].iloc[2]) == 404
    # the removed request's position is unknown from there on; every other request is paired
    assert int(ka["paired"].sum()) == 34
    # the body with a hole of known length stays in step: transfer 25 is whole
    row25 = ka[ka["request_frame"] == _frame_of_request(ka, 25)]
    assert bool(row25["paired"].iloc[0]) and int(row25["response_body_bytes"].iloc[0]) == 65536


def _frame_of_request(ka: pd.DataFrame, transfer: int) -> int:
    """request_frame of the ``transfer``-th request sent (request 15 was removed)."""
    frames = sorted(int(f) for f in ka["request_frame"].dropna())
    return frames[transfer - 1 - (1 if transfer > 15 else 0)]


def test_drops_pairs_are_pairs_of_the_full_capture() -> None:
    full = _pairs(_load(FULL).http_requests)
    drops = _pairs(_load(DROPS).http_requests)
    mapped = {(s, _to_full(q), _to_full(r)) for s, q, r in drops}
    assert mapped <= full
    assert len(full) - len(mapped) == 6  # 5 responses and 1 request not captured


def test_drops_pairs_equal_tshark_request_in(tshark: str) -> None:
    df = _load(DROPS).http_requests
    want, http_time = _tshark_pairs(DROPS)
    got = {p for p in _pairs(df) if p[0] == 0}
    assert len(want) == 33
    assert want <= got
    # the one pair tshark lacks: transfer 25, whose body has a hole of known length (tshark
    # cannot reassemble the response, we keep in step and count the lost bytes)
    (extra,) = got - want
    body_hole = next(d for d in _removed() if d["what"] == "response-body")
    assert extra[1] < body_hole["frame"] - 1 < extra[2]
    # http.time (response frame minus request frame) to the microsecond
    p = df[df["paired"] & (df["tcp_stream"] == 0)]
    for q, r, a, b in zip(
        p["request_frame"],
        p["response_frame"],
        p["request_end_ts"],
        p["response_end_ts"],
        strict=True,
    ):
        key = (0, int(q), int(r))
        if key in http_time:
            ours_s = (b - a).total_seconds()  # capture timestamps, compared with tshark's http.time
            assert abs(ours_s - http_time[key]) < 1e-6
    # tshark's unanswered requests and request-less responses are ours too
    rows = tshark_fields(
        DROPS,
        ("frame.number",),
        ("-2",),
        "tcp.stream == 0 && http.request && !http.response_in",
    )
    ts_unanswered = {int(r[0]) for r in rows} - {extra[1]}
    un = df[(df["tcp_stream"] == 0) & ~df["paired"]]
    assert {int(f) for f in un["request_frame"].dropna()} == ts_unanswered
    rows = tshark_fields(
        DROPS, ("frame.number",), ("-2",), "tcp.stream == 0 && http.response && !http.request_in"
    )
    assert {int(f) for f in un["response_frame"].dropna()} == {int(r[0]) for r in rows}


def test_drops_no_ttfb_from_another_requests_response() -> None:
    cap = _load(DROPS)
    df = cap.http_requests
    full = _load(FULL).http_requests.set_index(["tcp_stream", "request_frame"])
    p = df[df["paired"]]
    for s, q, ttfb in zip(p["tcp_stream"], p["request_frame"], p["ttfb_ms"], strict=True):
        assert ttfb == pytest.approx(full.loc[(s, _to_full(int(q))), "ttfb_ms"], abs=1e-9)
    lat = stream_latency(cap)
    h1 = lat[lat["stream_id"].isna()].set_index(["tcp_stream", "request_index"])
    t = df.set_index(["tcp_stream", "request_index"])
    assert h1.loc[t.index[~t["paired"]], "ttfb_ms"].isna().all()
    both = t.index[t["paired"]]
    assert (h1.loc[both, "ttfb_ms"] - t.loc[both, "ttfb_ms"]).abs().max() < 1e-9


def test_http09_simple_requests_are_requests() -> None:
    df = _load(FULL).http_requests
    simple = df[df["tcp_stream"] > 0].sort_values("tcp_stream")
    truth = _facts(FULL)["truth"]["simple_requests"]
    assert list(simple["path"]) == ["/index.html", "/data/small.json"]
    assert list(simple["http_version"].astype(str)) == ["0.9", "0.9"]
    assert simple["status"].isna().all() and simple["paired"].all()
    assert list(simple["response_body_bytes"]) == [t["bytes_received"] for t in truth]
    assert list(simple["end_reason"].astype(str)) == ["complete", "complete"]


def test_http09_request_frames_equal_tshark(tshark: str) -> None:
    # tshark 4.0 counts `GET /path\r\n\r\n` as a request (it waits for the blank line, so a
    # lone `GET /path\r\n` stays "a segment of a reassembled PDU")
    rows = tshark_fields(FULL, ("frame.number",), (), "tcp.stream == 2 && http.request")
    df = _load(FULL).http_requests
    assert [int(f) for f in df[df["tcp_stream"] == 2]["request_frame"]] == [int(rows[0][0])]


# --------------------------------------------------------------------------- hand-built


def _obs() -> tuple[Http1Observer, Diagnostics]:
    d = Diagnostics()
    return Http1Observer(tcp_stream=0, diag=d), d


class _Feeder:
    """Feed both directions with running offsets and frame numbers; ``lose`` leaves bytes out.
    As the TCP tracker does, a hole is reported when the next bytes of its direction arrive
    (by the observer itself) or, first, when a packet of the other direction acknowledges it
    (after that packet's own bytes)."""

    def __init__(self, obs: Http1Observer) -> None:
        self.obs = obs
        self.off = [0, 0]
        self.frame = 0
        self.events: list[object] = []
        self.pending: list[tuple[int, int] | None] = [None, None]

    def send(self, d: Any, data: bytes, *, lose: bool = False) -> int:
        self.frame += 1
        if lose:
            p = self.pending[d]
            self.pending[d] = (p[0], p[1] + len(data)) if p else (self.off[d], len(data))
            self.off[d] += len(data)
            return self.frame
        self.pending[d] = None  # the observer sees the jump in offsets
        ts = self.frame * 1000
        self.events += self.obs.feed(
            StreamChunk(direction=d, data=data, ts_ns=ts, frame=self.frame, offset=self.off[d])
        )
        self.off[d] += len(data)
        peer = 1 - d
        hole = self.pending[peer]
        if hole is not None:
            self.pending[peer] = None
            self.events += self.obs.gap(C2S if peer == 0 else S2C, hole[0], hole[1], ts, self.frame)
        return self.frame

    def end(self) -> list[HttpExchange]:
        self.frame += 1
        self.events += self.obs.close(C2S, self.frame * 1000, self.frame, at_eof=True)
        return sorted(
            (e for e in self.events if isinstance(e, HttpExchange)), key=lambda e: e.request_index
        )


def _req(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: h\r\n\r\n".encode()


def _resp(body: bytes, status: int = 200) -> bytes:
    return f"HTTP/1.1 {status} OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def _view(ex: list[HttpExchange]) -> list[tuple[object, ...]]:
    return [
        (
            e.request.target if e.request else None,
            e.response.status if e.response else None,
            e.paired,
            e.unpaired_reason,
        )
        for e in ex
    ]


def test_two_responses_lost_in_a_row_give_up_both_requests() -> None:
    f = _Feeder(_obs()[0])
    for i, lose in ((1, False), (2, True), (3, True), (4, False)):
        f.send(C2S, _req(f"/{i}"))
        f.send(S2C, _resp(b"x" * i, 210 + i), lose=lose)
    assert _view(f.end()) == [
        ("/1", 211, True, None),
        ("/2", None, False, "response_not_captured"),
        ("/3", None, False, "response_not_captured"),
        ("/4", 214, True, None),
    ]


def test_last_response_lost_and_no_response_are_told_apart() -> None:
    f = _Feeder(_obs()[0])
    f.send(C2S, _req("/a"))
    f.send(S2C, _resp(b"a"), lose=True)
    # the tracker reports the hole (as it does when the server's FIN comes after it)
    f.events += f.obs.gap(S2C, f.off[1], 10, 99_000, 99)
    assert _view(f.end()) == [("/a", None, False, "response_not_captured")]
    f = _Feeder(_obs()[0])
    f.send(C2S, _req("/b"))
    assert _view(f.end()) == [("/b", None, False, "no_response")]


def test_pipelined_then_gap_is_ambiguous_not_shifted() -> None:
    f = _Feeder(_obs()[0])
    # in step: two requests outstanding when the first response starts (pipelining seen)
    f.send(C2S, _req("/1") + _req("/2"))
    f.send(S2C, _resp(b"1"))
    f.send(S2C, _resp(b"2"))
    # then three pipelined requests and the first response lost
    f.send(C2S, _req("/3") + _req("/4") + _req("/5"))
    f.send(S2C, _resp(b"3", 233), lose=True)
    f.send(S2C, _resp(b"4", 234))
    f.send(S2C, _resp(b"5", 235))
    assert _view(f.end()) == [
        ("/1", 200, True, None),
        ("/2", 200, True, None),
        ("/3", None, False, "ambiguous"),
        ("/4", None, False, "ambiguous"),
        ("/5", None, False, "ambiguous"),
        (None, 234, False, "ambiguous"),
        (None, 235, False, "ambiguous"),
    ]


def test_keepalive_lost_request_leaves_its_response_unpaired() -> None:
    f = _Feeder(_obs()[0])
    f.send(C2S, _req("/1"))
    f.send(S2C, _resp(b"1", 201))
    f.send(C2S, _req("/2"), lose=True)
    f.send(S2C, _resp(b"2", 202))
    f.send(C2S, _req("/3"))
    f.send(S2C, _resp(b"3", 203))
    assert _view(f.end()) == [
        ("/1", 201, True, None),
        (None, 202, False, "request_not_captured"),
        ("/3", 203, True, None),
    ]


def test_http09_response_is_the_rest_of_the_connection() -> None:
    obs, diag = _obs()
    f = _Feeder(obs)
    f.send(C2S, b"GET /old\r\n")
    f.send(S2C, b"<html>")
    f.send(S2C, b"HTTP/1.1 is not a status line here</html>\n")
    f.frame += 1
    f.events += obs.close(S2C, f.frame * 1000, f.frame)
    (e,) = f.end()
    assert e.request is not None and e.response is not None
    assert (e.request.method, e.request.target, e.request.version) == ("GET", "/old", "0.9")
    assert (e.response.version, e.response.status, e.response.body_bytes) == ("0.9", 0, 48)
    assert (e.response.end_frame, e.end_reason, e.paired) == (4, "complete", True)
    assert diag.rows == []
    # a server that answers a 0.9 request with a status line is parsed as HTTP/1.x
    f = _Feeder(_obs()[0])
    f.send(C2S, b"GET /\r\n")
    f.send(S2C, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    (e,) = f.end()
    assert e.response is not None and e.response.status == 400 and e.paired
    assert detect(b"GET /\r\n") == "http1"
    assert detect(b"GET /") == "need_more"


# --------------------------------------------------------------------------- report, --json


def test_report_and_json_say_what_was_not_paired(tmp_path: Path) -> None:
    from pcaptools.analyses.summary import headline, verdicts
    from pcaptools.cli import main

    cap = _load(DROPS)
    h = headline(cap)
    assert h["http_unpaired"] == {"response_not_captured": 5, "request_not_captured": 1}
    assert (
        "6 HTTP/1.x requests and responses could not be paired (response not captured 5, "
        "request not captured 1): no time to first byte is given for them."
    ) in verdicts(cap, h)
    assert headline(_load(FULL))["http_unpaired"] == {}
    out, js = tmp_path / "r.html", tmp_path / "s.json"
    assert main([str(DROPS), "-o", str(out), "--json", str(js)]) == 0
    assert json.loads(js.read_text())["http_unpaired"] == h["http_unpaired"]
    html = out.read_text()
    assert "6 HTTP/1.x rows could not be paired (response_not_captured 5" in html


# --------------------------------------------------------------------------- property

_LOSS = st.sampled_from(["none", "none", "none", "request", "response", "status_line", "both"])


@given(losses=st.lists(_LOSS, min_size=1, max_size=25))
def test_keepalive_with_any_losses_never_pairs_wrongly(losses: list[str]) -> None:
    """One request at a time (keep-alive, no pipelining); whole messages, or a response's
    status line, left out at random: a pair is always a request and its own response, and
    every exchange whose messages were both captured is paired."""
    obs, _ = _obs()
    f = _Feeder(obs)
    for i, loss in enumerate(losses):
        f.send(C2S, _req(f"/{i}"), lose=loss in ("request", "both"))
        body = b"b" * (i + 1)
        resp = f"HTTP/1.1 200 R/{i}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
        if loss == "status_line":
            f.send(S2C, resp[:12], lose=True)
            f.send(S2C, resp[12:])
        else:
            f.send(S2C, resp, lose=loss in ("response", "both"))
    # the server's FIN comes after everything it sent (a hole at the end is reported)
    f.events += obs.gap(S2C, f.off[1], 1, (f.frame + 1) * 1000, f.frame + 1)
    ex = f.end()
    for e in ex:
        if e.paired:
            assert e.request is not None and e.response is not None
            assert e.response.reason == f"R{e.request.target}"
        else:
            assert e.unpaired_reason in ("response_not_captured", "request_not_captured")
    paired = sorted(int(e.request.target[1:]) for e in ex if e.paired and e.request)
    assert paired == [i for i, loss in enumerate(losses) if loss == "none"]


def _pcap_without(path: Path, frames: set[int]) -> bytes:
    """A classic pcap file minus the records numbered ``frames`` (1-based)."""
    raw = path.read_bytes()
    bo = "<" if raw[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, pos, n = [raw[:24]], 24, 0
    while pos + 16 <= len(raw):
        incl = int.from_bytes(raw[pos + 8 : pos + 12], "little" if bo == "<" else "big")
        n += 1
        if n not in frames:
            out.append(raw[pos : pos + 16 + incl])
        pos += 16 + incl
    return b"".join(out)


def test_lost_response_then_lost_request_is_not_paired_across(tmp_path: Path) -> None:
    """Response 5 and request 6 removed: response 6 arrives while request 5 is the only
    request seen outstanding. Its packet acknowledges the missing request 6, so it answers
    request 6 (tshark pairs it with request 5: wrong, as the full capture shows)."""
    full = _load(FULL).http_requests
    ka = full[full["tcp_stream"] == 0].sort_values("request_index")
    q5, r5, q6, r6 = (
        int(ka.iloc[i][c]) for i in (4, 5) for c in ("request_frame", "response_frame")
    )
    p = tmp_path / "lost-5-6.pcap"
    p.write_bytes(_pcap_without(FULL, {r5, q6}))
    df = pcaptools.load(p).http_requests
    d = df[df["tcp_stream"] == 0]
    d = d.assign(_at=d["request_frame"].fillna(d["response_frame"])).sort_values("_at")
    rows = [
        (None if pd.isna(q) else int(q), None if pd.isna(r) else int(r), bool(pd_), str(w))
        for q, r, pd_, w in zip(
            d["request_frame"], d["response_frame"], d["paired"], d["unpaired_reason"], strict=True
        )
    ]
    # frames after the removed ones move up by two. The 404 (frame r6 - 2 now) waits behind
    # the hole until the client's next packet acknowledges it: the reassembler delivers it
    # then, so its response_frame is that packet's (r6 - 1; tshark says r6 - 2)
    assert rows[4] == (q5, None, False, "response_not_captured")
    assert rows[5] == (None, r6 - 1, False, "request_not_captured")
    assert all(r[2] for i, r in enumerate(rows) if i not in (4, 5))
    assert len(rows) == 40
