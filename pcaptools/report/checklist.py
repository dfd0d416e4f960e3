"""The report's first section: one line per question, answered also when the answer is good
or when the capture holds nothing to answer it with.

Each :class:`Check` says how the answer looks (``status``), what it is (``text``, with the
numbers of the capture), which section backs it (``section``: the line links there) and,
where one request or connection stands out, names it with its Wireshark display filter
(``worst`` and ``filter``). :func:`checklist` builds them from a
:class:`~pcaptools.report.html.ReportContext`, so the analyses run once per report.

The questions, in page order (:data:`QUESTIONS`): what was analysed and what was not; did
any connection die (silently or not); time to first token; HTTP requests; the slowest request
and where its time went; heartbeats; realtime
voice (turn latency, audio underruns: only for a capture with realtime events); TLS; QUIC and
HTTP/3 (handshake time, 0-RTT: only for a capture with QUIC); loss; TCP handshake RTT; how the
connections ended; DNS; path MTU; overhead; warnings.
A question whose computation fails says so on its line (status ``error``) rather than
costing the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from ..analyses.coverage import DONE as COVERED
from ..analyses.summary import DECRYPT_REASONS, fmt_ms
from .context import handshake_phrase
from .quic_section import quic_check
from .slow_section import slow_analyses
from .voice_section import voice_check

if TYPE_CHECKING:
    from ..capture import Capture


class ReportContext(Protocol):
    """What the checklist needs of :class:`pcaptools.report.html.ReportContext` (the
    analyses, computed once per report, and the headline)."""

    cap: Capture
    head: dict[str, Any]
    _cache: dict[str, Any]

    def latency(self) -> pd.DataFrame: ...
    def disconnects(self) -> pd.DataFrame: ...
    def heartbeats(self) -> pd.DataFrame: ...
    def heartbeat_summary(self) -> pd.DataFrame: ...
    def overhead(self) -> pd.DataFrame: ...

__all__ = ["QUESTIONS", "STATUSES", "Check", "checklist"]

#: how a line's answer looks: ``ok`` (nothing wrong found), ``warn`` (look at it), ``bad``
#: (something failed), ``info`` (a fact, no judgement), ``absent`` (the capture holds
#: nothing to answer with), ``error`` (the answer could not be computed)
STATUSES: dict[str, tuple[str, str]] = {
    "ok": ("\u2713", "fine"),
    "warn": ("!", "look at this"),
    "bad": ("\u2717", "problem"),
    "info": ("\u00b7", "fact"),
    "absent": ("\u2013", "not in this capture"),
    "error": ("?", "could not be computed"),
}


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the checklist."""

    key: str
    """the question, e.g. ``"tls"`` (:data:`QUESTIONS`)"""
    label: str
    """its short name on the page, e.g. ``"TLS"``"""
    status: str
    """one of :data:`STATUSES`"""
    text: str
    """the answer, with the capture's numbers"""
    section: str
    """id of the section that backs it (without the page's id prefix)"""
    worst: str | None = None
    """the request or connection that stands out, e.g. ``"tcp.stream 1: peer vanished"``"""
    filter: str | None = None
    """Wireshark display filter of ``worst``"""


def _n(count: int, singular: str, plural: str | None = None) -> str:
    return f"{int(count):,} {singular if int(count) == 1 else (plural or singular + 's')}"


def _pct(part: float, whole: float) -> str:
    p = 100.0 * part / whole
    return f"{p:.0f}%" if p >= 10 else f"{p:.1f}%" if p >= 0.1 else f"{p:.2g}%"


def _duration(s: float) -> str:
    if s < 1:
        return f"{s * 1000:.3g} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _stats(st: Mapping[str, Any], what: str) -> str:
    """``"median 81.6 ms (p95 158 ms, max 165 ms, 5 requests)"`` of a headline stats dict."""
    k = int(st["count"])
    if k == 1:
        return f"{fmt_ms(st['median'])} (1 {what})"
    return (f"median {fmt_ms(st['median'])} (p95 {fmt_ms(st['p95'])}, max {fmt_ms(st['max'])}, "
            f"{k:,} {what}s)")


