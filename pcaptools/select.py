"""``subset()``: the part of a :class:`~pcaptools.capture.Capture` about some connections and/or
a time window, as a new Capture whose tables agree with each other.

    sub = cap.subset(sni="*.openai.com")                  # or pcaptools.select.subset(cap, ...)
    sub = cap.subset(host="192.0.2.20", port=443, start=1.5, end="2026-11-29T21:31:15Z")
    sub.summary.extra["subset"]    # 'host 192.0.2.20, port 443, time 1.5 s to 2026-11-29T21:31:15Z'

How rows are chosen:

1. **Connections** (rows of ``connections``, Wireshark ``tcp.stream``): every filter given must
   match (AND). ``host`` is an IP address on either side, or a host name matching the TLS SNI,
   the HTTP ``Host`` header, the HTTP/2 ``:authority`` or the WebSocket ``Host`` (case-insensitive,
   port ignored, ``*``/``?`` globs allowed); ``port`` a TCP port on either side; ``sni`` the
   TLS server name (exact or glob, e.g. ``*.openai.com``, case-insensitive); ``stream`` one
   ``tcp.stream`` or several; ``start``/``end`` a time window that the connection must overlap
   (first packet <= end and last packet >= start).
2. **Per-connection tables** (every table with a ``tcp_stream`` column: handshakes, TLS, HTTP,
   HTTP/2, SSE, WebSocket...): the rows of the kept connections, whole, so that per-request
   numbers (TTFB, TTFT, token counts, heartbeat answers) stay those of the full connection.
3. **Per-packet tables** (``packets``, ``tcp_events``, ``warnings``): rows of the kept
   connections whose time falls inside the window. Packets and warnings outside TCP: a packet
   is kept when an IP ``host`` / ``port`` filter matches its addresses / ports (or no
   connection filter was given), and when it is a frame of a kept ``dns`` row; warnings
   follow their frame; file-level warnings (no frame) are always kept.
4. **dns**: rows inside the window that are about the kept connections (the name is one of
   their SNI / Host / :authority names, an answer is one of their server addresses, or the
   row travelled on one of them: DNS over TCP or HTTPS), or
   that match the filters directly (``host``: the name, an answer or either address;
   ``sni``: the name; ``port``: 53 or the client port). Only ``start``/``end`` given: every
   row in the window.
5. **quic_connections**: the QUIC connections overlapping the window whose addresses / ports
   match an IP ``host`` / ``port`` filter and whose SNI matches ``sni`` / a ``host`` name
   (``stream`` matches none: it names TCP connections); **quic_packets** / **quic_frames**:
   the packets / frames of the kept QUIC connections inside the window, and ``packets``
   keeps their frames; the HTTP/3 tables (``http3_*``): the rows of the kept QUIC
   connections (``http3_frames`` / ``http3_sse_events``: inside the window; streams and
   connections whole).
6. **coverage**: the rows of the kept connections, and the UDP / other rows whose addresses or
   ports match an IP ``host`` / ``port`` filter (all of them without a connection filter) and,
   with a time window and a packets table, that have a kept frame. Rows stay whole (a flow
   that overlaps the window keeps all its frames), so with a time window their ``frames`` may
   add up to more than the subset's ``summary.frames``.

Times: ``start``/``end`` are seconds since the first frame of the capture (int, float, or a
string like ``"1.5"``), or absolute (``datetime``, ``pandas.Timestamp``, ISO 8601 string;
naive means UTC). Both ends are inclusive.

The summary is recomputed from the kept packets (``frames``, ``wire_bytes``, ``tcp_frames``,
...); ``first_ts_ns``/``last_ts_ns`` stay those of the capture, cut to the window, because
the observation window did not change (a connection silent until the end of the capture is
still silent until then). ``summary.extra["subset"]`` says which filter was applied,
``summary.extra["subset_display_filter"]`` is the equivalent Wireshark display filter.

Bad filter values (a port out of range, a time that cannot be read, start after end) raise
:class:`ValueError`; the data itself never makes ``subset`` raise.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import fnmatch
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .result import TABLES
from .tables.schema import TableSchema

if TYPE_CHECKING:
    from .result import Capture

__all__ = ["RULES", "Rule", "TimeLike", "parse_time", "rule_for", "subset"]

TimeLike = int | float | str | _dt.datetime | pd.Timestamp
"""seconds since the first frame, or an absolute time (naive = UTC)"""


@dataclass(frozen=True, slots=True)
class Rule:
    """How one table is restricted."""

    stream: str | None
    """column holding Wireshark's tcp.stream: rows of kept connections only (NA: see ``kind``)"""
    time: str | None
    """column whose time must fall inside the window (None: the table is not cut by time)"""
    kind: str = "per_connection"
    """per_connection, connections, per_packet (NA stream: by addresses), warnings, dns,
    coverage (NA stream: by addresses, and by the kept frames when cut by time)"""


