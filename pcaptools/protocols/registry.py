"""The one place that chooses every protocol: which observer a TLS ALPN id, an HTTP Upgrade
token, a body's media type or a UDP port hands the bytes to.

A :class:`ProtocolRegistry` holds small frozen entries, one per choice:

- :class:`StreamEntry` -- a byte-stream protocol by kind (``"http1"``, ``"http2"``): the
  factory of its :class:`~pcaptools.tcp.stream.StreamObserver` for one TCP connection;
- :class:`AlpnEntry` -- a TLS ALPN protocol id (RFC 7301 registry name, ``"h2"``) -> a kind;
- :class:`UpgradeEntry` -- an HTTP/1.1 ``Upgrade`` token (``"h2c"``, ``"websocket"``) -> the
  factory of the observer of the bytes after the ``101 Switching Protocols``;
- :class:`MediaTypeEntry` -- a body media type (``"text/event-stream"``) and the directions
  it is parsed in -> the factory of its :class:`BodyConsumer`;
- :class:`DatagramEntry` -- UDP ports (and, optionally, a probe for datagrams on other ports)
  -> the factory of one :class:`DatagramObserver` per load (DNS today; QUIC next);
- :class:`QuicAppEntry` -- an ALPN id negotiated on a QUIC connection (``"h3"``) -> the
  factory of its application observer (:mod:`pcaptools.protocols.quic.streams`);
- :class:`TcpPortEntry` -- TCP ports whose connections skip the TLS/HTTP sniffing and go to
  a port-chosen observer (DNS over TCP, which reports to the DNS datagram observer).

:data:`REGISTRY` is the registry ``load()`` uses. This module knows no protocol (it sits below
all of them, so every observer can look things up in it); the protocols pcaptools ships are
registered in one table, :mod:`pcaptools.protocols.builtin`, which the pipeline imports. Adding a
protocol is one entry there and its observer module: see ``docs/adding-a-protocol.md``.

Every lookup is one or two dict lookups, made once per connection, message or upgrade; the
only per-packet one is :meth:`UdpRoute.route`, the one call every UDP datagram of the frame
loop goes through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..diagnostics import Diagnostics
from ..net.packet import UdpDatagram
from ..tcp.stream import Direction

__all__ = [
    "REGISTRY",
    "AlpnEntry",
    "BodyConsumer",
    "BodyFactory",
    "DatagramEntry",
    "DatagramObserver",
    "MediaTypeEntry",
    "ProtocolRegistry",
    "QuicAppEntry",
    "StreamEntry",
    "StreamFactory",
    "TcpPortEntry",
    "TcpPortFactory",
    "UdpRoute",
    "UpgradeContext",
    "UpgradeEntry",
    "UpgradeFactory",
]

_T = TypeVar("_T")

BOTH_DIRECTIONS: tuple[Direction, ...] = (Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT)


# --------------------------------------------------------------------------- contracts


class StreamFactory(Protocol):
    """Builds the observer of one TCP connection (or of what TLS decrypted of it) for a kind."""

    def __call__(
        self, *, tcp_stream: int, diag: Diagnostics, websocket_factory: Any, midstream: bool
    ) -> Any:
        """``websocket_factory``: what the HTTP/1 observer calls on ``Upgrade: websocket``
        (None: WebSocket not followed); ``midstream``: the capture started inside the
        connection. Returns the observer (a :class:`~pcaptools.tcp.stream.StreamObserver`)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class UpgradeContext:
    """What an HTTP/1.1 observer knows when a ``101 Switching Protocols`` (or a CONNECT 2xx)
    hands the connection over: the input of an :data:`UpgradeFactory`."""

    token: str
    """the lower-cased Upgrade token (``h2c``, ``websocket``...) or ``connect``"""
    tcp_stream: int
    diag: Diagnostics
    request: Any
    """the upgraded request (:class:`~pcaptools.protocols.http1.HttpRequest`), None when
    the capture started after it"""
    response: Any
    """the 101 response head (:class:`~pcaptools.protocols.http1.HttpResponse`), or None"""
    websocket_factory: Any
    """the HTTP/1 observer's ``websocket_factory`` (None: WebSocket is not followed)"""
    sse_max_line_bytes: int
    max_decoded_body_bytes: int


UpgradeFactory = Callable[[UpgradeContext], Any]
"""``factory(context)`` -> the observer of the bytes after the switch, or None (the bytes are
then only counted, with an ``http1.upgrade_not_followed`` row)."""