def _rid(r: Mapping[str, Any]) -> str:
    """``tcp.stream 2 stream 5`` / ``tcp.stream 0 #2``: a request as the tables name it."""
    sid = r.get("stream_id")
    one = f"stream {int(sid)}" if sid is not None and not pd.isna(sid) else \
        f"#{int(r['request_index'])}"
    q = r.get("quic_connection")
    if pd.isna(r["tcp_stream"]) and q is not None and not pd.isna(q):  # HTTP/3
        return f"QUIC connection {int(q)} {one}"
    return f"tcp.stream {int(r['tcp_stream'])} {one}"


def _request_text(r: Mapping[str, Any]) -> str:
    method = "" if pd.isna(r["method"]) else str(r["method"])
    path = "" if pd.isna(r["path"]) else str(r["path"])
    if len(path) > 60:
        path = path[:57] + "..."
    return f"{_rid(r)} {method} {path}".rstrip()


def _row(df: pd.DataFrame, i: int) -> dict[str, Any]:
    """Row ``i`` (by position) as a dict."""
    return {str(k): v for k, v in df.iloc[i].items()}


def _max_row(df: pd.DataFrame, col: str) -> dict[str, Any]:
    """The first row with the largest ``col`` (NaN left out; ``col`` has a value)."""
    return _row(df, int(np.nanargmax(df[col].to_numpy(dtype=np.float64))))


# -- the questions -----------------------------------------------------------------------------


def _coverage(ctx: ReportContext) -> Check:
    h = ctx.head
    frames = int(h["frames"])
    if not frames:
        return Check("coverage", "Capture", "absent", "The capture holds no frames.", "capture")
    text = f"{_n(frames, 'frame')} over {_duration(float(h['duration_s']))}"
    cov = h.get("coverage") or {}
    by = cov.get("by_status") or {}
    done = sum(int(v["frames"]) for k, v in by.items() if k in COVERED)
    if not by:
        return Check("coverage", "Capture", "info", text + "; no coverage table.", "capture")
    if done == frames:
        return Check("coverage", "Capture", "ok", text + ", every one analysed.", "coverage")
    share = cov.get("analysed_wire_share")
    bytes_ = f" ({100.0 * float(share):.1f}% of bytes)" if share is not None else ""
    return Check("coverage", "Capture", "info",
                 f"{text}; {done:,} analysed{bytes_}.", "coverage")


def _not_analysed(ctx: ReportContext) -> Check:
    """What the numbers cannot show: frames not analysed, TLS not decrypted, bytes the
    capture missed, HTTP/1.x rows that could not be paired."""
    h, cap = ctx.head, ctx.cap
    parts: list[str] = []
    worst = flt = None
    # coverage_sentences: the analysed share, then one sentence per part not analysed
    parts += [x.rstrip(".") for x in list((h.get("coverage") or {}).get("sentences") or [])[1:]]
    tls = h["tls_decrypt_status"]
    total = sum(int(v) for v in tls.values())
    for status, reason in DECRYPT_REASONS.items():
        k = int(tls.get(status, 0))
        if k:
            what = "partly decrypted" if status == "partial" else "not decrypted"
            parts.append(f"{k:,} of {_n(total, 'TLS session')} {what}: {reason}")
    t = cap.tls_handshakes
    if len(t):
        st = t["decrypt_status"].astype("string")
        bad = t[~st.isin(["decrypted", "not_encrypted"]).fillna(True).to_numpy(bool)]
        if len(bad):
            r = _row(bad.sort_values(["tcp_stream", "session"]), 0)
            worst = (f"tcp.stream {int(r['tcp_stream'])}: "
                     f"{str(r['decrypt_status']).replace('_', ' ')}")
            flt = f"tcp.stream eq {int(r['tcp_stream'])} && tls"
    if h["capture_drop_bytes"]:
        parts.append(f"{int(h['capture_drop_bytes']):,} bytes the receiver acknowledged were "
                     "never captured (dropped by the capture)")
    if h["unresolved_gaps"]:
        parts.append(f"{_n(int(h['unresolved_gaps']), 'range')} of sequence space never captured")
    unpaired = h.get("http_unpaired") or {}
    if unpaired:
        parts.append(f"{_n(sum(unpaired.values()), 'HTTP/1.x row')} whose request and response "
                     "could not be paired (no TTFB)")
    if not parts:
        return Check("not-analysed", "Not analysed", "ok",
                     "nothing: every frame was analysed, every TLS session decrypted (or there "
                     "was none), no bytes missed by the capture.", "coverage")
    return Check("not-analysed", "Not analysed", "warn", "; ".join(parts) + ".", "coverage",
                 worst, flt)