#: tables cut by time as well as by connection (one row per packet or per event of a packet)
_PER_PACKET: dict[str, str] = {"packets": "ts", "tcp_events": "ts", "warnings": "ts"}
QUIC_TABLES = ("quic_connections", "quic_packets", "quic_frames", "http3_connections",
               "http3_frames", "http3_streams", "http3_pushes", "http3_sse_events")
"""the tables keyed by ``quic_connection`` (cut by the kept QUIC connections, not tcp_stream)"""


def rule_for(schema: TableSchema) -> Rule | None:
    """The rule for a table, read from its schema: ``connections`` defines the kept streams,
    ``dns`` (no tcp.stream) is matched by name/addresses, ``packets``/``tcp_events``/
    ``warnings`` are cut by stream and time, any other table with a ``tcp_stream`` column by
    stream. None: no rule fits (a new table that needs one)."""
    names = set(schema.names)
    if schema.name == "connections":
        return Rule("tcp_stream", None, "connections")
    if schema.name == "dns":
        return Rule(None, None, "dns")
    if schema.name == "coverage":
        return Rule("tcp_stream", None, "coverage")
    if schema.name in QUIC_TABLES:
        return Rule(None, None, "quic")
    if schema.name in _PER_PACKET:
        if "tcp_stream" not in names or _PER_PACKET[schema.name] not in names:
            return None
        kind = {"packets": "per_packet", "warnings": "warnings"}.get(schema.name, "per_connection")
        return Rule("tcp_stream", _PER_PACKET[schema.name], kind)
    if "tcp_stream" in names:
        return Rule("tcp_stream", None)
    return None


def _rules() -> dict[str, Rule]:
    out = {}
    for name, schema in TABLES.items():
        r = rule_for(schema)
        if r is not None:
            out[name] = r
    return out


class _LazyRules(Mapping[str, Rule]):
    """:data:`RULES`, built on first use."""

    _d: dict[str, Rule] | None = None

    def _get(self) -> dict[str, Rule]:
        if self._d is None:
            self._d = _rules()
        return self._d

    def __getitem__(self, k: str) -> Rule:
        return self._get()[k]

    def __iter__(self) -> Any:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


RULES: Mapping[str, Rule] = _LazyRules()
"""table name -> :class:`Rule`, for every table of ``pcaptools.TABLES`` that has one"""


# -- the filter ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Filter:
    host_ip: str | None = None
    host_name: str | None = None
    port: int | None = None
    sni: str | None = None
    streams: frozenset[int] | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    text: list[str] = dataclasses.field(default_factory=list)

    @property
    def by_connection(self) -> bool:
        return any(
            x is not None for x in (self.host_ip, self.host_name, self.port, self.sni, self.streams)
        )


