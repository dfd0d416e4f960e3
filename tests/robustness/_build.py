"""Builders for the bad-input catalogue: whole captures, so every case goes through ``load()``.

- :class:`Conv` writes one TCP connection (handshake, data split at the MSS and acknowledged,
  FINs) as ``(ts_ns, ethernet frame)`` pairs with :mod:`tests.helpers`' writers.
- :func:`good_conv` is the reference connection every case carries next to its bad part:
  the catalogue checks that the tables of that connection come out identical with and without
  the bad part (:func:`good_tables`, :func:`assert_good_unchanged`).
- :func:`bounded` runs a call under ``tracemalloc`` and asserts a generous bound on the peak
  of new allocations (the catalogue never asserts elapsed time).
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

import pcaptools
from pcaptools.capture import Capture
from tests.helpers import eth_tcp4, pcap_file

T0 = 1_700_000_000_000_000_000
MSS = 1448
C2S, S2C = 0, 1
SYN, FIN, RST, PSH, ACK = 0x02, 0x01, 0x04, 0x08, 0x10

#: the budget of the catalogue: peak new allocations of one load() (plus report) on a bad input
MEMORY_BOUND = 200 << 20

Packets = list[tuple[int, bytes]]


@dataclass
class Conv:
    """One TCP connection between (cli, sport) and (srv, dport), in capture order."""

    sport: int
    dport: int = 8080
    cli: str = "10.0.0.1"
    srv: str = "10.0.0.2"
    t0: int = T0
    step: int = 1_000_000
    isn: tuple[int, int] = (1000, 5000)
    packets: Packets = field(default_factory=list)

    def __post_init__(self) -> None:
        self.t = self.t0
        self.seq = [self.isn[0], self.isn[1]]

    def _emit(self, d: int, flags: int, payload: bytes = b"") -> None:
        src, dst, sp, dp = (
            (self.cli, self.srv, self.sport, self.dport)
            if d == C2S
            else (self.srv, self.cli, self.dport, self.sport)
        )
        ack = 0 if flags == SYN else self.seq[1 - d] & 0xFFFFFFFF
        frame = eth_tcp4(
            payload,
            sport=sp,
            dport=dp,
            seq=self.seq[d] & 0xFFFFFFFF,
            ack=ack,
            flags=flags,
            src=src,
            dst=dst,
        )
        self.packets.append((self.t, frame))
        self.t += self.step
        self.seq[d] += len(payload) + (1 if flags & (SYN | FIN) else 0)

    def raw(self, frame: bytes) -> Conv:
        """Append an arbitrary frame at the connection's clock."""
        self.packets.append((self.t, frame))
        self.t += self.step
        return self

    def handshake(self) -> Conv:
        self._emit(C2S, SYN)
        self._emit(S2C, SYN | ACK)
        self._emit(C2S, ACK)
        return self

    def send(self, d: int, data: bytes, *, mss: int = MSS, acks: bool = True) -> Conv:
        """``data`` from ``d`` in MSS-sized segments, each acknowledged by a bare ACK."""
        for i in range(0, len(data), mss):
            self._emit(d, PSH | ACK, data[i : i + mss])
            if acks:
                self._emit(1 - d, ACK)
        return self

    def close(self) -> Conv:
        self._emit(C2S, FIN | ACK)
        self._emit(S2C, FIN | ACK)
        self._emit(C2S, ACK)
        return self


def pcap(*convs: Conv | Packets, linktype: int = 1) -> bytes:
    """A pcap of all packets, ordered by time (stable: equal times keep argument order)."""
    pkts: Packets = []
    for c in convs:
        pkts += c.packets if isinstance(c, Conv) else c
    pkts.sort(key=lambda p: p[0])
    return pcap_file(pkts, linktype=linktype, nsec=True)


