"""Cold connections: those that have sent one payload-less SYN and nothing else (yet).

A port scan or SYN flood is millions of them, and most connections of any capture spend a
moment in this state before the SYN-ACK. :class:`~.tracker.TcpTracker` keeps such a
connection here as one packed row (~0.45 KB with its addresses and address-pair key)
instead of the analyzer's conversation and the tracker's record (~2.7 KB of Python objects).
When a
second segment of the address pair comes (the SYN-ACK, a retransmitted SYN, an RST, an ICMP
error quoting it) the tracker takes the SYN back (:meth:`ColdSyns.pop`) and replays it
through the full analysis with the ``tcp_stream`` number it was given, then goes on as if the
connection had never been cold. A connection still cold at the end of the capture gets its
``connections`` and ``tcp_handshakes`` rows from :func:`cold_connection_columns` and
:func:`cold_handshake_columns`: what the full path gives for one payload-less SYN, built as
whole columns from a :class:`ColdBatch` of one range of tcp_streams (:meth:`ColdSyns.batch`;
``tests/tcp/test_cold_syns.py`` checks the two give the same tables).

Only a SYN that the full path would turn into no analysis flag, no warning and no event goes
cold: SYN set and FIN, RST, ACK clear, no payload, a non-zero window (a zero window is a
Zeek ``W`` in the history), from an address pair with no connection (:func:`cold_eligible`).

Spilling (``ColdSyns(spill=True)``, what the streaming export ``load(out=DIR)`` uses): the
rows are kept in pages of :data:`PAGE_ROWS`; when more than :data:`PAGES_IN_MEMORY` pages
are in memory, the rows of the oldest that are still cold move to a private temporary
sqlite database (on disk, deleted when it is closed: :meth:`ColdSyns.close`), and their
addresses and address-pair keys leave memory. So the memory the cold connections take stays
flat however many there are. A spilled row is found by a 64-bit key of its address pair
(:func:`pair_hash`, the same both ways; the address pair is compared exactly after a key
match, so a collision never takes the wrong row); a fixed-size Bloom filter of those keys
(:data:`BLOOM_BITS`) answers "never spilled" for a new address pair without a query. A
spilled SYN answered later is replayed from the database as from memory, under the same
``tcp_stream`` number.
"""

from __future__ import annotations

import contextlib
import struct
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._memory import trim
from ..net.packet import ACK, FIN, RST, SYN, TcpSegment
from .analysis import SegmentAnalysis
from .options import parse_options

if TYPE_CHECKING:
    import sqlite3

_SFRA = SYN | FIN | RST | ACK

_FIELDS = (("stream", "q"), ("frame", "q"), ("ts", "q"), ("frame_len", "I"),
           ("ip_version", "B"), ("ttl", "B"), ("ip_id", "i"), ("sport", "H"), ("dport", "H"),
           ("seq", "I"), ("ack", "I"), ("flags", "H"), ("window", "H"), ("header_len", "H"),
           ("overhead_len", "I"), ("df", "B"), ("opts", "I"))
"""one cold SYN, packed (``opts``: index into :attr:`ColdSyns.options`): 61 bytes"""
_ROW = struct.Struct("<" + "".join(code for _, code in _FIELDS))
_DTYPE = np.dtype([(name, "<" + code) for name, code in _FIELDS])
_PORTS = struct.Struct("<HH")
_PORTS_AT = _ROW.size - struct.calcsize(
    "<" + "".join(code for _, code in _FIELDS[[name for name, _ in _FIELDS].index("sport"):]))
"""offset of sport (dport follows) in a packed row"""

_NO_KINDS: tuple[str, ...] = ()