def _parse_filter(
    cap: Capture,
    host: str | None,
    port: int | str | None,
    sni: str | None,
    stream: int | str | Iterable[int | str] | None,
    start: TimeLike | None,
    end: TimeLike | None,
) -> _Filter:
    f = _Filter()
    if host is not None:
        h = str(host).strip()
        if not h:
            raise ValueError("host: empty")
        try:
            f.host_ip = str(ipaddress.ip_address(h.strip("[]")))
            f.text.append(f"host {f.host_ip}")
        except ValueError:
            f.host_name = h.lower().rstrip(".")
            f.text.append(f"host {h}")
    if port is not None:
        try:
            p = int(port)
        except (TypeError, ValueError):
            raise ValueError(f"port {port!r}: not a number") from None
        if not 0 <= p <= 65535:
            raise ValueError(f"port {p}: not in 0..65535")
        f.port = p
        f.text.append(f"port {p}")
    if sni is not None:
        s = str(sni).strip().lower().rstrip(".")
        if not s:
            raise ValueError("sni: empty")
        f.sni = s
        f.text.append(f"SNI {sni}")
    if stream is not None:
        items = [stream] if isinstance(stream, (int, str, np.integer)) else list(stream)
        try:
            streams = frozenset(int(x) for x in items)
        except (TypeError, ValueError):
            raise ValueError(f"stream {stream!r}: not a tcp.stream number") from None
        if not streams:
            raise ValueError("stream: no tcp.stream given")
        f.streams = streams
        f.text.append("tcp.stream " + ", ".join(str(x) for x in sorted(streams)))
    origin = _origin_ns(cap)
    if start is not None:
        f.start_ns = _time_ns(start, origin, "start")
    if end is not None:
        f.end_ns = _time_ns(end, origin, "end")
    if f.start_ns is not None and f.end_ns is not None and f.start_ns > f.end_ns:
        raise ValueError(f"start {start!r} is after end {end!r}")
    if start is not None and end is not None:
        f.text.append(f"time {_time_text(start)} to {_time_text(end)}")
    elif start is not None:
        f.text.append(f"time from {_time_text(start)}")
    elif end is not None:
        f.text.append(f"time until {_time_text(end)}")
    return f


def _origin_ns(cap: Capture) -> int:
    """Time of the capture file's first frame (also for a subset of a subset)."""
    o = cap.summary.extra.get("subset_origin_ts_ns")
    return o if isinstance(o, int) else (cap.summary.first_ts_ns or 0)


def parse_time(value: TimeLike, origin_ns: int = 0, what: str = "time") -> int:
    """``value`` as integer ns since the epoch: a number (or numeric string) is seconds after
    ``origin_ns``; a datetime, Timestamp or ISO 8601 string is absolute (naive = UTC).
    Raises ValueError, naming ``what``, when it cannot be read."""
    return _time_ns(value, origin_ns, what)


def _time_ns(v: TimeLike, origin_ns: int, what: str) -> int:
    """``v`` as integer ns since the epoch: numbers (and numeric strings) are seconds after
    ``origin_ns``; datetimes and other strings are absolute (naive = UTC)."""
    if isinstance(v, bool):
        raise ValueError(f"{what} {v!r}: not a time")
    if isinstance(v, (int, float, np.integer, np.floating)):
        if not np.isfinite(v):
            raise ValueError(f"{what} {v!r}: not a finite number of seconds")
        return origin_ns + round(float(v) * 1e9)
    if isinstance(v, str):
        s = v.strip()
        try:
            secs = float(s)
        except ValueError:
            pass
        else:
            return _time_ns(secs, origin_ns, what)
        try:
            ts = pd.Timestamp(s)
        except (ValueError, TypeError):
            raise ValueError(
                f"{what} {v!r}: give seconds since the first frame (e.g. 1.5) or an ISO 8601 "
                "time (e.g. 2026-11-29T21:31:14Z)"
            ) from None
    elif isinstance(v, (_dt.datetime, pd.Timestamp)):
        ts = pd.Timestamp(v)
    else:
        raise ValueError(f"{what} {v!r}: not a time")
    if pd.isna(ts):
        raise ValueError(f"{what} {v!r}: not a time")
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return int(ts.value)


def _time_text(v: TimeLike) -> str:
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return f"{float(v):g} s"
    if isinstance(v, str):
        try:
            return f"{float(v):g} s"
        except ValueError:
            return v.strip()
    return pd.Timestamp(v).isoformat()