GOOD_REQUEST = b"GET /v1/models HTTP/1.1\r\nHost: api.example\r\nAccept: */*\r\n\r\n"
GOOD_BODY = b'{"data": [' + b'{"id": "model-%d"}, ' * 300 % tuple(range(300)) + b'{"id": "last"}]}'
GOOD_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    % len(GOOD_BODY)
    + GOOD_BODY
)


def good_conv(t0: int = T0, sport: int = 40000) -> Conv:
    """The reference connection: tcp.stream 0 (it starts first), one HTTP/1.1 exchange whose
    response spans several segments; its packets are spread over 0.1 s so bad parts built
    with a later ``t0`` interleave with it."""
    c = Conv(sport=sport, dport=8080, t0=t0, step=5_000_000)
    return c.handshake().send(C2S, GOOD_REQUEST).send(S2C, GOOD_RESPONSE).close()


def later(n: int = 1) -> int:
    """A start time inside the good connection (n-th ms after its first packet)."""
    return T0 + 2_500_000 + n * 1_000_000


def load_bytes(tmp_path: Path, data: bytes, name: str = "case.pcap", **kw: Any) -> Capture:
    path = tmp_path / name
    path.write_bytes(data)
    return pcaptools.load(path, **kw)


#: per table: the columns that identify rows of the good connection, and volatile columns
_GOOD_TABLES = ("connections", "tcp_handshakes", "tcp_events", "http_requests")


def good_tables(cap: Capture, tcp_stream: int = 0) -> dict[str, list[tuple[Any, ...]]]:
    """Rows of the good connection in every per-connection table, as comparable tuples."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for name in _GOOD_TABLES:
        df: pd.DataFrame = cap.tables[name]
        rows = df[df["tcp_stream"] == tcp_stream].drop(columns=["tcp_stream"])
        # frame numbers move when bad frames are interleaved: compare the rest exactly
        rows = rows.drop(columns=[c for c in rows.columns if "frame" in c])
        out[name] = [tuple(_norm(v) for v in r) for r in rows.itertuples(index=False)]
    return out


def _norm(v: Any) -> Any:
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v


def assert_good_unchanged(cap: Capture, reference: Capture, tcp_stream: int = 0) -> None:
    """The good connection's rows are identical to those of a capture without the bad part."""
    got, want = good_tables(cap, tcp_stream), good_tables(reference, 0)
    assert want["http_requests"], "the reference connection has no HTTP exchange"
    for name in _GOOD_TABLES:
        assert got[name] == want[name], name


def rows(df: pd.DataFrame, drop: Sequence[str] = ()) -> list[tuple[Any, ...]]:
    """The rows of ``df`` as comparable tuples (missing values as None), without ``drop``."""
    df = df.drop(columns=list(drop))
    return [tuple(_norm(v) for v in r) for r in df.itertuples(index=False)]


def codes(cap: Capture) -> list[str]:
    return cap.warnings["code"].astype(str).tolist()


R = TypeVar("R")


def bounded(fn: Callable[[], R], limit: int = MEMORY_BOUND) -> tuple[R, int]:
    """Run ``fn`` under tracemalloc; assert its peak of new allocations stays under ``limit``.
    Returns fn's result and that peak in bytes."""
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was:
            tracemalloc.stop()
    log = os.environ.get("PCAPTOOLS_PEAK_LOG")  # docs/robustness.md's figures come from here
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}\t{peak}\n")
    assert peak < limit, f"peak allocation {peak / 2**20:.1f} MiB >= {limit / 2**20:.0f} MiB"
    return result, peak


def split(data: bytes, sizes: Iterable[int]) -> list[bytes]:
    out, pos = [], 0
    for n in sizes:
        out.append(data[pos : pos + n])
        pos += n
    if pos < len(data):
        out.append(data[pos:])
    return [p for p in out if p]


def one_segment_each(conv: Conv, d: int, parts: Sequence[bytes]) -> Conv:
    """Send each part in its own segment (no MSS splitting)."""
    for p in parts:
        conv.send(d, p, mss=max(1, len(p)))
    return conv