PAGE_ROWS = 16384
"""rows of a page of a spilling :class:`ColdSyns` (~7 MB with their addresses and keys): at
a flood's 100,000 SYNs a second, the 0.16 s before a row may go to the database"""
PAGES_IN_MEMORY = 2
"""pages a spilling :class:`ColdSyns` keeps in memory (the one being filled among them)"""
BLOOM_BITS = 1 << 25
"""bits of the Bloom filter in front of the spilled rows (4 MiB, whatever their number): with
a million spilled rows, one new address pair in ~1,500 costs an (indexed) query for nothing"""

KeyHash = Callable[[bytes, int, bytes, int], int]
"""(src, sport, dst, dport) -> a signed 64-bit key, the same for both directions"""


def pair_hash(src: bytes, sport: int, dst: bytes, dport: int) -> int:
    """The key of a spilled row: Python's hash of the address pair in a fixed order (the
    same both ways; a 64-bit int on 64-bit builds). It changes between processes, which is
    all a private database needs."""
    a, b = (src, sport), (dst, dport)
    return hash((a, b) if a <= b else (b, a))


def cold_eligible(seg: TcpSegment) -> bool:
    """Whether ``seg``, the first segment of an address pair, may stay cold (see the module
    docstring)."""
    return seg.flags & _SFRA == SYN and not seg.seg_len and seg.window != 0


_Page = tuple[bytearray, list[bytes], list[bytes], bytearray]
"""(packed rows, src, dst, live flags) of a page kept in memory"""


class KeyBloom:
    """A fixed-size Bloom filter of 64-bit address-pair keys (:func:`pair_hash`): k = 3 bit
    positions a key, by double hashing. :meth:`may_hold` False: the key was never added."""

    __slots__ = ("bits", "mask")

    def __init__(self, nbits: int) -> None:
        if nbits < 8 or nbits & (nbits - 1):
            raise ValueError(f"bloom_bits must be a power of two >= 8, got {nbits}")
        self.bits: bytearray | None = bytearray(nbits >> 3)
        """(None once :meth:`forget` let it go: every key may be there)"""
        self.mask = nbits - 1

    def add(self, keys: np.ndarray) -> None:
        """Add int64 ``keys``."""
        if self.bits is None:
            return
        bloom = np.frombuffer(self.bits, dtype=np.uint8)
        step = (keys >> 32) | 1
        for i in range(3):  # (as may_hold; int64 arithmetic wraps: the same low bits)
            b = (keys + i * step) & self.mask
            np.bitwise_or.at(bloom, b >> 3, (1 << (b & 7)).astype(np.uint8))

    def may_hold(self, key: int) -> bool:
        bits = self.bits
        if bits is None:
            return True
        m, step = self.mask, (key >> 32) | 1
        for b in (key & m, (key + step) & m, (key + 2 * step) & m):
            if not bits[b >> 3] >> (b & 7) & 1:
                return False
        return True

    def forget(self) -> None:
        self.bits = None


def temporary_database() -> sqlite3.Connection:
    """A private temporary sqlite database (a file sqlite deletes when it is closed), made for
    speed, not durability: no journal, no sync, a 2 MB page cache; transactions by hand.
    (sqlite3 is imported here, by the first spill: most loads never need it.)"""
    import sqlite3

    db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
    for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-2048"):
        db.execute(f"PRAGMA {pragma}")
    return db


@contextlib.contextmanager
def all_or_nothing(db: sqlite3.Connection) -> Iterator[None]:
    """One transaction of a :func:`temporary_database`: committed when the block ends, rolled
    back (nothing of it stays stored) when it raises sqlite3.Error, which goes on."""
    import sqlite3

    db.execute("BEGIN")
    try:
        yield
        db.execute("COMMIT")
    except sqlite3.Error:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


