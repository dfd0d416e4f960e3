"""TEST helper: run TlsObservers over a capture with pcaptools' own io/net/tcp layers.

Until ``pcaptools.load()`` wires protocol observers, this does the wiring for the TLS
tests: frames -> TcpSegment -> TcpTracker (tcp.stream, direction, relative seq/ack) ->
one Reassembler per direction -> TlsObserver per connection. Key logs come from a file
and/or the capture's pcapng Decryption Secrets Blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pcaptools.diagnostics import Diagnostics
from pcaptools.io import open_capture
from pcaptools.io.pcapng import SECRETS_TLS_KEYLOG
from pcaptools.net.decode import PacketDecoder
from pcaptools.net.packet import ACK, FIN, RST, SYN, TcpSegment
from pcaptools.protocols.tls import KeyLog, TlsObserver
from pcaptools.protocols.tls.observer import InnerFactory
from pcaptools.tcp.reassembly import Reassembler, StreamGap
from pcaptools.tcp.stream import Direction, StreamChunk, StreamObserver
from pcaptools.tcp.tracker import TcpTracker


@dataclass
class Collector:
    """An inner observer that keeps the plaintext it is given (per direction)."""

    alpn: str | None
    data: list[bytearray] = field(default_factory=lambda: [bytearray(), bytearray()])
    chunks: list[StreamChunk] = field(default_factory=list)
    gaps: list[tuple[int, int, int]] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    finished: int = 0

    def feed(self, chunk: StreamChunk) -> list[object]:
        assert chunk.offset == len(self.data[chunk.direction]) + sum(
            n for d, _, n in self.gaps if d == chunk.direction
        ), "plaintext offsets must be contiguous"
        self.data[chunk.direction] += chunk.data
        self.chunks.append(chunk)
        return []

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        self.gaps.append((direction, offset, nbytes))
        return []

    @property
    def wants_bytes(self) -> bool:
        return True

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        self.closed.append(direction)
        return []

    def finish(self, ts_ns: int, frame: int) -> list[object]:
        self.finished += 1
        return []


@dataclass
class Run:
    events: list[object]
    observers: dict[int, TlsObserver]
    inners: dict[int, Collector]
    diag: Diagnostics
    keylog: KeyLog | None
    client_ports: dict[int, int] = field(default_factory=dict)
    """tcp_stream -> client TCP port"""

    def of(self, cls: type) -> list:
        return [e for e in self.events if isinstance(e, cls)]


def segments(
    path: str | Path, diag: Diagnostics
) -> tuple[list[TcpSegment], list[tuple[int, bytes]]]:
    decoder = PacketDecoder(diag)
    out = []
    with open_capture(path, diag) as reader:
        for raw in reader.frames():
            pkt = decoder.decode(raw)
            if type(pkt) is TcpSegment:
                out.append(pkt)
        secrets = list(reader.secrets)
    return out, secrets


def run(
    path: str | Path,
    keylog_path: str | Path | None = None,
    *,
    use_dsb: bool = True,
    inner: bool = True,
    chunker: Callable[[bytes], Iterable[bytes]] | None = None,
    diag: Diagnostics | None = None,
    inner_for: Callable[[int, Diagnostics], InnerFactory] | None = None,
) -> Run:
    """Feed every TCP connection of ``path`` to a TlsObserver; return all events.

    ``chunker`` re-splits each delivered chunk (to test segmentation independence);
    ``inner_for(tcp_stream, diag)`` gives the inner factory (default: a :class:`Collector`).
    """
    diag = diag or Diagnostics()
    segs, secrets = segments(path, diag)
    keylog: KeyLog | None = None
    if keylog_path is not None:
        keylog = KeyLog.from_file(keylog_path, diag)
    if use_dsb:
        for i, (stype, data) in enumerate(secrets):
            if stype == SECRETS_TLS_KEYLOG:
                keylog = keylog or KeyLog()
                keylog.add_text(data, diag, source=f"pcapng DSB #{i + 1}")
    tracker = TcpTracker(diag)
    reasm: dict[int, tuple[Reassembler, Reassembler]] = {}
    observers: dict[int, TlsObserver] = {}
    inners: dict[int, Collector] = {}
    events: list[object] = []
    ports: dict[int, int] = {}
    last = (0, 0)

    def make_inner(stream: int) -> InnerFactory:
        def factory(alpn: str | None) -> StreamObserver | None:
            if not inner:
                return None
            c = inners[stream] = Collector(alpn)
            return c

        return factory

    def deliver(stream: int, items: list[StreamChunk | StreamGap]) -> None:
        obs = observers[stream]
        for it in items:
            if isinstance(it, StreamGap):
                events.extend(obs.gap(it.direction, it.offset, it.nbytes, it.ts_ns, it.frame))
            elif chunker is None:
                events.extend(obs.feed(it))
            else:
                off = it.offset
                for piece in chunker(it.data):
                    events.extend(
                        obs.feed(
                            StreamChunk(
                                direction=it.direction,
                                data=piece,
                                ts_ns=it.ts_ns,
                                frame=it.frame,
                                offset=off,
                            )
                        )
                    )
                    off += len(piece)

    for seg in segs:
        a = tracker.segment(seg)
        last = (seg.ts_ns, seg.frame)
        st = a.tcp_stream
        if st not in reasm:
            reasm[st] = (
                Reassembler(Direction.CLIENT_TO_SERVER),
                Reassembler(Direction.SERVER_TO_CLIENT),
            )
            factory = inner_for(st, diag) if inner_for is not None else make_inner(st)
            observers[st] = TlsObserver(
                tcp_stream=st, diag=diag, keylog=keylog, inner_factory=factory
            )
        d = Direction.CLIENT_TO_SERVER if a.from_client else Direction.SERVER_TO_CLIENT
        ports[st] = seg.sport if a.from_client else seg.dport
        mine, peer = reasm[st][d], reasm[st][1 - d]
        items: list[StreamChunk | StreamGap] = []
        if not seg.flags & RST:
            items += mine.segment(
                a.rel_seq,
                seg.payload,
                seg.ts_ns,
                seg.frame,
                syn=bool(seg.flags & SYN),
                fin=bool(seg.flags & FIN),
                seg_len=seg.seg_len,
            )
            if seg.flags & ACK and a.rel_ack is not None:
                items += peer.acked(a.rel_ack, seg.ts_ns, seg.frame)
        deliver(st, items)
    for st, (r0, r1) in reasm.items():
        deliver(st, r0.finish(*last) + r1.finish(*last))
        obs = observers[st]
        events.extend(obs.close(Direction.CLIENT_TO_SERVER, *last))
        events.extend(obs.close(Direction.SERVER_TO_CLIENT, *last))
        events.extend(obs.finish(*last))
    return Run(events, observers, inners, diag, keylog, ports)