def _disconnects(ctx: ReportContext) -> Check:
    from ..analyses.disconnects import VERDICTS

    n = len(ctx.cap.connections)
    if not n:
        return Check("disconnects", "Disconnects", "absent", "no TCP connection.", "disconnects")
    d = ctx.disconnects()
    clean = int(d.attrs.get("clean_connections", 0))
    still = int(d.attrs.get("open_connections", 0))
    if not len(d):
        text = (f"no silent or abrupt disconnects: {clean:,} of {_n(n, 'connection')} ended "
                "cleanly")
        if still:
            text += f", {still:,} still open at the end of the capture without a finding"
        return Check("disconnects", "Disconnects", "ok", text + ".", "disconnects")
    counts = d["verdict"].astype(object).value_counts()
    detail = ", ".join(f"{int(counts[v]):,} {v.replace('_', ' ')}" for v in VERDICTS
                       if counts.get(v))
    first = d.iloc[0]
    worst = f"tcp.stream {int(first['tcp_stream'])}: {first['summary']}"
    return Check("disconnects", "Disconnects", "bad",
                 f"{len(d):,} of {_n(n, 'connection')} did not end cleanly: {detail}.",
                 "disconnects", worst, str(first["display_filter"]))


def _ttft(ctx: ReportContext) -> Check:
    lat = ctx.latency()
    streamed = lat[lat["token_events"] > 0]
    ft = ctx.head["ttft_ms"]
    if not len(streamed) or not ft["count"]:
        sse = len(ctx.cap.sse_events)
        text = (f"no streamed text: {_n(sse, 'server-sent event')}, none with delta text."
                if sse else "no streamed responses (server-sent events with text) seen.")
        return Check("ttft", "Time to first token", "absent", text, "streaming")
    text = _stats(ft, "streamed response")
    gap = ctx.head["token_gap_ms"]
    if gap["count"]:
        text += f"; median gap between tokens {fmt_ms(gap['median'])}"
    r = _max_row(streamed, "ttft_ms")
    worst = f"slowest: {_request_text(r)}, {fmt_ms(float(r['ttft_ms']))}"
    return Check("ttft", "Time to first token", "info", text + ".", "streaming", worst,
                 str(r["wireshark_filter"]))


def _http(ctx: ReportContext) -> Check:
    h = ctx.head
    n = int(h["http_requests"])
    if not n:
        undecrypted = sum(int(v) for k, v in h["tls_decrypt_status"].items()
                          if k not in ("decrypted", "not_encrypted"))
        if undecrypted:
            return Check("http", "HTTP", "warn",
                         f"no request could be read: {_n(undecrypted, 'TLS session')} not "
                         "decrypted.", "http")
        return Check("http", "HTTP", "absent", "no HTTP/1.x or HTTP/2 requests.", "http")
    by = h["http_by_protocol"]
    kinds = ", ".join(f"{c:,} {p}" for p, c in by.items())
    text = (f"{_n(n, 'request')} ({kinds}) on {_n(int(h['http_connections']), 'connection')}")
    if h["ttfb_ms"]["count"]:
        text += f"; time to first byte {_stats(h['ttfb_ms'], 'request')}"
    status = "ok"
    errors = {k: v for k, v in h["http_status"].items() if k.isdigit() and int(k) >= 400}
    if errors:
        status = "bad" if any(int(k) >= 500 for k in errors) else "warn"
        text += "; HTTP errors: " + ", ".join(f"{k} ({v:,})" for k, v in errors.items())
    if h["http_incomplete"]:
        status = "warn" if status == "ok" else status
        text += f"; {_n(int(h['http_incomplete']), 'response')} did not end normally"
    lat = ctx.latency()
    worst = flt = None
    incomplete = lat[~lat["complete"].fillna(False).astype(bool)]
    if len(incomplete):
        r = _row(incomplete, 0)
        why = "" if pd.isna(r["end_reason"]) else str(r["end_reason"]).replace("_", " ")
        worst = f"{_request_text(r)}: {why or 'did not end normally'}"
        flt = str(r["wireshark_filter"])
    elif lat["ttfb_ms"].notna().any():
        r = _max_row(lat, "ttfb_ms")
        worst = f"slowest first byte: {_request_text(r)}, {fmt_ms(float(r['ttfb_ms']))}"
        flt = str(r["wireshark_filter"])
    return Check("http", "HTTP", status, text + ".", "http", worst, flt)


