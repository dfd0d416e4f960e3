"""Builders of the TCP tables from the tracker's per-connection records."""

from __future__ import annotations

import marshal
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np
import pandas as pd

from .._columns import CodeColumn, nullable
from ..diagnostics import Diagnostics
from ..tcp.cold import cold_connection_columns, cold_handshake_columns
from ..tcp.tracker import NO_LOSS, Connection, TcpTracker, addr_text
from .foundation import CONNECTIONS, TCP_EVENTS, TCP_HANDSHAKES, TCP_LOSSES, WARNINGS
from .schema import ChunkedFrame, TableSchema

CHUNK_ROWS = 16384
"""connections cast into table columns at a time (:meth:`TableSchema.frame_in_chunks`)"""


def record_tables(tracker: TcpTracker,
                  keep: Callable[[Connection], bool] = lambda conn: True,
                  write: Callable[[str, pd.DataFrame], None] | None = None,
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``connections`` and ``tcp_handshakes`` in one pass, :data:`CHUNK_ROWS` tcp_streams at
    a time: the rows of the tracker's records, and those of its cold connections
    (:mod:`pcaptools.tcp.cold`) made as whole columns, in tcp_stream order. Each record is
    dropped from ``tracker.connections`` (left None) once its rows are made unless
    ``keep(conn)``: the records give way to the tables as they are built, so the two are not
    held whole at once. For the pipeline's last use of the records.

    ``write(table, chunk)`` (the streaming export): each chunk of the two tables goes there
    as it is made, and the two frames returned are empty: neither table is ever whole in
    memory."""
    conns: list[Any] = tracker.connections
    cold, frozen = tracker.cold, tracker.frozen
    cf, hf = ChunkedFrame(CONNECTIONS), ChunkedFrame(TCP_HANDSHAKES)
    for start in range(0, len(conns), CHUNK_ROWS):
        end = start + CHUNK_ROWS
        chunk = tracker.records(start, end)
        crows, hrows = _connection_rows(chunk), _handshake_rows(chunk)
        packed = frozen.take_rows(start, end) if frozen is not None else []
        if packed:  # (rows made when their records were frozen: in tcp_stream order)
            crows = sorted(crows + [p[0] for p in packed], key=_first)
            hrows = sorted(hrows + [h for p in packed for h in p[1]], key=_first)
        batch = cold.batch(start, end) if cold is not None else None
        if batch is None:
            if write is None:
                cf.add(crows)
                hf.add(hrows)
            else:
                write("connections", CONNECTIONS.frame(crows))
                write("tcp_handshakes", TCP_HANDSHAKES.frame(hrows))
        else:
            c = _merged(CONNECTIONS, crows, cold_connection_columns(batch, addr_text))
            h = _merged(TCP_HANDSHAKES, hrows, cold_handshake_columns(batch))
            if write is None:
                cf.add_frame(c)
                hf.add_frame(h)
            else:
                write("connections", c)
                write("tcp_handshakes", h)
            del c, h
        for conn in chunk:  # (a frozen record was thawed: kept, it is put back)
            conns[conn.conv.tcp_stream] = conn if keep(conn) else None
        del chunk, crows, hrows, packed
    if write is not None and not conns:  # (the files exist, with their schema)
        write("connections", CONNECTIONS.frame([]))
        write("tcp_handshakes", TCP_HANDSHAKES.frame([]))
    return cf.frame(), hf.frame()


_first = itemgetter(0)
"""a row's tcp_stream"""


def packed_rows(conn: Connection, keep: Callable[[Connection], bool]) -> bytes | None:
    """A record's ``connections`` row and ``tcp_handshakes`` rows, packed, made when it is
    frozen (:attr:`~pcaptools.tcp.tracker.TcpTracker.row_maker`), so the end of the pass does
    not thaw it; None for a record ``keep`` wants (the end thaws it, and keeps it)."""
    if keep(conn):
        return None
    rows: Any = (_connection_rows([conn])[0], _handshake_rows([conn]))  # (marshallable values)
    return marshal.dumps(rows)


def _merged(schema: TableSchema, rows: list[tuple[object, ...]],
            cold_columns: dict[str, Any]) -> pd.DataFrame:
    """The rows of records and the columns of cold connections as one frame, in tcp_stream
    order."""
    df = schema.frame(columns=cold_columns, copy=False)
    if rows:
        df = pd.concat([schema.frame(rows), df], ignore_index=True)
        order = np.argsort(df["tcp_stream"].to_numpy(), kind="stable")
        df = df.take(order).reset_index(drop=True)
        for col in schema.columns:  # (concat leaves two different category sets as objects)
            if col.dtype == "category" and not isinstance(df[col.name].dtype,
                                                          pd.CategoricalDtype):
                df[col.name] = pd.Categorical(df[col.name].tolist())  # (as TableSchema casts)
    return df


def _connection_rows(conns: list[Connection]) -> list[tuple[object, ...]]:
    rows = []
    for conn in conns:
        c = conn.conv
        fin = conn.fin or _NO_FIN
        fin_c, fin_s = fin[0], fin[1]
        # an RST after both FINs (a late reset of a closed connection) does not change the ending
        rst_after_close = (conn.rst_frame is not None and fin_c is not None and fin_s is not None
                           and max(fin_c, fin_s) < conn.rst_frame)
        end_by: str | None
        end_frame: int | None
        end_ts: int | None
        if conn.rst_frame is not None and not rst_after_close:
            end_reason, end_by = "rst", "client" if conn.rst_by_client else "server"
            end_frame, end_ts = conn.rst_frame, conn.rst_ts
        elif fin_c is not None and fin_s is not None:
            end_reason = "fin"
            if fin_c > fin_s:
                end_by, end_frame, end_ts = "client", fin_c, fin[2]
            else:
                end_by, end_frame, end_ts = "server", fin_s, fin[3]
        elif fin_c is not None or fin_s is not None:
            end_reason = "half_closed"
            if fin_c is not None:
                end_by, end_frame, end_ts = "client", fin_c, fin[2]
            else:
                end_by, end_frame, end_ts = "server", fin_s, fin[3]
        else:
            end_reason, end_by, end_frame, end_ts = "open_at_eof", None, None, None
        rows.append((
            c.tcp_stream, c.ip_version, addr_text(c.client_addr), c.client_port,
            addr_text(c.server_addr), c.server_port, c.client_inferred,
            conn.first_frame, conn.last_frame, conn.first_ts, conn.last_ts,
            (conn.last_ts - conn.first_ts) / 1e6,
            *conn.counts,  # packets, payload_bytes, wire_bytes, resent_bytes (client, server)
            conn.retransmissions, conn.history.conn_state(), conn.history.history,
            end_reason, end_by, end_frame, end_ts,
            *_timeline(conn),
        ))
    return rows


_NO_FIN = (None, None, None, None)
"""Connection.fin of a connection without FIN"""


def _pos(v: int) -> int | None:
    """-1 / 0 sentinels of the tracker's counters -> None (NA)."""
    return v if v > 0 else None


def _oldest_unacked(unacked: list[list[int]]) -> tuple[int | None, int | None]:
    if not unacked:
        return None, None
    frame, _seq, _nextseq, ts = unacked[0]
    return frame, ts


def _timeline(conn: Connection) -> tuple[object, ...]:
    """The CONNECTIONS columns after end_ts, in schema order."""
    c, s = conn.side
    lc, ls = conn.loss or NO_LOSS
    fin = conn.fin or _NO_FIN
    cu = _oldest_unacked(conn.conv.c2s.unacked)
    su = _oldest_unacked(conn.conv.s2c.unacked)
    rst = conn.rst_frame is not None
    return (
        _pos(c.last_frame), c.last_ts if c.last_frame else None,
        _pos(s.last_frame), s.last_ts if s.last_frame else None,
        fin[0], fin[2], fin[1], fin[3],
        conn.rst_frame, conn.rst_ts,
        None if not rst else ("client" if conn.rst_by_client else "server"),
        conn.rst_ttl if rst and conn.rst_ttl >= 0 else None,
        conn.rst_ip_id if rst and conn.rst_ip_id >= 0 else None,
        _nonneg(c.ttl_min), _nonneg(c.ttl_max), _nonneg(s.ttl_min), _nonneg(s.ttl_max),
        c.ip_id if c.last_frame and c.ip_id >= 0 else None,
        s.ip_id if s.last_frame and s.ip_id >= 0 else None,
        _pos(c.ip_id_first), _pos(s.ip_id_first),
        conn.idle_max_ns / 1e6, _pos(conn.idle_max_start_frame), _pos(conn.idle_max_end_frame),
        conn.idle_max_end_ts if conn.idle_max_end_frame else None,
        conn.idle_last_ns / 1e6 if conn.idle_last_end_frame else None,
        _pos(conn.idle_last_start_frame), _pos(conn.idle_last_end_frame),
        conn.idle_last_end_ts if conn.idle_last_end_frame else None,
        cu[0], cu[1], su[0], su[1],
        c.handshake_bytes, s.handshake_bytes, c.teardown_bytes, s.teardown_bytes,
        c.pure_ack_packets, s.pure_ack_packets, c.pure_ack_bytes, s.pure_ack_bytes,
        c.max_seg, s.max_seg, c.max_acked, s.max_acked,
        None if not c.payload_bytes else c.no_df_packets == 0,
        None if not s.payload_bytes else s.no_df_packets == 0,
        conn.vantage(), lc.lost, ls.lost, lc.spurious, ls.spurious,
        lc.capture_drop_bytes, ls.capture_drop_bytes,
    )


def _nonneg(v: int) -> int | None:
    return v if v >= 0 else None


def losses_table(tracker: TcpTracker) -> pd.DataFrame:
    """The ``tcp_losses`` table, in key order (tcp_stream, direction, seq, frame)."""
    df = TCP_LOSSES.frame(tracker.losses.rows)
    if len(df):
        df = df.sort_values(list(TCP_LOSSES.key), kind="stable").reset_index(drop=True)
    return df


def _handshake_rows(conns: list[Connection]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for conn in conns:
        hs = conn.handshake
        if hs is None:
            continue
        if hs.refused:
            result = "refused"
        elif hs.synack_frame is None:
            result = "no_answer"
        elif hs.ack_frame is None:
            result = "no_final_ack"
        else:
            result = "established"
        irtt = conn.conv.irtt_ns
        rows.append((
            conn.conv.tcp_stream, hs.syn_frame, hs.syn_ts, hs.syn_count, hs.synack_frame,
            hs.synack_ts, hs.synack_count, hs.ack_frame, hs.ack_ts,
            None if irtt is None else irtt / 1e6,
            None if hs.syn_ts is None or hs.synack_ts is None else (hs.synack_ts - hs.syn_ts) / 1e6,
            result, hs.client_mss, hs.server_mss, hs.client_wscale, hs.server_wscale,
            hs.client_sack_perm, hs.server_sack_perm, hs.client_timestamps, hs.server_timestamps,
            hs.tfo_cookie_request, hs.tfo_cookie_len, hs.syn_data_bytes,
        ))
    return rows


def events_table(tracker: TcpTracker, *, take: bool = False) -> pd.DataFrame:
    """The ``tcp_events`` table from the tracker's event columns. ``take=True`` hands the rows
    over (the columns are emptied, category codes kept): the next call gives only the rows
    added after, which is how :class:`EventsDrain` streams the table out in chunks."""
    ev = tracker.events
    i = ev.ints

    def ints(name: str) -> np.ndarray:
        return i[name].take() if take else i[name].to_numpy()

    def codes(col: CodeColumn) -> pd.Categorical:
        return col.take() if take else col.to_categorical()

    return TCP_EVENTS.frame(columns={
        "frame": ints("frame"), "ts": ints("ts"), "tcp_stream": ints("tcp_stream"),
        "direction": codes(ev.direction), "kind": codes(ev.kind),
        "seq": nullable(ints("seq")), "len": nullable(ints("len")), "ack": nullable(ints("ack")),
        "dup_ack_num": nullable(ints("dup_ack_num")),
        "dup_ack_frame": nullable(ints("dup_ack_frame")),
    }, copy=False)


class EventsDrain:
    """The tracker's tcp_events rows as a :class:`~pcaptools.tables.schema.Drainable`
    (streaming export): ``drain()`` hands over the rows added since the last call."""

    def __init__(self, tracker: TcpTracker) -> None:
        self.tracker = tracker

    def pending(self) -> dict[str, int]:
        return {"tcp_events": len(self.tracker.events)}

    def drain(self, table: str = "tcp_events") -> pd.DataFrame:
        return events_table(self.tracker, take=True)


def warnings_table(diag: Diagnostics) -> pd.DataFrame:
    rows = [
        (a.ts_ns, a.frame, a.tcp_stream, a.direction, a.layer, a.code, a.detail, a.nbytes)
        for a in diag.rows
    ]
    rows.extend(suppressed_rows(diag.suppressed()))
    return WARNINGS.frame(rows)


def suppressed_rows(suppressed: dict[str, int]) -> list[tuple[Any, ...]]:
    """The closing rows of the warnings table: one per code that had more occurrences than
    were kept, saying how many more (no time, frame or connection)."""
    return [(None, None, None, None, code.split(".", 1)[0], code,
             f"{n} more occurrences of {code} were counted but not listed", None)
            for code, n in sorted(suppressed.items())]
