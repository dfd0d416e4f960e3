"""The report's QUIC / HTTP/3 section (issue #15) and its checklist line.

Shown only when the capture has QUIC connections (``cap.quic_connections``); otherwise the
builder returns None and the page has no such section. It shows:

- what was decrypted: connections whose key log holds no secrets for their ClientHello
  random are named plainly (only their Initial packets, which need no key, are read);
- one row per QUIC connection (at most :data:`MAX_QUIC_CONNECTIONS`, worst first: those that
  did not end cleanly, then those that lost packets, then the slowest handshakes): server
  name, ALPN, version, handshake kind (full, resumed, 0-RTT accepted / rejected, Retry), handshake
  time, RTT samples from ACK frames (both directions: which one is the path RTT depends on
  where the capture was made), packets lost, how it ended, and what was decrypted;
- the HTTP/3 requests (rows of ``stream_latency`` with protocol HTTP/3): TTFB and time to
  first token, their distribution and the token cadence chart of :mod:`.charts`, and which
  requests went in 0-RTT packets;
- QPACK: field sections that waited for encoder-stream bytes, and those never decoded;
- the first article's question (do 0-RTT and the absence of TCP head-of-line blocking make
  answers faster?) as plain lines of this capture's numbers, without a verdict.

Every capture string (SNI, ALPN, paths, close reasons) goes through the page's escaping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from markupsafe import Markup

from ..analyses.summary import fmt_ms
from ..protocols.http3.frames import ERROR_CODES as H3_ERROR_CODES
from . import charts
from .context import CheckContext, CheckParts, SectionContext, cached, handshake_phrase, store
from .context import lines as _lines
from .context import opt_float as _f
from .context import records as _records
from .context import text as _text

__all__ = ["MAX_H3_CADENCE_STREAMS", "MAX_QUIC_CONNECTIONS", "QuicView", "quic_check",
           "quic_parts", "quic_view"]

#: QUIC connections listed in the section's table (worst first; all are in cap.quic_connections)
MAX_QUIC_CONNECTIONS = 200
#: HTTP/3 responses drawn in the token cadence chart (as the streaming section's)
MAX_H3_CADENCE_STREAMS = 30

Cell = Any

#: QUIC transport error codes (RFC 9000 §20.1); 0x0100-0x01ff is CRYPTO_ERROR (a TLS alert)
TRANSPORT_ERRORS: dict[int, str] = {
    0x0: "NO_ERROR", 0x1: "INTERNAL_ERROR", 0x2: "CONNECTION_REFUSED",
    0x3: "FLOW_CONTROL_ERROR", 0x4: "STREAM_LIMIT_ERROR", 0x5: "STREAM_STATE_ERROR",
    0x6: "FINAL_SIZE_ERROR", 0x7: "FRAME_ENCODING_ERROR", 0x8: "TRANSPORT_PARAMETER_ERROR",
    0x9: "CONNECTION_ID_LIMIT_ERROR", 0xA: "PROTOCOL_VIOLATION", 0xB: "INVALID_TOKEN",
    0xC: "APPLICATION_ERROR", 0xD: "CRYPTO_BUFFER_EXCEEDED", 0xE: "KEY_UPDATE_ERROR",
    0xF: "AEAD_LIMIT_REACHED", 0x10: "NO_VIABLE_PATH",
}
#: application close codes that mean "no error" (HTTP/3's H3_NO_ERROR; 0, which many
#: stacks send for a plain close)
_APP_CLEAN = frozenset({0x0, 0x100})


def _n(k: int, one: str, many: str | None = None) -> str:
    return f"{int(k):,} {one if int(k) == 1 else (many or one + 's')}"


def _int(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def handshake_text(r: dict[str, Any]) -> str:
    """``full``, ``resumed``, ``resumed, 0-RTT accepted``, ``Retry, full``, ``started before
    the capture`` of a quic_connections row (``resumed``: the ServerHello accepted a
    pre-shared key; not said when the ServerHello was not captured)."""
    kind = _text(r["handshake_kind"])
    if not kind:
        return "started before the capture"
    res = r["resumed"]
    out = "Retry, " if kind.startswith("retry") else ""
    if "0rtt" in kind:
        out += "resumed, 0-RTT" if res is True else "0-RTT"
        z = _text(r["zero_rtt"])
        out += {"accepted": " accepted", "rejected": " rejected",
                "unknown": " (accepted or not: not decrypted)"}.get(z, "")
        return out
    return out + ("resumed" if res is True else "full" if res is False else "1-RTT")


def error_name(code: int, application: bool) -> str:
    """``0x100 H3_NO_ERROR``, ``0x0 NO_ERROR``, ``0x128 CRYPTO_ERROR (TLS alert 40)``."""
    if application:
        name = H3_ERROR_CODES.get(code, "")
    elif 0x100 <= code <= 0x1FF:
        name = f"CRYPTO_ERROR (TLS alert {code - 0x100})"
    else:
        name = TRANSPORT_ERRORS.get(code, "")
    return f"0x{code:x}" + (f" {name}" if name else "")


def end_text(r: dict[str, Any]) -> str:
    """How a QUIC connection ended, in words (from quic_connections' end columns)."""
    end = _text(r["end"])
    by = _text(r["closed_by"])
    if end.startswith("connection_close"):
        app = end.endswith("application")
        out = f"CONNECTION_CLOSE ({'application' if app else 'transport'})"
        if by:
            out += f" by the {by}"
        code = _int(r["close_error_code"])
        if code is not None:
            out += f", {error_name(code, app)}"
        frame = _int(r["close_frame"])
        if frame is not None:
            out += f", frame {frame}"
        reason = _text(r["close_reason"])
        if reason:
            out += f": \u201c{reason[:200]}\u201d"
        return out
    if end == "stateless_reset":
        return "stateless reset" + (f" by the {by}" if by else "")
    if end == "idle_timeout":
        return "idle timeout (silent for longer than the idle timeout both sides announced)"
    if end == "open_at_end":
        return "open at the end of the capture"
    if end == "unknown":
        return "unknown: packets not decrypted (a close would not show)"
    return end


def clean_end(r: dict[str, Any]) -> bool | None:
    """True: closed without error or open at the end; False: stateless reset, idle timeout
    or a close with an error code; None: not known (not decrypted)."""
    end = _text(r["end"])
    if end == "open_at_end":
        return True
    if end in ("stateless_reset", "idle_timeout"):
        return False
    if end.startswith("connection_close"):
        code = _int(r["close_error_code"])
        if code is None:
            return None
        return code in _APP_CLEAN if end.endswith("application") else code == 0
    return None


def decrypt_status(r: dict[str, Any]) -> str:
    """``decrypted`` | ``no_key`` (the key log has no secrets for its ClientHello random) |
    ``partial`` (keys found, some packets did not decrypt) | ``initial_only`` (only Initial
    packets, which need no key, were seen)."""
    needs, found = bool(r["needs_keylog"]), bool(r["keys_found"])
    if needs and not found:
        return "no_key"
    if needs:
        return "partial"
    return "decrypted" if found else "initial_only"


_DECRYPT_TEXT = {
    "decrypted": "yes",
    "no_key": "no: no key for its client random",
    "partial": "partly",
    "initial_only": "Initial packets only (no key needed)",
}


def _lost(r: dict[str, Any], side: str) -> tuple[int | None, int | None]:
    return _int(r[f"{side}_packets_unacked"]), _int(r[f"{side}_packets_missing"])


def lost_packets(r: dict[str, Any]) -> int | None:
    """Packets lost either way (unacknowledged after the capture point plus missing before
    it, both directions); None when a count is not known."""
    vals = [*_lost(r, "client"), *_lost(r, "server")]
    if any(v is None for v in vals):
        return None
    return sum(v for v in vals if v is not None)


def _lost_text(r: dict[str, Any], side: str) -> str:
    unacked, missing = _lost(r, side)
    return f"{'?' if unacked is None else unacked} / {'?' if missing is None else missing}"


#: how the 0-RTT outcomes read
_ZERO_RTT = {"accepted": "accepted", "rejected": "rejected",
             "unknown": "accepted or not: not decrypted"}


def _zero_rtt_counts(zero: pd.DataFrame) -> str:
    acc = zero["zero_rtt"].astype(object).value_counts()
    return ", ".join(f"{int(k):,} {_ZERO_RTT.get(str(s), str(s))}" for s, k in acc.items())


def _rtt_text(r: dict[str, Any], side: str) -> str:
    mn, sm = _f(r[f"{side}_min_rtt_ms"]), _f(r[f"{side}_smoothed_rtt_ms"])
    if mn is None:
        return ""
    return f"{fmt_ms(mn)} / {fmt_ms(sm) if sm is not None else '?'}"


def _both_ways(r: dict[str, Any],
               text: Callable[[dict[str, Any], str], str]) -> Markup | str:
    """``c\u2192s …`` over ``s\u2192c …`` from ``text(r, "client")`` and ``text(r, "server")``
    (the client's and the server's packets); empty when neither is known."""
    cs, sc = text(r, "client"), text(r, "server")
    if not cs and not sc:
        return ""
    return _lines(f"c\u2192s {cs}", f"s\u2192c {sc}")


def _lost_cell(r: dict[str, Any]) -> Markup | str:
    cell = _both_ways(r, _lost_text)
    if str(r["_decrypt"]) in ("no_key", "initial_only"):
        # (the only packet numbers it could read)
        cell = _lines(cell, "(Initial packets only)") if cell else "(Initial packets only)"
    return cell


@dataclass(frozen=True, slots=True)
class QuicView:
    """What the section and its checklist line show, computed once per report."""

    conns: pd.DataFrame
    """quic_connections, worst first, with ``_decrypt`` (:func:`decrypt_status`)"""
    requests: pd.DataFrame
    """the HTTP/3 rows of stream_latency, with ``in_0rtt`` (STREAM frames of the request
    went in a 0-RTT packet)"""


def quic_view(ctx: CheckContext) -> QuicView | None:
    """The section's data, or None when the capture has no QUIC connection (computed once per
    report)."""
    found, value = cached(ctx, "quic")
    if found:
        known: QuicView | None = value
        return known
    cap = ctx.cap
    q = cap.quic_connections
    view: QuicView | None = None
    if len(q):
        recs = _records(q)
        unclean = [clean_end(r) is False for r in recs]
        lost = [lost_packets(r) or 0 for r in recs]
        hs = q["handshake_ms"].to_numpy(dtype=np.float64)
        conns = q.assign(_decrypt=[decrypt_status(r) for r in recs], _unclean=unclean,
                         _lost=lost, _hs=np.nan_to_num(hs, nan=-1.0))
        conns = conns.sort_values(["_unclean", "_lost", "_hs", "quic_connection"],
                                  ascending=[False, False, False, True], kind="stable")
        lat = ctx.latency()
        req = lat[lat["protocol"].astype(str).eq("HTTP/3").to_numpy(bool)]
        f = cap.quic_frames
        early = f[f["frame_type"].astype(str).eq("STREAM").to_numpy(bool)
                  & f["packet_type"].astype(str).eq("0rtt").to_numpy(bool)
                  & f["direction"].astype(str).eq("client_to_server").to_numpy(bool)]
        pairs = set(zip(early["quic_connection"].tolist(), early["stream_id"].tolist(),
                        strict=True))
        in0 = [(int(c), int(s)) in pairs if not pd.isna(s) else False
               for c, s in zip(req["quic_connection"].tolist(), req["stream_id"].tolist(),
                               strict=True)]
        view = QuicView(conns.drop(columns=["_hs"]), req.assign(in_0rtt=in0))
    store(ctx, "quic", view)
    return view


def _coverage_lines(v: QuicView) -> list[str]:
    c = v.conns
    st = c["_decrypt"].value_counts()
    n = len(c)
    out = []
    dec = int(st.get("decrypted", 0))
    out.append(f"{_n(n, 'QUIC connection')}: {dec:,} decrypted"
               + (f", {int(st['initial_only']):,} with Initial packets only (no key needed)"
                  if st.get("initial_only") else "") + ".")
    if st.get("no_key"):
        k = int(st["no_key"])
        out.append(f"{_n(k, 'QUIC connection')} not decrypted: no key for their client random "
                   "(the key log has no secrets for their ClientHello): only their Initial "
                   "packets are read (SNI, offered ALPN, the ServerHello); ALPN, HTTP/3, "
                   "packet loss and how they ended are not known.")
    if st.get("partial"):
        k = int(st["partial"])
        failed = int(c.loc[c["_decrypt"] == "partial", "decrypt_failed"].sum())
        out.append(f"{_n(k, 'QUIC connection')} partly decrypted: keys found, "
                   f"{_n(failed, 'packet')} did not decrypt (quic.decrypt_failed warnings) "
                   "or their keys were not in the key log.")
    return out


def _article_lines(v: QuicView, tcp: pd.DataFrame) -> list[str]:
    """The first article's question, answered with this capture's numbers only."""
    c, req = v.conns, v.requests
    out: list[str] = []
    kinds = c["handshake_kind"].astype(object)
    zero = c[kinds.isin(["0rtt", "retry_0rtt"]).to_numpy(bool)]
    first = req[req["position"].eq(1).fillna(False).to_numpy(bool)]
    full_ids = set(c.loc[kinds.isin(["1rtt", "retry"]).to_numpy(bool), "quic_connection"]
                   .tolist())

    def waited(rows: pd.DataFrame) -> str:
        start = charts.ns(rows["connection_start_ts"])
        sent = (charts.ns(rows["request_ts"]) - start) / 1e6
        ft = rows["ttft_from_start_ms"].dropna()
        resp = rows["response_start_ts"].notna().to_numpy(bool)
        fb = (charts.ns(rows["response_start_ts"])[resp] - start[resp]) / 1e6
        txt = f"the request left {fmt_ms(float(np.median(sent)))} after the first packet"
        if len(ft):
            txt += f", first token {fmt_ms(float(ft.median()))} after it"
        elif len(fb):
            txt += f", first response byte {fmt_ms(float(np.median(fb)))} after it"
        return txt + (f" (medians of {len(rows):,})" if len(rows) > 1 else "")

    if len(zero):
        line = (f"0-RTT: {_n(len(zero), 'connection')} sent 0-RTT packets "
                f"({_zero_rtt_counts(zero)})")
        z_first = first[first["quic_connection"].isin(zero["quic_connection"].tolist())
                        & first["in_0rtt"]]
        if len(z_first):
            line += (f"; {_n(len(z_first), 'first request')} went in 0-RTT packets: "
                     + waited(z_first))
        f_first = first[first["quic_connection"].isin(list(full_ids))]
        if len(f_first):
            line += (f". On the {_n(len(f_first), 'connection')} without 0-RTT: "
                     f"{waited(f_first)}")
        out.append(line + ".")
    elif len(first):
        hs = c["handshake_ms"].dropna()
        line = "0-RTT: not used (no connection sent 0-RTT packets)"
        if len(hs):
            line += f"; handshake median {fmt_ms(float(hs.median()))}"
        out.append(line + f"; first requests: {waited(first)}.")
    if len(req):
        lost = c[["quic_connection", "_lost"]]
        lossy = set(lost.loc[lost["_lost"] > 0, "quic_connection"].tolist())
        gaps = req["token_gap_max_ms"]
        if lossy:
            on = req[req["quic_connection"].isin(list(lossy))]
            k = int(lost.loc[lost["_lost"] > 0, "_lost"].sum())
            line = (f"Loss: {_n(k, 'packet')} lost on {_n(len(lossy), 'HTTP/3 connection')}"
                    if set(req["quic_connection"].tolist()) & lossy else
                    f"Loss: {_n(k, 'QUIC packet')} lost, none on an HTTP/3 connection")
            g = on["token_gap_max_ms"].dropna()
            if len(g):
                i = int(np.nanargmax(on["token_gap_max_ms"].to_numpy(dtype=np.float64)))
                r = _records(on.iloc[[i]])[0]
                line += (f"; the longest gap between token events on their streams was "
                         f"{fmt_ms(float(g.max()))} (QUIC connection {int(r['quic_connection'])}"
                         f" stream {int(r['stream_id'])}); a lost QUIC packet holds up only "
                         "the streams whose frames it carried")
            out.append(line + ".")
        elif gaps.notna().any():
            out.append(f"Loss: no QUIC packet lost in this capture; the longest gap between "
                       f"token events was {fmt_ms(float(gaps.max()))}.")
    if len(tcp) and len(req):
        parts = []
        for proto, rows in [("HTTP/3", req), *tcp.groupby(tcp["protocol"].astype(str))]:
            fb = rows["ttfb_ms"].dropna()
            ft = rows["ttft_ms"].dropna()
            p = f"{proto}: {_n(len(rows), 'request')}"
            if len(fb):
                p += f", TTFB median {fmt_ms(float(fb.median()))}"
            if len(ft):
                p += f", TTFT median {fmt_ms(float(ft.median()))}"
            parts.append(p)
        out.append("In this capture, " + "; ".join(parts) + " (different servers and paths "
                   "may lie behind them).")
    return out


def _conn_table(ctx: SectionContext, c: pd.DataFrame) -> Markup:
    """One row per QUIC connection. Related values share a cell, one a line (client over
    server, server name over ALPN, version over handshake, both directions of RTT and loss, how
    it ended over what was decrypted), and names, handshakes and ends wrap, so the table fits
    a 1400 px window (#19)."""
    shown = c.head(min(ctx.max_table_rows, MAX_QUIC_CONNECTIONS))
    rows: list[list[Cell]] = []
    for r in _records(shown):
        alpn = _text(r["alpn"])
        if not alpn and _text(r["alpn_offered"]):
            alpn = f"{r['alpn_offered']} (offered)"
        qc = int(r["quic_connection"])
        decrypted = _DECRYPT_TEXT.get(str(r["_decrypt"]), str(r["_decrypt"]))
        rows.append([
            qc,
            _lines(*(charts.endpoint(str(r[f"{s}_addr"]), int(r[f"{s}_port"]))
                     for s in ("client", "server"))),
            _lines(_text(r["sni"]), alpn),
            _lines(_text(r["versions"]) or _text(r["version"]), handshake_text(r)),
            _f(r["handshake_ms"]), _both_ways(r, _rtt_text), _lost_cell(r),
            _lines(end_text(r), f"decrypted: {decrypted}"),
            ctx.code(f"quic.connection.number eq {qc}"),
        ])
    return ctx.table(
        ["QUIC conn.", "client / server", "server name / ALPN", "version / handshake",
         "handshake ms", "RTT min / smoothed", "lost unacked / missing", "end / decrypted",
         "Wireshark filter"],
        rows, numeric=(0, 4), mono=(1,), wrap=(2, 3, 7), total=len(c),
        source="cap.quic_connections",
    )


def _request_table(ctx: SectionContext, req: pd.DataFrame) -> Markup:
    rows: list[list[Cell]] = []
    for r in _records(req.head(ctx.max_table_rows)):
        rows.append([
            int(r["quic_connection"]), _int(r["stream_id"]), _text(r["method"]),
            _text(r["host"]), _text(r["path"]), _int(r["status"]),
            "yes" if r["in_0rtt"] else "", _f(r["ttfb_ms"]), _f(r["ttft_ms"]),
            int(r["token_events"]) or None, _f(r["token_gap_max_ms"]), _f(r["total_ms"]),
            _text(r["end_reason"]).replace("_", " "), ctx.code(_text(r["wireshark_filter"])),
        ])
    return ctx.table(
        ["QUIC conn.", "stream", "method", "host", "path", "status", "0-RTT", "TTFB ms",
         "TTFT ms", "tokens", "gap max ms", "total ms", "end", "Wireshark filter"],
        rows, numeric=(0, 1, 5, 7, 8, 9, 10, 11), wrap=(4,), total=len(req),
        source="stream_latency(cap) (protocol HTTP/3)",
    )


_QPACK_BAD = ("never_decoded", "failed", "too_long")


def _qpack(ctx: SectionContext) -> tuple[list[str], Markup | None]:
    cap = ctx.cap
    h = cap.http3_connections
    if not len(h):
        return [], None
    dec = int(h["client_field_sections"].sum() + h["server_field_sections"].sum())
    blk = int(h["client_blocked_field_sections"].sum()
              + h["server_blocked_field_sections"].sum())
    und = int(h["client_undecoded_field_sections"].sum()
              + h["server_undecoded_field_sections"].sum())
    line = f"QPACK: {_n(dec, 'field section')} decoded"
    line += (f", {blk:,} of them after waiting for encoder-stream bytes (blocked)" if blk
             else ", none had to wait for encoder-stream bytes")
    line += (f"; {_n(und, 'field section')} never decoded or failed (their headers are "
             "unknown: listed below)" if und else "; none left undecoded") + "."
    fr = cap.http3_frames
    bad = fr[fr["qpack"].astype(object).isin(_QPACK_BAD).to_numpy(bool)]
    if not len(bad):
        return [line], None
    rows: list[list[Cell]] = [
        [int(r["quic_connection"]), int(r["stream_id"]), _text(r["direction"]),
         _text(r["type"]), int(r["frame"]), _text(r["qpack"]).replace("_", " "),
         ctx.code(f"frame.number == {int(r['frame'])}")]
        for r in _records(bad.head(ctx.max_table_rows))
    ]
    return [line], ctx.table(
        ["QUIC conn.", "stream", "direction", "frame type", "frame", "QPACK", "Wireshark filter"],
        rows, numeric=(0, 1, 4), total=len(bad), source="cap.http3_frames (qpack)",
    )


def quic_parts(ctx: SectionContext) -> tuple[Markup, str] | None:
    """The QUIC / HTTP/3 section's body and note; None (no section on the page) without QUIC
    connections."""
    v = quic_view(ctx)
    if v is None:
        return None
    lat = ctx.latency()
    tcp_req = lat[~lat["protocol"].astype(str).eq("HTTP/3").to_numpy(bool)]
    lines: list[Cell] = [*_coverage_lines(v), *_article_lines(v, tcp_req)]
    qlines, qtable = _qpack(ctx)
    lines += qlines
    parts: list[Markup] = [ctx.items(lines), _conn_table(ctx, v.conns)]
    c = v.conns
    note = (
        "QUIC connections (cap.quic_connections), worst first: not ended cleanly, then by "
        "packets lost, then by handshake time"
        + (f"; the table lists {MAX_QUIC_CONNECTIONS:,} of {len(c):,}" if len(c) >
           min(ctx.max_table_rows, MAX_QUIC_CONNECTIONS) else "")
        + ". Handshake: full, or resumed (the ServerHello accepted a pre-shared key), with "
        "0-RTT when the client sent 0-RTT packets (accepted or rejected by the server's "
        "EncryptedExtensions); its time is the first Initial to HANDSHAKE_DONE at the "
        "capture point. RTT: samples from ACK frames, per direction of the acknowledged "
        "packets; at the client the c\u2192s line is the path RTT and the s\u2192c one the "
        "client's own ack delay (the other way round at the server). Lost: packets the "
        "peer's ACKs skipped (unacked: lost after the capture point) / packet numbers never "
        "seen (missing: lost before it)."
    )
    req = v.requests
    if len(req):
        dist = charts.ms_histogram_figure({"TTFB": req["ttfb_ms"], "TTFT": req["ttft_ms"]},
                                          "milliseconds after the request was sent", "requests")
        if dist is not None:
            parts.append(ctx.figure(dist, "quic-ttfb"))
        points, total = charts.token_cadence_rows(req, ctx.cap.sse_events,
                                                  MAX_H3_CADENCE_STREAMS,
                                                  ctx.cap.http3_sse_events)
        fig = charts.token_cadence_figure(points)
        if fig is not None:
            parts.append(ctx.figure(fig, "quic-token-cadence"))
        parts.append(_request_table(ctx, req))
        note += (
            f" HTTP/3 requests: {len(req):,} (stream_latency rows with protocol HTTP/3); "
            "TTFB and TTFT from the request's end (FIN), the token chart as in Streamed "
            "responses"
            + (f" (first {MAX_H3_CADENCE_STREAMS} of {total:,} responses)"
               if total > MAX_H3_CADENCE_STREAMS else "")
            + "; 0-RTT: the request went (in part or whole) in 0-RTT packets."
        )
    elif len(c):
        note += " No HTTP/3 request was read (no h3 connection decrypted)."
    if qtable is not None:
        parts.append(qtable)
    return Markup("".join(parts)), note


def quic_check(ctx: CheckContext) -> CheckParts | None:
    """The checklist line: was QUIC / HTTP/3 used, how fast were its handshakes, was 0-RTT
    used; None without QUIC connections (no line)."""
    v = quic_view(ctx)
    if v is None:
        return None
    c = v.conns
    alpn = c["alpn"].astype("string").dropna()
    what = f" ({', '.join(sorted(set(alpn.tolist())))})" if len(alpn) else ""
    text = f"{_n(len(c), 'QUIC connection')}{what}"
    hs = c["handshake_ms"].dropna()
    worst = flt = None
    text += handshake_phrase(hs)
    if len(hs) > 1:
        r = _records(c.iloc[[int(np.nanargmax(c["handshake_ms"].to_numpy(np.float64)))]])[0]
        worst = (f"slowest handshake: QUIC connection {int(r['quic_connection'])}, "
                 f"{fmt_ms(float(r['handshake_ms']))}")
        flt = f"quic.connection.number eq {int(r['quic_connection'])}"
    kinds = c["handshake_kind"].astype(object)
    zero = c[kinds.isin(["0rtt", "retry_0rtt"]).to_numpy(bool)]
    if len(zero):
        text += "; 0-RTT: " + _zero_rtt_counts(zero)
    else:
        text += "; no 0-RTT"
    resumed = int(c["resumed"].eq(True).fillna(False).sum())
    if resumed:
        text += f"; {resumed:,} resumed"
    retry = int(kinds.isin(["retry", "retry_0rtt"]).sum())
    if retry:
        text += f"; {_n(retry, 'Retry', 'Retries')}"
    if len(v.requests):
        fb = v.requests["ttfb_ms"].dropna()
        text += f"; {_n(len(v.requests), 'HTTP/3 request')}"
        if len(fb):
            text += f", TTFB median {fmt_ms(float(fb.median()))}"
    lost = int(c["_lost"].sum())
    if lost:
        text += f"; {_n(lost, 'packet')} lost"
    status = "info"
    nokey = int((c["_decrypt"] == "no_key").sum())
    if nokey:
        status = "warn"
        text += f"; {nokey:,} not decrypted: no key for their client random"
    unclean = c[c["_unclean"].astype(bool)]
    if len(unclean):
        status = "bad"
        r = _records(unclean.head(1))[0]
        text += f"; {_n(len(unclean), 'connection')} did not end cleanly"
        worst = f"QUIC connection {int(r['quic_connection'])}: {end_text(r)}"
        flt = f"quic.connection.number eq {int(r['quic_connection'])}"
    return CheckParts(status, text + ".", worst, flt)