_HB_NAMES = {"websocket": "WebSocket", "http2": "HTTP/2 PING", "tcp_keepalive": "TCP keep-alive"}
_HB_FILTERS = {
    "websocket": "tcp.stream eq {} && websocket.opcode in {{9 10}}",
    "http2": "tcp.stream eq {} && http2.type == 6",
    "tcp_keepalive": "tcp.stream eq {} && (tcp.analysis.keep_alive || tcp.analysis.keep_alive_ack)",
}


#: the parts of request_timing (pcaptools.analyses.slow) in words, in its order
_PARTS = (("dns_ms", "DNS lookup"), ("connect_ms", "TCP connect"), ("tls_ms", "TLS handshake"),
          ("client_ms", "client time"), ("upload_ms", "request upload"),
          ("network_rtt_ms", "network round trip"), ("server_wait_ms", "server wait"),
          ("model_wait_ms", "model wait"), ("streaming_ms", "streaming"),
          ("stall_ms", "stalls"))


def _who(r: Mapping[str, Any]) -> str:
    """``stream 7 on tcp.stream 2`` / ``request #1 on tcp.stream 0`` / ``stream 4 on QUIC
    connection 0``"""
    sid = r.get("stream_id")
    one = f"stream {int(sid)}" if sid is not None and not pd.isna(sid) else \
        f"request #{int(r['request_index'])}"
    if pd.isna(r["tcp_stream"]):
        return f"{one} on QUIC connection {int(r['quic_connection'])}"
    return f"{one} on tcp.stream {int(r['tcp_stream'])}"


def _slowest(ctx: ReportContext) -> Check:
    """The request with the longest total time (request_timing) and its largest part."""
    _, rt = slow_analyses(ctx)
    if not len(rt):
        return Check("slowest", "Slowest request", "absent",
                     "no HTTP request to time (see the HTTP line).", "slow")
    done = rt[rt["total_ms"].notna()]
    if not len(done):
        return Check("slowest", "Slowest request", "absent",
                     f"{_n(len(rt), 'request')}, none with a response end in the capture: no "
                     "total time.", "slow")
    r = _max_row(done, "total_ms")
    total = float(r["total_ms"])
    parts = [(float(r[c]), name) for c, name in _PARTS
             if not pd.isna(r[c]) and float(r[c]) > 0]
    text = (f"{_who(r)}, {fmt_ms(total)}" if len(rt) == 1 else
            f"of {len(rt):,} requests, {_who(r)}, {fmt_ms(total)}")
    status = "info"
    if parts and total > 0:
        v, name = max(parts, key=lambda p: p[0])
        word = "mostly" if v >= 0.5 * total else "largest part"
        text += f", {word} {name} ({fmt_ms(v)}, {_pct(v, total)})"
        if name == "stalls":
            status = "warn"
    n_st = int(r["stalls"])
    if n_st:
        cause = str(r["worst_stall_cause"]).replace("_", " ")
        text += f"; {_n(n_st, 'stall')} ({fmt_ms(float(r['stall_ms']))}; longest: {cause})"
    else:
        text += "; no stall"
    return Check("slowest", "Slowest request", status, text + ".", "slow", str(r["sentence"]),
                 str(r["wireshark_filter"]))