class _SpillStore:
    """The spilled rows of a :class:`ColdSyns`: a private temporary sqlite database (on disk
    once past sqlite's small page cache; deleted when closed) with, per row, its tcp_stream,
    the packed row and the two addresses (``cold``, appended in tcp_stream order), and its
    address-pair key (``cold_key``, clustered by key: a page's keys go in sorted, so that
    they touch each page of that index once, not one page at random each); and a Bloom filter
    of the keys (fixed size; a false positive costs one indexed query, a negative none)."""

    __slots__ = ("bloom", "db")

    def __init__(self, bloom_bits: int) -> None:
        self.bloom = KeyBloom(bloom_bits)
        db = self.db = temporary_database()
        db.execute("CREATE TABLE cold (stream INTEGER PRIMARY KEY, row BLOB NOT NULL,"
                   " src BLOB NOT NULL, dst BLOB NOT NULL)")
        db.execute("CREATE TABLE cold_key (key INTEGER NOT NULL, stream INTEGER NOT NULL,"
                   " PRIMARY KEY (key, stream)) WITHOUT ROWID")

    def put(self, rows: list[tuple[int, bytes, bytes, bytes]], keys: list[int]) -> None:
        """Store (stream, packed row, src, dst) rows, in tcp_stream order, and their keys,
        in one transaction."""
        k = np.array(keys, dtype=np.int64)
        self.bloom.add(k)
        order = np.argsort(k, kind="stable")
        streams = [r[0] for r in rows]
        db = self.db
        with all_or_nothing(db):
            db.executemany("INSERT INTO cold VALUES (?, ?, ?, ?)", rows)
            db.executemany("INSERT INTO cold_key VALUES (?, ?)",
                           [(keys[i], streams[i]) for i in order.tolist()])

    def may_hold(self, key: int) -> bool:
        """False: no row of ``key`` was ever stored (the Bloom filter says so)."""
        return self.bloom.may_hold(key)

    def with_key(self, key: int) -> list[tuple[int, bytes, bytes, bytes]]:
        """(stream, packed row, src, dst) of the rows of ``key`` (hash collisions among them)"""
        return self.db.execute("SELECT c.stream, c.row, c.src, c.dst FROM cold_key k"
                               " JOIN cold c ON c.stream = k.stream WHERE k.key = ?",
                               (key,)).fetchall()

    def get(self, stream: int) -> tuple[bytes, bytes, bytes]:
        """(packed row, src, dst) of ``stream``'s row"""
        return self.db.execute(  # type: ignore[no-any-return]
            "SELECT row, src, dst FROM cold WHERE stream = ?", (stream,)).fetchone()

    def delete(self, stream: int, key: int) -> None:
        db = self.db
        db.execute("DELETE FROM cold WHERE stream = ?", (stream,))
        db.execute("DELETE FROM cold_key WHERE key = ? AND stream = ?", (key, stream))

    def between(self, start: int, end: int) -> list[tuple[bytes, bytes, bytes]]:
        """(packed row, src, dst) of the rows of tcp_streams [start, end), in order"""
        return self.db.execute("SELECT row, src, dst FROM cold WHERE stream >= ? AND stream < ?"
                               " ORDER BY stream", (start, end)).fetchall()

    def close(self) -> None:
        self.db.close()
        self.bloom.forget()


