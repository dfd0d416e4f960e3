"""Frozen connections: the records of connections that ended or went idle, packed into one
``bytes`` object each until a segment of their address pair comes again.

A connection the tracker analyses costs ~3.3 KB of Python objects (its
:class:`~.tracker.Connection` record, the analyzer's :class:`~.analysis.TcpConversation` and
their parts) from its first segment after the SYN to the end of the capture. A busy load
balancer's hour, or a closed-port scan, is millions of connections that ended long before the
capture did. :class:`~.tracker.TcpTracker` freezes such a connection (when ``load()`` asks it
to: :class:`FreezePolicy`): every field of its record and conversation goes into one
``marshal`` blob (~0.8 KB for a short connection, :meth:`RecordCodec.freeze`), the objects go,
and the analyzer forgets the address pair. A later segment of that address pair (a
retransmitted FIN, a late RST, a reused port, an ICMP error quoting it) thaws it
(:meth:`RecordCodec.thaw`): the same objects with the same values are made again and the
analyzer takes the address pair back, so the segment is analysed exactly as if the connection
had never been frozen, under the same ``tcp_stream`` (tshark never forgets an address pair, and
neither does pcaptools: unlike Zeek's timeouts, freezing changes no number and no row). The
record's table rows are made when it is frozen (:attr:`~.tracker.TcpTracker.row_maker`; it
cannot change while frozen), so the end of the pass reads them
(:meth:`FrozenConnections.take_rows`) instead of thawing the record. With ``spill``
(``load(out=DIR)``) frozen records move to a temporary database in pages.

A connection with no byte-stream observer state (``Connection.streams`` None: nobody parses
its payload, or ``load(payloads=False)``) is frozen as it is. A parsed connection (TLS,
HTTP/1, HTTP/2, WebSocket) gets there in one of two ways:

* *ended*: when its time comes, if both directions ended (a FIN reached with every byte
  before it delivered, or an RST), its reassemblers hold nothing (no piece behind a hole) and
  its observers are ``done`` (they said all they will: TLS, HTTP/1, HTTP/2, WebSocket and the
  detectors are, once both directions closed), the tracker lets its parsers go
  (:meth:`~.tracker.TcpTracker._release`) and follows its sequence space as for an unparsed
  connection, which reports the same gaps. Their ``finish`` would have added nothing, so no
  row changes; the one thing lost is payload arriving after that end and after the freeze
  delay (beyond a FIN: a protocol violation or a reused port without a SYN; after an RST:
  data more than a second in flight), which a ``tcp.payload_after_release`` warning reports
  (with its byte count; the coverage row says ``partly_analysed``) instead of parsing;
* *idle*: otherwise (still open, or holding bytes behind a hole), once idle, its byte-stream
  state (parsers and reassemblers) is packed (:mod:`.packing`) into the record
  (``Connection.packed``; a TLS connection's, which holds traffic keys, stays in the
  tracker's memory and never goes to disk) and made again, the same objects with the same
  values, when the record thaws: at the connection's next segment, or at the end of the
  capture (:meth:`~.tracker.TcpTracker.finish` thaws such records one at a time, finishes
  them and freezes them again). Nothing is lost. A state holding something the packer does
  not pack (a live decompressor: a WebSocket with permessage-deflate, a compressed body in
  progress; a plugin's observer that does not opt in) stays live, and its connection is not
  frozen.

``tests/tcp/test_frozen.py`` freezes every connection after each of its segments and requires
every table, warning and observer call to be what they are without it.
"""

from __future__ import annotations

import dataclasses
import marshal
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np

from .._memory import trim
from .analysis import TcpConversation, TcpDirection
from .cold import (
    BLOOM_BITS,
    PAGE_ROWS,
    KeyBloom,
    all_or_nothing,
    pair_hash,
    temporary_database,
)
from .connstate import ConnHistory, _Endpoint
from .gaps import SeqFollower, _Dir
from .losses import LossDirection

_NS = 1_000_000_000
_I64 = 1 << 63


