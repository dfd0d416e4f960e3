"""What was analysed, by transport, protocol and status: ``Capture.coverage`` summed up.

    from pcaptools.analyses.coverage import coverage_summary, coverage_sentences
    coverage_summary(cap)     # one row per (transport, protocol, status), shares of the capture
    coverage_sentences(cap)   # "34 UDP frames (52% of bytes) were QUIC and are not analysed."

Pure functions of the ``coverage`` table and ``summary`` (rules of the table:
:mod:`pcaptools.tables.coverage`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from ..tables.schema import Column, TableSchema

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = [
    "COVERAGE_SUMMARY",
    "DONE",
    "coverage_headline",
    "coverage_sentences",
    "coverage_summary",
    "share_text",
]

#: statuses that count as analysed (the rest is what the report says was not)
DONE = frozenset({"analysed", "decrypted"})

COVERAGE_SUMMARY = TableSchema(
    name="coverage_summary",
    grain="one row per (transport, protocol, status) of Capture.coverage: "
    "pcaptools.analyses.coverage.coverage_summary(cap), not a Capture attribute",
    key=("transport", "protocol", "status"),
    columns=(
        Column("transport", "string", None, "coverage.transport"),
        Column("protocol", "string", None, "coverage.protocol"),
        Column("status", "string", None, "coverage.status"),
        Column("flows", "int64", None, "coverage rows: TCP connections, UDP flows, other classes"),
        Column("frames", "int64", "frames", "frames of those rows"),
        Column("wire_bytes", "int64", "bytes", "frame.len summed"),
        Column(
            "frames_share", "float64", None, "frames / summary.frames (all frames of the capture)"
        ),
        Column("wire_share", "float64", None, "wire_bytes / summary.wire_bytes (all frame bytes)"),
    ),
)

_PROTO = {
    "quic": "QUIC",
    "gquic": "Google QUIC",
    "tls": "TLS",
    "http1": "HTTP/1.x",
    "http2": "HTTP/2",
    "websocket": "WebSocket",
    "dns": "DNS",
    "mdns": "mDNS",
    "llmnr": "LLMNR",
    "ntp": "NTP",
    "dhcp": "DHCP",
    "dhcpv6": "DHCPv6",
    "netbios": "NetBIOS",
    "ssdp": "SSDP",
    "snmp": "SNMP",
    "syslog": "syslog",
    "isakmp": "IKE",
    "wireguard": "WireGuard",
    "webrtc": "WebRTC media (STUN/DTLS/SRTP)",
    "icmp": "ICMP",
    "icmpv6": "ICMPv6",
    "arp": "ARP",
    "lldp": "LLDP",
    "ip_fragment": "IP fragments",
    "igmp": "IGMP",
    "gre": "GRE",
    "esp": "IPsec ESP",
    "llc": "802.3 LLC",
    "db-lsp-disc": "Dropbox LAN sync",
}
_TRANSPORT = {"tcp": "TCP", "udp": "UDP", "non_ip": "non-IP", "icmp": "ICMP", "icmpv6": "ICMPv6"}


def _name(table: dict[str, str], key: str) -> str:
    return table.get(key, key.replace("_", " ").upper() if len(key) <= 5 else key.replace("_", " "))


def coverage_summary(cap: Capture) -> pd.DataFrame:
    """``cap.coverage`` grouped by (transport, protocol, status), largest wire bytes first
    (schema :data:`COVERAGE_SUMMARY`); shares are of the whole capture (``summary``)."""
    cov = getattr(cap, "coverage", None)
    if not isinstance(cov, pd.DataFrame) or not len(cov):
        return COVERAGE_SUMMARY.frame([])
    g = (
        cov.assign(
            transport=cov["transport"].astype(str),
            protocol=cov["protocol"].astype(str),
            status=cov["status"].astype(str),
        )
        .groupby(["transport", "protocol", "status"], sort=False)
        .agg(flows=("frame", "size"), frames=("frames", "sum"), wire_bytes=("wire_bytes", "sum"))
        .reset_index()
    )
    frames = cap.summary.frames or int(g["frames"].sum())
    wire = cap.summary.wire_bytes or int(g["wire_bytes"].sum())
    g["frames_share"] = g["frames"] / frames if frames else float("nan")
    g["wire_share"] = g["wire_bytes"] / wire if wire else float("nan")
    g = g.sort_values(["wire_bytes", "frames"], ascending=False, kind="stable")
    return COVERAGE_SUMMARY.frame(g.itertuples(index=False, name=None))


def share_text(part: int, whole: int) -> str:
    """``part / whole`` as a percentage for a sentence (12%, 1.8%, 0.042%); a part smaller
    than the whole never shows as 100%."""
    p = 100.0 * part / whole if whole else 0.0
    if 99 < p < 100 and part < whole:  # never round a part up to the whole
        return f"{int(p * 10) / 10:.1f}%"
    if p >= 10 or p == 0:
        return f"{p:.0f}%"
    if p >= 0.1:
        return f"{p:.1f}%"
    return f"{p:.2g}%"


def _n(k: int, word: str) -> str:
    return f"{k:,} {word}{'' if k == 1 else 's'}"


def coverage_sentences(cap: Capture, summ: pd.DataFrame | None = None) -> list[str]:
    """Plain sentences about what was not analysed, largest share of bytes first, e.g.
    ``"34 UDP frames (52% of bytes) were QUIC and are not analysed."``; preceded by one
    sentence on the analysed share when anything was not. Empty when every frame was
    analysed (or the coverage table is empty)."""
    s = coverage_summary(cap) if summ is None else summ
    if not len(s):
        return []
    total_f = cap.summary.frames or int(s["frames"].sum())
    total_b = cap.summary.wire_bytes or int(s["wire_bytes"].sum())
    rest = s[~s["status"].isin(DONE)]
    if not len(rest):
        return []
    done = s[s["status"].isin(DONE)]
    df_, db = int(done["frames"].sum()), int(done["wire_bytes"].sum())
    share = share_text(db, total_b)
    out = [
        f"pcaptools analysed {df_:,} of {_n(total_f, 'frame')} ({share} of bytes); "
        "the rest is listed below and in the Coverage section."
    ]
    for r in rest.to_dict("records"):
        t, p, st = str(r["transport"]), str(r["protocol"]), str(r["status"])
        frames, wire, flows = int(r["frames"]), int(r["wire_bytes"]), int(r["flows"])
        plural = "" if frames == 1 else "s"
        pct = share_text(wire, total_b)
        head = f"{frames:,} {_name(_TRANSPORT, t)} frame{plural} ({pct} of bytes)"
        conns = f" in {_n(flows, 'connection')}" if t == "tcp" else ""
        pname = _name(_PROTO, p)
        if st == "not_parsed":
            what = f"were {pname} and are not analysed" if p != t else "are not analysed"
            if p.startswith("linktype_"):
                what = f"have link type {p.removeprefix('linktype_')}, which is not decoded"
        elif st == "encrypted_no_key" and p == "quic":
            what = "were QUIC without a key: only the Initial packets are analysed"
        elif st == "encrypted_no_key":
            what = "were TLS without a key: only the handshakes are analysed"
        elif st == "unknown_payload":
            what = (
                "carried decrypted TLS payload of an unknown protocol"
                if p == "tls"
                else "carried a payload no parser recognised"
            )
        elif st == "partly_analysed":
            what = f"were {pname} whose payload after the connection's end was not parsed"
        elif st == "malformed":
            what = (
                f"were {pname} whose parsing stopped on malformed data"
                if t == "tcp"
                else "were malformed: their headers could not be decoded"
            )
        else:
            what = f"were {pname} ({st.replace('_', ' ')})"
        out.append(f"{head}{conns} {what}.")
    return out


def coverage_headline(cap: Capture) -> dict[str, Any]:
    """The ``coverage`` key of :func:`~pcaptools.analyses.summary.headline`: ``frames_analysed``
    / ``wire_bytes_analysed`` (status analysed or decrypted), ``analysed_wire_share``,
    ``by_status`` (status -> {frames, wire_bytes}), ``groups`` (every row of
    :func:`coverage_summary` as a dict, largest first; shares rounded to 6 digits), and
    ``sentences`` (:func:`coverage_sentences`). ``None`` values when the capture has no
    coverage table (e.g. tables read back from an older export)."""
    s = coverage_summary(cap)
    if not len(s):
        return {
            "frames_analysed": None,
            "wire_bytes_analysed": None,
            "analysed_wire_share": None,
            "by_status": {},
            "groups": [],
            "sentences": [],
        }
    done = s[s["status"].isin(DONE)]
    wire = cap.summary.wire_bytes or int(s["wire_bytes"].sum())
    by_status: dict[str, dict[str, int]] = {}
    for st, f, b in zip(
        s["status"].tolist(), s["frames"].tolist(), s["wire_bytes"].tolist(), strict=True
    ):
        d = by_status.setdefault(str(st), {"frames": 0, "wire_bytes": 0})
        d["frames"] += int(f)
        d["wire_bytes"] += int(b)
    groups = [
        {
            "transport": str(r["transport"]),
            "protocol": str(r["protocol"]),
            "status": str(r["status"]),
            "flows": int(r["flows"]),
            "frames": int(r["frames"]),
            "wire_bytes": int(r["wire_bytes"]),
            "frames_share": round(float(r["frames_share"]), 6),
            "wire_share": round(float(r["wire_share"]), 6),
        }
        for r in s.to_dict("records")
    ]
    db = int(done["wire_bytes"].sum())
    return {
        "frames_analysed": int(done["frames"].sum()),
        "wire_bytes_analysed": db,
        "analysed_wire_share": round(db / wire, 6) if wire else None,
        "by_status": by_status,
        "groups": groups,
        "sentences": coverage_sentences(cap, s),
    }