# -- matching --------------------------------------------------------------------------------------


def _name_match(values: pd.Series, pattern: str) -> pd.Series:
    """Case-insensitive exact or glob match of host names (a trailing ``:port`` and dot
    removed); NA never matches."""
    s = values.astype("string").str.lower().str.strip()
    s = s.str.replace(r":\d+$", "", regex=True).str.rstrip(".")
    if any(c in pattern for c in "*?["):
        hits = [isinstance(x, str) and fnmatch.fnmatchcase(x, pattern) for x in s.astype(object)]
        return pd.Series(hits, index=values.index, dtype=bool)
    return s.eq(pattern).fillna(False).astype(bool)


def _streams_named(cap: Capture, pattern: str, *, sni_only: bool) -> set[int]:
    """tcp.streams whose TLS SNI (and unless ``sni_only`` HTTP Host, :authority, WebSocket
    Host) matches ``pattern``."""
    cols = [("tls_handshakes", "sni")]
    if not sni_only:
        cols += [
            ("http_requests", "host"),
            ("http2_streams", "authority"),
            ("ws_connections", "host"),
        ]
    out: set[int] = set()
    for table, col in cols:
        df = cap.tables.get(table)
        if df is None or len(df) == 0 or col not in df.columns:
            continue
        out.update(int(x) for x in df.loc[_name_match(df[col], pattern), "tcp_stream"].tolist())
    return out


def _connection_names(cap: Capture, streams: set[int]) -> set[str]:
    """SNI / Host / :authority names seen on ``streams`` (lower case, no port)."""
    names: set[str] = set()
    for table, col in (
        ("tls_handshakes", "sni"),
        ("http_requests", "host"),
        ("http2_streams", "authority"),
        ("ws_connections", "host"),
    ):
        df = cap.tables.get(table)
        if df is None or len(df) == 0 or col not in df.columns:
            continue
        vals = df.loc[df["tcp_stream"].isin(streams), col].astype("string").dropna()
        for v in vals.str.lower().str.replace(r":\d+$", "", regex=True).str.rstrip("."):
            if v:
                names.add(str(v))
    return names


def _answers(col: pd.Series) -> list[set[str]]:
    """dns.answers ("A 1.2.3.4, CNAME x") -> the answer values of each row, as sets."""
    out: list[set[str]] = []
    for x in col.astype(object):
        if not isinstance(x, str) or not x:
            out.append(set())
        else:
            out.append({p.strip().split(" ", 1)[-1].lower().rstrip(".") for p in x.split(",")})
    return out


def _in_window(col: pd.Series, f: _Filter) -> pd.Series:
    ok = pd.Series(True, index=col.index)
    if f.start_ns is not None:
        ok &= (col >= pd.Timestamp(f.start_ns, unit="ns", tz="UTC")).fillna(False).astype(bool)
    if f.end_ns is not None:
        ok &= (col <= pd.Timestamp(f.end_ns, unit="ns", tz="UTC")).fillna(False).astype(bool)
    return ok


def _kept_streams(cap: Capture, f: _Filter) -> set[int]:
    c = cap.connections
    ok = pd.Series(True, index=c.index)
    if f.streams is not None:
        ok &= c["tcp_stream"].isin(f.streams)
    if f.port is not None:
        ok &= c["client_port"].eq(f.port) | c["server_port"].eq(f.port)
    if f.host_ip is not None:
        ok &= (c["client_addr"].eq(f.host_ip) | c["server_addr"].eq(f.host_ip)).fillna(False)
    if f.host_name is not None:
        ok &= c["tcp_stream"].isin(_streams_named(cap, f.host_name, sni_only=False))
    if f.sni is not None:
        ok &= c["tcp_stream"].isin(_streams_named(cap, f.sni, sni_only=True))
    if f.start_ns is not None:
        ok &= (c["last_ts"] >= pd.Timestamp(f.start_ns, unit="ns", tz="UTC")).fillna(False)
    if f.end_ns is not None:
        ok &= (c["first_ts"] <= pd.Timestamp(f.end_ns, unit="ns", tz="UTC")).fillna(False)
    return {int(x) for x in c.loc[ok.astype(bool), "tcp_stream"].tolist()}