@dataclass(frozen=True, slots=True)
class FreezePolicy:
    """When the tracker freezes a connection (capture time, nanoseconds; a parsed connection's
    parsers are let go once it ended, or packed once it is idle: see the module docstring).

    Zeek expires a connection 5 s after its close or reset (``tcp_close_delay``,
    ``tcp_reset_delay``) and after 5 minutes without a packet (``tcp_inactivity_timeout``),
    and a packet after that starts a new connection. Freezing loses nothing (a later segment
    thaws the connection under its number), so pcaptools can freeze sooner: 1 s after the last
    packet of a connection that ended (RST, or FIN both ways), 60 s after the last packet of
    one that did not. ``every``: the tracker looks for connections to freeze once every that
    many segments, and only while it holds more than ``min_records`` records (~3.3 KB each:
    a capture of fewer connections is never frozen, and pays nothing for it). The tests
    freeze before each segment: ``FreezePolicy(0, 0, 1, 0)``."""

    ended_ns: int = 1 * _NS
    idle_ns: int = 60 * _NS
    every: int = 4096
    min_records: int = 10_000


# ----------------------------------------------------------------- the packed form

def _names(cls: type) -> tuple[str, ...]:
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    return tuple(cls.__slots__)  # type: ignore[attr-defined]


def _make(cls: Any, names: tuple[str, ...], values: tuple[Any, ...]) -> Any:
    o = cls.__new__(cls)
    for n, v in zip(names, values, strict=True):
        setattr(o, n, v)
    return o


class RecordCodec:
    """Packs a tracker's connection record (``conn_cls``, with its ``DirStats`` and
    ``Handshake`` classes: the tracker gives them, this module does not import it) and its
    conversation into one ``marshal`` blob (:meth:`freeze`) and makes them again
    (:meth:`thaw`): attrgetters of every class of a record, in a fixed field order."""

    __slots__ = (
        "at",
        "conn",
        "conn_cls",
        "conn_n",
        "conv",
        "conv_n",
        "dir",
        "dir_n",
        "ds",
        "ds_cls",
        "ep",
        "ep_n",
        "gd",
        "gd_n",
        "hist",
        "hist_n",
        "hs",
        "hs_cls",
        "ld",
        "ld_n",
    )

    def __init__(self, conn_cls: type, ds_cls: type, hs_cls: type) -> None:
        self.conn_cls, self.ds_cls, self.hs_cls = conn_cls, ds_cls, hs_cls
        self.conn_n = _names(conn_cls)
        self.conn = attrgetter(*self.conn_n)
        self.at = tuple(self.conn_n.index(n) for n in ("conv", "history", "side", "handshake",
                                                       "follow", "loss"))
        """positions of the record's fields that are objects of their own"""
        self.hs = attrgetter(*_names(hs_cls))
        self.ds = attrgetter(*_names(ds_cls))
        self.conv_n = tuple(n for n in _names(TcpConversation) if n not in ("c2s", "s2c"))
        self.conv = attrgetter(*self.conv_n)
        self.dir_n = _names(TcpDirection)
        self.dir = attrgetter(*self.dir_n)
        self.hist_n = tuple(n for n in _names(ConnHistory) if n not in ("_orig", "_resp"))
        self.hist = attrgetter(*self.hist_n)
        self.ep_n = _names(_Endpoint)
        self.ep = attrgetter(*self.ep_n)
        self.gd_n = _names(_Dir)
        self.gd = attrgetter(*self.gd_n)
        self.ld_n = _names(LossDirection)
        self.ld = attrgetter(*self.ld_n)

    def freeze(self, conn: Any) -> bytes:
        """Every field of ``conn`` (no byte-stream observer: ``streams`` None) and of its
        conversation as one blob."""
        assert conn.streams is None
        c = conn.conv
        h = conn.history
        hs = conn.handshake
        f = conn.follow
        loss = conn.loss
        side = conn.side
        v = list(self.conn(conn))
        i_conv, i_hist, i_side, i_hs, i_follow, i_loss = self.at
        d, ep, gd, ld = self.dir, self.ep, self.gd, self.ld
        v[i_conv] = (self.conv(c), d(c.c2s), d(c.s2c))
        v[i_hist] = (self.hist(h), ep(h._orig), ep(h._resp))
        v[i_side] = (self.ds(side[0]), self.ds(side[1]))
        v[i_hs] = None if hs is None else self.hs(hs)
        v[i_follow] = None if f is None else (f.hi, gd(f.dirs[0]), gd(f.dirs[1]), f.released)
        v[i_loss] = None if loss is None else (ld(loss[0]), ld(loss[1]))
        return marshal.dumps(tuple(v))

    def thaw(self, blob: bytes) -> Any:
        """The record :meth:`freeze` packed, with its conversation, as new objects."""
        v = list(marshal.loads(blob))
        i_conv, i_hist, i_side, i_hs, i_follow, i_loss = self.at
        cv, c2s, s2c = v[i_conv]
        conv = _make(TcpConversation, self.conv_n, cv)
        conv.c2s = _make(TcpDirection, self.dir_n, c2s)
        conv.s2c = _make(TcpDirection, self.dir_n, s2c)
        v[i_conv] = conv
        hv, orig, resp = v[i_hist]
        h = _make(ConnHistory, self.hist_n, hv)
        h._orig = _make(_Endpoint, self.ep_n, orig)
        h._resp = _make(_Endpoint, self.ep_n, resp)
        v[i_hist] = h
        c, s = v[i_side]
        v[i_side] = (self.ds_cls(*c), self.ds_cls(*s))
        if v[i_hs] is not None:
            v[i_hs] = self.hs_cls(*v[i_hs])
        if v[i_follow] is not None:
            hi, d0, d1, released = v[i_follow]
            f = SeqFollower.__new__(SeqFollower)
            f.hi = hi
            f.released = released
            f.dirs = (_make(_Dir, self.gd_n, d0), _make(_Dir, self.gd_n, d1))
            v[i_follow] = f
        if v[i_loss] is not None:
            a, b = v[i_loss]
            v[i_loss] = (_make(LossDirection, self.ld_n, a), _make(LossDirection, self.ld_n, b))
        return self.conn_cls(*v)


