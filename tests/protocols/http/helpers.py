"""Test helpers for the HTTP observers.

- :class:`FrameFactory` builds HTTP/2 frames with hyperframe and an HPACK encoder per
  direction (the h2 test-suite shape).
- :func:`conversation_items` / :func:`feed_conversation` turn a list of
  ``(direction, bytes)`` segments into StreamChunks with frame numbers and offsets.
- :func:`capture_items` gets each TCP connection's in-order byte streams from a real
  capture: tshark dissects TCP (``-T fields``: relative seq/ack, flags, payload) and
  :class:`pcaptools.tcp.reassembly.Reassembler` orders the bytes, so frame numbers and
  times are the capture's. Private to these tests, until ``pcaptools.load()`` wires the
  observers itself.
- :func:`strip_times` removes ts/frame fields from events, for segmentation invariance.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpack import Encoder
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    PushPromiseFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.protocols.detect import HttpDetector
from pcaptools.protocols.http1 import Http1Observer
from pcaptools.protocols.http2 import Http2Observer
from pcaptools.tcp.reassembly import Reassembler, StreamGap

C2S = Direction.CLIENT_TO_SERVER
S2C = Direction.SERVER_TO_CLIENT
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class FrameFactory:
    """Serialised HTTP/2 frames; one HPACK encoder per direction (client, server)."""

    def __init__(self) -> None:
        self.encoders = {C2S: Encoder(), S2C: Encoder()}

    def headers_block(
        self, headers: Sequence[tuple[str, str]], direction: Direction = C2S
    ) -> bytes:
        return self.encoders[direction].encode(list(headers))

    def headers(
        self,
        stream_id: int,
        headers: Sequence[tuple[str, str]],
        *,
        direction: Direction = C2S,
        flags: Sequence[str] = ("END_HEADERS",),
        padding: int = 0,
        priority: tuple[int, int, bool] | None = None,
    ) -> bytes:
        f = HeadersFrame(stream_id)
        f.data = self.headers_block(headers, direction)
        f.flags = set(flags)
        if padding:
            f.flags.add("PADDED")
            f.pad_length = padding
        if priority is not None:
            f.flags.add("PRIORITY")
            f.depends_on, f.stream_weight, f.exclusive = priority
        return f.serialize()

    @staticmethod
    def headers_raw(stream_id: int, block: bytes, flags: Sequence[str] = ("END_HEADERS",)) -> bytes:
        f = HeadersFrame(stream_id)
        f.data = block
        f.flags = set(flags)
        return f.serialize()

    @staticmethod
    def continuation(stream_id: int, block: bytes, flags: Sequence[str] = ()) -> bytes:
        f = ContinuationFrame(stream_id)
        f.data = block
        f.flags = set(flags)
        return f.serialize()

    def push_promise(
        self, stream_id: int, promised: int, headers: Sequence[tuple[str, str]]
    ) -> bytes:
        f = PushPromiseFrame(stream_id)
        f.promised_stream_id = promised
        f.data = self.headers_block(headers, S2C)
        f.flags = {"END_HEADERS"}
        return f.serialize()

    @staticmethod
    def data(
        stream_id: int, payload: bytes, *, end_stream: bool = False, padding: int = 0
    ) -> bytes:
        f = DataFrame(stream_id)
        f.data = payload
        if end_stream:
            f.flags.add("END_STREAM")
        if padding:
            f.flags.add("PADDED")
            f.pad_length = padding
        return f.serialize()

    @staticmethod
    def settings(values: dict[int, int] | None = None, *, ack: bool = False) -> bytes:
        f = SettingsFrame(0)
        if ack:
            f.flags.add("ACK")
        else:
            f.settings = dict(values or {})
        return f.serialize()

    @staticmethod
    def ping(payload: bytes = b"\0" * 8, *, ack: bool = False) -> bytes:
        f = PingFrame(0)
        f.opaque_data = payload
        if ack:
            f.flags.add("ACK")
        return f.serialize()

    @staticmethod
    def goaway(last: int, code: int = 0, debug: bytes = b"") -> bytes:
        f = GoAwayFrame(0)
        f.last_stream_id = last
        f.error_code = code
        f.additional_data = debug
        return f.serialize()

    @staticmethod
    def window_update(stream_id: int, inc: int) -> bytes:
        f = WindowUpdateFrame(stream_id)
        f.window_increment = inc
        return f.serialize()

    @staticmethod
    def rst(stream_id: int, code: int) -> bytes:
        f = RstStreamFrame(stream_id)
        f.error_code = code
        return f.serialize()

    @staticmethod
    def priority(stream_id: int, depends_on: int, weight: int, exclusive: bool = False) -> bytes:
        f = PriorityFrame(stream_id)
        f.depends_on, f.stream_weight, f.exclusive = depends_on, weight, exclusive
        return f.serialize()

    @staticmethod
    def raw(length: int, ftype: int, flags: int, stream_id: int, payload: bytes) -> bytes:
        return (
            length.to_bytes(3, "big")
            + bytes([ftype, flags])
            + stream_id.to_bytes(4, "big")
            + payload
        )

    @staticmethod
    def parse(data: bytes) -> list[Frame]:
        """Frames in ``data`` (for sanity checks of the factory itself)."""
        out = []
        pos = 0
        while pos + 9 <= len(data):
            f, length = Frame.parse_frame_header(memoryview(data[pos : pos + 9]))
            f.parse_body(memoryview(data[pos + 9 : pos + 9 + length]))
            out.append(f)
            pos += 9 + length
        return out


# --------------------------------------------------------------------------- synthetic feeding

Segments = Sequence[tuple[Direction, bytes]]


def conversation_items(
    segments: Segments, *, t0: int = 1_000_000_000, step: int = 1_000_000
) -> list[StreamChunk]:
    """Each segment becomes one StreamChunk: frame = index + 1, ts = t0 + index * step."""
    off = [0, 0]
    out = []
    for i, (d, data) in enumerate(segments):
        out.append(
            StreamChunk(direction=d, data=data, ts_ns=t0 + i * step, frame=i + 1, offset=off[d])
        )
        off[d] += len(data)
    return out


def feed_conversation(
    obs: Any, segments: Segments, *, close: bool = True, at_eof: bool = False
) -> list[object]:
    """Feed every segment, then close both directions (FIN after the last segment)."""
    events: list[object] = []
    chunks = conversation_items(segments)
    for c in chunks:
        events += obs.feed(c)
    if close:
        last = len(chunks)
        t = 1_000_000_000 + last * 1_000_000
        if at_eof:
            events += obs.close(C2S, t, last, at_eof=True)
        else:
            events += obs.close(C2S, t, last + 1)
            events += obs.close(S2C, t, last + 2)
    return events


def resegment(segments: Segments, cuts: Iterable[int]) -> list[tuple[Direction, bytes]]:
    """Split the segments at the given byte positions of their concatenation (in order),
    keeping each piece's direction; consecutive same-direction pieces stay separate."""
    out: list[tuple[Direction, bytes]] = []
    total = 0
    bounds = sorted(set(cuts))
    bi = 0
    for d, data in segments:
        start = 0
        while bi < len(bounds) and bounds[bi] <= total:
            bi += 1
        while bi < len(bounds) and bounds[bi] < total + len(data):
            cut = bounds[bi] - total
            if cut > start:
                out.append((d, data[start:cut]))
                start = cut
            bi += 1
        if start < len(data):
            out.append((d, data[start:]))
        total += len(data)
    return out