def _dns_mask(cap: Capture, d: pd.DataFrame, f: _Filter, streams: set[int]) -> pd.Series:
    when = d["query_ts"].where(d["query_ts"].notna(), d["response_ts"])
    in_time = _in_window(when, f)
    if not f.by_connection:
        return in_time
    names = d["name"].astype("string").str.lower().str.rstrip(".")
    answers = _answers(d["answers"])
    # about a kept connection: its name, or one of its server addresses
    conns = cap.connections[cap.connections["tcp_stream"].isin(streams)]
    cnames = _connection_names(cap, streams)
    addrs = {str(a) for a in conns["server_addr"].dropna().tolist()}
    related = names.isin(cnames).fillna(False).astype(bool)
    if "tcp_stream" in d.columns:  # DNS over TCP or HTTPS carried by a kept connection
        related |= d["tcp_stream"].isin(streams).fillna(False).astype(bool)
    if addrs:
        related |= pd.Series([bool(addrs & a) for a in answers], index=d.index, dtype=bool)
    # matching the filters directly (all those that apply to a DNS row)
    direct = pd.Series(f.streams is None, index=d.index)
    if f.host_ip is not None:
        ip = f.host_ip
        direct &= (
            d["client_addr"].eq(ip).fillna(False)
            | d["server_addr"].eq(ip).fillna(False)
            | pd.Series([ip in a for a in answers], index=d.index, dtype=bool)
        ).astype(bool)
    if f.host_name is not None:
        direct &= _name_match(d["name"], f.host_name)
    if f.sni is not None:
        direct &= _name_match(d["name"], f.sni)
    if f.port is not None:
        direct &= pd.Series(f.port == 53, index=d.index) | d["client_port"].eq(f.port)
    return in_time & (related | direct)


def _packet_direct(pk: pd.DataFrame, f: _Filter) -> pd.Series:
    """Non-TCP packets matching the address/port filters (sni and stream match none)."""
    if f.sni is not None or f.streams is not None or f.host_name is not None:
        return pd.Series(False, index=pk.index)
    ok = pd.Series(True, index=pk.index)
    if f.host_ip is not None:
        ok &= (pk["src"].eq(f.host_ip) | pk["dst"].eq(f.host_ip)).fillna(False).astype(bool)
    if f.port is not None:
        ok &= (pk["sport"].eq(f.port) | pk["dport"].eq(f.port)).fillna(False).astype(bool)
    return ok


# -- the subset ------------------------------------------------------------------------------------


