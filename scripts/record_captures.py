"""Record pcaptools' own test captures from real traffic between real servers and clients.

Usage (as root, on Linux; see captures/README.md for the packages it needs)::

    python scripts/record_captures.py                 # every scenario
    python scripts/record_captures.py --only tcp-reset --only ipv6
    python scripts/record_captures.py --list
    python scripts/record_captures.py --readme-only    # rebuild captures/README.md from facts

Each scenario builds its own network namespaces (``scripts/netlab.py``), starts real servers
(nginx, ``scripts/servers/tcpkit.py``) and clients (curl, Python sockets), captures with
tcpdump or dumpcap, and writes next to every capture ``<capture>.facts.json``: what the script
did and knows for sure (addresses, ports, every connection and how it was meant to start and
end, link delay/loss/seed and the exact segments the link dropped, byte counts, timestamps),
plus a ``tshark`` section (tshark 4.0 counts and a per-stream table) and ``checks``: the facts
compared with what tshark sees.  A failed check makes the exit status 1 (the files are still
written, so they can be inspected).

Adding a scenario: write ``def my_scenario(ctx: Ctx) -> None`` that builds a topology with
``ctx.pair()`` / ``ctx.lab``, starts servers, calls ``ctx.capture(...)``, logs connections with
``ctx.conn(...)`` and expectations with ``ctx.expect(...)``, and register it with
``@scenario("name", outputs=("name.pcap",), summary="...")``.  Nothing else needs to change.

Traffic only ever flows inside namespaces this script creates (and their loopbacks); all loops
are bounded in count and time; namespaces and processes are removed on every exit path.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))

import netlab  # noqa: E402
from netlab import LinkParams, Netns  # noqa: E402

FACTS_SCHEMA = 1
CLIENT4, SERVER4 = "192.0.2.10", "192.0.2.20"          # RFC 5737 documentation range
CLIENT6, SERVER6 = "2001:db8:77::10", "2001:db8:77::20"  # RFC 3849 documentation range
MAC_CLIENT, MAC_SERVER = "02:00:00:00:00:10", "02:00:00:00:00:20"
TCPKIT = SCRIPTS / "servers" / "tcpkit.py"

ANALYSIS_FLAGS = (
    "retransmission", "fast_retransmission", "spurious_retransmission", "duplicate_ack",
    "zero_window", "zero_window_probe", "keep_alive", "out_of_order", "lost_segment",
    "ack_lost_segment", "reused_ports", "window_full", "window_update",
)


# =========================================================================== registry

@dataclass(frozen=True, slots=True)
class Scenario:
    """A registered recording: its name, the capture files it writes and a one-line summary."""

    name: str
    outputs: tuple[str, ...]
    summary: str
    run: Callable[[Ctx], None]
    attempts: int = 1


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, *, outputs: tuple[str, ...], summary: str,
             attempts: int = 1) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
    """Register ``fn`` as scenario ``name`` writing ``outputs`` (files in the output dir).

    ``attempts`` > 1 re-records (same seed, fresh namespaces) while a check fails: for
    scenarios whose wanted events (e.g. a fast retransmission) depend on timing.
    """
    def deco(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} registered twice")
        SCENARIOS[name] = Scenario(name, outputs, summary, fn, attempts)
        return fn
    return deco


# =========================================================================== context

def ep(ip: str, port: int) -> str:
    """An endpoint as text: ``1.2.3.4:80`` or ``[2001:db8::1]:80``."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class Ctx:
    """What a scenario works with: the lab, the capture helpers and the facts it records."""

    def __init__(self, sc: Scenario, out_dir: Path, work: Path, lab: netlab.Lab) -> None:
        self.sc = sc
        self.out_dir = out_dir
        self.work = work
        self.lab = lab
        self.common: dict[str, Any] = {
            "hosts": {}, "link": None, "servers": [], "connections": [], "events": [],
            "notes": [],
        }
        self.per_capture: dict[str, dict[str, Any]] = {}
        self.expectations: dict[str, list[tuple[str, str, int]]] = {}
        self._captures: dict[str, netlab.Capture] = {}
        self.t0_ns = time.time_ns()

    # -- recording facts
    def event(self, what: str, **detail: Any) -> None:
        """Log something the script did, with the wall-clock time (same clock as captures)."""
        self.common["events"].append({"t_ns": time.time_ns(), "what": what, **detail})

    def note(self, text: str) -> None:
        self.common["notes"].append(text)

    def conn(self, *, client: str, server: str, opened: str = "during-capture",
             handshake: str = "completed", end: str, **detail: Any) -> dict[str, Any]:
        """Record one TCP connection attempt; returns the dict so callers can add to it.

        ``opened``: ``during-capture`` / ``before-capture``.  ``handshake``: ``completed``,
        ``refused`` (RST answer), ``no-answer`` (SYNs dropped), ``icmp-rejected``.
        ``end``: ``fin-client-first``, ``fin-server-first``, ``fin-both`` (both close at
        about the same time, the order is a race), ``rst-client``, ``rst-server``,
        ``open-at-capture-end`` or ``none`` (no connection was made).
        """
        c = {"id": len(self.common["connections"]) + 1, "client": client, "server": server,
             "opened": opened, "handshake": handshake, "end": end, **detail}
        self.common["connections"].append(c)
        return c

    def expect(self, capture: str, key: str, op: str, value: int) -> None:
        """A tshark count ``capture`` must show: ``expect(f, "tcp.retransmission", ">=", 1)``."""
        self.expectations.setdefault(capture, []).append((key, op, value))

    # -- topology
    def pair(self, *, ipv4: bool = True, ipv6: bool = False,
             link: LinkParams | None = None) -> tuple[Netns, Netns, netlab.TapLink | None]:
        """Client and server namespaces joined by a veth pair, or by a TAP link when given."""
        c = self.lab.netns("client", ipv6=ipv6)
        s = self.lab.netns("server", ipv6=ipv6)
        ac = ([f"{CLIENT4}/24"] if ipv4 else []) + ([f"{CLIENT6}/64"] if ipv6 else [])
        as_ = ([f"{SERVER4}/24"] if ipv4 else []) + ([f"{SERVER6}/64"] if ipv6 else [])
        tl = None
        if link is None:
            self.lab.veth(c, s, addrs_a=ac, addrs_b=as_, mac_a=MAC_CLIENT, mac_b=MAC_SERVER)
            self.common["link"] = {"kind": "veth", "gso_max_segs": 1, "mtu": 1500,
                                   "delay_ms_each_way": 0, "loss_each_way": 0.0}
        else:
            tl = self.lab.tap_link(c, s, link, addrs_a=ac, addrs_b=as_, mac_a=MAC_CLIENT,
                                   mac_b=MAC_SERVER)
            self.common["link"] = {"kind": "tap+forwarder", "mtu": 1500,
                                   "delay_ms_each_way": link.delay_ms,
                                   "loss_client_to_server": link.loss_ab,
                                   "loss_server_to_client": link.loss_ba,
                                   "params": asdict(link)}
        self.common["hosts"] = {
            "client": {"netns_role": "client", "iface": "eth0", "mac": MAC_CLIENT,
                       "ipv4": CLIENT4 if ipv4 else None, "ipv6": CLIENT6 if ipv6 else None},
            "server": {"netns_role": "server", "iface": "eth0", "mac": MAC_SERVER,
                       "ipv4": SERVER4 if ipv4 else None, "ipv6": SERVER6 if ipv6 else None},
        }
        if ipv6:
            time.sleep(1.5)  # let the link-up MLD reports pass before any capture starts
        return c, s, tl

    def link_stats(self, tl: netlab.TapLink | None) -> None:
        """Stop the TAP forwarder and put its statistics (and drop lists) into the facts."""
        if tl is None:
            return
        st = tl.stop()
        if st:
            self.common["link"]["forwarder"] = {
                k: st[k] for k in ("ran_s", "undelivered_at_exit", "started_ns") if k in st}
            self.common["link"]["client_to_server"] = st.get("a_to_b")
            self.common["link"]["server_to_client"] = st.get("b_to_a")

    # -- captures
    def capture(self, ns: Netns, iface: str, name: str, *, vantage: str,
                **kw: Any) -> netlab.Capture:
        """Start a capture that will become ``<out>/<name>``; ``vantage`` says where it was."""
        if name not in self.sc.outputs:
            raise ValueError(f"{name} is not among {self.sc.name}'s outputs")
        cap = netlab.Capture(self.lab, ns, iface, self.work / name, **kw)
        cap.start()
        self._captures[name] = cap
        self.per_capture[name] = {"vantage": vantage, "iface": iface,
                                  "netns_role": ns.role}
        self.event("capture started", capture=name)
        return cap

    def stop_capture(self, name: str) -> None:
        res = self._captures[name].stop()
        self.event("capture stopped", capture=name)
        self.per_capture[name]["recorder"] = {
            "tool": res.tool, "version": netlab.tool_version([res.tool, "--version"]),
            "argv": [a.replace(str(self.work) + "/", "") for a in res.argv],
            "packets_captured": res.packets_captured,
            "packets_dropped": res.packets_dropped, "started_ns": res.started_ns,
            "stopped_ns": res.stopped_ns}


