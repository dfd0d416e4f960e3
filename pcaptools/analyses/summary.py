"""Headline numbers of a capture and the plain-English verdicts built from them.

Both the HTML report and ``pcap-report --json`` use :func:`headline`; the report's
top box is :func:`verdicts`. Pure functions of ``Capture.summary`` and the tables:
no I/O, no printing, and the same Capture always gives the same output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._format import fmt_ms
from .coverage import coverage_headline, share_text

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = [
    "fmt_ms",
    "headline",
    "health_verdicts",
    "tls_decrypt_sentences",
    "verdicts",
    "warning_counts",
]

# tables.tcp_tables.warnings_table writes one such row per code whose rows were capped
_SUPPRESSED = re.compile(r"^(\d+) more occurrences of (\S+) were counted but not listed$")


def headline(cap: Capture, *, latency: pd.DataFrame | None = None) -> dict[str, Any]:
    """The headline numbers of ``cap`` as a JSON-serialisable dict (ints, floats, str, None,
    lists and dicts only; never NaN). ``latency``: ``stream_latency(cap)`` when the caller
    already has it (the report does).

    Keys (all counts are exact):

    - capture file: ``file``, ``format``, ``compression``, ``file_size``, ``linktypes``,
      ``first_ts`` / ``last_ts`` (ISO 8601 UTC, None for an empty capture), ``duration_s``,
      ``frames``, ``wire_bytes``, ``tcp_frames``, ``udp_frames``, ``other_ip_frames``,
      ``non_ip_frames``, ``tls_secrets``
    - ``tcp_connections`` (rows of ``connections``), ``handshakes_captured`` (rows of
      ``tcp_handshakes``: SYN or SYN-ACK seen), ``handshakes_established``, ``refused``
      (SYN answered by RST), ``no_answer`` (SYN never answered), ``started_mid_stream``
      (no SYN captured, roles inferred), ``reset`` (ended by RST, refused ones not included),
      ``closed_fin``, ``half_closed``, ``open_at_eof``
    - ``irtt_ms``: ``{"count", "median", "p95", "max"}`` of ``tcp_handshakes.irtt_ms``
      (tshark's tcp.analysis.initial_rtt; p95 by linear interpolation; None without data)
    - ``retransmitted_segments``: frames tshark flags ``tcp.analysis.retransmission``
      (``Capture.retransmissions``: plain, fast and spurious), ``retransmissions_by_kind``,
      ``data_segments`` (TCP frames with tcp.len > 0; None when the packets table was
      switched off), ``retransmitted_data_segments`` (those of the retransmissions that carry
      payload; the rest are SYN/FIN retransmissions), ``retransmitted_share``
      (retransmitted_data_segments / data_segments, None when unknown)
    - ``lost_segments``: segments lost and resent, from any vantage point (``tcp_losses``
      rows of kind loss; also ``connections.client_lost_segments`` + ``server_lost_segments``),
      ``lost_before_capture`` / ``lost_after_capture`` (where they were lost),
      ``losses_by_recovery`` (fast_retransmit, rto, tail_loss_probe, unknown),
      ``spurious_resends`` (resent though the first copy had arrived),
      ``capture_drop_bytes`` (acknowledged by the receiver but never captured: the capture
      missed packets) and ``unresolved_gaps`` (ranges never captured, neither resent nor
      acknowledged before the end)
    - ``payload_bytes`` / ``resent_bytes``: TCP payload bytes in all connections, and those
      that had already been seen (no heuristics); ``resent_share``
    - ``conn_state`` / ``end_reason``: connections by Zeek conn_state / end_reason
    - ``tcp_events``: ``tcp_events`` rows by kind (tshark's analysis flags)
    - ``warnings`` (total occurrences, including those counted but not listed) and
      ``warnings_by_code``
    - HTTP (:func:`~pcaptools.analyses.latency.stream_latency` rows): ``http_requests``,
      ``http_by_protocol`` (``{"HTTP/2": 15}``), ``http_connections`` (connections that
      carried a request), ``http_reused`` (requests on an already open connection),
      ``http_status`` (final status code -> requests), ``http_incomplete`` (responses that
      did not end normally), ``http_unpaired`` (HTTP/1.x rows whose request and response
      could not be paired, by ``http_requests.unpaired_reason``: they have no TTFB),
      ``ttfb_ms`` / ``ttft_ms`` / ``token_gap_ms`` (per-stream median gaps) as
      ``{"count", "median", "p95", "max"}``, ``token_events``
    - HTTP bodies (rows of ``http_requests`` and ``http2_streams`` with a response
      Content-Encoding): ``http_content_encodings`` (coding -> responses),
      ``http_encoded_wire_bytes`` / ``http_encoded_decoded_bytes`` (their body bytes on the
      wire and after decoding), ``http_content_decoding`` (status -> responses: decoded,
      corrupt, truncated, gap, limit, unsupported, incomplete)
    - TLS: ``tls_sessions`` (rows of ``tls_handshakes``), ``tls_versions``, ``tls_alpn``
      (selected protocol), ``tls_resumed``, ``tls_decrypt_status``
    - DNS: ``dns_queries`` (rows of ``dns``), ``dns_unanswered``, ``dns_rcodes``,
      ``dns_latency_ms`` (``{"count", "median", "p95", "max"}``)
    - ``coverage``: what was analysed and what was not, by transport, protocol and status
      (:func:`~pcaptools.analyses.coverage.coverage_headline`); ``tcp_wire_bytes``: the
      frame bytes of the TCP connections, which the goodput and overhead ratios are taken over
      ``dns_latency_ms`` (``{"count", "median", "p95", "max"}``), ``dns_transports``
      (``{"udp": 12, "tcp": 2, "doh": 34}``), ``dns_truncated`` (UDP answers with TC=1),
      ``dns_tcp_retries`` (of those, retried over TCP in the capture)
    - path MTU: ``icmp_errors`` (rows of ``icmp_errors``), ``icmp_errors_by_kind``,
      ``path_mtu`` (the rows of ``path_mtu`` as ``{"tcp_stream", "direction", "outcome",
      "mtu", "icmp_errors", "big_seg_bytes", "resend_seg_bytes", "delivered_ms", "cost_ms"}``,
      first 100), ``pmtu_black_holes`` (the ``pmtu_black_hole`` rows of
      :func:`~pcaptools.analyses.disconnects.disconnects` as ``{"tcp_stream", "peer",
      "retransmissions", "summary"}``, first 100; computed only when some connection has
      retransmitted segments larger than any it got acknowledged)

    Dict-valued counts list only non-zero entries, largest first.
    """
    s = cap.summary
    conns = cap.connections
    hs = cap.tcp_handshakes
    retrans = cap.retransmissions

    result = hs["result"].astype("string")
    refused_streams = set(hs.loc[result.eq("refused").fillna(False), "tcp_stream"].tolist())
    end = conns["end_reason"].astype("string")
    is_rst = end.eq("rst").fillna(False)
    reset = int((is_rst & ~conns["tcp_stream"].isin(refused_streams)).sum())

    irtt = hs["irtt_ms"].dropna().to_numpy(dtype=np.float64)
    irtt_stats: dict[str, Any] = {
        "count": int(irtt.size),
        "median": _ms(np.median(irtt)) if irtt.size else None,
        "p95": _ms(np.percentile(irtt, 95)) if irtt.size else None,
        "max": _ms(irtt.max()) if irtt.size else None,
    }

    data_segments = _data_segments(cap)
    rlen = retrans["len"].fillna(0).astype("int64")
    retrans_data = int((rlen > 0).sum())
    payload = int(conns["client_bytes"].sum() + conns["server_bytes"].sum())
    resent = int(conns["client_resent_bytes"].sum() + conns["server_resent_bytes"].sum())

    lo = cap.tcp_losses
    lkind = lo["kind"].astype("string")
    loss_rows = lo[lkind.eq("loss").fillna(False).to_numpy()]
    lwhere = loss_rows["lost_where"].astype("string")

    wcounts = warning_counts(cap)
    return {
        "file": Path(s.path).name,
        "format": s.format,
        "compression": s.compression,
        "file_size": int(s.file_size),
        "linktypes": [int(x) for x in s.linktypes],
        "first_ts": _iso(s.first_ts_ns),
        "last_ts": _iso(s.last_ts_ns),
        "duration_s": round(float(s.duration_s), 9),
        "frames": int(s.frames),
        "wire_bytes": int(s.wire_bytes),
        "tcp_frames": int(s.tcp_frames),
        "udp_frames": int(s.udp_frames),
        "other_ip_frames": int(s.other_ip_frames),
        "non_ip_frames": int(s.non_ip_frames),
        "tls_secrets": int(s.tls_secrets),
        "tcp_connections": len(conns),
        "handshakes_captured": len(hs),
        "handshakes_established": int(result.eq("established").fillna(False).sum()),
        "refused": len(refused_streams),
        "no_answer": int(result.eq("no_answer").fillna(False).sum()),
        "started_mid_stream": int(conns["client_inferred"].sum()),
        "reset": reset,
        "closed_fin": int(end.eq("fin").fillna(False).sum()),
        "half_closed": int(end.eq("half_closed").fillna(False).sum()),
        "open_at_eof": int(end.eq("open_at_eof").fillna(False).sum()),
        "irtt_ms": irtt_stats,
        "retransmitted_segments": len(retrans),
        "retransmissions_by_kind": _counts(retrans["kind"]),
        "data_segments": data_segments,
        "retransmitted_data_segments": retrans_data,
        "retransmitted_share": (round(retrans_data / data_segments, 6) if data_segments else None),
        "lost_segments": len(loss_rows),
        "lost_before_capture": int(lwhere.eq("before_capture").fillna(False).sum()),
        "lost_after_capture": int(lwhere.eq("after_capture").fillna(False).sum()),
        "losses_by_recovery": _counts(loss_rows["recovery"]),
        "spurious_resends": int(lkind.eq("spurious").fillna(False).sum()),
        "capture_drop_bytes": int(lo.loc[lkind.eq("capture_drop").fillna(False).to_numpy(),
                                         "len"].sum()),
        "unresolved_gaps": int(lkind.eq("unresolved").fillna(False).sum()),
        "payload_bytes": payload,
        "resent_bytes": resent,
        "resent_share": round(resent / payload, 6) if payload else None,
        "conn_state": _counts(conns["conn_state"]),
        "end_reason": _counts(conns["end_reason"]),
        "tcp_events": _counts(cap.tcp_events["kind"]),
        "warnings": sum(wcounts.values()),
        "warnings_by_code": wcounts,
        **_http_headline(cap, latency),
        **_tls_headline(cap),
        **_dns_headline(cap),
        "tcp_wire_bytes": int(conns["client_wire_bytes"].sum() + conns["server_wire_bytes"].sum()),
        "coverage": coverage_headline(cap),
        **_pmtu_headline(cap),
    }


def warning_counts(cap: Capture) -> dict[str, int]:
    """Occurrences per warning code, largest first. Counts the rows of ``cap.warnings`` and
    adds the occurrences that were counted but not listed (the "N more occurrences of CODE"
    rows the table ends with when a code hit its row cap)."""
    extra = cap.summary.extra.get("warning_counts")
    if isinstance(extra, Mapping) and extra:
        return _sorted_counts({str(k): int(v) for k, v in extra.items()})
    w = cap.warnings
    counts: dict[str, int] = {}
    for code, frame, detail in zip(
        w["code"].astype("string"), w["frame"], w["detail"], strict=True
    ):
        n = 1
        if frame is pd.NA and isinstance(detail, str):
            m = _SUPPRESSED.match(detail)
            if m is not None and m.group(2) == code:
                n = int(m.group(1))
        counts[str(code)] = counts.get(str(code), 0) + n
    return _sorted_counts(counts)


def verdicts(cap: Capture, head: Mapping[str, Any] | None = None) -> list[str]:
    """Plain sentences with numbers, most important first, e.g.
    ``"41 TCP connections: 3 reset (RST), 1 refused."``. Only sentences the data backs:
    no handshake sentence without a measured iRTT, no retransmission share without a
    packets table. ``head`` is ``headline(cap)`` if the caller already has it."""
    h = headline(cap) if head is None else head
    out: list[str] = []

    dur = float(h["duration_s"])
    out.append(
        f"{_n(h['frames'], 'frame')} over {_duration(dur)}."
        if h["frames"]
        else "The capture holds no frames."
    )
    cov = h.get("coverage")
    if isinstance(cov, Mapping):
        out += list(cov.get("sentences", ()))

    n = int(h["tcp_connections"])
    if n == 0:
        if h["frames"]:
            out.append("No TCP traffic.")
    else:
        # exclusive groups: an unanswered SYN is also "open at EOF"; count it once
        open_other = int(h["open_at_eof"]) - _unanswered_open(cap)
        parts = []
        for count, label in (
            (h["closed_fin"], "closed with FIN"),
            (h["reset"], "reset (RST)"),
            (h["refused"], "refused"),
            (h["no_answer"], "SYN never answered"),
            (h["half_closed"], "half-closed"),
            (open_other, "still open at the end of the capture"),
        ):
            if count:
                parts.append(f"{count:,} {label}")
        out.append(f"{_n(n, 'TCP connection')}" + (": " + ", ".join(parts) if parts else "") + ".")
        if h["started_mid_stream"]:
            k = int(h["started_mid_stream"])
            out.append(
                f"{k:,} of {n:,} connections started before the capture "
                "(no SYN seen): client and server are guessed from the ports."
            )

    irtt = h["irtt_ms"]
    if irtt["count"] == 1:
        out.append(f"TCP handshake RTT {fmt_ms(irtt['median'])} (1 connection).")
    elif irtt["count"] > 1:
        out.append(
            f"Median TCP handshake RTT {fmt_ms(irtt['median'])} "
            f"(p95 {fmt_ms(irtt['p95'])}, max {fmt_ms(irtt['max'])}, "
            f"{irtt['count']:,} connections)."
        )
    syn_retx = _syn_retransmissions(cap)
    if syn_retx:
        out.append(f"{_n(syn_retx, 'connection')} had to retransmit the SYN or SYN-ACK.")

    rs, ds, rd = (
        int(h["retransmitted_segments"]),
        h["data_segments"],
        int(h["retransmitted_data_segments"]),
    )
    kinds = h["retransmissions_by_kind"]
    detail = ", ".join(
        f"{kinds[k]:,} {label}"
        for k, label in (("fast_retransmission", "fast"), ("spurious_retransmission", "spurious"))
        if kinds.get(k)
    )
    if h["capture_drop_bytes"]:
        out.append(
            f"The capture missed {h['capture_drop_bytes']:,} payload bytes that the receiver "
            f"acknowledged ({_n(_streams_with_loss(cap, 'capture_drop'), 'connection')}): "
            "packets dropped by the capture, not by the network."
        )
    lost = int(h["lost_segments"])
    where = (f"{h['lost_before_capture']:,} lost before the capture point, "
             f"{h['lost_after_capture']:,} after it")
    if lost and ds:
        out.append(f"{_pct(lost, ds)} of data segments were lost and resent "
                   f"({lost:,} of {ds:,}: {where}).")
    elif lost:
        out.append(f"{_n(lost, 'segment')} lost and resent ({where}).")
    elif ds:
        out.append(f"No data segment was lost ({ds:,} data segments).")
    if h["spurious_resends"]:
        sp = int(h["spurious_resends"])
        out.append(f"{_n(sp, 'resend')} {'was' if sp == 1 else 'were'} spurious "
                   "(the first copy had arrived).")
    if h["unresolved_gaps"]:
        out.append(f"{_n(int(h['unresolved_gaps']), 'range')} of sequence space never "
                   "captured, neither resent nor acknowledged before the capture ended.")
    if rs > rd and ds:
        detail += (", " if detail else "") + f"{rs - rd:,} without payload (SYN or FIN)"
    if rs:
        out.append(
            f"{_n(rs, 'retransmission')} flagged by tshark (tcp.analysis.retransmission)"
            + (f": {detail}." if detail else ".")
        )

    if h["resent_bytes"] and h["payload_bytes"]:
        out.append(
            f"{h['resent_bytes']:,} payload bytes were sent more than once "
            f"({_pct(h['resent_bytes'], h['payload_bytes'])} of {h['payload_bytes']:,})."
        )

    ev = h["tcp_events"]
    if ev.get("zero_window"):
        streams = _streams_with(cap, "zero_window")
        out.append(
            f"Zero window advertised by a receiver ({_n(ev['zero_window'], 'frame')} "
            f"in {_n(streams, 'connection')})."
        )
    if ev.get("lost_segment"):
        out.append(
            f"{_n(ev['lost_segment'], 'gap')} in the sequence numbers: segments lost before "
            "the capture point or dropped by the capture (tshark: previous segment not "
            "captured)."
        )

    out += _http_verdicts(h)
    out += _tls_verdicts(h)
    out += _dns_verdicts(h)
    out += _pmtu_verdicts(h)

    total = int(h["warnings"])
    if total:
        codes = list(h["warnings_by_code"].items())
        listed = ", ".join(f"{c} {k}" for k, c in codes[:3])
        more = f" and {len(codes) - 3} more codes" if len(codes) > 3 else ""
        out.append(f"{_n(total, 'warning')} while reading: {listed}{more}.")
    return out


# -- disconnects, heartbeats, overhead ------------------------------------------------------

_HB_LABELS = {
    "websocket": ("WebSocket pings", "median pong"),
    "http2": ("HTTP/2 PINGs", "median PING ACK"),
    "tcp_keepalive": ("TCP keep-alives", "median answer"),
}


def health_verdicts(
    cap: Capture,
    *,
    disc: pd.DataFrame | None = None,
    hb: pd.DataFrame | None = None,
    ovh: pd.DataFrame | None = None,
) -> list[str]:
    """Sentences on how connections ended, their heartbeats and goodput, e.g.
    ``"1 of 1 TCP connection did not end cleanly: 1 peer vanished."``,
    ``"WebSocket pings: 4 of 5 answered, 1 unanswered, median pong 0.448 ms."``,
    ``"Goodput 48% of bytes on the wire (37,222 of 77,491 bytes are application payload)."``.

    ``disc``, ``hb``, ``ovh``: ``analyses.disconnects(cap)``,
    ``analyses.heartbeats.heartbeats(...)`` over the three mechanisms, and
    ``analyses.overhead(cap)`` when the caller has them (computed otherwise). Kept apart
    from :func:`verdicts` (whose sentences are pinned to the TCP-level headline); the report
    appends them. No sentence without data: no disconnect sentence when
    every connection ended cleanly, no goodput sentence when no application payload was parsed.
    """
    from .disconnects import VERDICTS, disconnects
    from .heartbeats import heartbeats
    from .overhead import overhead

    out: list[str] = []
    n = len(cap.connections)
    if n:
        d = disconnects(cap) if disc is None else disc
        if len(d):
            counts = d["verdict"].astype(object).value_counts()
            detail = ", ".join(
                f"{int(counts[v]):,} {v.replace('_', ' ')}" for v in VERDICTS if counts.get(v)
            )
            out.append(
                f"{len(d):,} of {_n(n, 'TCP connection')} did not end cleanly: {detail}."
            )
    h = (
        heartbeats(cap.ws_frames, cap.http2_frames, cap.tcp_events, connections=cap.connections)
        if hb is None
        else hb
    )
    if len(h):
        mech = h["mechanism"].astype(object)
        oc = h["outcome"].astype(object)
        for m, (label, pong) in _HB_LABELS.items():
            sel = mech == m
            k = int(sel.sum())
            if not k:
                continue
            answered = int((oc[sel] == "answered").sum())
            text = f"{label}: {answered:,} of {k:,} answered"
            for outcome in ("unanswered", "superseded", "cut_off"):
                c = int((oc[sel] == outcome).sum())
                if c:
                    text += f", {c:,} {outcome.replace('_', ' ')}"
            rtt = h.loc[sel, "rtt_ms"].dropna()
            if len(rtt):
                text += f", {pong} {fmt_ms(float(rtt.median()))}"
            out.append(text + ".")
    if n:
        ov = overhead(cap) if ovh is None else ovh
        tot = ov[ov["total"].astype(bool)]
        if len(tot):
            wire = int(tot["wire_bytes"].iloc[0])
            app = int(tot["app_payload_bytes"].iloc[0])
            if wire and app:
                whole = int(cap.summary.wire_bytes)
                if wire >= whole:
                    out.append(
                        f"Goodput {_pct(app, wire)} of bytes on the wire "
                        f"({app:,} of {wire:,} bytes are application payload)."
                    )
                else:  # say which bytes the ratio is taken over
                    out.append(
                        f"Goodput {_pct(app, wire)} of the TCP bytes on the wire "
                        f"({app:,} of {wire:,} bytes are application payload); the TCP "
                        f"connections hold {share_text(wire, whole)} of the capture's "
                        f"{whole:,} bytes."
                    )
    return out


# -- HTTP, TLS and DNS ---------------------------------------------------------------------

#: what each tls_handshakes.decrypt_status means, for the sentence about undecrypted sessions
DECRYPT_REASONS: dict[str, str] = {
    "no_keys": "no key in the key log (see tls.no_key_for_session)",
    "no_keylog": (
        "no key log was given (pcap-report --keylog KEYS.txt; record with SSLKEYLOGFILE set)"
    ),
    "failed": "the logged keys did not decrypt the records (see tls.decrypt_failed)",
    "partial": "some records did not decrypt with the logged keys (see tls.decrypt_failed)",
    "unsupported_cipher": "the cipher suite is not supported (see tls.unsupported_cipher)",
    "incomplete": "the handshake was not captured (the capture started after it)",
}


def _stats(values: pd.Series) -> dict[str, Any]:
    v = values.dropna().to_numpy(dtype=np.float64)
    return {
        "count": int(v.size),
        "median": _ms(np.median(v)) if v.size else None,
        "p95": _ms(np.percentile(v, 95)) if v.size else None,
        "max": _ms(v.max()) if v.size else None,
    }


def _http_headline(cap: Capture, lat: pd.DataFrame | None = None) -> dict[str, Any]:
    from .latency import stream_latency  # same layer; imported here to keep summary light

    if lat is None:
        lat = stream_latency(cap)
    status = lat["status"].dropna().astype("int64").astype(str)
    return {
        "http_requests": len(lat),
        "http_by_protocol": _counts(lat["protocol"]),
        "http_connections": int(lat["tcp_stream"].nunique())
        + int(lat["quic_connection"].nunique()),
        "http_reused": int(lat["reused"].eq(True).fillna(False).sum()),
        "http_status": _counts(status),
        "http_incomplete": int((~lat["complete"]).sum()),
        "http_unpaired": _counts(cap.http_requests["unpaired_reason"]),
        "ttfb_ms": _stats(lat["ttfb_ms"]),
        "ttft_ms": _stats(lat["ttft_ms"]),
        "token_gap_ms": _stats(lat["token_gap_median_ms"]),
        "token_events": int(lat["token_events"].sum()),
        **_coding_headline(cap),
    }


def _coding_headline(cap: Capture) -> dict[str, Any]:
    """Content-encoded response bodies of both HTTP versions."""
    h1, h2 = cap.http_requests, cap.http2_streams
    enc = pd.concat([h1["content_encoding"], h2["content_encoding"]], ignore_index=True)
    wire = pd.concat([h1["response_body_bytes"], h2["server_data_bytes"]], ignore_index=True)
    dec = pd.concat([h1["response_decoded_bytes"], h2["response_decoded_bytes"]],
                    ignore_index=True)
    status = pd.concat([h1["content_decoding"].astype("string"),
                        h2["content_decoding"].astype("string")], ignore_index=True)
    coded = enc.notna() & ~status.isin(["identity"]).fillna(False) & status.notna()
    return {
        "http_content_encodings": _counts(enc[coded]),
        "http_encoded_wire_bytes": int(wire[coded].fillna(0).sum()),
        "http_encoded_decoded_bytes": int(dec[coded].fillna(0).sum()),
        "http_content_decoding": _counts(status[coded]),
    }


def _tls_headline(cap: Capture) -> dict[str, Any]:
    t = cap.tls_handshakes
    return {
        "tls_sessions": len(t),
        "tls_versions": _counts(t["version"]),
        "tls_alpn": _counts(t["alpn_selected"]),
        "tls_resumed": int(t["resumption"].notna().sum()),
        "tls_decrypt_status": _counts(t["decrypt_status"]),
    }


def _dns_headline(cap: Capture) -> dict[str, Any]:
    d = cap.dns
    asked = d[d["query_frame"].notna()]
    return {
        "dns_queries": len(d),
        "dns_unanswered": int(asked["response_frame"].isna().sum()),
        "dns_rcodes": _counts(d["rcode"]),
        "dns_latency_ms": _stats(d["latency_ms"]),
        "dns_transports": _counts(d["transport"]),
        "dns_truncated": int(((d["transport"] == "udp") & d["truncated"].fillna(False)).sum()),
        "dns_tcp_retries": int(d["tcp_retry_frame"].notna().sum()),
    }


def _http_verdicts(h: Mapping[str, Any]) -> list[str]:
    n = int(h.get("http_requests", 0))
    if not n:
        return []
    out: list[str] = []
    by_proto = h["http_by_protocol"]
    conns = int(h["http_connections"])
    if len(by_proto) == 1:
        proto = next(iter(by_proto))
        if conns == 1 and n > 1:
            out.append(f"{proto} reused 1 connection for {n:,} requests.")
        else:
            k = int(h["http_reused"])
            reused = f" ({k:,} on an already open connection)" if k else ""
            out.append(f"{proto}: {_n(n, 'request')} over {_n(conns, 'connection')}{reused}.")
    else:
        parts = ", ".join(f"{c:,} {p}" for p, c in by_proto.items())
        reused = f", {h['http_reused']:,} on an already open connection" if h["http_reused"] else ""
        out.append(f"{_n(n, 'HTTP request')} ({parts}) over {_n(conns, 'connection')}{reused}.")
    errors = {k: v for k, v in h["http_status"].items() if k.isdigit() and int(k) >= 400}
    if errors:
        listed = ", ".join(f"{k} ({v:,})" for k, v in errors.items())
        out.append(f"{_n(sum(errors.values()), 'request')} failed with an HTTP error: {listed}.")
    tt = h["ttfb_ms"]
    if tt["count"] == 1:
        out.append(f"Time to first byte {fmt_ms(tt['median'])} (1 request).")
    elif tt["count"] > 1:
        out.append(f"Median time to first byte {fmt_ms(tt['median'])} (p95 {fmt_ms(tt['p95'])}, "
                   f"max {fmt_ms(tt['max'])}, {tt['count']:,} requests).")
    ft = h["ttft_ms"]
    if ft["count"]:
        head = (f"Time to first token {fmt_ms(ft['median'])} (1 streamed response)"
                if ft["count"] == 1 else
                f"Median TTFT {fmt_ms(ft['median'])} (p95 {fmt_ms(ft['p95'])}, "
                f"{ft['count']:,} streamed responses)")
        gap = h["token_gap_ms"]
        if gap["count"]:
            head += f"; median gap between tokens {fmt_ms(gap['median'])}"
        out.append(head + ".")
    out += _coding_verdicts(h)
    unpaired = h.get("http_unpaired") or {}
    if unpaired:
        k = sum(unpaired.values())
        why = ", ".join(f"{_UNPAIRED.get(r, r)} {c:,}" for r, c in unpaired.items())
        out.append(f"{_n(k, 'HTTP/1.x request or response', 'HTTP/1.x requests and responses')} "
                   f"could not be paired ({why}): no time to first byte is given for them.")
    if h["http_incomplete"]:
        k = int(h["http_incomplete"])
        out.append(f"{_n(k, 'response')} did not end normally (still open when the capture "
                   "ended, reset, or cut by the connection closing).")
    return out


def _coding_verdicts(h: Mapping[str, Any]) -> list[str]:
    encs = h.get("http_content_encodings") or {}
    n = sum(encs.values())
    if not n:
        return []
    listed = "; ".join(f"{k}: {v:,}" for k, v in encs.items())
    out = [f"{_n(n, 'response body', 'response bodies')} content-encoded ({listed}): "
           f"{h['http_encoded_wire_bytes']:,} bytes on the wire decoded to "
           f"{h['http_encoded_decoded_bytes']:,} bytes before SSE parsing."]
    status = h.get("http_content_decoding") or {}
    bad = {k: v for k, v in status.items() if k not in ("decoded", "incomplete")}
    if bad:
        parts = "; ".join(f"{k}: {v:,}" for k, v in bad.items())
        k = sum(bad.values())
        out.append(f"{_n(k, 'encoded body', 'encoded bodies')} could not be decoded to the end "
                   f"({parts}): what came after the problem is not analysed (see the "
                   "http.content_* warnings).")
    return out


#: http_requests.unpaired_reason in words, for the verdicts
_UNPAIRED = {
    "response_not_captured": "response not captured",
    "request_not_captured": "request not captured",
    "no_response": "no response",
    "ambiguous": "ambiguous after a capture gap",
    "evicted": "too many outstanding",
}


def _tls_verdicts(h: Mapping[str, Any]) -> list[str]:
    n = int(h.get("tls_sessions", 0))
    if not n:
        return []
    out: list[str] = []
    versions = ", ".join(f"{v}: {c:,}" if len(h["tls_versions"]) > 1 else v
                         for v, c in h["tls_versions"].items())
    text = f"{_n(n, 'TLS session')}" + (f" ({versions})" if versions else "")
    if h["tls_resumed"]:
        text += f", {h['tls_resumed']:,} resumed"
    out.append(text + ".")
    out += tls_decrypt_sentences(h["tls_decrypt_status"])
    return out


def tls_decrypt_sentences(status_counts: Mapping[str, int]) -> list[str]:
    """One sentence per reason some TLS sessions were not decrypted, e.g. ``"3 of 5 TLS
    sessions could not be decrypted: no key in the key log (see tls.no_key_for_session)."``
    Sessions that are decrypted or were never encrypted need no sentence."""
    total = sum(int(v) for v in status_counts.values())
    out = []
    for status, reason in DECRYPT_REASONS.items():
        k = int(status_counts.get(status, 0))
        if not k:
            continue
        if status == "partial":
            who = "The TLS session was" if total == 1 else f"{k:,} of {total:,} TLS sessions were"
            out.append(f"{who} only partly decrypted: {reason}.")
        elif k == total == 1:
            out.append(f"The TLS session could not be decrypted: {reason}.")
        elif k == total:
            out.append(f"None of the {total:,} TLS sessions could be decrypted: {reason}.")
        else:
            out.append(f"{k:,} of {total:,} TLS sessions could not be decrypted: {reason}.")
    return out


def _pmtu_headline(cap: Capture) -> dict[str, Any]:
    ie = getattr(cap, "icmp_errors", None)
    pm = getattr(cap, "path_mtu", None)
    rows: list[dict[str, Any]] = []
    if isinstance(pm, pd.DataFrame) and len(pm):
        for r in pm.head(100).astype(object).to_dict("records"):
            rows.append({
                "tcp_stream": int(r["tcp_stream"]), "direction": str(r["direction"]),
                "outcome": str(r["outcome"]), "mtu": _int_or_none(r["mtu"]),
                "icmp_errors": int(r["icmp_errors"]),
                "big_seg_bytes": _int_or_none(r["big_seg_bytes"]),
                "resend_seg_bytes": _int_or_none(r["resend_seg_bytes"]),
                "delivered_ms": _ms_or_none(r["delivered_ms"]),
                "cost_ms": _ms_or_none(r["cost_ms"]),
            })
    holes: list[dict[str, Any]] = []
    if _pmtu_candidates(cap.connections):
        from .disconnects import disconnects

        d = disconnects(cap)
        d = d[d["verdict"].astype("string").eq("pmtu_black_hole").fillna(False).to_numpy(bool)]
        for r in d.head(100).astype(object).to_dict("records"):
            holes.append({"tcp_stream": int(r["tcp_stream"]), "peer": str(r["peer"]),
                          "retransmissions": int(r["retransmissions_after_peer"]),
                          "summary": str(r["summary"])})
    n_ie = len(ie) if isinstance(ie, pd.DataFrame) else 0
    return {
        "icmp_errors": n_ie,
        "icmp_errors_by_kind": _counts(ie["kind"]) if isinstance(ie, pd.DataFrame) and n_ie else {},
        "path_mtu": rows,
        "pmtu_black_holes": holes,
    }


def _pmtu_candidates(conns: pd.DataFrame) -> bool:
    """Could disconnects() find a pmtu_black_hole: a side whose largest segment (above 536
    bytes) was never acknowledged, on a connection with retransmissions?"""
    if not len(conns) or "client_max_acked_seg_bytes" not in conns.columns:
        return False
    retx = conns["retransmissions"].to_numpy(np.int64) > 0
    for side in ("client", "server"):
        sent = conns[f"{side}_max_seg_bytes"].to_numpy(np.int64)
        acked = conns[f"{side}_max_acked_seg_bytes"].to_numpy(np.int64)
        if bool((retx & (sent > acked) & (sent > 536)).any()):
            return True
    return False


def _ms_or_none(v: Any) -> float | None:
    return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else _ms(v)


def _int_or_none(v: Any) -> int | None:
    return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else int(v)


def _pmtu_verdicts(h: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    rows = h.get("path_mtu") or []
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["outcome"], []).append(r)
    for outcome, how in (("discovered", "from ICMP too-big errors"),
                         ("no_icmp", "without any ICMP too-big error in the capture")):
        rs = by.get(outcome, [])
        if not rs:
            continue
        mtus = sorted({r["mtu"] for r in rs if r["mtu"] is not None})
        mtu = f" ({'/'.join(str(m) for m in mtus)} bytes)" if mtus else ""
        costs = [r["cost_ms"] for r in rs if r["cost_ms"] is not None]
        cost = f"; it cost up to {fmt_ms(max(costs))} beyond one round trip" if costs else ""
        out.append(f"Path-MTU discovery: {_n(len(rs), 'connection direction')} learnt a smaller "
                   f"path MTU{mtu} {how} and re-sent smaller segments{cost}.")
    if by.get("icmp_ignored"):
        k = len(by["icmp_ignored"])
        out.append(f"{_n(k, 'connection direction')} got ICMP too-big errors but never re-sent "
                   "smaller segments in the capture.")
    holes = h.get("pmtu_black_holes") or []
    if holes:
        out.append(f"{_n(len(holes), 'connection')} hit a path-MTU black hole: large segments "
                   "were retransmitted and never acknowledged while small packets got through "
                   "(see Disconnects and Path MTU).")
    return out


def _dns_verdicts(h: Mapping[str, Any]) -> list[str]:
    n = int(h.get("dns_queries", 0))
    if not n:
        return []
    lat = h["dns_latency_ms"]
    text = f"{_n(n, 'DNS query', 'DNS queries')}"
    tr = h.get("dns_transports") or {}
    if any(k != "udp" for k in tr):
        names = {"udp": "over UDP", "tcp": "over TCP", "doh": "over HTTPS (DoH)"}
        text += " (" + ", ".join(f"{v:,} {names.get(k, k)}" for k, v in tr.items()) + ")"
    if lat["count"] == 1:
        text += f", answered in {fmt_ms(lat['median'])}"
    elif lat["count"]:
        text += f", median answer time {fmt_ms(lat['median'])} (max {fmt_ms(lat['max'])})"
    fails = {k: v for k, v in h["dns_rcodes"].items() if k != "NOERROR"}
    extra = []
    if fails:
        extra.append(", ".join(f"{v:,} {k}" for k, v in fails.items()))
    if h["dns_unanswered"]:
        extra.append(f"{h['dns_unanswered']:,} unanswered")
    tc = int(h.get("dns_truncated", 0))
    if tc:
        retried = int(h.get("dns_tcp_retries", 0))
        extra.append(f"{_n(tc, 'UDP answer')} truncated (TC=1), "
                     + ("all retried over TCP" if retried == tc
                        else f"{retried:,} retried over TCP"))
    return [text + (": " + "; ".join(extra) if extra else "") + "."]


# -- helpers ---------------------------------------------------------------------------------


def _data_segments(cap: Capture) -> int | None:
    extra = cap.summary.extra.get("tcp_data_segments")
    if isinstance(extra, int):
        return extra
    pk = cap.packets
    if len(pk) == 0:
        return 0 if cap.summary.tcp_frames == 0 else None
    return int(pk["tcp_len"].fillna(0).astype("int64").gt(0).sum())


def _unanswered_open(cap: Capture) -> int:
    hs, conns = cap.tcp_handshakes, cap.connections
    streams = hs.loc[hs["result"].astype("string").eq("no_answer").fillna(False), "tcp_stream"]
    open_ = conns["end_reason"].astype("string").eq("open_at_eof").fillna(False)
    return int((open_ & conns["tcp_stream"].isin(set(streams.tolist()))).sum())


def _streams_with_loss(cap: Capture, kind: str) -> int:
    lo = cap.tcp_losses
    return int(lo.loc[(lo["kind"].astype("string") == kind).fillna(False).to_numpy(),
                      "tcp_stream"].nunique())


def _syn_retransmissions(cap: Capture) -> int:
    hs = cap.tcp_handshakes
    return int(((hs["syn_count"] > 1) | (hs["synack_count"] > 1)).sum())


def _streams_with(cap: Capture, kind: str) -> int:
    ev = cap.tcp_events
    return int(ev.loc[ev["kind"].astype("string").eq(kind).fillna(False), "tcp_stream"].nunique())


def _counts(col: pd.Series) -> dict[str, int]:
    vc = col.astype("string").dropna().value_counts()
    return _sorted_counts({str(k): int(v) for k, v in vc.items() if v})


def _sorted_counts(d: Mapping[str, int]) -> dict[str, int]:
    return dict(sorted(((k, v) for k, v in d.items() if v), key=lambda kv: (-kv[1], kv[0])))


def _iso(ts_ns: int | None) -> str | None:
    if ts_ns is None:
        return None
    return pd.Timestamp(ts_ns, unit="ns", tz="UTC").isoformat()


def _ms(v: float | np.floating[Any]) -> float:
    return round(float(v), 6)  # ns resolution


def _n(count: int, singular: str, plural: str | None = None) -> str:
    word = singular if count == 1 else (plural or singular + "s")
    return f"{count:,} {word}"


def _pct(part: int, whole: int) -> str:
    """1.8%, 12%, 0.042%: one decimal from 0.1%, two significant digits below."""
    p = 100.0 * part / whole
    if p >= 10:
        return f"{p:.0f}%"
    if p >= 0.1:
        return f"{p:.1f}%"
    return f"{p:.2g}%"


def _duration(s: float) -> str:
    if s < 1:
        return f"{s * 1000:.3g} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"