class ColdSyns:
    """The cold connections of one tracker: a packed row each (:data:`_ROW`), in
    ``tcp_stream`` order, and ``keys``: address-pair key (both directions, as the analyzer
    keys them) -> row of the connections still cold and in memory. A row taken back by
    :meth:`pop` stays (its ``live`` flag cleared) so that row numbers never move.

    Rows are numbered across pages: row ``r`` is row ``r % page_rows`` of page
    ``r // page_rows``; the page being filled is ``buf``/``src``/``dst``/``live`` (without
    ``spill``, the only page). With ``spill`` (see the module docstring), when more than
    ``pages_in_memory`` pages are in memory the oldest one's cold rows go to the database;
    ``key_hash`` keys them there (a parameter for the tests; :func:`pair_hash`)."""

    __slots__ = ("_base", "_found", "_kept", "_key_hash", "_old", "_opt_ids", "_store",
                 "_streams", "bloom_bits", "buf", "dst", "keys", "live", "n_live", "n_spilled",
                 "options", "page_rows", "pages_in_memory", "spill", "spill_error", "src")

    def __init__(self, spill: bool = False, *, page_rows: int = PAGE_ROWS,
                 pages_in_memory: int = PAGES_IN_MEMORY, bloom_bits: int = BLOOM_BITS,
                 key_hash: KeyHash = pair_hash) -> None:
        if page_rows < 1 or pages_in_memory < 1:
            raise ValueError(f"page_rows and pages_in_memory must be >= 1, got {page_rows} "
                             f"and {pages_in_memory}")
        self.spill = spill
        self.page_rows = page_rows if spill else sys.maxsize
        """rows a page (without ``spill``: no limit, one page)"""
        self.pages_in_memory = pages_in_memory
        self.bloom_bits = bloom_bits
        self._key_hash = key_hash
        self.buf = bytearray()
        """the rows of the page being filled, packed (:data:`_ROW`)"""
        self.src: list[bytes] = []
        self.dst: list[bytes] = []
        self.keys: dict[tuple[bytes, int, bytes, int], int] = {}
        self.live = bytearray()
        """1 while the row's connection is cold"""
        self.n_live = 0
        """connections cold (those spilled among them)"""
        self.n_spilled = 0
        """connections cold in the database"""
        self.options: list[bytes] = []
        """distinct option bytes (a flood repeats one set)"""
        self._opt_ids: dict[bytes, int] = {}
        self._old: list[_Page | None] = []
        """the pages before the one being filled (None: spilled)"""
        self._kept = 0
        """index of the first page in memory"""
        self._base = 0
        """row number of the first row of the page being filled"""
        self._store: _SpillStore | None = None
        """the database, from the first spilled page on"""
        self._found: tuple[int, int, bytes, bytes, bytes] | None = None
        """(stream, key, row, src, dst) of the spilled row :meth:`find` found last"""
        self._streams: dict[int, np.ndarray] = {}
        """page -> its tcp_stream column (:meth:`batch`)"""
        self.spill_error: str | None = None
        """why spilling stopped (the database could not be made or written), None: it did not"""

    def __len__(self) -> int:
        return self.n_live

    def add(self, seg: TcpSegment, stream: int) -> SegmentAnalysis | None:
        """Keep ``seg`` (:func:`cold_eligible`) as the cold connection ``stream``; return the
        analysis :meth:`~.analysis.TcpAnalyzer.feed` gives a connection's first SYN (no
        conversation yet: ``conv`` is None). None, with nothing kept, for a field out of the
        row's range (the caller analyses the segment as any other)."""
        if len(self.live) == self.page_rows:
            self._next_page()
        opts = seg.options
        oid = self._opt_ids.get(opts)
        if oid is None:
            oid = len(self.options)
        try:
            self.buf += _ROW.pack(stream, seg.frame, seg.ts_ns, seg.frame_len, seg.ip_version,
                                  seg.ttl, seg.ip_id, seg.sport, seg.dport, seg.seq, seg.ack,
                                  seg.flags, seg.window, seg.header_len, seg.overhead_len,
                                  1 if seg.df else 0, oid)
        except (struct.error, TypeError):
            return None
        if oid == len(self.options):
            self._opt_ids[opts] = oid
            self.options.append(opts)
        row = self._base + len(self.live)
        self.src.append(seg.src)
        self.dst.append(seg.dst)
        self.live.append(1)
        self.n_live += 1
        keys = self.keys
        keys[(seg.src, seg.sport, seg.dst, seg.dport)] = row
        keys[(seg.dst, seg.dport, seg.src, seg.sport)] = row
        return SegmentAnalysis(stream, None, True, 0, None, seg.window, _NO_KINDS, None, None,
                               None, None, 0, True)

    def find(self, seg: TcpSegment) -> int:
        """A handle of the cold connection of ``seg``'s address pair, for :meth:`pop`: its
        row (>= 0) when in memory, ``-2 - tcp_stream`` when spilled; -1: none."""
        if not self.n_live:
            return -1
        row = self.keys.get((seg.src, seg.sport, seg.dst, seg.dport), -1)
        if row < 0 and self.n_spilled:
            return self._find_spilled(seg.src, seg.sport, seg.dst, seg.dport)
        return row

    def _find_spilled(self, src: bytes, sport: int, dst: bytes, dport: int) -> int:
        store = self._store
        assert store is not None
        key = self._key_hash(src, sport, dst, dport)
        if not store.may_hold(key):
            return -1
        for stream, row, s, d in store.with_key(key):
            sp, dp = _PORTS.unpack_from(row, _PORTS_AT)
            if (s == src and sp == sport and d == dst and dp == dport) \
                    or (s == dst and sp == dport and d == src and dp == sport):
                self._found = (stream, key, row, s, d)
                return -2 - stream
        return -1

    def pop(self, handle: int) -> tuple[TcpSegment, int]:
        """Take the cold connection of ``handle`` (:meth:`find`) back: its SYN as the decoder
        made it, and its ``tcp_stream``. The connection is no longer cold."""
        if handle < 0:
            return self._pop_spilled(-2 - handle)
        page, i = divmod(handle, self.page_rows)
        if page == len(self._old):
            buf, srcs, dsts, live = self.buf, self.src, self.dst, self.live
        else:
            p = self._old[page]
            assert p is not None  # (a spilled row's keys left with it)
            buf, srcs, dsts, live = p
        src, dst = srcs[i], dsts[i]
        seg, stream = self._segment(buf, i * _ROW.size, src, dst)
        keys = self.keys
        keys.pop((src, seg.sport, dst, seg.dport), None)
        keys.pop((dst, seg.dport, src, seg.sport), None)  # (the same key for a SYN sent to itself)
        live[i] = 0
        self.n_live -= 1
        return seg, stream

    def _pop_spilled(self, stream: int) -> tuple[TcpSegment, int]:
        store = self._store
        assert store is not None
        found = self._found
        self._found = None
        if found is not None and found[0] == stream:
            _, key, row, src, dst = found
            seg, _ = self._segment(row, 0, src, dst)
        else:
            row, src, dst = store.get(stream)
            seg, _ = self._segment(row, 0, src, dst)
            key = self._key_hash(src, seg.sport, dst, seg.dport)
        store.delete(stream, key)
        self.n_spilled -= 1
        self.n_live -= 1
        return seg, stream

    def _segment(self, buf: bytes | bytearray, at: int, src: bytes, dst: bytes
                 ) -> tuple[TcpSegment, int]:
        """the SYN of the packed row at ``buf[at:]``, and its tcp_stream"""
        (stream, frame, ts, frame_len, ver, ttl, ip_id, sport, dport, seq, ack, flags, window,
         header_len, overhead_len, df, oid) = _ROW.unpack_from(buf, at)
        seg = TcpSegment(frame, ts, frame_len, ver, src, dst, ttl, ip_id, sport, dport, seq, ack,
                         flags, window, header_len, self.options[oid], 0, b"", overhead_len,
                         bool(df))
        return seg, stream

    def _next_page(self) -> None:
        """The page being filled is full: start the next; spill the oldest in memory when
        more than ``pages_in_memory`` are."""
        self._old.append((self.buf, self.src, self.dst, self.live))
        self.buf, self.src, self.dst, self.live = bytearray(), [], [], bytearray()
        self._base += self.page_rows
        while len(self._old) + 1 - self._kept > self.pages_in_memory:
            if not self._spill_page(self._kept):
                break
            self._kept += 1

    def _spill_page(self, page: int) -> bool:
        """Move the cold rows of ``page`` to the database; the page leaves memory. False,
        with the page kept and spilling stopped (:attr:`spill_error`), when the database
        cannot be made or written (no temporary directory, a full disk): the rows then stay
        in memory, as without ``spill``."""
        p = self._old[page]
        assert p is not None
        buf, srcs, dsts, live = p
        rows = np.flatnonzero(np.frombuffer(live, dtype=np.uint8))
        if len(rows):
            import sqlite3

            try:
                self._put(rows, buf, srcs, dsts)
            except sqlite3.Error as exc:
                self.spill_error = f"{type(exc).__name__}: {exc}"
                self.pages_in_memory = sys.maxsize
                return False
        self._old[page] = None
        self._streams.pop(page, None)
        del p, buf, srcs, dsts, live
        trim()  # (the page's address objects and keys are freed: their heap pages go back)
        return True

    def _put(self, rows: np.ndarray, buf: bytearray, srcs: list[bytes],
             dsts: list[bytes]) -> None:
        """Store the cold rows ``rows`` of a page in the database, then forget their address
        pairs (raises sqlite3.Error with nothing forgotten)."""
        rec = np.frombuffer(buf, dtype=_DTYPE)[rows]
        packed = rec.tobytes()
        key_hash, size = self._key_hash, _ROW.size
        out = []
        pair_keys = []
        pairs = []
        at = 0
        for i, stream, sport, dport in zip(rows.tolist(), rec["stream"].tolist(),
                                           rec["sport"].tolist(), rec["dport"].tolist(),
                                           strict=True):
            src, dst = srcs[i], dsts[i]
            pairs.append((src, sport, dst, dport))
            pair_keys.append(key_hash(src, sport, dst, dport))
            out.append((stream, packed[at:at + size], src, dst))
            at += size
        if self._store is None:
            self._store = _SpillStore(self.bloom_bits)
        self._store.put(out, pair_keys)
        keys = self.keys
        for src, sport, dst, dport in pairs:
            keys.pop((src, sport, dst, dport), None)
            keys.pop((dst, dport, src, sport), None)
        self.n_spilled += len(out)

    def _pages(self) -> Iterator[tuple[int, _Page]]:
        """(index, page) of the pages in memory, in order"""
        for i in range(self._kept, len(self._old)):
            p = self._old[i]
            if p is not None:
                yield i, p
        yield len(self._old), (self.buf, self.src, self.dst, self.live)

    def batch(self, start: int, end: int) -> ColdBatch | None:
        """The connections still cold of the tcp_streams [start, end), in tcp_stream order,
        from the database and memory alike (None: there are none)."""
        if not self.n_live:
            return None
        recs: list[np.ndarray] = []
        src: list[bytes] = []
        dst: list[bytes] = []
        if self.n_spilled:  # (spilled pages are the oldest: their streams come first)
            assert self._store is not None
            got = self._store.between(start, end)
            if got:
                recs.append(np.frombuffer(b"".join(r[0] for r in got), dtype=_DTYPE))
                src += [r[1] for r in got]
                dst += [r[2] for r in got]
        for i, (buf, srcs, dsts, live) in self._pages():
            streams = self._streams.get(i)
            if streams is None or len(streams) != len(live):
                streams = self._streams[i] = np.frombuffer(buf, dtype=_DTYPE)["stream"].copy()
            lo, hi = np.searchsorted(streams, [start, end]).tolist()
            if lo == hi:
                continue
            rows = lo + np.flatnonzero(np.frombuffer(live, dtype=np.uint8)[lo:hi])
            if len(rows):
                recs.append(np.frombuffer(buf, dtype=_DTYPE)[rows])
                rows_l = rows.tolist()
                src += [srcs[r] for r in rows_l]
                dst += [dsts[r] for r in rows_l]
        if not recs:
            return None
        return ColdBatch(recs[0] if len(recs) == 1 else np.concatenate(recs), src, dst,
                         self.options)

    def forget_pairs(self) -> None:
        """End of capture: no segment comes after, so the address-pair index goes (``keys``
        and the Bloom filter); the rows stay for :meth:`batch`."""
        self.keys = {}
        self._found = None
        if self._store is not None:
            self._store.bloom.forget()

    def close(self) -> None:
        """Close (and so delete) the database of the spilled rows; nothing may be read
        after."""
        if self._store is not None:
            self._store.close()
            self._store = None
        self._streams = {}


