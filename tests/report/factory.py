"""Hand-built Capture objects from schema-conformant rows, for the summary, report and CLI tests.

``make_capture()`` returns one small capture whose every number is known (see
``MIXED_FACTS``); the ``*_row`` helpers fill in defaults so a test names only what it cares
about.
"""

from __future__ import annotations

from typing import Any

from pcaptools.capture import Capture, CaptureSummary
from pcaptools.tables.foundation import (
    CONNECTIONS,
    PACKETS,
    TCP_EVENTS,
    TCP_HANDSHAKES,
    TCP_LOSSES,
    WARNINGS,
)
from pcaptools.tables.schema import TableSchema

T0 = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z, in ns
MS = 1_000_000
S = 1_000_000_000

XSS = "<script>alert(1)</script>"


def _row(schema: TableSchema, defaults: dict[str, Any], kw: dict[str, Any]) -> tuple[Any, ...]:
    unknown = set(kw) - set(schema.names)
    assert not unknown, f"{schema.name}: unknown columns {unknown}"
    d = {**defaults, **kw}
    return tuple(d.get(n) for n in schema.names)


def conn_row(tcp_stream: int, **kw: Any) -> tuple[Any, ...]:
    first_ts = kw.pop("first_ts", T0 + tcp_stream * S)
    last_ts = kw.pop("last_ts", first_ts + 100 * MS)
    defaults = dict(
        tcp_stream=tcp_stream,
        ip_version=4,
        client_addr="10.0.0.1",
        client_port=50000 + tcp_stream,
        server_addr="192.0.2.10",
        server_port=443,
        client_inferred=False,
        first_frame=1,
        last_frame=10,
        first_ts=first_ts,
        last_ts=last_ts,
        duration_ms=(last_ts - first_ts) / MS,
        client_packets=5,
        server_packets=5,
        client_bytes=1000,
        server_bytes=5000,
        client_wire_bytes=1400,
        server_wire_bytes=5400,
        client_resent_bytes=0,
        server_resent_bytes=0,
        retransmissions=0,
        conn_state="SF",
        history="ShADadFf",
        end_reason="fin",
        end_by="client",
        end_frame=10,
        end_ts=last_ts,
        client_max_seg_bytes=1000,
        server_max_seg_bytes=1448,
        client_max_acked_seg_bytes=1000,
        server_max_acked_seg_bytes=1448,
        capture_vantage="unknown",
        client_lost_segments=0,
        server_lost_segments=0,
        client_spurious_resends=0,
        server_spurious_resends=0,
        client_capture_drop_bytes=0,
        server_capture_drop_bytes=0,
    )
    return _row(CONNECTIONS, defaults, kw)


def loss_row(frame: int, **kw: Any) -> tuple[Any, ...]:
    """A tcp_losses row: a client segment resent at ``frame``, first sent 10 frames before."""
    defaults = dict(
        tcp_stream=0,
        direction="client_to_server",
        kind="loss",
        seq=1 + 100 * frame,
        len=100,
        first_frame=frame - 10,
        first_ts=T0 + (frame - 10) * MS,
        frame=frame,
        ts=T0 + frame * MS,
        gap_frame=None,
        gap_ts=None,
        lost_where="after_capture",
        spurious=False,
        recovery="rto",
        recovery_ms=10.0,
        dup_acks=0,
        tshark_kind="retransmission",
    )
    return _row(TCP_LOSSES, defaults, kw)