def _heartbeats(ctx: ReportContext) -> Check:
    hb = ctx.heartbeats()
    summ = ctx.heartbeat_summary()
    if not len(hb):
        idle = len(summ)
        text = "no heartbeats seen (no WebSocket ping, HTTP/2 PING or TCP keep-alive)"
        if idle:
            text += (f", on {_n(idle, 'WebSocket or HTTP/2 connection')} that could have "
                     "sent them")
        return Check("heartbeats", "Heartbeats", "absent", text + ".", "heartbeats")
    mech = hb["mechanism"].astype(object)
    oc = hb["outcome"].astype(object)
    parts = []
    for m, name in _HB_NAMES.items():
        sel = mech == m
        k = int(sel.sum())
        if not k:
            continue
        answered = int((oc[sel] == "answered").sum())
        part = f"{name}: {answered:,} of {_n(k, 'ping')} answered"
        rtt = hb.loc[sel, "rtt_ms"].dropna()
        if len(rtt):
            part += f" (median {fmt_ms(float(rtt.median()))})"
        parts.append(part)
    missed = (int(summ["client_missed"].sum()) + int(summ["server_missed"].sum())
              if len(summ) else 0)
    unanswered = int((oc == "unanswered").sum())
    text = "; ".join(parts)
    status = "ok"
    worst = flt = None
    if unanswered:
        status = "bad" if missed else "warn"
        text += (f"; {_n(unanswered, 'ping')} never answered, {missed:,} of them missed "
                 "(the connection lived on 2 s or more)")
        bad = hb[(oc == "unanswered").to_numpy(bool)]
        counts: dict[tuple[int, str], int] = {}
        for t, m in zip(bad["tcp_stream"].tolist(), bad["mechanism"].astype(object).tolist(),
                        strict=True):
            counts[(int(t), str(m))] = counts.get((int(t), str(m)), 0) + 1
        (tcp, mname), k = max(counts.items(), key=lambda kv: (kv[1], -kv[0][0]))
        worst = f"tcp.stream {tcp}: {_n(k, 'unanswered ping')}"
        flt = _HB_FILTERS.get(mname, "tcp.stream eq {}").format(tcp)
    return Check("heartbeats", "Heartbeats", status, text + ".", "heartbeats", worst, flt)


def _tls(ctx: ReportContext) -> Check:
    t = ctx.cap.tls_handshakes
    if not len(t):
        return Check("tls", "TLS", "absent", "no TLS handshake seen.", "tls")
    h = ctx.head
    n = len(t)
    versions = ", ".join(h["tls_versions"]) or "version unknown"
    st = h["tls_decrypt_status"]
    dec = int(st.get("decrypted", 0))
    if dec == n:
        how = "decrypted" if n == 1 else "all decrypted"
        status = "ok"
    else:
        how = f"{dec:,} of {n:,} decrypted"
        status = "warn"
    text = f"{_n(n, 'session')} ({versions}), {how}"
    hs = t["handshake_ms"].dropna()
    worst = flt = None
    text += handshake_phrase(hs)
    if len(hs) > 1:
        r = _max_row(t, "handshake_ms")
        worst = f"slowest: tcp.stream {int(r['tcp_stream'])}, {fmt_ms(float(r['handshake_ms']))}"
        flt = f"tcp.stream eq {int(r['tcp_stream'])} && tls.handshake"
    if h["tls_resumed"]:
        text += f", {int(h['tls_resumed']):,} resumed"
    if status != "ok":
        bad = t[~t["decrypt_status"].astype("string").isin(["decrypted"]).fillna(True)
                .to_numpy(bool)]
        r = _row(bad, 0)
        worst = (f"tcp.stream {int(r['tcp_stream'])}: "
                 f"{str(r['decrypt_status']).replace('_', ' ')}")
        flt = f"tcp.stream eq {int(r['tcp_stream'])} && tls"
    return Check("tls", "TLS", status, text + ".", "tls", worst, flt)