@dataclass(frozen=True, slots=True)
class ColdBatch:
    """The connections still cold of a range of tcp_streams, in tcp_stream order
    (:meth:`ColdSyns.batch`)."""

    rec: np.ndarray
    """their packed rows, as a structured array (:data:`_DTYPE`)"""
    src: list[bytes]
    """client (SYN sender) address of each"""
    dst: list[bytes]
    options: list[bytes]
    """:attr:`ColdSyns.options`, which ``rec["opts"]`` indexes"""

    def __len__(self) -> int:
        return len(self.rec)

    def col(self, name: str) -> np.ndarray:
        """the int64 column of field ``name``"""
        return self.rec[name].astype(np.int64)


# ------------------------------------------------------------------ table rows


def _na_int(n: int) -> Any:
    return pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool))


def _na_bool(n: int) -> Any:
    return pd.arrays.BooleanArray(np.zeros(n, bool), np.ones(n, bool))


def _pos_or_na(v: np.ndarray) -> Any:
    """v where > 0, else NA (the tables' ``_pos``)"""
    return pd.arrays.IntegerArray(v.copy(), v <= 0)


def _nonneg_or_na(v: np.ndarray) -> Any:
    return pd.arrays.IntegerArray(v.copy(), v < 0)


def _addr_texts(addrs: list[bytes], addr_text: Any) -> list[str]:
    memo: dict[bytes, str] = {}
    out = []
    for b in addrs:
        s = memo.get(b)
        if s is None:
            s = memo[b] = addr_text(b)
        out.append(s)
    return out