def handshake_row(tcp_stream: int, **kw: Any) -> tuple[Any, ...]:
    syn_ts = kw.pop("syn_ts", T0 + tcp_stream * S)
    defaults = dict(
        tcp_stream=tcp_stream,
        syn_frame=1,
        syn_ts=syn_ts,
        syn_count=1,
        synack_frame=2,
        synack_ts=syn_ts + 5 * MS,
        synack_count=1,
        ack_frame=3,
        ack_ts=syn_ts + 10 * MS,
        irtt_ms=10.0,
        syn_to_synack_ms=5.0,
        result="established",
        client_mss=1460,
        server_mss=1460,
        client_wscale=7,
        server_wscale=7,
        client_sack_perm=True,
        server_sack_perm=True,
        client_timestamps=True,
        server_timestamps=True,
        tfo_cookie_request=False,
        tfo_cookie_len=None,
        syn_data_bytes=0,
    )
    return _row(TCP_HANDSHAKES, defaults, kw)


def event_row(frame: int, kind: str, **kw: Any) -> tuple[Any, ...]:
    defaults = dict(
        frame=frame,
        ts=T0 + frame * MS,
        tcp_stream=0,
        direction="client_to_server",
        kind=kind,
        seq=1,
        len=100,
        ack=1,
        dup_ack_num=None,
        dup_ack_frame=None,
    )
    return _row(TCP_EVENTS, defaults, kw)


def packet_row(frame: int, **kw: Any) -> tuple[Any, ...]:
    defaults = dict(
        frame=frame,
        ts=T0 + frame * MS,
        frame_len=154,
        cap_len=154,
        interface=0,
        ip_version=4,
        ip_proto=6,
        src="10.0.0.1",
        dst="192.0.2.10",
        sport=50000,
        dport=443,
        tcp_stream=0,
        direction="client_to_server",
        tcp_flags=0x18,
        flags="AP",
        seq=1,
        ack=1,
        seq_raw=1001,
        ack_raw=2001,
        tcp_len=100,
        window=65535,
        resent=False,
        ack_rtt_ms=None,
        acks_frame=None,
    )
    return _row(PACKETS, defaults, kw)


def warning_row(code: str, detail: str, **kw: Any) -> tuple[Any, ...]:
    defaults = dict(
        ts=None,
        frame=None,
        tcp_stream=None,
        direction=None,
        layer=code.split(".", 1)[0],
        code=code,
        detail=detail,
    )
    return _row(WARNINGS, defaults, kw)


def summary(
    frames: int,
    *,
    path: str = "/tmp/mixed.pcapng",
    tcp_frames: int | None = None,
    duration_s: float = 10.0,
    **kw: Any,
) -> CaptureSummary:
    return CaptureSummary(
        path=path,
        file_size=kw.pop("file_size", 123_456),
        format=kw.pop("format", "pcapng"),
        compression=kw.pop("compression", None),
        linktypes=kw.pop("linktypes", [1]),
        frames=frames,
        first_ts_ns=T0 if frames else None,
        last_ts_ns=T0 + int(duration_s * S) if frames else None,
        wire_bytes=kw.pop("wire_bytes", frames * 154),
        tcp_frames=frames if tcp_frames is None else tcp_frames,
        **kw,
    )


# ------------------------------------------------------------------ the "mixed" capture

#: the numbers make_capture() is built to have
MIXED_FACTS = dict(
    frames=300,
    tcp_connections=6,
    handshakes_captured=5,
    handshakes_established=3,
    refused=1,
    no_answer=1,
    started_mid_stream=1,
    reset=1,
    closed_fin=2,
    open_at_eof=2,
    irtt=[10.0, 20.0, 30.0],
    retransmitted_segments=6,
    retransmitted_data_segments=5,
    lost_segments=4,
    spurious_resends=1,
    data_segments=200,
    resent_bytes=500 + 300,
    payload_bytes=4 * 6000,
    warnings=2 + 1 + 5,
)