class BodyConsumer(Protocol):
    """What a body parser offers (:class:`~pcaptools.protocols.sse.SseParser` is one)."""

    def feed(self, data: bytes, ts_ns: int, frame: int) -> list[Any]:
        """the next decoded body bytes (delivered by packet ``frame``) -> events"""
        ...

    def gap(self, ts_ns: int, frame: int) -> None:
        """decoded bytes are missing here (lost on the wire, or not decodable)"""
        ...

    def close(
        self, ts_ns: int, frame: int, *, at_eof: bool = False, complete: bool = True
    ) -> list[Any] | None:
        """the body ended (``at_eof``: the capture ended first; ``complete=False``: the
        message was cut, e.g. by RST_STREAM or a FIN inside it) -> events, if any"""
        ...


class BodyFactory(Protocol):
    """Builds the parser of one (decoded) message body of a registered media type."""

    def __call__(
        self,
        mtype: str,
        *,
        tcp_stream: int | None,
        stream_id: int | None,
        request_index: int | None,
        direction: Direction,
        diag: Diagnostics,
        sse_max_line_bytes: int,
    ) -> BodyConsumer: ...


class DatagramObserver(Protocol):
    """Watches the UDP datagrams of one protocol for a whole load (one instance per load; it
    keeps its own rows, which its table builder reads). Never raises on wire data."""

    def datagram(self, d: UdpDatagram) -> None:
        """One datagram of a registered port (or one its probe accepted)."""
        ...


class TcpPortFactory(Protocol):
    """Builds the observer of one TCP connection chosen by its port."""

    def __call__(
        self,
        *,
        tcp_stream: int,
        diag: Diagnostics,
        addrs: tuple[int, bytes, int, bytes, int],
        midstream: bool,
        observers: Mapping[str, DatagramObserver],
    ) -> Any:
        """``addrs``: (ip_version, client address, client port, server address, server port);
        ``observers``: the load's datagram observers by name (:attr:`UdpRoute.observers`), for
        a protocol that reports to one of them. Returns a
        :class:`~pcaptools.tcp.stream.StreamObserver`."""
        ...


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEntry:
    """A byte-stream protocol, by the kind detection and ALPN entries name."""

    kind: str
    factory: StreamFactory


@dataclass(frozen=True, slots=True, kw_only=True)
class AlpnEntry:
    """A TLS ALPN protocol id (RFC 7301 registry name) and the kind whose observer takes the
    decrypted bytes."""

    alpn: str
    kind: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UpgradeEntry:
    """An HTTP/1.1 ``Upgrade`` token (lower case) and the observer the connection switches to."""

    token: str
    factory: UpgradeFactory


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaTypeEntry:
    """A body media type (lower case, no parameters) and the parser of such bodies sent in
    ``directions``."""

    media_type: str
    factory: BodyFactory
    directions: tuple[Direction, ...] = BOTH_DIRECTIONS


@dataclass(frozen=True, slots=True, kw_only=True)
class DatagramEntry:
    """A UDP protocol: the ports it is chosen by and the factory of its per-load observer.

    A datagram goes to the entry of its lower port, else of its higher port (Wireshark's
    order); a datagram on no registered port is offered to the ``probe`` of each entry, in
    registration order, and goes to the first that accepts it."""

    name: str
    """the observer's name, by which the pipeline and the table builders find it"""
    factory: Callable[..., DatagramObserver]
    """``factory(diag)``, or with ``wants_keylog`` ``factory(diag, keylog)``"""
    ports: tuple[int, ...] = ()
    probe: Callable[[UdpDatagram], bool] | None = None
    """``probe(datagram)`` -> True when the datagram is this protocol (first bytes, say)"""
    wants_keylog: bool = False
    """the factory also takes the load's TLS key log (a ``tls.keylog.KeyLog``: a file's,
    and the pcapng Decryption Secrets Blocks' as they are read), e.g. QUIC"""


@dataclass(frozen=True, slots=True, kw_only=True)
class TcpPortEntry:
    """TCP ports whose connections go to ``factory``'s observer instead of the TLS and HTTP
    sniffing of :class:`~.dispatch.ConnectionObserver`: the server's port, else the
    client's (the SYN sender's)."""

    name: str
    ports: tuple[int, ...]
    factory: TcpPortFactory


@dataclass(frozen=True, slots=True, kw_only=True)
class QuicAppEntry:
    """The application protocol of a QUIC connection, chosen by its negotiated ALPN id: the
    factory takes a :class:`~pcaptools.protocols.quic.streams.QuicAppContext` and returns a
    :class:`~pcaptools.protocols.quic.streams.QuicStreamObserver` (typed loosely here: this
    module sits below the protocols)."""

    alpn: str
    factory: Callable[[Any], Any]


Entry = (StreamEntry | AlpnEntry | UpgradeEntry | MediaTypeEntry | DatagramEntry | TcpPortEntry
         | QuicAppEntry)