def cold_connection_columns(batch: ColdBatch, addr_text: Any) -> dict[str, Any]:
    """The ``connections`` columns of the cold connections of ``batch`` (what the tracker's
    record of a connection that sent one payload-less SYN gives: ``tcp_tables``)."""
    n = len(batch)
    col = batch.col
    frame, ts = col("frame"), col("ts")
    flen = col("frame_len")
    ttl, ip_id = col("ttl"), col("ip_id")
    zeros, fzero = np.zeros(n, np.int64), np.zeros(n, np.float64)
    na = _na_int(n)
    ttl_na = _nonneg_or_na(ttl)
    return {
        "tcp_stream": col("stream"), "ip_version": col("ip_version"),
        "client_addr": _addr_texts(batch.src, addr_text),
        "client_port": col("sport"),
        "server_addr": _addr_texts(batch.dst, addr_text),
        "server_port": col("dport"),
        "client_inferred": np.zeros(n, bool),
        "first_frame": frame, "last_frame": frame, "first_ts": ts, "last_ts": ts,
        "duration_ms": fzero,
        "client_packets": np.ones(n, np.int64), "server_packets": zeros,
        "client_bytes": zeros, "server_bytes": zeros,
        "client_wire_bytes": flen, "server_wire_bytes": zeros,
        "client_resent_bytes": zeros, "server_resent_bytes": zeros,
        "retransmissions": zeros,
        "conn_state": ["S0"] * n, "history": ["S"] * n,
        "end_reason": ["open_at_eof"] * n, "end_by": [None] * n,
        "end_frame": na, "end_ts": na,
        "client_last_frame": _pos_or_na(frame),
        "client_last_ts": pd.arrays.IntegerArray(ts.copy(), frame <= 0),
        "server_last_frame": na, "server_last_ts": na,
        "client_fin_frame": na, "client_fin_ts": na, "server_fin_frame": na, "server_fin_ts": na,
        "rst_frame": na, "rst_ts": na, "rst_by": [None] * n, "rst_ttl": na, "rst_ip_id": na,
        "client_ttl_min": ttl_na, "client_ttl_max": ttl_na,
        "server_ttl_min": na, "server_ttl_max": na,
        "client_ip_id": _nonneg_or_na(ip_id), "server_ip_id": na,
        "client_first_ip_id": _pos_or_na(ip_id), "server_first_ip_id": na,
        "max_idle_ms": fzero, "max_idle_start_frame": na, "max_idle_end_frame": na,
        "max_idle_end_ts": na,
        "last_idle_ms": np.full(n, np.nan), "last_idle_start_frame": na,
        "last_idle_end_frame": na, "last_idle_end_ts": na,
        "client_unacked_frame": frame, "client_unacked_ts": ts,
        "server_unacked_frame": na, "server_unacked_ts": na,
        "client_tcp_handshake_bytes": flen, "server_tcp_handshake_bytes": zeros,
        "client_tcp_teardown_bytes": zeros, "server_tcp_teardown_bytes": zeros,
        "client_pure_ack_packets": zeros, "server_pure_ack_packets": zeros,
        "client_pure_ack_bytes": zeros, "server_pure_ack_bytes": zeros,
        "client_max_seg_bytes": zeros, "server_max_seg_bytes": zeros,
        "client_max_acked_seg_bytes": zeros, "server_max_acked_seg_bytes": zeros,
        "client_df": _na_bool(n), "server_df": _na_bool(n),
        "capture_vantage": ["unknown"] * n,
        "client_lost_segments": zeros, "server_lost_segments": zeros,
        "client_spurious_resends": zeros, "server_spurious_resends": zeros,
        "client_capture_drop_bytes": zeros, "server_capture_drop_bytes": zeros,
    }