def make_capture(*, xss: bool = False) -> Capture:
    """Six connections, 300 frames (200 with payload), 6 retransmissions, 8 warnings.

    - stream 0: SF, handshake iRTT 10 ms, 3 plain + 1 fast + 1 spurious data retransmissions
      (500 resent client bytes)
    - stream 1: RSTO (reset by client), iRTT 20 ms, 300 resent server bytes
    - stream 2: REJ (refused: SYN answered by RST)
    - stream 3: S0, SYN sent 3 times, never answered (1 SYN retransmission row, len 0), open at EOF
    - stream 4: OTH, capture started mid-stream (no handshake row), open at EOF
    - stream 5: SF, iRTT 30 ms, zero window once
    With ``xss=True`` stream 4's history and a warning's detail are ``<script>alert(1)</script>``.
    """
    conns = [
        conn_row(0, client_resent_bytes=500, retransmissions=5, first_frame=1, last_frame=250,
                 client_lost_segments=4, client_spurious_resends=1),
        conn_row(
            1,
            conn_state="RSTO",
            history="ShADadR",
            end_reason="rst",
            end_by="client",
            server_resent_bytes=300,
            end_frame=260,
        ),
        conn_row(
            2,
            conn_state="REJ",
            history="Sr",
            end_reason="rst",
            end_by="server",
            client_bytes=0,
            server_bytes=0,
            end_frame=262,
            last_ts=T0 + 2 * S + 1 * MS,
        ),
        conn_row(
            3,
            conn_state="S0",
            history="S",
            end_reason="open_at_eof",
            end_by=None,
            end_frame=None,
            end_ts=None,
            client_bytes=0,
            server_bytes=0,
            retransmissions=1,
            last_ts=T0 + 3 * S + 3000 * MS,
        ),
        conn_row(
            4,
            conn_state="OTH",
            history=XSS if xss else "Dd",
            end_reason="open_at_eof",
            end_by=None,
            end_frame=None,
            end_ts=None,
            client_inferred=True,
            client_addr="2001:db8::1",
            server_addr="2001:db8::2",
            ip_version=6,
        ),
        conn_row(5),
    ]
    # payload_bytes: each connection defaults to 1000 + 5000; streams 2 and 3 carry none
    hs = [
        handshake_row(0, irtt_ms=10.0),
        handshake_row(1, irtt_ms=20.0),
        handshake_row(
            2,
            synack_frame=None,
            synack_ts=None,
            synack_count=0,
            ack_frame=None,
            ack_ts=None,
            irtt_ms=None,
            syn_to_synack_ms=None,
            result="refused",
        ),
        handshake_row(
            3,
            syn_count=3,
            synack_frame=None,
            synack_ts=None,
            synack_count=0,
            ack_frame=None,
            ack_ts=None,
            irtt_ms=None,
            syn_to_synack_ms=None,
            result="no_answer",
        ),
        handshake_row(5, irtt_ms=30.0),
    ]
    events = [
        event_row(20, "retransmission"),
        event_row(40, "retransmission"),
        event_row(1500, "retransmission"),  # 1.5 s in
        event_row(60, "fast_retransmission"),
        event_row(80, "spurious_retransmission"),
        event_row(3000, "retransmission", tcp_stream=3, len=0, seq=0),  # SYN retransmission
        event_row(55, "duplicate_ack", len=0),
        event_row(56, "duplicate_ack", len=0),
        event_row(90, "zero_window", tcp_stream=5, len=0, direction="server_to_client"),
    ]
    losses = [
        loss_row(20),
        loss_row(40),
        loss_row(60, recovery="fast_retransmit", dup_acks=3, tshark_kind="fast_retransmission"),
        loss_row(80, kind="spurious", lost_where=None, spurious=True,
                 tshark_kind="spurious_retransmission"),
        loss_row(1500),
    ]
    packets = [packet_row(f, tcp_len=100 if f <= 200 else 0) for f in range(1, 301)]
    warnings = [
        warning_row(
            "tcp.capture_started_mid_stream",
            "first packet of tcp.stream 4 is not a SYN",
            frame=200,
            tcp_stream=4,
            ts=T0 + 200 * MS,
        ),
        warning_row(
            "net.bad_ip_total_length",
            XSS if xss else "IP total length 1500 > 60 captured",
            frame=17,
            ts=T0 + 17 * MS,
        ),
        warning_row(
            "net.bad_ip_total_length",
            "IP total length 1500 > 60 captured",
            frame=18,
            ts=T0 + 18 * MS,
        ),
        warning_row(
            "net.bad_ip_total_length",
            "5 more occurrences of net.bad_ip_total_length were counted but not listed",
        ),
    ]
    tables = {
        "connections": CONNECTIONS.frame(conns),
        "tcp_handshakes": TCP_HANDSHAKES.frame(hs),
        "tcp_events": TCP_EVENTS.frame(events),
        "tcp_losses": TCP_LOSSES.frame(losses),
        "packets": PACKETS.frame(packets),
        "warnings": WARNINGS.frame(warnings),
    }
    return Capture(summary(300, duration_s=10.0), tables)