# ----------------------------------------------------------------- the store

class _Disk:
    """Frozen records moved out of memory: a private temporary sqlite database (deleted when
    closed) with, per record, its tcp_stream, address-pair key (NULL: the pair is a later
    connection's), blob and packed rows; and a Bloom filter of the keys."""

    __slots__ = ("bloom", "db")

    def __init__(self, bloom_bits: int) -> None:
        self.bloom = KeyBloom(bloom_bits)
        db = self.db = temporary_database()
        db.execute("CREATE TABLE frozen (stream INTEGER PRIMARY KEY, key INTEGER, blob BLOB"
                   " NOT NULL, rows BLOB)")
        db.execute("CREATE INDEX frozen_key ON frozen (key) WHERE key IS NOT NULL")

    def put(self, recs: list[tuple[int, int | None, bytes, bytes | None]]) -> None:
        with all_or_nothing(self.db):
            self.db.executemany("INSERT INTO frozen VALUES (?, ?, ?, ?)", recs)
        self.bloom.add(np.array([r[1] for r in recs if r[1] is not None], dtype=np.int64))

    def with_key(self, key: int) -> list[tuple[int, bytes]]:
        if not self.bloom.may_hold(key):
            return []
        return self.db.execute("SELECT stream, blob FROM frozen WHERE key = ?",
                               (key,)).fetchall()

    def get(self, stream: int) -> tuple[bytes, bytes | None]:
        return self.db.execute(  # type: ignore[no-any-return]
            "SELECT blob, rows FROM frozen WHERE stream = ?", (stream,)).fetchone()

    def delete(self, stream: int) -> None:
        self.db.execute("DELETE FROM frozen WHERE stream = ?", (stream,))

    def rows_between(self, start: int, end: int) -> list[tuple[int, bytes]]:
        return self.db.execute("SELECT stream, rows FROM frozen WHERE stream >= ? AND stream < ?"
                               " AND rows IS NOT NULL ORDER BY stream", (start, end)).fetchall()


_ON_DISK_ROWS, _ON_DISK = 1, 2
"""FrozenConnections.on_disk: the record is on disk with its rows, without"""