def _loss(ctx: ReportContext) -> Check:
    h = ctx.head
    conns = ctx.cap.connections
    if not len(conns):
        return Check("loss", "Loss", "absent", "no TCP connection.", "retransmissions")
    lost, ds = int(h["lost_segments"]), h["data_segments"]
    sp = int(h["spurious_resends"])
    if not lost and not sp:
        text = "no data segment was lost" + (f" ({ds:,} data segments)" if ds else "")
        return Check("loss", "Loss", "ok", text + ".", "retransmissions")
    where = (f"{h['lost_before_capture']:,} before the capture point, "
             f"{h['lost_after_capture']:,} after it")
    text = (f"{_pct(lost, ds)} of data segments lost and resent ({lost:,} of {ds:,}: {where})"
            if ds else f"{_n(lost, 'segment')} lost and resent ({where})")
    if sp:
        text += f"; {_n(sp, 'spurious resend')}"
    per = (conns["client_lost_segments"] + conns["server_lost_segments"]).to_numpy(np.int64)
    worst = flt = None
    if per.max() > 0:
        i = int(per.argmax())
        tcp = int(conns["tcp_stream"].iloc[i])
        worst = f"tcp.stream {tcp}: {_n(int(per[i]), 'segment')} lost"
        flt = f"tcp.stream eq {tcp}"
    return Check("loss", "Loss", "warn", text + ".", "retransmissions", worst, flt)


def _irtt(ctx: ReportContext) -> Check:
    irtt = ctx.head["irtt_ms"]
    if not irtt["count"]:
        return Check("irtt", "TCP handshake RTT", "absent",
                     "no complete TCP handshake (SYN, SYN-ACK, ACK) captured.", "irtt")
    hs = ctx.cap.tcp_handshakes
    worst = flt = None
    if irtt["count"] > 1:
        r = _max_row(hs, "irtt_ms")
        worst = f"slowest: tcp.stream {int(r['tcp_stream'])}, {fmt_ms(float(r['irtt_ms']))}"
        flt = f"tcp.stream eq {int(r['tcp_stream'])}"
    return Check("irtt", "TCP handshake RTT", "info", _stats(irtt, "connection") + ".", "irtt",
                 worst, flt)


def _connections(ctx: ReportContext) -> Check:
    h = ctx.head
    n = int(h["tcp_connections"])
    if not n:
        return Check("connections", "TCP connections", "absent", "no TCP traffic.",
                     "connections")
    # exclusive groups: an unanswered SYN is also open at the end; count it once
    hs, conns = ctx.cap.tcp_handshakes, ctx.cap.connections
    unanswered = set(hs.loc[hs["result"].astype("string").eq("no_answer").fillna(False),
                            "tcp_stream"].tolist())
    open_ = conns["end_reason"].astype("string").eq("open_at_eof").fillna(False)
    open_other = int((open_ & ~conns["tcp_stream"].isin(unanswered)).sum())
    parts = [f"{int(c):,} {label}" for c, label in (
        (h["closed_fin"], "closed with FIN"), (h["reset"], "reset (RST)"),
        (h["refused"], "refused"), (h["no_answer"], "SYN never answered"),
        (h["half_closed"], "half-closed"), (open_other, "open at the end of the capture"),
    ) if c]
    status = "warn" if h["reset"] or h["refused"] or h["no_answer"] else "info"
    text = _n(n, "connection") + (": " + ", ".join(parts) if parts else "")
    if h["started_mid_stream"]:
        text += f"; {int(h['started_mid_stream']):,} started before the capture"
    return Check("connections", "TCP connections", status, text + ".", "connections")


def _dns(ctx: ReportContext) -> Check:
    h = ctx.head
    n = int(h["dns_queries"])
    if not n:
        return Check("dns", "DNS", "absent", "no DNS queries.", "dns")
    lat = h["dns_latency_ms"]
    text = _n(n, "query", "queries")
    if lat["count"]:
        text += f", answer time {_stats(lat, 'answer')}"
    fails = {k: v for k, v in h["dns_rcodes"].items() if k != "NOERROR"}
    status = "ok"
    if fails:
        text += "; " + ", ".join(f"{v:,} {k}" for k, v in fails.items())
        status = "warn"
    if h["dns_unanswered"]:
        text += f"; {int(h['dns_unanswered']):,} unanswered"
        status = "warn"
    return Check("dns", "DNS", status, text + ".", "dns")