def subset(
    cap: Capture,
    *,
    host: str | None = None,
    port: int | str | None = None,
    sni: str | None = None,
    stream: int | str | Iterable[int | str] | None = None,
    start: TimeLike | None = None,
    end: TimeLike | None = None,
) -> Capture:
    """A new Capture (same class as ``cap``) with every table restricted to the connections
    matching all the given filters and to the time window (see the module docstring for the
    rules). No filter given: a copy of ``cap`` with ``summary.extra["subset"] = "everything"``.
    Row order and dtypes are kept; indexes are renumbered from 0. Raises ValueError for a
    filter value that cannot be read."""
    f = _parse_filter(cap, host, port, sni, stream, start, end)
    streams = _kept_streams(cap, f)
    rules = dict(RULES)
    tables: dict[str, pd.DataFrame] = {}

    # dns first (packets keep its frames), then packets (warnings follow their frames)
    # (and the QUIC tables: packets keeps their frames too)
    first = {"dns": 0, "quic_connections": 1, **dict.fromkeys(QUIC_TABLES[1:], 2), "packets": 3}
    order = sorted(cap.tables, key=lambda n: first.get(n, 4))
    dns_frames: set[int] = set()
    quic_kept: set[int] = set()
    packet_frames: np.ndarray | None = None
    for name in order:
        df = cap.tables[name]
        if name == "dns":
            keep = _dns_mask(cap, df, f, streams) if len(df) else pd.Series(dtype=bool)
            tables[name] = df[keep.to_numpy(dtype=bool)].reset_index(drop=True)
            for col in ("query_frame", "response_frame", "frame"):
                dns_frames.update(int(x) for x in tables[name][col].dropna().tolist())
            continue
        if name in QUIC_TABLES and len(df):
            keep = _quic_mask(name, df, f, quic_kept)
            tables[name] = df[keep.to_numpy(dtype=bool)].reset_index(drop=True)
            if name == "quic_connections":
                quic_kept = {int(x) for x in tables[name]["quic_connection"].tolist()}
            elif "frame" in df.columns:
                dns_frames.update(int(x) for x in tables[name]["frame"].tolist())
            continue
        rule = rules.get(name)
        if rule is None and "tcp_stream" in df.columns:
            rule = Rule("tcp_stream", None)  # a table pcaptools does not know: by stream
        if rule is None or len(df) == 0:
            tables[name] = df.copy()
            continue
        keep = _table_mask(df, rule, f, streams, dns_frames, packet_frames)
        tables[name] = df[keep.to_numpy(dtype=bool)].reset_index(drop=True)
        if name == "packets":
            packet_frames = tables[name]["frame"].to_numpy()

    pk = cap.tables.get("packets")
    summary = _summary(cap, tables, f, streams, pk is not None and len(pk) > 0)
    return type(cap)(summary, tables)


def _quic_mask(name: str, df: pd.DataFrame, f: _Filter, kept: set[int]) -> pd.Series:
    """quic_connections: the filters on its addresses, ports and SNI, and the window; the
    other QUIC and HTTP/3 tables: the rows of the ``kept`` connections (inside the window when
    the rows are packets, frames or events: they have a ``ts``)."""
    if name != "quic_connections":
        ok = df["quic_connection"].isin(kept).astype(bool)
        return ok & _in_window(df["ts"], f) if "ts" in df.columns else ok
    ok = pd.Series(f.streams is None, index=df.index)
    if f.host_ip is not None:
        ok &= (df["client_addr"].eq(f.host_ip) | df["server_addr"].eq(f.host_ip)).fillna(
            False).astype(bool)
    if f.port is not None:
        ok &= (df["client_port"].eq(f.port) | df["server_port"].eq(f.port)).astype(bool)
    for pattern in (f.sni, f.host_name):
        if pattern is not None:
            ok &= _name_match(df["sni"], pattern)
    if f.start_ns is not None:
        ok &= (df["last_ts"] >= pd.Timestamp(f.start_ns, unit="ns", tz="UTC")).astype(bool)
    if f.end_ns is not None:
        ok &= (df["first_ts"] <= pd.Timestamp(f.end_ns, unit="ns", tz="UTC")).astype(bool)
    return ok


def _table_mask(
    df: pd.DataFrame,
    rule: Rule,
    f: _Filter,
    streams: set[int],
    dns_frames: set[int],
    packet_frames: np.ndarray | None,
) -> pd.Series:
    col = df[rule.stream] if rule.stream is not None else None
    if col is None:
        return pd.Series(True, index=df.index)
    on_kept = col.isin(streams).fillna(False).astype(bool)
    if rule.kind == "coverage":  # whole rows: a UDP flow or class overlapping the subset
        other = pd.Series(True, index=df.index) if not f.by_connection else _packet_direct(df, f)
        if packet_frames is not None and (f.start_ns is not None or f.end_ns is not None):
            lo = np.searchsorted(packet_frames, df["frame"].to_numpy(np.int64), "left")
            hi = np.searchsorted(packet_frames, df["last_frame"].to_numpy(np.int64), "right")
            other &= pd.Series(hi > lo, index=df.index)
        return on_kept | (other.astype(bool) & col.isna())
    if rule.kind in ("per_packet", "warnings"):
        no_stream = col.isna().to_numpy()
        if rule.kind == "per_packet":
            other = (
                pd.Series(True, index=df.index) if not f.by_connection else _packet_direct(df, f)
            )
            other |= df["frame"].isin(dns_frames)
        else:  # warnings without a connection: follow their frame; file-level: always
            frame = df["frame"]
            if packet_frames is not None:
                other = frame.isin(packet_frames).fillna(False).astype(bool)
            else:
                other = pd.Series(not f.by_connection, index=df.index)
            other |= frame.isna()
        on_kept = on_kept | (other.astype(bool) & no_stream)
    if rule.time is not None and (f.start_ns is not None or f.end_ns is not None):
        t = df[rule.time]
        in_time = _in_window(t, f)
        if rule.kind == "warnings":
            in_time |= t.isna()  # file-level: no time
        on_kept &= in_time
    return on_kept