class FrozenConnections:
    """The frozen records of one tracker: ``blobs[tcp_stream]`` (None: not frozen, or on
    disk) and an index of their address pairs (:func:`~.cold.pair_hash` -> tcp_stream, or a
    list of them for keys that collide; a key match is checked against the record's
    addresses).

    ``spill`` (the streaming export's choice, as for cold SYNs): when :data:`PAGE_ROWS` x 2
    records are frozen in memory, the :data:`PAGE_ROWS` frozen first move to a temporary
    database (:class:`_Disk`), and their address pairs leave the index (a Bloom filter of
    their keys answers "never moved" without a query). If the database cannot be made or
    written, they stay in memory (:attr:`spill_error` says why, the tracker warns)."""

    __slots__ = (
        "_disk",
        "_order",
        "blobs",
        "bloom_bits",
        "codec",
        "finish",
        "index",
        "n",
        "n_disk",
        "on_disk",
        "page_rows",
        "rows",
        "spill",
        "spill_error",
    )

    def __init__(self, codec: RecordCodec, spill: bool = False, *, page_rows: int = PAGE_ROWS,
                 bloom_bits: int = BLOOM_BITS) -> None:
        self.codec = codec
        self.blobs: list[bytes | None] = []
        self.rows: list[bytes | None] = []
        """``rows[tcp_stream]``: the table rows of a frozen record, made when it was frozen
        (:attr:`~.tracker.TcpTracker.row_maker`), packed; None: none were made"""
        self.index: dict[int, int | list[int]] = {}
        self.finish = bytearray()
        """per tcp_stream: 1 if its frozen record is one the end of the capture must see (a
        hole the loss table closes, a content gap to report, packed parsers to finish):
        :meth:`~.tracker.TcpTracker.finish` thaws those (a byte each: a million idle
        connections to finish would cost ~60 MB as a set)"""
        self.n = 0
        """records frozen now (those on disk among them)"""
        self.spill = spill
        self.page_rows = page_rows
        self.bloom_bits = bloom_bits
        self._order: list[tuple[int, int | None, bytes]] = []
        """(tcp_stream, key, blob) of the records frozen in memory, in the order frozen (with
        ``spill``; a record thawed since no longer has that blob)"""
        self.on_disk = bytearray()
        """per tcp_stream: 0, or _ON_DISK_ROWS / _ON_DISK while its record is on disk"""
        self.n_disk = 0
        self._disk: _Disk | None = None
        self.spill_error: str | None = None

    def put(self, stream: int, blob: bytes, key: int | None, at_finish: bool,
            rows: bytes | None = None) -> None:
        """Keep ``blob`` as ``stream``'s record (and ``rows``, its table rows); ``key``: its
        address pair's (None: the pair belongs to a later connection, so nothing thaws this
        one before the end)."""
        blobs = self.blobs
        if stream >= len(blobs):
            more = [None] * (stream + 1 - len(blobs))
            blobs.extend(more)
            self.rows.extend(more)
            self.finish.extend(bytes(len(more)))
            if self.spill:
                self.on_disk.extend(bytes(len(more)))
        blobs[stream] = blob
        self.rows[stream] = rows
        self.n += 1
        if at_finish:
            self.finish[stream] = 1
        if key is not None:
            have = self.index.get(key)
            if have is None:
                self.index[key] = stream
            elif isinstance(have, int):
                self.index[key] = [have, stream]
            else:
                have.append(stream)
        if self.spill:
            order = self._order
            order.append((stream, key, blob))
            if len(order) >= 2 * self.page_rows and self.spill_error is None:
                self._move(order[:self.page_rows])
                del order[:self.page_rows]

    def _move(self, page: list[tuple[int, int | None, bytes]]) -> None:
        """The records of ``page`` still frozen in memory as they were then go to the
        database."""
        blobs, rows = self.blobs, self.rows
        recs = [(s, k, b, rows[s]) for s, k, b in page if blobs[s] is b]
        import sqlite3  # (lazily: only a spill needs it)

        try:
            if self._disk is None:
                self._disk = _Disk(self.bloom_bits)
            self._disk.put(recs)
        except sqlite3.Error as exc:
            self.spill_error = f"{type(exc).__name__}: {exc}"
            return
        on_disk = self.on_disk
        for s, k, _, r in recs:
            blobs[s] = rows[s] = None
            on_disk[s] = _ON_DISK if r is None else _ON_DISK_ROWS
            if k is not None:
                self._unindex(s, k)
        self.n_disk += len(recs)
        trim()

    def take(self, src: bytes, sport: int, dst: bytes, dport: int,
             same: Callable[[Any], bool]) -> Any:
        """The frozen record of this address pair, thawed and no longer frozen (None: none).
        ``same(record)``: whether it is the connection of these addresses (a key collision
        is not)."""
        key = pair_hash(src, sport, dst, dport)
        have = self.index.get(key)
        if have is not None:
            for stream in ([have] if isinstance(have, int) else list(have)):
                blob = self.blobs[stream]
                assert blob is not None
                conn = self.codec.thaw(blob)
                if same(conn):
                    self._forget(stream, key)
                    return conn
        if self.n_disk:
            assert self._disk is not None
            for stream, blob in self._disk.with_key(key):
                conn = self.codec.thaw(blob)
                if same(conn):
                    self._off_disk(stream)
                    return conn
        return None

    def pop(self, stream: int, with_rows: bool = True) -> Any:
        """``stream``'s record, thawed and no longer frozen (None: not frozen, or, unless
        ``with_rows``, frozen with its table rows)."""
        if stream >= len(self.blobs):
            return None
        blob = self.blobs[stream]
        if blob is None:
            state = self.on_disk[stream] if self.n_disk else 0
            if not state or (state == _ON_DISK_ROWS and not with_rows):
                return None
            assert self._disk is not None
            blob = self._disk.get(stream)[0]
            self._off_disk(stream)
            return self.codec.thaw(blob)
        if not with_rows and self.rows[stream] is not None:
            return None
        conn = self.codec.thaw(blob)
        c = conn.conv
        self._forget(stream, pair_hash(c.client_addr, c.client_port, c.server_addr,
                                       c.server_port))
        return conn

    def peek(self, stream: int) -> Any:
        """``stream``'s record, thawed, still frozen (None: not frozen)."""
        if stream >= len(self.blobs):
            return None
        blob = self.blobs[stream]
        if blob is None and self.n_disk and self.on_disk[stream]:
            assert self._disk is not None
            blob = self._disk.get(stream)[0]
        return None if blob is None else self.codec.thaw(blob)

    def take_rows(self, start: int, end: int) -> list[Any]:
        """The table rows of the frozen records of tcp_streams [start, end) that have them,
        unpacked, in order; those records are let go (nothing thaws them after the pass)."""
        got: list[tuple[int, bytes]] = []
        rows, blobs = self.rows, self.blobs
        for i in range(start, min(end, len(rows))):
            r = rows[i]
            if r is not None:
                got.append((i, r))
                rows[i] = blobs[i] = None
                self.n -= 1
        if self.n_disk:
            assert self._disk is not None
            more = self._disk.rows_between(start, end)
            for i, _ in more:
                self.on_disk[i] = 0
            self.n_disk -= len(more)
            self.n -= len(more)
            got = sorted(got + more) if got else more
        return [marshal.loads(r) for _, r in got]

    def _off_disk(self, stream: int) -> None:
        assert self._disk is not None
        self._disk.delete(stream)
        self.on_disk[stream] = 0
        self.n_disk -= 1
        self.n -= 1
        self.finish[stream] = 0

    def _forget(self, stream: int, key: int) -> None:
        self.blobs[stream] = None
        self.rows[stream] = None
        self.n -= 1
        self.finish[stream] = 0
        self._unindex(stream, key)

    def _unindex(self, stream: int, key: int) -> None:
        have = self.index.get(key)
        if have == stream:
            del self.index[key]
        elif isinstance(have, list) and stream in have:
            have.remove(stream)
            if len(have) == 1:
                self.index[key] = have[0]

    def forget_pairs(self) -> None:
        """End of capture: no segment comes after, so the address-pair index goes."""
        self.index = {}
        self._order = []
        if self._disk is not None:
            self._disk.bloom.forget()

    def close(self) -> None:
        """Close (and so delete) the database; nothing on disk may be read after."""
        if self._disk is not None:
            self._disk.db.close()
            self._disk = None


class Deadlines:
    """tcp_streams with the capture time after which they may be frozen, in the order they
    were added: two int64 arrays (16 bytes an entry) read from ``head`` on."""

    __slots__ = ("at", "head", "streams")

    def __init__(self) -> None:
        self.streams = array("q")
        self.at = array("q")
        self.head = 0

    def add(self, stream: int, at: int) -> None:
        self.streams.append(stream)
        self.at.append(at if -_I64 <= at < _I64 else _I64 - 1 if at > 0 else -_I64)

    def due(self, now: int) -> list[int]:
        """The streams whose time came (taken out), oldest first."""
        at, h = self.at, self.head
        n = len(at)
        start = h
        while h < n and at[h] <= now:
            h += 1
        out = self.streams[start:h].tolist()
        if h > 4096 and h * 2 > n:  # (the entries before head go)
            del at[:h]
            del self.streams[:h]
            h = 0
        self.head = h
        return out

    def __len__(self) -> int:
        return len(self.at) - self.head