# --------------------------------------------------------------------------- the registry


class ProtocolRegistry:
    """Entries by what chooses them. Registering a second entry for the same choice (ALPN id,
    token, media type and direction, UDP port, kind or datagram name) raises ValueError:
    a choice is made in one place."""

    def __init__(self, entries: tuple[Entry, ...] = ()) -> None:
        self._kinds: dict[str, StreamEntry] = {}
        self.alpn_kinds: dict[str, str] = {}
        """ALPN protocol id -> kind (a live view: ``detect.ALPN_KINDS`` is this dict)"""
        self._upgrades: dict[str, UpgradeEntry] = {}
        self._media: dict[tuple[str, Direction], MediaTypeEntry] = {}
        self._datagrams: dict[str, DatagramEntry] = {}
        self._udp_ports: dict[int, DatagramEntry] = {}
        self._tcp_ports: dict[int, TcpPortEntry] = {}
        self._quic_apps: dict[str, QuicAppEntry] = {}
        self.add(*entries)

    def add(self, *entries: Entry) -> None:
        """Register entries (see the class docstring for duplicates). An entry that cannot be
        registered changes nothing (the entries before it stay registered)."""
        for e in entries:
            slots = self._slots(e)
            for table, key, _value, what in slots:
                if key in table:
                    raise ValueError(f"{what} {key!r} is registered twice")
            for table, key, value, _what in slots:
                table[key] = value

    def remove(self, *entries: Entry) -> None:
        """Unregister entries added with :meth:`add` (a plug-in switched off, a test's toy
        protocol); an entry not registered raises KeyError and changes nothing."""
        for e in entries:
            slots = self._slots(e)
            for table, key, value, _what in slots:
                if key not in table or table[key] != value:
                    raise KeyError(f"{key!r} is not registered as {value!r}")
            for table, key, _value, _what in slots:
                del table[key]

    def _slots(self, e: Entry) -> list[tuple[dict[Any, Any], object, object, str]]:
        """(table, key, value, what the key is) of every place entry ``e`` takes."""
        if isinstance(e, StreamEntry):
            return [(self._kinds, e.kind, e, "stream kind")]
        if isinstance(e, AlpnEntry):
            return [(self.alpn_kinds, e.alpn, e.kind, "ALPN id")]
        if isinstance(e, UpgradeEntry):
            return [(self._upgrades, e.token, e, "Upgrade token")]
        if isinstance(e, MediaTypeEntry):
            return [(self._media, (e.media_type, d), e, "media type") for d in e.directions]
        if isinstance(e, DatagramEntry):
            return [(self._datagrams, e.name, e, "datagram observer"),
                    *((self._udp_ports, p, e, "UDP port") for p in e.ports)]
        if isinstance(e, TcpPortEntry):
            return [(self._tcp_ports, p, e, "TCP port") for p in e.ports]
        if isinstance(e, QuicAppEntry):
            return [(self._quic_apps, e.alpn, e, "QUIC ALPN id")]
        raise TypeError(f"not a registry entry: {e!r}")

    # ------------------------------------------------------------------ lookups

    def stream_factory(self, kind: str) -> StreamFactory | None:
        """The observer factory of ``kind`` or of the kind ALPN id ``kind`` names, else None."""
        entry = self._kinds.get(self.alpn_kinds.get(kind, kind))
        return entry.factory if entry is not None else None

    def alpn_kind(self, alpn: str) -> str | None:
        """The kind of ALPN protocol id ``alpn`` (``"h2"`` -> ``"http2"``), else None."""
        return self.alpn_kinds.get(alpn)

    def upgrade(self, token: str) -> UpgradeFactory | None:
        """The factory of the observer after ``Upgrade: token``, else None."""
        entry = self._upgrades.get(token)
        return entry.factory if entry is not None else None

    def body_parser(self, mtype: str | None, direction: Direction) -> BodyFactory | None:
        """The parser factory of bodies of media type ``mtype`` sent in ``direction``, else None."""
        if mtype is None:
            return None
        entry = self._media.get((mtype, direction))
        return entry.factory if entry is not None else None

    def udp_port(self, port: int) -> DatagramEntry | None:
        """The datagram entry registered for UDP ``port``, else None."""
        return self._udp_ports.get(port)

    def tcp_port(self, server_port: int, client_port: int) -> TcpPortEntry | None:
        """The entry registered for a connection's server port, else for its client port,
        else None (the connection is sniffed for TLS and HTTP)."""
        ports = self._tcp_ports
        entry = ports.get(server_port)
        return entry if entry is not None else ports.get(client_port)

    def quic_app(self, alpn: str | None) -> Callable[[Any], Any] | None:
        """The application observer factory of a QUIC connection that negotiated ``alpn``
        (``"h3"``), else None (its streams are counted, not parsed)."""
        if alpn is None:
            return None
        entry = self._quic_apps.get(alpn)
        return entry.factory if entry is not None else None

    @property
    def datagram_entries(self) -> tuple[DatagramEntry, ...]:
        """The datagram entries, in registration order."""
        return tuple(self._datagrams.values())

    def udp_route(self, diag: Diagnostics, keylog: Any = None) -> UdpRoute:
        """A new :class:`UdpRoute` for one load: one observer per datagram entry
        (``keylog``: the load's key log, for the entries that want it)."""
        return UdpRoute(self, diag, keylog)