def _summary(
    cap: Capture,
    tables: Mapping[str, pd.DataFrame],
    f: _Filter,
    streams: set[int],
    have_packets: bool,
) -> Any:
    s = cap.summary
    out = dataclasses.replace(s, extra=dict(s.extra), linktypes=list(s.linktypes))
    first, last = s.first_ts_ns, s.last_ts_ns
    if first is not None and f.start_ns is not None:
        first = max(first, f.start_ns)
    if last is not None and f.end_ns is not None:
        last = min(last, f.end_ns)
    if first is not None and last is not None and last < first:
        last = first
    out.first_ts_ns, out.last_ts_ns = first, last
    extra = out.extra
    extra.pop("warning_counts", None)  # counted over the whole capture: recounted from rows
    extra.pop("tcp_data_segments", None)
    conns = tables.get("connections", cap.connections)
    if have_packets:
        pk = tables["packets"]
        proto = pk["ip_proto"]
        out.frames = len(pk)
        out.wire_bytes = int(pk["frame_len"].sum())
        out.tcp_frames = int((proto.eq(6) & pk["tcp_stream"].notna()).fillna(False).sum())
        out.udp_frames = int(proto.eq(17).fillna(False).sum())
        out.non_ip_frames = int(pk["ip_version"].isna().sum())
        out.other_ip_frames = out.frames - out.tcp_frames - out.udp_frames - out.non_ip_frames
        extra["tcp_data_segments"] = int(pk["tcp_len"].fillna(0).gt(0).sum())
    else:
        # no packets table: the kept connections' own counts (whole connections)
        out.tcp_frames = int(conns["client_packets"].sum() + conns["server_packets"].sum())
        out.frames = out.tcp_frames
        out.wire_bytes = int(conns["client_wire_bytes"].sum() + conns["server_wire_bytes"].sum())
        out.udp_frames = out.other_ip_frames = out.non_ip_frames = 0
        extra["subset_counts"] = "estimated from the kept connections (no packets table)"
    text = ", ".join(f.text) if f.text else "everything"
    prev = s.extra.get("subset")
    extra["subset"] = f"{prev}; then {text}" if isinstance(prev, str) else text
    extra["subset_connections"] = len(streams)
    extra["subset_of_frames"] = int(s.extra.get("subset_of_frames", s.frames))  # type: ignore[call-overload]
    extra["subset_display_filter"] = _display_filter(f, streams, cap)
    if s.first_ts_ns is not None:
        extra["subset_origin_ts_ns"] = _origin_ns(cap)
    return out


def _display_filter(f: _Filter, streams: set[int], cap: Capture) -> str:
    """A Wireshark display filter for the same packets (connections by tcp.stream)."""
    parts: list[str] = []
    if f.by_connection:
        tcp = "tcp.stream in {" + ",".join(str(x) for x in sorted(streams)) + "}"
        if not streams:
            tcp = "tcp.stream == -1"  # matches nothing, like the subset
        parts.append(tcp)
    origin = _origin_ns(cap)
    if f.start_ns is not None:
        parts.append(f"frame.time_relative >= {(f.start_ns - origin) / 1e9:.9g}")
    if f.end_ns is not None:
        parts.append(f"frame.time_relative <= {(f.end_ns - origin) / 1e9:.9g}")
    return " && ".join(parts)