def _path_mtu(ctx: ReportContext) -> Check:
    h = ctx.head
    holes = h.get("pmtu_black_holes") or []
    rows = h.get("path_mtu") or []
    ie = int(h.get("icmp_errors", 0))
    if not holes and not rows and not ie:
        return Check("path-mtu", "Path MTU", "absent",
                     "no ICMP errors, no path-MTU discovery, no black hole.", "path-mtu")
    parts = []
    if ie:
        parts.append(_n(ie, "ICMP error"))
    if rows:
        mtus = sorted({int(r["mtu"]) for r in rows if r.get("mtu") is not None})
        learnt = f" ({', '.join(map(str, mtus))} bytes)" if mtus else ""
        parts.append(f"{_n(len(rows), 'connection direction')} learnt a smaller path MTU"
                     f"{learnt}")
    worst = flt = None
    if holes:
        parts.append(f"{_n(len(holes), 'path-MTU black hole')}")
        worst = f"tcp.stream {holes[0]['tcp_stream']}: {holes[0]['summary']}"
        flt = f"tcp.stream eq {holes[0]['tcp_stream']}"
    return Check("path-mtu", "Path MTU", "bad" if holes else "info", "; ".join(parts) + ".",
                 "path-mtu", worst, flt)


def _overhead(ctx: ReportContext) -> Check:
    if not len(ctx.cap.connections):
        return Check("overhead", "Overhead", "absent", "no TCP bytes.", "overhead")
    o = ctx.overhead()
    tot = o[o["total"].astype(bool)]
    if not len(tot) or not int(tot["wire_bytes"].iloc[0]):
        return Check("overhead", "Overhead", "absent", "no TCP bytes.", "overhead")
    wire = int(tot["wire_bytes"].iloc[0])
    app = int(tot["app_payload_bytes"].iloc[0])
    if not app:
        return Check("overhead", "Overhead", "info",
                     f"{wire:,} TCP bytes on the wire; no application payload parsed, so no "
                     "goodput.", "overhead")
    return Check("overhead", "Overhead", "info",
                 f"goodput {_pct(app, wire)}: {app:,} of {wire:,} TCP bytes on the wire are "
                 "application payload.", "overhead")


def _warnings(ctx: ReportContext) -> Check:
    h = ctx.head
    total = int(h["warnings"])
    if not total:
        return Check("warnings", "Warnings", "ok", "none: every frame was read and decoded.",
                     "warnings")
    codes = list(h["warnings_by_code"].items())
    listed = ", ".join(f"{c} ({k:,})" for c, k in codes[:3])
    more = f" and {_n(len(codes) - 3, 'more code')}" if len(codes) > 3 else ""
    return Check("warnings", "Warnings", "warn", f"{_n(total, 'warning')}: {listed}{more}.",
                 "warnings")


def _quic(ctx: ReportContext) -> Check | None:
    p = quic_check(ctx)
    return None if p is None else Check("quic", "QUIC / HTTP/3", p.status, p.text, "quic",
                                        p.worst, p.filter)


def _voice(ctx: ReportContext) -> Check | None:
    p = voice_check(ctx)
    return None if p is None else Check("voice", "Voice", p.status, p.text, "voice", p.worst,
                                        p.filter)


#: the questions in page order: (key, builder); a builder returning None has no line for
#: this capture (QUIC and voice, when the capture has none)
QUESTIONS: tuple[tuple[str, Callable[[ReportContext], Check | None]], ...] = (
    ("coverage", _coverage),
    ("not-analysed", _not_analysed),
    ("disconnects", _disconnects),
    ("ttft", _ttft),
    ("http", _http),
    ("slowest", _slowest),
    ("heartbeats", _heartbeats),
    ("voice", _voice),
    ("tls", _tls),
    ("quic", _quic),
    ("loss", _loss),
    ("irtt", _irtt),
    ("connections", _connections),
    ("dns", _dns),
    ("path-mtu", _path_mtu),
    ("overhead", _overhead),
    ("warnings", _warnings),
)


def checklist(ctx: ReportContext) -> list[Check]:
    """One :class:`Check` per question of :data:`QUESTIONS`, in that order."""
    out = []
    for key, fn in QUESTIONS:
        try:
            c = fn(ctx)
            if c is not None:
                out.append(c)
        except Exception as exc:  # one question must not cost the others
            out.append(Check(key, key.replace("-", " ").capitalize(), "error",
                             f"could not be computed: {type(exc).__name__}: {exc}", key))
    return out