_TIME_FIELDS = ("ts_ns", "frame")


def strip_times(obj: Any) -> Any:
    """The event with every time or frame field (``frame``, ``*_ns``, ``*_frame``) set to 0,
    recursively (nested records too; dataclass and NamedTuple events); lists and tuples mapped."""
    if isinstance(obj, list):
        return [strip_times(x) for x in obj]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a NamedTuple event (SseEvent)
        return obj._replace(
            **{
                name: None if getattr(obj, name) is None else 0
                for name in obj._fields
                if name in _TIME_FIELDS or name.endswith("_ns") or name.endswith("_frame")
            }
        )
    if isinstance(obj, tuple):
        return tuple(strip_times(x) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if f.name in _TIME_FIELDS or f.name.endswith("_ns") or f.name.endswith("_frame"):
                changes[f.name] = None if v is None else 0
            elif dataclasses.is_dataclass(v) or isinstance(v, (list, tuple)):
                changes[f.name] = strip_times(v)
        return dataclasses.replace(obj, **changes)
    return obj


# --------------------------------------------------------------------------- real captures


@dataclass
class Close:
    direction: Direction
    ts_ns: int
    frame: int


Item = StreamChunk | StreamGap | Close


@dataclass
class Connection:
    tcp_stream: int
    client: tuple[str, int]
    items: list[Item] = field(default_factory=list)
    syn_seen: bool = False
    last_ts: int = 0
    last_frame: int = 0


_FIELDS = (
    "frame.number",
    "frame.time_epoch",
    "tcp.stream",
    "ip.src",
    "ipv6.src",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.flags",
    "tcp.seq",
    "tcp.ack",
    "tcp.len",
    "tcp.payload",
)


def _ns(epoch: str) -> int:
    sec, _, frac = epoch.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


@functools.lru_cache(maxsize=64)
def _tshark_tcp(path: str) -> tuple[tuple[str, ...], ...]:
    args = [
        "tshark",
        "-n",
        "-r",
        path,
        "-Y",
        "tcp",
        "-T",
        "fields",
        "-E",
        "separator=\t",
        "-E",
        "occurrence=f",
    ]
    for f in _FIELDS:
        args += ["-e", f]
    with tempfile.TemporaryDirectory() as cfg:
        env = dict(os.environ, WIRESHARK_CONFIG_DIR=cfg)
        res = subprocess.run(
            args, capture_output=True, text=True, env=env, check=False
        )
    rows = []
    for line in res.stdout.splitlines():
        cols = line.split("\t")
        cols += [""] * (len(_FIELDS) - len(cols))
        rows.append(tuple(cols))
    return tuple(rows)


def capture_items(path: str | Path) -> dict[int, Connection]:
    """tcp.stream -> Connection with the in-order items of both directions, in capture order.

    Client = the sender of the first SYN (or the receiver of a SYN-ACK); without either, the
    higher port. FIN closes a direction once its bytes are all delivered; RST closes both.
    """
    rows = _tshark_tcp(str(path))
    # roles first
    roles: dict[int, tuple[str, int]] = {}
    for r in rows:
        stream = int(r[2])
        if stream in roles:
            continue
        flags = int(r[7], 16)
        src = r[3] or r[4]
        sport, dport = int(r[5]), int(r[6])
        if flags & 0x02 and not flags & 0x10:
            roles[stream] = (src, sport)
    conns: dict[int, Connection] = {}
    reasm: dict[int, tuple[Reassembler, Reassembler]] = {}
    pending_fin: dict[tuple[int, Direction], tuple[int, int]] = {}
    closed: set[tuple[int, Direction]] = set()
    for r in rows:
        frame = int(r[0])
        ts = _ns(r[1])
        stream = int(r[2])
        flags = int(r[7], 16)
        src = r[3] or r[4]
        sport, dport = int(r[5]), int(r[6])
        if stream not in roles:
            if flags & 0x12 == 0x12:
                roles[stream] = ("?", dport)  # the receiver of a SYN-ACK is the client
            else:
                roles[stream] = ("?", max(sport, dport))
        conn = conns.get(stream)
        if conn is None:
            conn = conns[stream] = Connection(tcp_stream=stream, client=roles[stream])
            reasm[stream] = (Reassembler(C2S), Reassembler(S2C))
        client = roles[stream]
        from_client = (sport == client[1]) if client[0] == "?" else (src, sport) == client
        d = C2S if from_client else S2C
        ra = reasm[stream]
        conn.last_ts, conn.last_frame = ts, frame
        if flags & 0x02:
            conn.syn_seen = True
        seq = int(r[8]) if r[8] else 0
        length = int(r[10]) if r[10] else 0
        payload = bytes.fromhex(r[11].replace(":", "")) if r[11] else b""
        rst = bool(flags & 0x04)
        fin = bool(flags & 0x01)
        items: list[Item] = []
        if not rst:
            items += ra[d].segment(
                seq, payload, ts, frame, syn=bool(flags & 0x02), fin=fin, seg_len=length
            )
            if flags & 0x10 and r[9]:
                items += ra[1 - d].acked(int(r[9]), ts, frame)
        conn.items += items
        if fin and (stream, d) not in closed:
            pending_fin[(stream, d)] = (ts, frame)
        for dd in (C2S, S2C):
            key = (stream, dd)
            if key in pending_fin:
                fo = ra[dd].fin_offset
                if fo is None or ra[dd].next_offset >= fo:
                    # every byte before the FIN is delivered: the direction ends here
                    del pending_fin[key]
                    closed.add(key)
                    conn.items.append(Close(dd, ts, frame))
        if rst:
            for dd in (C2S, S2C):
                if (stream, dd) not in closed:
                    conn.items += ra[dd].finish(ts, frame)
                    closed.add((stream, dd))
                    conn.items.append(Close(dd, ts, frame))
    for stream, conn in conns.items():
        for dd in (C2S, S2C):
            if (stream, dd) not in closed:
                conn.items += reasm[stream][dd].finish(conn.last_ts, conn.last_frame)
                key = (stream, dd)
                if key in pending_fin:
                    fts, ffr = pending_fin.pop(key)
                    conn.items.append(Close(dd, fts, ffr))
                    closed.add(key)
    return conns


def run_items(obs: Any, conn: Connection) -> list[object]:
    """Feed one connection's items to ``obs``; directions never closed get ``at_eof``."""
    events: list[object] = []
    closed = set()
    for it in conn.items:
        if isinstance(it, StreamChunk):
            events += obs.feed(it)
        elif isinstance(it, StreamGap):
            events += obs.gap(it.direction, it.offset, it.nbytes, it.ts_ns, it.frame)
        else:
            closed.add(it.direction)
            events += obs.close(it.direction, it.ts_ns, it.frame)
    if len(closed) < 2:
        if isinstance(obs, (Http1Observer, Http2Observer, HttpDetector)):
            events += obs.close(
                C2S if C2S not in closed else S2C, conn.last_ts, conn.last_frame, at_eof=True
            )
        else:  # e.g. the TLS observer: close what is open, then finish()
            for d in (C2S, S2C):
                if d not in closed:
                    events += obs.close(d, conn.last_ts, conn.last_frame)
            events += obs.finish(conn.last_ts, conn.last_frame)
    return events


def run_capture(path: str | Path, make: Callable[[Connection], Any]) -> dict[int, list[object]]:
    """tcp.stream -> events of the observer ``make(conn)`` (None: connection skipped)."""
    out = {}
    for stream, conn in sorted(capture_items(path).items()):
        obs = make(conn)
        if obs is not None:
            out[stream] = run_items(obs, conn)
    return out


# --------------------------------------------------------------------------- synthetic captures


def tcp_session_pcap(
    segments: Segments,
    *,
    drop: Iterable[int] = (),
    handshake: bool = True,
    t0: int = 1_700_000_000_000_000_000,
    step: int = 10_000_000,
    sport: int = 50000,
    dport: int = 8080,
) -> tuple[bytes, dict[int, int]]:
    """An Ethernet/IPv4 pcap of one TCP connection carrying ``segments`` (one packet each,
    each acknowledged by a bare ACK from the peer), then FINs from both sides.

    ``drop``: indices of segments left out of the capture (the peer's ACK still covers
    them: the reassembler reports them as gaps). Returns the file bytes and
    segment index -> frame number. ``handshake=False`` starts mid-connection.
    """
    from tests.helpers import eth_tcp4, pcap_file

    cli, srv = "10.0.0.1", "10.0.0.2"
    seq = {C2S: 1000, S2C: 5000}
    pkts: list[tuple[int, bytes]] = []
    frames: dict[int, int] = {}
    t = t0
    dropped = set(drop)

    def send(d: Direction, flags: int, payload: bytes = b"", *, capture: bool = True) -> None:
        nonlocal t
        src, dst, sp, dp = (cli, srv, sport, dport) if d == C2S else (srv, cli, dport, sport)
        ack = 0 if flags == 0x02 else seq[S2C if d == C2S else C2S] & 0xFFFFFFFF
        if capture:
            pkt = eth_tcp4(
                payload,
                sport=sp,
                dport=dp,
                seq=seq[d] & 0xFFFFFFFF,
                ack=ack,
                flags=flags,
                src=src,
                dst=dst,
            )
            pkts.append((t, pkt))
        t += step
        seq[d] += len(payload) + (1 if flags & 0x03 else 0)

    if handshake:
        send(C2S, 0x02)
        send(S2C, 0x12)
        send(C2S, 0x10)
    for i, (d, data) in enumerate(segments):
        send(d, 0x18, data, capture=i not in dropped)
        if i not in dropped:
            frames[i] = len(pkts)
        send(S2C if d == C2S else C2S, 0x10)
    send(C2S, 0x11)
    send(S2C, 0x11)
    send(C2S, 0x10)
    return pcap_file(pkts), frames