def cold_handshake_columns(batch: ColdBatch) -> dict[str, Any]:
    """The ``tcp_handshakes`` columns of the cold connections of ``batch`` (a SYN, no
    answer)."""
    n = len(batch)
    col = batch.col
    na = _na_int(n)
    # the client's options, parsed once per distinct option bytes
    parsed = [parse_options(o) for o in batch.options]
    oid = col("opts")

    def per_option(value: Any, dtype: str) -> Any:
        vals = [value(p) for p in parsed]
        if dtype == "Int64":
            data = np.array([0 if v is None else v for v in vals], np.int64)[oid]
            mask = np.array([v is None for v in vals], bool)[oid]
            return pd.arrays.IntegerArray(data, mask)
        return pd.arrays.BooleanArray(np.array(vals, bool)[oid], np.zeros(n, bool))

    return {
        "tcp_stream": col("stream"), "syn_frame": col("frame"),
        "syn_ts": col("ts"), "syn_count": np.ones(n, np.int64),
        "synack_frame": na, "synack_ts": na, "synack_count": np.zeros(n, np.int64),
        "ack_frame": na, "ack_ts": na,
        "irtt_ms": np.full(n, np.nan), "syn_to_synack_ms": np.full(n, np.nan),
        "result": ["no_answer"] * n,
        "client_mss": per_option(lambda p: p.mss, "Int64"), "server_mss": na,
        "client_wscale": per_option(lambda p: p.wscale, "Int64"), "server_wscale": na,
        "client_sack_perm": per_option(lambda p: p.sack_perm, "boolean"),
        "server_sack_perm": _na_bool(n),
        "client_timestamps": per_option(lambda p: p.timestamps is not None, "boolean"),
        "server_timestamps": _na_bool(n),
        "tfo_cookie_request": per_option(lambda p: p.tfo == b"", "boolean"),
        "tfo_cookie_len": per_option(lambda p: len(p.tfo) if p.tfo else None, "Int64"),
        "syn_data_bytes": np.zeros(n, np.int64),
    }