class UdpRoute:
    """The UDP route of one load: every UDP datagram of the frame loop goes through
    :meth:`route`, which gives it to the observer of its port (or of the first probe that
    accepts it). The observers are created here, one per :class:`DatagramEntry`, and found
    by name with :meth:`observer` (the DNS tracker is shared with DNS over TCP and HTTPS).

    The boundary of the datagram observers: a bug in one (an exception) becomes a
    ``udp.observer_error`` row and the load carries on with the next datagram."""

    __slots__ = ("_diag", "_observers", "_ports", "_probes")

    def __init__(self, registry: ProtocolRegistry, diag: Diagnostics,
                 keylog: Any = None) -> None:
        self._diag = diag
        self._observers: dict[str, DatagramObserver] = {
            e.name: e.factory(diag, keylog) if e.wants_keylog else e.factory(diag)
            for e in registry.datagram_entries
        }
        obs = self._observers
        self._ports: dict[int, DatagramObserver] = {
            port: obs[e.name] for port, e in registry._udp_ports.items()
        }
        self._probes: tuple[tuple[Callable[[UdpDatagram], bool], DatagramObserver], ...] = tuple(
            (e.probe, obs[e.name]) for e in registry.datagram_entries if e.probe is not None
        )

    @property
    def observers(self) -> Mapping[str, DatagramObserver]:
        """The datagram observers of this load, by entry name."""
        return self._observers

    def observer(self, name: str, cls: type[_T]) -> _T:
        """The observer of entry ``name``, checked to be a ``cls``."""
        obs = self._observers[name]
        if not isinstance(obs, cls):
            raise TypeError(
                f"datagram observer {name!r} is a {type(obs).__name__}, not {cls.__name__}"
            )
        return obs

    def route(self, d: UdpDatagram) -> None:
        """Give ``d`` to the observer of its lower registered port, else its higher one,
        else the first probe that accepts it; none: nothing is done. Never raises."""
        sport = d.sport
        dport = d.dport
        ports = self._ports
        if sport <= dport:
            obs = ports.get(sport)
            if obs is None:
                obs = ports.get(dport)
        else:
            obs = ports.get(dport)
            if obs is None:
                obs = ports.get(sport)
        if obs is None:
            if not self._probes:
                return
            obs = self._probe(d)
            if obs is None:
                return
        try:
            obs.datagram(d)
        except Exception as exc:  # the boundary: any bug becomes a row
            self._diag.add(
                "udp.observer_error",
                f"{type(exc).__name__} in {type(obs).__name__}.datagram on UDP port "
                f"{d.sport} -> {d.dport}: {str(exc)[:200]}",
                ts_ns=d.ts_ns, frame=d.frame,
            )

    def finish(self, ts_ns: int, frame: int) -> None:
        """The end of the capture: ``finish(ts_ns, frame)`` of every observer that has one
        (guarded as :meth:`route` is)."""
        for obs in self._observers.values():
            fin = getattr(obs, "finish", None)
            if fin is None:
                continue
            try:
                fin(ts_ns, frame)
            except Exception as exc:  # the boundary
                self._diag.add(
                    "udp.observer_error",
                    f"{type(exc).__name__} in {type(obs).__name__}.finish: {str(exc)[:200]}",
                    ts_ns=ts_ns, frame=frame,
                )

    def _probe(self, d: UdpDatagram) -> DatagramObserver | None:
        for probe, obs in self._probes:
            try:
                if probe(d):
                    return obs
            except Exception as exc:
                self._diag.add(
                    "udp.observer_error",
                    f"{type(exc).__name__} in the probe of {type(obs).__name__}: {str(exc)[:200]}",
                    ts_ns=d.ts_ns, frame=d.frame,
                )
        return None


REGISTRY = ProtocolRegistry()
"""The registry ``load()`` uses, filled by :mod:`pcaptools.protocols.builtin`."""