def empty_capture(frames: int = 0, **kw: Any) -> Capture:
    """A capture with no TCP at all (``frames`` non-TCP frames)."""
    return Capture(summary(frames, tcp_frames=0, **kw), {})


# --------------------------------------------------------------------------- reading reports


def report_section(page: str, sid: str) -> str:
    """The inside of the report's ``<section id="sid">`` (fails when the page has none)."""
    import re

    m = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    assert m, sid
    return m.group(1)


def report_tables(fragment: str) -> list[list[list[str]]]:
    """Every table of an HTML report (or part of one) as rows of cell texts, as a reader
    sees them: a paged table's rows come from its JSON block (all of them), a small table's
    from its ``<tbody>``. Wireshark filter cells read as their filter text; a cell holding
    several values, one a line (``<br>``), reads as its lines joined by newlines."""
    import html as _html
    import json
    import re

    def _text(cell: str) -> str:
        return _html.unescape(re.sub(r"<[^>]*>", "", cell.replace("<br>", "\n")))

    out: list[list[list[str]]] = []
    pos = 0
    table_re = re.compile(r'<div class="(ptable|table-wrap)"', re.S)
    while (m := table_re.search(fragment, pos)) is not None:
        if m.group(1) == "ptable":
            start = fragment.index('<script type="application/json" class="pt-data">', m.end())
            body_start = start + len('<script type="application/json" class="pt-data">')
            end = fragment.index("</script>", body_start)
            data = json.loads(fragment[body_start:end])
            rows = []
            for r in data["rows"]:
                cells = []
                for c in r:
                    if isinstance(c, str):
                        cells.append(c)
                    elif "f" in c:
                        cells.append(c["f"])
                    else:
                        cells.append(_text(c["h"]))
                rows.append(cells)
            out.append(rows)
            pos = end
        else:
            end = fragment.index("</table></div>", m.end())
            body = fragment[m.end():end]
            tb = body[body.index("<tbody>"):] if "<tbody>" in body else ""
            rows = [
                [_text(td) for td in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
                for tr in re.findall(r"<tr>(.*?)</tr>", tb, re.S)
            ]
            out.append(rows)
            pos = end
    return out


def checklist_lines(page: str) -> dict[str, tuple[str, str]]:
    """The Verdicts checklist of a rendered report: label -> (status, text after the label,
    tags removed and entities decoded, the worst-case part and its filter included)."""
    import html
    import re

    m = re.search(r'<ul class="checklist">(.*?)</ul>', page, re.S)
    assert m, "no checklist in the page"
    out: dict[str, tuple[str, str]] = {}
    for status, body in re.findall(r'<li class="chk-(\w+)">(.*?)</li>', m.group(1), re.S):
        body = re.sub(r'^<span class="mark"[^>]*>[^<]*</span>', "", body)
        label_m = re.match(r'<a href="#[^"]*">(.*?)</a>: ', body)
        assert label_m, body
        text = html.unescape(re.sub(r"<[^>]+>", "", body[label_m.end():]))
        out[html.unescape(label_m.group(1))] = (status, text)
    return out