# =========================================================================== servers

def _www(root: Path) -> dict[str, int]:
    """Deterministic files for nginx to serve; returns {url path: size}."""
    files: dict[str, bytes] = {}
    lines = [f"<p>line {i:03d}: pcaptools test page, served by nginx in a namespace</p>"
             for i in range(16)]
    page = ("<!doctype html>\n<html><head><title>pcaptools lab</title></head><body>\n"
            + "\n".join(lines) + "\n</body></html>\n").encode()
    files["/index.html"] = page
    files["/close/index.html"] = page
    files["/data/small.json"] = json.dumps(
        {"model": "lab", "items": [{"id": i, "text": f"item {i}"} for i in range(8)]},
        indent=1).encode() + b"\n"
    for kb in (64, 200, 300):
        files[f"/data/{kb}k.bin"] = random.Random(kb).randbytes(kb * 1024)
    for rel, data in files.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "upload").mkdir(exist_ok=True)
    return {k: len(v) for k, v in files.items()}


def start_nginx(ctx: Ctx, ns: Netns, listens: list[str], *, port: int = 80) -> Path:
    """nginx in ``ns`` serving ``_www`` files; returns the JSON-lines access log path.

    ``/close/`` answers with ``Connection: close`` (the server closes first); PUT to
    ``/upload/`` stores the body (so uploads are read in full before the 201/204 answer).
    """
    d = ctx.work / "nginx"
    www = d / "www"
    www.mkdir(parents=True, exist_ok=True)
    sizes = _www(www)
    access = d / "access.jsonl"
    listen_lines = "\n".join(f"    listen {x};" for x in listens)
    temp = "\n".join(f"  {k}_temp_path {d}/{k}_tmp;" for k in
                     ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = f"""
daemon off;
worker_processes 1;
user root;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
  log_format lab escape=json '{{"t":"$msec","conn":$connection,"conn_req":$connection_requests,'
      '"remote":"$remote_addr","rport":"$remote_port","request":"$request","status":$status,'
      '"bytes_sent":$bytes_sent,"body_bytes_sent":$body_bytes_sent,'
      '"request_length":$request_length}}';
  access_log {access} lab;
{temp}
  types {{ text/html html; application/json json; application/octet-stream bin; }}
  default_type application/octet-stream;
  sendfile off;
  keepalive_timeout 30s;
  server_tokens off;
  server {{
{listen_lines}
    server_name lab;
    root {www};
    location /close/ {{ keepalive_timeout 0; }}
    location /upload/ {{
      dav_methods PUT;
      create_full_put_path on;
      client_max_body_size 10m;
    }}
  }}
}}
"""
    (d / "nginx.conf").write_text(conf)
    ctx.lab.spawn(ns, ["nginx", "-p", str(d), "-e", str(d / "error.log"), "-c",
                       str(d / "nginx.conf")], name="nginx", lifetime_s=600)
    netlab.wait_for_port(ns, "", port)
    ctx.common["servers"].append({"kind": "nginx",
                                  "version": netlab.tool_version(["nginx", "-v"]),
                                  "listen": listens, "files": sizes,
                                  "behaviour": "static files; /close/ sends Connection: close;"
                                               " PUT /upload/ stores the body"})
    return access


def nginx_log(path: Path) -> list[dict[str, Any]]:
    """The access log rows (empty when the file is missing)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def start_tcpkit(ctx: Ctx, ns: Netns, listens: list[str], *, lifetime_s: int = 60) -> Path:
    """scripts/servers/tcpkit.py in ``ns``; returns its JSON-lines event log path."""
    events = ctx.work / "tcpkit.events.jsonl"
    argv = [sys.executable, str(TCPKIT), "--events", str(events), "--lifetime",
            str(lifetime_s)]
    for spec in listens:
        argv += ["--listen", spec]
    ctx.lab.spawn(ns, argv, name="tcpkit", lifetime_s=lifetime_s + 5)
    for spec in listens:
        netlab.wait_for_port(ns, "", int(spec.rsplit(":", 1)[1]))
    ctx.common["servers"].append({"kind": "tcpkit", "listen": listens})
    return events


def tcpkit_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# =========================================================================== clients

@dataclass(slots=True)
class Req:
    """One curl transfer: ``method`` GET, HEAD or PUT (``upload`` bytes for PUT)."""

    path: str
    method: str = "GET"
    upload: bytes | None = None


@dataclass(slots=True)
class CurlRun:
    """One curl process: its transfers (a subset of ``%{json}`` each) and when it ran."""

    transfers: list[dict[str, Any]]
    t_start_ns: int
    t_end_ns: int
    exit: int


def curl(ctx: Ctx, ns: Netns, host: str, reqs: list[Req], *, local_port: int,
         port: int = 80) -> CurlRun:
    """Run the requests with one curl process (so keep-alive reuses the connection)."""
    hostpart = f"[{host}]" if ":" in host else host
    argv = ["curl"]
    for i, r in enumerate(reqs):
        if i:
            argv.append("--next")
        argv += ["--http1.1", "-sS", "-g", "--max-time", "30", "--local-port", str(local_port),
                 "-H", "Expect:", "-o", "/dev/null", "-w", "%{json}\\n"]
        if r.method == "HEAD":
            argv.append("-I")
        elif r.method == "PUT":
            assert r.upload is not None
            up = ctx.work / f"upload-{local_port}-{i}.bin"
            up.write_bytes(r.upload)
            argv += ["-T", str(up)]
        argv.append(f"http://{hostpart}:{port}{r.path}")
    ctx.event("curl start", local_port=local_port, n_requests=len(reqs))
    t0 = time.time_ns()
    res = ns.run(argv, check=False, timeout=60)
    t1 = time.time_ns()
    ctx.event("curl end", local_port=local_port, exit=res.returncode)
    out = []
    keep = ("url", "method", "http_code", "size_download", "size_upload", "size_header",
            "size_request", "num_connects", "local_ip", "local_port", "remote_ip",
            "remote_port", "time_connect", "time_starttransfer", "time_total", "exitcode",
            "errormsg", "http_version")
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            out.append({k: j.get(k) for k in keep})
    if res.returncode != 0:
        ctx.note(f"curl from port {local_port} exited {res.returncode}: {res.stderr.strip()}")
    return CurlRun(out, t0, t1, res.returncode)


@dataclass(slots=True)
class Attempt:
    """The result of ``sock_connect``: the socket (None unless connected) and what happened."""

    sock: socket.socket | None
    outcome: str         # connected, refused, timeout, or an exception's class name
    t_start_ns: int
    t_end_ns: int

    def connected(self) -> socket.socket:
        """The socket; raises LabError when the connection was not made."""
        if self.sock is None:
            raise netlab.LabError(f"connection failed: {self.outcome}")
        return self.sock


def sock_connect(ns: Netns, src: tuple[str, int], dst: tuple[str, int], *,
                 timeout: float = 5.0, reuse: bool = False) -> Attempt:
    """Connect from ``src`` (fixed port) to ``dst`` inside ``ns``; never raises for the
    connect itself (refusal, timeout and errors become the Attempt's ``outcome``)."""
    fam = socket.AF_INET6 if ":" in src[0] else socket.AF_INET
    s = ns.socket(fam)
    if reuse:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(src)
    s.settimeout(timeout)
    t0 = time.time_ns()
    try:
        s.connect(dst)
    except OSError as exc:
        s.close()
        out = {ConnectionRefusedError: "refused", TimeoutError: "timeout"}.get(
            type(exc), exc.__class__.__name__)
        return Attempt(None, out, t0, time.time_ns())
    s.settimeout(None)
    return Attempt(s, "connected", t0, time.time_ns())


def refused_conn(ctx: Ctx, at: Attempt, *, client: str, server: str, handshake: str,
                 purpose: str, **detail: Any) -> dict[str, Any]:
    """Record a connection attempt that got no connection (``end`` is ``none``)."""
    return ctx.conn(client=client, server=server, handshake=handshake, end="none",
                    via="python socket", client_outcome=at.outcome, t_start_ns=at.t_start_ns,
                    t_end_ns=at.t_end_ns, purpose=purpose, **detail)


def drain(s: socket.socket, seconds: float, *, until_eof: bool = False) -> tuple[int, str]:
    """Read for ``seconds`` (or until EOF); returns (bytes read, ``ok``/``eof``/``reset``)."""
    deadline = time.monotonic() + seconds
    n = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return n, "ok"
        s.settimeout(min(left, 0.05))
        try:
            data = s.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return n, "reset"
        if not data:
            return n, "eof"
        n += len(data)


def http_get_bytes(path: str, host: str, *, close: bool = False) -> bytes:
    hdr = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: pcaptools-lab\r\n"
    if close:
        hdr += "Connection: close\r\n"
    return (hdr + "\r\n").encode()


def linger0(s: socket.socket) -> None:
    """Make close() send RST (SO_LINGER on, timeout 0)."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def curl_conns(ctx: Ctx, run: CurlRun, *, client_ip: str, server_ip: str, port: int,
               local_port: int, end: str, access: list[dict[str, Any]] | None = None,
               **detail: Any) -> dict[str, Any]:
    """Record the connection one curl process made (with its transfers and nginx's rows)."""
    rows = [a for a in (access or []) if str(a.get("rport")) == str(local_port)]
    transfers = run.transfers
    return ctx.conn(
        client=ep(client_ip, local_port), server=ep(server_ip, port), end=end,
        via="curl", requests=[{k: t[k] for k in ("method", "url", "http_code",
                                                  "size_download", "size_upload",
                                                  "num_connects")} for t in transfers],
        client_bytes_body_received=sum(t["size_download"] or 0 for t in transfers),
        client_bytes_body_sent=sum(t["size_upload"] or 0 for t in transfers),
        server_log=rows, t_start_ns=run.t_start_ns, t_end_ns=run.t_end_ns,
        curl_exit=run.exit, **detail)


# =========================================================================== scenarios

@scenario("http1-basic", outputs=("http1-basic.pcap",),
          summary="HTTP/1.1 to nginx over a veth pair: keep-alive reuse, fresh connections, "
                  "404, HEAD, PUT upload, server-side close")
def sc_http1_basic(ctx: Ctx) -> None:
    c, s, _ = ctx.pair()
    access = start_nginx(ctx, s, [f"{SERVER4}:80"])
    name = "http1-basic.pcap"
    ctx.capture(c, "eth0", name, vantage="client")
    plan: list[tuple[int, list[Req], str, str]] = [
        (41001, [Req("/index.html"), Req("/data/small.json"), Req("/data/64k.bin"),
                 Req("/missing.html"), Req("/data/64k.bin", "HEAD")],
         "fin-client-first", "keep-alive: 5 requests on one connection"),
        (41002, [Req("/index.html")], "fin-client-first", "fresh connection, one request"),
        (41003, [Req("/close/index.html")], "fin-both",
         "server answers Connection: close and closes; curl closes as soon as it has the "
         "response, so which FIN comes first is a race"),
        (41004, [Req("/upload/u1.bin", "PUT", random.Random(41004).randbytes(20000))],
         "fin-client-first", "PUT upload of 20000 bytes"),
    ]
    done = []
    for port, reqs, end, what in plan:
        done.append((port, curl(ctx, c, SERVER4, reqs, local_port=port), end, what))
        time.sleep(0.2)
    ctx.stop_capture(name)
    log = nginx_log(access)
    for port, transfers, end, what in done:
        curl_conns(ctx, transfers, client_ip=CLIENT4, server_ip=SERVER4, port=80,
                   local_port=port, end=end, access=log, purpose=what)
    ctx.expect(name, "tcp.streams", "==", 4)
    ctx.expect(name, "http.requests", "==", 8)
    ctx.expect(name, "tcp.retransmission", "==", 0)


LOSSY = LinkParams(delay_ms=30.0, loss_ab=0.03, loss_ba=0.03, reorder_prob=0.01,
                   reorder_extra_ms=4.0, rate_bps=20_000_000, queue_frames=256, seed=20240,
                   lifetime_s=120)


@scenario("http1-lossy", outputs=("http1-lossy.pcap", "http1-lossy-server.pcap"),
          summary="HTTP/1.1 download (300 KB) and upload (64 KB) across a TAP link with 30 ms "
                  "one-way delay, 3% seeded loss and 1% reordering each way; captured at both "
                  "ends", attempts=3)
def sc_http1_lossy(ctx: Ctx) -> None:
    c, s, tl = ctx.pair(link=LOSSY)
    # classic loss recovery (3 duplicate ACKs, then a fast retransmission) instead of RACK,
    # which often retransmits after the first SACK, before tshark's "fast" rule applies
    for ns in (c, s):
        ns.sysctl("net.ipv4.tcp_recovery", 0)
    ctx.common["sysctl"] = {"client": {"net.ipv4.tcp_recovery": 0},
                            "server": {"net.ipv4.tcp_recovery": 0}}
    access = start_nginx(ctx, s, [f"{SERVER4}:80"])
    fc, fs = "http1-lossy.pcap", "http1-lossy-server.pcap"
    ctx.capture(c, "eth0", fc, vantage="client")
    ctx.capture(s, "eth0", fs, vantage="server")
    t1 = curl(ctx, c, SERVER4, [Req("/data/300k.bin"), Req("/index.html")], local_port=41101)
    time.sleep(0.2)
    t2 = curl(ctx, c, SERVER4, [Req("/upload/u2.bin", "PUT",
                                    random.Random(41102).randbytes(65536))], local_port=41102)
    time.sleep(0.5)
    ctx.stop_capture(fc)
    ctx.stop_capture(fs)
    ctx.link_stats(tl)
    log = nginx_log(access)
    curl_conns(ctx, t1, client_ip=CLIENT4, server_ip=SERVER4, port=80, local_port=41101,
               end="fin-client-first", access=log, purpose="300 KB download + small GET")
    curl_conns(ctx, t2, client_ip=CLIENT4, server_ip=SERVER4, port=80, local_port=41102,
               end="fin-client-first", access=log, purpose="64 KB PUT upload")
    for f in (fc, fs):
        ctx.expect(f, "tcp.streams", "==", 2)
        ctx.expect(f, "tcp.retransmission", ">=", 1)
        ctx.expect(f, "tcp.duplicate_ack", ">=", 1)
    ctx.expect(fs, "tcp.fast_retransmission", ">=", 1)
    ctx.expect(fc, "tcp.out_of_order", ">=", 1)
    ctx.expect(fs, "tcp.out_of_order", ">=", 1)
    ctx.note("loss and reordering apply to TCP frames only, never to SYNs; ARP always passes")
    ctx.note("the client capture sees server segments after the link (losses show as gaps), "
             "the server capture sees them before it (losses show as retransmissions "
             "after dup ACKs)")


@scenario("tcp-refused", outputs=("tcp-refused.pcap",),
          summary="refused connection (RST/ACK), SYNs dropped by a firewall (retransmitted "
                  "SYNs, no answer), ICMP port-unreachable reject, and one normal request")
def sc_tcp_refused(ctx: Ctx) -> None:
    c, s, _ = ctx.pair()
    access = start_nginx(ctx, s, [f"{SERVER4}:80"])
    s.run(["iptables", "-A", "INPUT", "-p", "tcp", "--dport", "82", "-j", "DROP"])
    s.run(["iptables", "-A", "INPUT", "-p", "tcp", "--dport", "83", "-j", "REJECT",
           "--reject-with", "icmp-port-unreachable"])
    ctx.common["firewall"] = ["server: iptables -A INPUT -p tcp --dport 82 -j DROP",
                              "server: iptables -A INPUT -p tcp --dport 83 -j REJECT "
                              "--reject-with icmp-port-unreachable"]
    name = "tcp-refused.pcap"
    ctx.capture(c, "eth0", name, vantage="client")
    t = curl(ctx, c, SERVER4, [Req("/index.html")], local_port=42000)
    time.sleep(0.2)
    at = sock_connect(c, (CLIENT4, 42001), (SERVER4, 81))
    refused_conn(ctx, at, client=ep(CLIENT4, 42001), server=ep(SERVER4, 81),
                 handshake="refused",
                 purpose="nothing listens on port 81: the server kernel answers RST/ACK")
    time.sleep(0.2)
    at = sock_connect(c, (CLIENT4, 42002), (SERVER4, 82), timeout=3.5)
    refused_conn(ctx, at, client=ep(CLIENT4, 42002), server=ep(SERVER4, 82),
                 handshake="no-answer", client_timeout_s=3.5,
                 purpose="firewall drops the SYN: the client retransmits it and gives up "
                         "after 3.5 s")
    time.sleep(0.2)
    at = sock_connect(c, (CLIENT4, 42003), (SERVER4, 83))
    refused_conn(ctx, at, client=ep(CLIENT4, 42003), server=ep(SERVER4, 83),
                 handshake="icmp-rejected",
                 purpose="firewall rejects the SYN with ICMP port unreachable")
    ctx.stop_capture(name)
    curl_conns(ctx, t, client_ip=CLIENT4, server_ip=SERVER4, port=80, local_port=42000,
               end="fin-client-first", access=nginx_log(access), purpose="normal GET")
    ctx.expect(name, "tcp.streams", "==", 4)
    ctx.expect(name, "tcp.rst", "==", 1)
    ctx.expect(name, "tcp.syn", ">=", 5)  # 1 + 1 + (>= 2: the SYN and its retransmissions) + 1
    ctx.common["client_sysctl"] = {k: sysctl_value(c, k) for k in (
        "net.ipv4.tcp_syn_retries", "net.ipv4.tcp_syn_linear_timeouts")}
    ctx.note("how often the SYN to the firewalled port is retransmitted within 3.5 s depends "
             "on the kernel: Linux >= 6.7 retransmits the first SYNs at linear 1 s intervals "
             "(net.ipv4.tcp_syn_linear_timeouts), older kernels at 1 s and 3 s")
    ctx.expect(name, "icmp", "==", 1)


@scenario("tcp-reset", outputs=("tcp-reset.pcap",),
          summary="server aborts with SO_LINGER 0 (RST), client aborts with SO_LINGER 0, "
                  "close with unread data (RST), a connection open before the capture started "
                  "and one still open when it stopped")
def sc_tcp_reset(ctx: Ctx) -> None:
    c, s, _ = ctx.pair()
    ev = start_tcpkit(ctx, s, [f"stream:100:200@{SERVER4}:9001", f"abort:6000@{SERVER4}:9002",
                               f"stream:50:200@{SERVER4}:9003"], lifetime_s=40)
    name = "tcp-reset.pcap"
    req = http_get_bytes("/stream", SERVER4)
    # M: opened before the capture starts (mid-stream start)
    m_at = sock_connect(c, (CLIENT4, 43001), (SERVER4, 9001))
    m = m_at.connected()
    m.sendall(req)
    m_rx, _ = drain(m, 0.5)
    ctx.capture(c, "eth0", name, vantage="client")
    rx, _ = drain(m, 0.3)
    m_rx_during = rx
    # B: the server aborts after 6000 body bytes
    b_at = sock_connect(c, (CLIENT4, 43002), (SERVER4, 9002))
    b = b_at.connected()
    b.sendall(http_get_bytes("/abort", SERVER4))
    b_rx, b_how = drain(b, 3.0)
    b.close()
    ctx.event("server abort seen by client", client_port=43002, how=b_how)
    m_rx_during += drain(m, 0.2)[0]
    # C: the client aborts with SO_LINGER 0 while the server streams
    c_at = sock_connect(c, (CLIENT4, 43003), (SERVER4, 9003))
    cc = c_at.connected()
    cc.sendall(http_get_bytes("/stream", SERVER4))
    c_rx, _ = drain(cc, 0.4)
    linger0(cc)
    cc.close()
    ctx.event("client abort (SO_LINGER 0)", client_port=43003)
    # U: the client closes with unread data in its receive buffer (the kernel sends RST)
    u_at = sock_connect(c, (CLIENT4, 43004), (SERVER4, 9003))
    u = u_at.connected()
    u.sendall(http_get_bytes("/stream", SERVER4))
    time.sleep(0.4)
    u.close()
    ctx.event("client close with unread data", client_port=43004)
    # O: opened now, still open when the capture stops
    o_at = sock_connect(c, (CLIENT4, 43005), (SERVER4, 9001))
    o = o_at.connected()
    o.sendall(req)
    o_rx, _ = drain(o, 0.3)
    # M ends gracefully: client FIN first, the server sees EOF and closes
    m.shutdown(socket.SHUT_WR)
    ctx.event("client shutdown(SHUT_WR)", client_port=43001)
    m_rx_during += drain(m, 2.0, until_eof=True)[0]
    m.close()
    o_rx += drain(o, 0.4)[0]
    ctx.stop_capture(name)
    o_rx += drain(o, 0.3)[0]
    o.shutdown(socket.SHUT_WR)
    o_rx += drain(o, 2.0)[0]
    o.close()
    ctx.event("connection 43005 closed after the capture stopped")
    ctx.conn(client=ep(CLIENT4, 43001), server=ep(SERVER4, 9001), opened="before-capture",
             end="fin-client-first", via="python socket", t_start_ns=m_at.t_start_ns,
             client_bytes_received_before_capture=m_rx,
             client_bytes_received_during_capture=m_rx_during,
             purpose="chunked stream opened 0.5 s before the capture (no SYN in the file); "
                     "the client shuts down its side, the server answers FIN")
    ctx.conn(client=ep(CLIENT4, 43002), server=ep(SERVER4, 9002), end="rst-server",
             via="python socket", t_start_ns=b_at.t_start_ns, client_bytes_received=b_rx,
             client_read_result=b_how,
             purpose="server sends a 200 header promising 24000 bytes, 6000 bytes, then "
                     "closes with SO_LINGER 0 (RST)")
    ctx.conn(client=ep(CLIENT4, 43003), server=ep(SERVER4, 9003), end="rst-client",
             via="python socket", t_start_ns=c_at.t_start_ns, client_bytes_received=c_rx,
             purpose="client reads for 0.4 s, then closes with SO_LINGER 0 (RST)")
    ctx.conn(client=ep(CLIENT4, 43004), server=ep(SERVER4, 9003), end="rst-client",
             via="python socket", t_start_ns=u_at.t_start_ns, client_bytes_received=0,
             purpose="client never reads and closes after 0.4 s: unread data, so the kernel "
                     "sends RST instead of FIN")
    ctx.conn(client=ep(CLIENT4, 43005), server=ep(SERVER4, 9001), end="open-at-capture-end",
             via="python socket", t_start_ns=o_at.t_start_ns, client_bytes_received=o_rx,
             purpose="still streaming when tcpdump stops; closed (FIN) after the capture")
    time.sleep(0.3)
    ctx.common["server_events"] = tcpkit_events(ev)
    ctx.expect(name, "tcp.streams", "==", 5)
    ctx.expect(name, "tcp.syn_streams", "==", 4)


@scenario("tcp-port-reuse", outputs=("tcp-port-reuse.pcap",),
          summary="four successive connections from the same client port (SO_REUSEADDR + bind)"
                  " to the same server port; nanosecond pcap")
def sc_tcp_port_reuse(ctx: Ctx) -> None:
    c, s, _ = ctx.pair()
    access = start_nginx(ctx, s, [f"{SERVER4}:80"])
    name = "tcp-port-reuse.pcap"
    ctx.capture(c, "eth0", name, vantage="client", nano=True)
    port = 44000
    for i in range(4):
        at = sock_connect(c, (CLIENT4, port), (SERVER4, 80), reuse=True)
        if at.sock is None:
            refused_conn(ctx, at, client=ep(CLIENT4, port), server=ep(SERVER4, 80),
                         handshake=at.outcome, attempt=i + 1, purpose="unexpected failure")
            continue
        sk = at.sock
        if i < 2:
            sk.sendall(http_get_bytes("/index.html", SERVER4, close=True))
            rx, how = drain(sk, 3.0, until_eof=True)
            sk.close()
            end = "fin-server-first"
            what = "GET with Connection: close; nginx closes first (TIME_WAIT on the server)"
        elif i == 2:
            sk.sendall(http_get_bytes("/index.html", SERVER4))
            rx, how = drain(sk, 0.3)
            linger0(sk)
            sk.close()
            end = "rst-client"
            what = "keep-alive GET, then the client aborts with SO_LINGER 0 (RST)"
        else:
            sk.sendall(http_get_bytes("/index.html", SERVER4, close=True))
            rx, how = drain(sk, 3.0, until_eof=True)
            sk.close()
            end = "fin-server-first"
            what = "reuse right after the RST: GET with Connection: close"
        ctx.conn(client=ep(CLIENT4, port), server=ep(SERVER4, 80), end=end,
                 via="python socket", attempt=i + 1, t_start_ns=at.t_start_ns,
                 client_bytes_received=rx,
                 client_read_result=how, purpose=what)
        time.sleep(0.3 if i < 2 else 0.05)
    ctx.stop_capture(name)
    ctx.common["server_log"] = nginx_log(access)
    ctx.expect(name, "tcp.streams", "==", 4)
    ctx.expect(name, "tcp.reused_ports", ">=", 3)


@scenario("ipv6", outputs=("ipv6.pcap",),
          summary="HTTP/1.1 over IPv6 only (neighbour discovery, keep-alive, server close, "
                  "refused port); nanosecond pcap")
def sc_ipv6(ctx: Ctx) -> None:
    c, s, _ = ctx.pair(ipv4=False, ipv6=True)
    access = start_nginx(ctx, s, [f"[{SERVER6}]:80"])
    name = "ipv6.pcap"
    ctx.capture(c, "eth0", name, vantage="client", nano=True)
    t1 = curl(ctx, c, SERVER6, [Req("/index.html"), Req("/data/64k.bin")], local_port=45001)
    time.sleep(0.2)
    t2 = curl(ctx, c, SERVER6, [Req("/close/index.html")], local_port=45002)
    time.sleep(0.2)
    at = sock_connect(c, (CLIENT6, 45003), (SERVER6, 81))
    refused_conn(ctx, at, client=ep(CLIENT6, 45003), server=ep(SERVER6, 81),
                 handshake="refused", purpose="nothing listens on port 81: RST/ACK")
    time.sleep(0.2)
    ctx.stop_capture(name)
    log = nginx_log(access)
    curl_conns(ctx, t1, client_ip=CLIENT6, server_ip=SERVER6, port=80, local_port=45001,
               end="fin-client-first", access=log, purpose="keep-alive: 2 requests")
    curl_conns(ctx, t2, client_ip=CLIENT6, server_ip=SERVER6, port=80, local_port=45002,
               end="fin-both", access=log, purpose="Connection: close")
    ctx.expect(name, "tcp.streams", "==", 3)
    ctx.expect(name, "http.requests", "==", 3)
    ctx.expect(name, "tcp.rst", "==", 1)


@scenario("loopback-any", outputs=("loopback-any.pcap", "loopback-any-sll1.pcap"),
          summary="loopback traffic captured with tcpdump -i any: Linux cooked v2 (default) "
                  "and v1 (-y LINUX_SLL), the same packets in both")
def sc_loopback_any(ctx: Ctx) -> None:
    ns = ctx.lab.netns("lo", ipv6=True)
    ctx.common["hosts"] = {"lo": {"netns_role": "lo", "iface": "lo",
                                  "ipv4": "127.0.0.1", "ipv6": "::1"}}
    ctx.common["link"] = {"kind": "loopback", "mtu": 65536, "delay_ms_each_way": 0,
                          "loss_each_way": 0.0}
    access = start_nginx(ctx, ns, ["127.0.0.1:8080", "[::1]:8080"], port=8080)
    f2, f1 = "loopback-any.pcap", "loopback-any-sll1.pcap"
    ctx.capture(ns, "any", f2, vantage="any (loopback only)")
    ctx.capture(ns, "any", f1, vantage="any (loopback only)", linktype="LINUX_SLL")
    t1 = curl(ctx, ns, "127.0.0.1", [Req("/index.html"), Req("/data/64k.bin")],
              local_port=46001, port=8080)
    time.sleep(0.2)
    t2 = curl(ctx, ns, "::1", [Req("/data/small.json")], local_port=46002, port=8080)
    time.sleep(0.2)
    at = sock_connect(ns, ("127.0.0.1", 46003), ("127.0.0.1", 8081))
    time.sleep(0.2)
    ctx.stop_capture(f2)
    ctx.stop_capture(f1)
    log = nginx_log(access)
    curl_conns(ctx, t1, client_ip="127.0.0.1", server_ip="127.0.0.1", port=8080,
               local_port=46001, end="fin-client-first", access=log, purpose="keep-alive")
    curl_conns(ctx, t2, client_ip="::1", server_ip="::1", port=8080, local_port=46002,
               end="fin-client-first", access=log, purpose="IPv6 loopback")
    refused_conn(ctx, at, client=ep("127.0.0.1", 46003), server=ep("127.0.0.1", 8081),
                 handshake="refused", purpose="closed port on loopback")
    ctx.note("on loopback every packet is seen once (libpcap drops the outgoing copy); "
             "MTU 65536, so segments are larger than on Ethernet")
    for f in (f1, f2):
        ctx.expect(f, "tcp.streams", "==", 3)
        ctx.expect(f, "http.requests", "==", 3)


DEMO_LINK = LinkParams(delay_ms=20.0, loss_ab=0.02, loss_ba=0.02, reorder_prob=0.005,
                       reorder_extra_ms=4.0, rate_bps=20_000_000, queue_frames=256, seed=4242,
                       lifetime_s=120)


@scenario("demo", outputs=("demo.pcapng",),
          summary="README demo for pcap-report: keep-alive and fresh HTTP/1.1 connections, a "
                  "200 KB download and a 32 KB upload over a 20 ms / 2% loss link, one refused "
                  "connection, one server reset; pcapng written by dumpcap", attempts=3)
def sc_demo(ctx: Ctx) -> None:
    c, s, tl = ctx.pair(link=DEMO_LINK)
    access = start_nginx(ctx, s, [f"{SERVER4}:80"])
    ev = start_tcpkit(ctx, s, [f"abort:6000@{SERVER4}:9002"], lifetime_s=60)
    name = "demo.pcapng"
    ctx.capture(c, "eth0", name, vantage="client", tool="dumpcap")
    t1 = curl(ctx, c, SERVER4, [Req("/index.html"), Req("/data/200k.bin"),
                                Req("/data/small.json")], local_port=47001)
    t2 = curl(ctx, c, SERVER4, [Req("/index.html")], local_port=47002)
    t3 = curl(ctx, c, SERVER4, [Req("/upload/demo.bin", "PUT",
                                    random.Random(47003).randbytes(32768))], local_port=47003)
    at = sock_connect(c, (CLIENT4, 47004), (SERVER4, 81))
    refused_conn(ctx, at, client=ep(CLIENT4, 47004), server=ep(SERVER4, 81),
                 handshake="refused", purpose="nothing listens on port 81")
    b_at = sock_connect(c, (CLIENT4, 47005), (SERVER4, 9002))
    bk = b_at.connected()
    bk.sendall(http_get_bytes("/abort", SERVER4))
    b_rx, b_how = drain(bk, 3.0)
    bk.close()
    ctx.conn(client=ep(CLIENT4, 47005), server=ep(SERVER4, 9002), end="rst-server",
             via="python socket", t_start_ns=b_at.t_start_ns, client_bytes_received=b_rx,
             client_read_result=b_how,
             purpose="server sends 6000 of 24000 promised body bytes, then RST")
    t6 = curl(ctx, c, SERVER4, [Req("/close/index.html")], local_port=47006)
    time.sleep(0.3)
    ctx.stop_capture(name)
    ctx.link_stats(tl)
    log = nginx_log(access)
    curl_conns(ctx, t1, client_ip=CLIENT4, server_ip=SERVER4, port=80, local_port=47001,
               end="fin-client-first", access=log, purpose="keep-alive, 200 KB download")
    curl_conns(ctx, t2, client_ip=CLIENT4, server_ip=SERVER4, port=80, local_port=47002,
               end="fin-client-first", access=log, purpose="fresh connection")
    curl_conns(ctx, t3, client_ip=CLIENT4, server_ip=SERVER4, port=80, local_port=47003,
               end="fin-client-first", access=log, purpose="32 KB PUT upload")
    curl_conns(ctx, t6, client_ip=CLIENT4, server_ip=SERVER4, port=80, local_port=47006,
               end="fin-both", access=log, purpose="Connection: close")
    ctx.common["server_events"] = tcpkit_events(ev)
    ctx.expect(name, "tcp.streams", "==", 6)
    ctx.expect(name, "tcp.retransmission", ">=", 1)
    ctx.expect(name, "http.requests", "==", 7)  # tshark's heuristic also finds GET /abort


# =========================================================================== tshark facts

_TSHARK_FIELDS = (
    "frame.number", "frame.time_epoch", "frame.len", "tcp.stream", "ip.src", "ip.dst",
    "ipv6.src", "ipv6.dst", "tcp.srcport", "tcp.dstport", "tcp.flags", "tcp.len",
    *(f"tcp.analysis.{f}" for f in ANALYSIS_FLAGS),
    "http.request", "http.response", "icmp.type", "icmpv6.type", "arp.opcode",
)


def _tshark_env() -> tuple[dict[str, str], tempfile.TemporaryDirectory[str]]:
    tmp = tempfile.TemporaryDirectory(prefix="pcl-wscfg-")
    return dict(os.environ, WIRESHARK_CONFIG_DIR=tmp.name), tmp


def capinfos(path: Path) -> dict[str, Any]:
    """``capinfos -M -S`` facts: file type, encapsulation, precision, counts, times, SHA256.

    Top-level ``Key: value`` lines become keys; per-interface lines go to ``interfaces``.
    """
    res = subprocess.run(["capinfos", "-M", "-S", str(path)], capture_output=True, text=True,
                         timeout=60, check=False)
    out: dict[str, Any] = {"interfaces": []}
    skip = {"File name", "RIPEMD160", "SHA1"}
    for line in res.stdout.splitlines():
        if line.startswith("Interface #"):
            out["interfaces"].append({})
        elif line.startswith(" ") and "=" in line and out["interfaces"]:
            k, _, v = line.strip().partition("=")
            out["interfaces"][-1][k.strip()] = v.strip()
        elif ":" in line and not line.startswith(" "):
            k, _, v = line.partition(":")
            if k.strip() not in skip:
                out[k.strip()] = v.strip()
    return out


def tshark_facts(path: Path) -> dict[str, Any]:
    """tshark 4.0's view of a capture: counts (named as in the corpus truth.txt) and streams."""
    env, tmp = _tshark_env()
    with tmp:
        args = ["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "separator=\t",
                "-E", "occurrence=a", "-E", "aggregator=,"]
        for f in _TSHARK_FIELDS:
            args += ["-e", f]
        res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300,
                             check=False)
    idx = {f: i for i, f in enumerate(_TSHARK_FIELDS)}
    tcp: dict[str, int] = {"frames": 0, "streams": 0, "syn_streams": 0, "syn": 0, "synack": 0,
                           "rst": 0, "fin": 0, **{f: 0 for f in ANALYSIS_FLAGS}}
    other = {"http.requests": 0, "http.responses": 0, "icmp": 0, "icmpv6": 0, "arp": 0}
    streams: dict[int, dict[str, Any]] = {}
    frames = 0
    t_first: float | None = None
    for line in res.stdout.splitlines():
        col = line.split("\t")
        col += [""] * (len(_TSHARK_FIELDS) - len(col))

        def g(name: str, col: list[str] = col) -> str:
            return col[idx[name]].split(",")[0]

        frames += 1
        ts = float(g("frame.time_epoch"))
        t_first = ts if t_first is None else t_first
        if col[idx["http.request"]]:
            other["http.requests"] += 1
        if col[idx["http.response"]]:
            other["http.responses"] += 1
        if col[idx["arp.opcode"]]:
            other["arp"] += 1
        if col[idx["icmp.type"]]:
            other["icmp"] += 1
            continue
        if col[idx["icmpv6.type"]]:
            other["icmpv6"] += 1
            continue
        if not g("tcp.stream"):
            continue
        sid = int(g("tcp.stream"))
        src_ip = g("ip.src") or g("ipv6.src")
        dst_ip = g("ip.dst") or g("ipv6.dst")
        src, dst = ep(src_ip, int(g("tcp.srcport"))), ep(dst_ip, int(g("tcp.dstport")))
        flags = int(g("tcp.flags"), 16)
        tlen = int(g("tcp.len") or 0)
        tcp["frames"] += 1
        st = streams.get(sid)
        if st is None:
            st = streams[sid] = {
                "stream": sid, "a": src, "b": dst, "frames": [0, 0], "bytes": [0, 0],
                "payload": [0, 0], "syn": 0, "synack": 0, "fin": [0, 0], "rst": [0, 0],
                "first_fin_from": None, "first_frame": int(g("frame.number")),
                "last_frame": 0, "start_s": round(ts - t_first, 6), "duration_s": 0.0,
                "analysis": {}}
        d = 0 if src == st["a"] else 1
        st["frames"][d] += 1
        st["bytes"][d] += int(g("frame.len"))
        st["payload"][d] += tlen
        st["last_frame"] = int(g("frame.number"))
        st["duration_s"] = round(ts - t_first - st["start_s"], 6)
        syn, ack, fin, rst = flags & 0x02, flags & 0x10, flags & 0x01, flags & 0x04
        if syn and not ack:
            st["syn"] += 1
            tcp["syn"] += 1
        if syn and ack:
            st["synack"] += 1
            tcp["synack"] += 1
        if fin:
            st["fin"][d] += 1
            tcp["fin"] += 1
            if st["first_fin_from"] is None:
                st["first_fin_from"] = "ab"[d]
        if rst:
            st["rst"][d] += 1
            tcp["rst"] += 1
        for f in ANALYSIS_FLAGS:
            if col[idx[f"tcp.analysis.{f}"]]:
                tcp[f] += 1
                st["analysis"][f] = st["analysis"].get(f, 0) + 1
    tcp["streams"] = len(streams)
    tcp["syn_streams"] = sum(1 for s in streams.values() if s["syn"])
    return {
        "version": netlab.tool_version(["tshark", "--version"]),
        "read_error": res.stderr.strip() if res.returncode != 0 else "",
        "frames": frames,
        "tcp": tcp,
        **other,
        "streams": [streams[k] for k in sorted(streams)],
    }


def _count(tf: dict[str, Any], key: str) -> int:
    if key.startswith("tcp."):
        return int(tf["tcp"][key[4:]])
    return int(tf[key])


def run_checks(facts: dict[str, Any], expectations: list[tuple[str, str, int]]
               ) -> list[dict[str, Any]]:
    """Compare the connections the script made (and the expected counts) with tshark's view.

    Returns one ``{"check", "ok", "detail"}`` row per connection and per expectation.
    """
    tf = facts["tshark"]
    link = facts.get("link") or {}
    lossy = link.get("kind") == "tap+forwarder" and (
        link["params"]["loss_ab"] > 0 or link["params"]["loss_ba"] > 0)
    checks: list[dict[str, Any]] = []
    written = (facts.get("recorder") or {}).get("packets_captured")
    if written is not None:
        checks.append({"check": "tshark reads every packet the capture tool counted",
                       "ok": tf["frames"] == written and not tf["read_error"],
                       "detail": f"tool: {written}, tshark: {tf['frames']} {tf['read_error']}"})
    for key, op, want in expectations:
        got = _count(tf, key)
        ok = {"==": got == want, ">=": got >= want, "<=": got <= want}[op]
        checks.append({"check": f"{key} {op} {want}", "ok": ok, "detail": f"tshark: {got}"})
    if link.get("kind") in ("veth", "loopback"):
        gaps = tf["tcp"]["lost_segment"] + tf["tcp"]["ack_lost_segment"]
        checks.append({"check": "no TCP gaps on a lossless link (the capture missed nothing)",
                       "ok": gaps == 0, "detail": f"lost_segment + ack_lost_segment: {gaps}"})
    c2s, s2c = link.get("client_to_server"), link.get("server_to_client")
    if c2s and s2c and facts.get("netns_role") in ("client", "server"):
        if facts["netns_role"] == "client":
            on_wire = c2s["frames_in"] + s2c["frames_out"]
        else:
            on_wire = c2s["frames_out"] + s2c["frames_in"]
        checks.append({"check": "the capture holds every frame the TAP forwarder carried at "
                                "this end", "ok": on_wire == tf["frames"],
                       "detail": f"forwarder: {on_wire}, tshark: {tf['frames']}"})
    used: set[int] = set()
    for conn in facts["connections"]:
        cands = [s for s in tf["streams"] if {s["a"], s["b"]} == {conn["client"], conn["server"]}
                 and s["stream"] not in used]
        label = f"conn {conn['id']} {conn['client']} -> {conn['server']}"
        if not cands:
            ok = conn["handshake"] == "icmp-rejected" and tf["icmp"] + tf["icmpv6"] > 0
            checks.append({"check": f"{label}: {conn['handshake']}", "ok": ok,
                           "detail": "no TCP stream (ICMP answer)" if ok else "no TCP stream"})
            continue
        st = cands[0]
        used.add(st["stream"])
        c = 0 if st["a"] == conn["client"] else 1
        sv = 1 - c
        problems = []
        if conn["opened"] == "during-capture" and st["syn"] < 1:
            problems.append("no SYN")
        if conn["opened"] == "before-capture" and st["syn"]:
            problems.append("SYN seen although opened before the capture")
        hs = conn["handshake"]
        if hs == "completed" and conn["opened"] == "during-capture" and st["synack"] < 1:
            problems.append("no SYN/ACK")
        if hs == "refused" and (st["synack"] or not st["rst"][sv]):
            problems.append("expected RST from the server and no SYN/ACK")
        if hs == "no-answer" and (st["frames"][sv] or st["syn"] < 2):
            problems.append("expected >= 2 SYNs and nothing from the server")
        end = conn["end"]
        first_fin = None if st["first_fin_from"] is None else \
            ("client" if "ab".index(st["first_fin_from"]) == c else "server")
        if end == "fin-both" and not (st["fin"][0] and st["fin"][1]):
            problems.append("expected a FIN from each side")
        for who, side in (("client", c), ("server", sv)):
            if end == f"fin-{who}-first":
                if lossy:
                    # a lost FIN reaches the far end after the other side's FIN, so the
                    # order seen depends on where the capture was taken: need both FINs
                    if not (st["fin"][side] and st["fin"][1 - side]):
                        problems.append("expected a FIN from each side")
                elif first_fin != who:
                    problems.append(f"first FIN from {first_fin}")
        if end == "rst-server" and not st["rst"][sv]:
            problems.append("no RST from the server")
        if end == "rst-client" and not st["rst"][c]:
            problems.append("no RST from the client")
        if end == "open-at-capture-end" and (sum(st["fin"]) or sum(st["rst"])):
            problems.append("FIN/RST seen")
        conn_stream = st["stream"]
        checks.append({"check": f"{label}: {conn['opened']}, {hs}, {end}",
                       "ok": not problems, "detail": "; ".join(problems) or
                       f"tcp.stream {conn_stream}"})
        conn["tshark_stream"] = conn_stream
    return checks


# =========================================================================== finishing

def summarise_connections(conns: list[dict[str, Any]]) -> dict[str, int]:
    """Counts for the facts ``summary`` block."""
    def n(pred: Callable[[dict[str, Any]], bool]) -> int:
        return sum(1 for c in conns if pred(c))
    return {
        "attempted": len(conns),
        "completed": n(lambda c: c["handshake"] == "completed"),
        "refused": n(lambda c: c["handshake"] == "refused"),
        "no_answer": n(lambda c: c["handshake"] == "no-answer"),
        "icmp_rejected": n(lambda c: c["handshake"] == "icmp-rejected"),
        "reset": n(lambda c: c["end"] in ("rst-client", "rst-server")),
        "closed_with_fin": n(lambda c: c["end"].startswith("fin-")),
        "open_at_capture_start": n(lambda c: c["opened"] == "before-capture"),
        "open_at_capture_end": n(lambda c: c["end"] == "open-at-capture-end"),
    }


_ENV: dict[str, str] = {}


def environment() -> dict[str, str]:
    """Versions of the kernel and the tools that made the traffic and the captures."""
    if not _ENV:
        _ENV["kernel"] = os.uname().release
        _ENV["python"] = sys.version.split()[0]
        for name, argv in (("curl", ["curl", "--version"]), ("nginx", ["nginx", "-v"]),
                           ("tcpdump", ["tcpdump", "--version"]),
                           ("dumpcap", ["dumpcap", "--version"]),
                           ("tshark", ["tshark", "--version"])):
            _ENV[name] = netlab.tool_version(argv)
    return dict(_ENV)


def sysctl_value(ns: Netns, key: str) -> str | None:
    """A sysctl's value inside ``ns`` (None when this kernel does not have it)."""
    res = ns.run(["sysctl", "-n", key], check=False)
    return res.stdout.strip() if res.returncode == 0 else None


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def finish(ctx: Ctx, started: float) -> list[dict[str, Any]]:
    """Move captures into the output dir and write their facts; returns the facts."""
    out = []
    for name in ctx.sc.outputs:
        src = ctx.work / name
        if not src.exists() or name not in ctx.per_capture:
            raise netlab.LabError(f"{ctx.sc.name} did not produce {name}")
        dst = ctx.out_dir / name
        shutil.copyfile(src, dst)
        facts: dict[str, Any] = {
            "schema": FACTS_SCHEMA,
            "capture": name,
            "scenario": ctx.sc.name,
            "summary_text": ctx.sc.summary,
            "rerecord": f"sudo python scripts/record_captures.py --only {ctx.sc.name}",
            "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "recording_took_s": round(time.monotonic() - started, 2),
            "environment": environment(),
            "file": {"bytes": dst.stat().st_size, "sha256": sha256(dst)},
            **ctx.per_capture[name],
            "capinfos": capinfos(dst),
            **{k: v for k, v in ctx.common.items()},
        }
        conns = sorted(ctx.common["connections"], key=lambda c: c.get("t_start_ns", 1 << 62))
        for i, c in enumerate(conns, 1):
            c["id"] = i
        facts["connections"] = json.loads(json.dumps(conns))
        facts["summary"] = summarise_connections(facts["connections"])
        facts["tshark"] = tshark_facts(dst)
        facts["checks"] = run_checks(facts, ctx.expectations.get(name, []))
        (ctx.out_dir / f"{name}.facts.json").write_text(json.dumps(facts, indent=1) + "\n")
        out.append(facts)
    return out


def write_readme(out_dir: Path) -> Path:
    """captures/README.md: one table per capture, built from the facts files."""
    facts = []
    for p in sorted(out_dir.glob("*.facts.json")):
        facts.append(json.loads(p.read_text()))
    lines = [
        "# Test captures recorded from real traffic",
        "",
        "Every file here was recorded by `scripts/record_captures.py` from real servers "
        "(nginx, `scripts/servers/tcpkit.py`) and clients (curl, Python sockets) talking inside "
        "Linux network namespaces created for the recording (or their loopback). Next to each "
        "capture, `<capture>.facts.json` holds what the script did and knows for sure "
        "(addresses, ports, every connection with how it was meant to start and end, link "
        "delay/loss/seed and the exact TCP segments the lossy link dropped, byte counts, "
        "wall-clock timestamps on the capture's clock), tshark 4.0's counts and per-stream "
        "table under `tshark`, and `checks` comparing the two.",
        "",
        "Addresses: client 192.0.2.10 / 2001:db8:77::10 (MAC 02:00:00:00:00:10), server "
        "192.0.2.20 / 2001:db8:77::20 (MAC 02:00:00:00:00:20), documentation ranges that only "
        "exist inside the namespaces. Client ports are fixed per connection, so re-recording "
        "gives the same endpoints; TCP sequence numbers, timestamps and the exact timing (and so "
        "which segments a seeded lossy link drops) differ from run to run.",
        "",
        "Re-record as root on Linux (Debian 12 packages: `apt-get install tcpdump tshark "
        "nginx-light curl iproute2 iptables procps`; tshark brings dumpcap and capinfos; "
        "Python 3.11 with no extra packages). A full re-record takes about 30 s; each scenario "
        "cleans up its namespaces and processes on every exit path, and `python "
        "scripts/netlab.py cleanup` removes what a SIGKILLed run left behind.",
        "",
        "    sudo python scripts/record_captures.py            # all scenarios",
        "    sudo python scripts/record_captures.py --only tcp-reset",
        "    sudo python scripts/record_captures.py --list",
        "",
        "The lossy links are a user-space TAP forwarder (`scripts/netlab.py`), because the "
        "kernel used has no netem/tbf qdiscs: a fixed one-way delay, seeded random loss and "
        "reordering of TCP frames (never SYNs), a rate limit and a bounded queue.",
        "",
        "| capture | scenario | link type | packets | bytes |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for f in facts:
        lines.append(f"| [`{f['capture']}`](#{_anchor(f['capture'])}) | {f['scenario']} | "
                     f"{_encap(f)} | "
                     f"{f['tshark']['frames']} | {f['file']['bytes']} |")
    total = sum(f["file"]["bytes"] for f in facts)
    envs = sorted({(f.get("environment") or {}).get("kernel", "?") for f in facts})
    lines += ["", f"Total: {len(facts)} captures, {total} bytes. Recorded on Linux "
              f"{', '.join(envs)}; each facts file lists the tool versions under "
              "`environment`.", ""]
    for f in facts:
        lines += _readme_section(f)
    path = out_dir / "README.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path


def _encap(f: dict[str, Any]) -> str:
    ifs = f["capinfos"].get("interfaces") or [{}]
    return str(ifs[0].get("Encapsulation", f["capinfos"].get("File encapsulation", "?")))


def _anchor(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum() or ch in "-_ ").replace(" ", "-")


def _readme_section(f: dict[str, Any]) -> list[str]:
    s = f["summary"]
    tcp = f["tshark"]["tcp"]
    link = f["link"] or {}
    if link.get("kind") == "tap+forwarder":
        p = link["params"]
        ls = (f"TAP link + forwarder: {p['delay_ms']:g} ms one-way delay, loss "
              f"{p['loss_ab']:.0%} client->server / {p['loss_ba']:.0%} server->client, "
              f"reorder {p['reorder_prob']:.1%} (+{p['reorder_extra_ms']:g} ms), "
              f"{p['rate_bps'] / 1e6:g} Mbit/s, seed {p['seed']}")
        c2s, s2c = link.get("client_to_server") or {}, link.get("server_to_client") or {}
        if c2s:
            ls += (f"; the link dropped {c2s.get('lost')} client->server and {s2c.get('lost')} "
                   f"server->client TCP frames and reordered {c2s.get('reordered', 0)} / "
                   f"{s2c.get('reordered', 0)}")
    elif link.get("kind") == "veth":
        ls = "veth pair (gso_max_segs 1, so MTU-sized segments), no delay, no loss"
    else:
        ls = str(link.get("kind", "?"))
    conns = "; ".join(
        f"{c['client']} -> {c['server']}: {c.get('purpose', '')} "
        f"[{c['opened']}, {c['handshake']}, {c['end']}]" for c in f["connections"])
    nonzero = ", ".join(f"{k} {v}" for k, v in tcp.items()
                        if v and k not in ("frames",)) or "-"
    extra = ", ".join(f"{k} {f['tshark'][k]}" for k in
                      ("http.requests", "http.responses", "icmp", "icmpv6", "arp")
                      if f["tshark"].get(k))
    rec = f.get("recorder", {})
    ci = f["capinfos"]
    bad = [c for c in f["checks"] if not c["ok"]]
    return [
        f"## {f['capture']}",
        "",
        "| | |",
        "| --- | --- |",
        f"| what | {f['summary_text']} |",
        f"| connections | {s['attempted']} attempted: {s['completed']} completed, "
        f"{s['refused']} refused, {s['no_answer']} unanswered, {s['icmp_rejected']} ICMP-"
        f"rejected; {s['reset']} ended by RST, {s['closed_with_fin']} by FIN, "
        f"{s['open_at_capture_start']} open at capture start, {s['open_at_capture_end']} "
        "open at capture end |",
        f"| details | {conns} |",
        f"| link | {ls} |",
        f"| vantage | {f['vantage']} (netns `{f['netns_role']}`, interface `{f['iface']}`) |",
        f"| format | {ci.get('File type', '?')}, {_encap(f)}, "
        f"timestamps {ci.get('File timestamp precision', '?')}; written by "
        f"{rec.get('tool', '?')} |",
        f"| packets / bytes | {f['tshark']['frames']} / {f['file']['bytes']} |",
        f"| tshark | {nonzero}{'; ' + extra if extra else ''} |",
        f"| checks | {len(f['checks']) - len(bad)}/{len(f['checks'])} passed"
        f"{' (FAILED: ' + '; '.join(c['check'] for c in bad) + ')' if bad else ''} |",
        f"| re-record | `{f['rerecord']}` |",
        "",
    ]


# =========================================================================== main

@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt so ``finally`` blocks clean up."""
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)



def record_one(sc: Scenario, out_dir: Path, *, keep_work: bool = False) -> list[str]:
    """Record one scenario (re-recording up to ``sc.attempts`` times while checks fail).

    Returns the failures of the last attempt (empty when everything passed).
    """
    failures: list[str] = []
    for attempt in range(1, sc.attempts + 1):
        work = Path(tempfile.mkdtemp(prefix=f"pcl-rec-{sc.name}-"))
        t0 = time.monotonic()
        print(f"== {sc.name}" + (f" (attempt {attempt})" if attempt > 1 else ""), flush=True)
        failures = []
        try:
            with netlab.Lab(work) as lab:
                ctx = Ctx(sc, out_dir, work, lab)
                ctx.common["attempt"] = attempt
                sc.run(ctx)
            facts = finish(ctx, t0)
        except KeyboardInterrupt:
            print(f"interrupted; scratch dir kept at {work}", file=sys.stderr)
            raise
        except Exception:
            traceback.print_exc()
            print(f"   scenario {sc.name} FAILED; scratch dir kept at {work}", file=sys.stderr)
            failures.append(sc.name)
            continue
        for f in facts:
            bad = [c for c in f["checks"] if not c["ok"]]
            print(f"   {f['capture']}: {f['tshark']['frames']} packets, {f['file']['bytes']} "
                  f"bytes, checks {len(f['checks']) - len(bad)}/{len(f['checks'])}",
                  flush=True)
            for c in bad:
                print(f"   CHECK FAILED: {c['check']}: {c['detail']}", flush=True)
                failures.append(f"{f['capture']}: {c['check']}")
        print(f"   took {time.monotonic() - t0:.1f} s", flush=True)
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)
        if not failures:
            break
    return failures


def main(argv: list[str] | None = None) -> int:
    """Record the chosen scenarios; returns 0, or 1 when a scenario failed or a check failed."""
    ap = argparse.ArgumentParser(description="Record pcaptools' test captures.")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="record only this scenario (repeatable)")
    ap.add_argument("--out", type=Path, default=ROOT / "captures")
    ap.add_argument("--list", action="store_true", help="list scenarios and exit")
    ap.add_argument("--readme-only", action="store_true",
                    help="rebuild README.md from the facts files and exit")
    ap.add_argument("--keep-work", action="store_true", help="keep the scratch directory")
    args = ap.parse_args(argv)
    if args.list:
        for sc in SCENARIOS.values():
            print(f"{sc.name:16} {', '.join(sc.outputs):45} {sc.summary}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if args.readme_only:
        print(write_readme(args.out))
        return 0
    unknown = [n for n in args.only if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {unknown}; known: {list(SCENARIOS)}")
    if os.geteuid() != 0:
        ap.error("must run as root (network namespaces, tcpdump)")
    for what in netlab.cleanup_stale():
        print(f"removed stale {what}")
    chosen = [SCENARIOS[n] for n in (args.only or list(SCENARIOS))]
    failures: list[str] = []
    t_all = time.monotonic()
    with _signals_raise():
        for sc in chosen:
            try:
                failures += record_one(sc, args.out, keep_work=args.keep_work)
            except KeyboardInterrupt:
                return 130
    write_readme(args.out)
    print(f"all done in {time.monotonic() - t_all:.1f} s; {len(failures)} failure(s)")
    for f in failures:
        print(f"  - {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
