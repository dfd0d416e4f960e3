"""A small network lab for recording real test captures: namespaces, links, processes, tcpdump.

Everything here runs as root on Linux and touches only what it creates itself:

* ``Lab``: a context manager that creates network namespaces (named ``pcl-<pid>-<role>``),
  veth pairs and TAP links between them, starts processes inside them, and on exit (normal,
  exception, SIGTERM/SIGINT or interpreter exit) kills those processes by process-group id and
  deletes those namespaces.  ``cleanup_stale()`` removes namespaces left by a run that was
  killed with SIGKILL (only names starting with ``pcl-``).
* ``Netns``: one namespace; ``run()`` / ``popen()`` run commands in it, ``entered()`` switches
  the *calling thread* into it (setns), so Python sockets made inside the ``with`` block belong
  to the namespace (``netns.socket()`` does this for you).
* ``TapLink`` + ``tap_forward_main()``: a user-space Ethernet link between two namespaces made
  of two TAP devices and a forwarder process that delays frames by a fixed one-way delay, drops
  TCP frames (and, with ``loss_udp``, UDP datagrams) at random with a *seeded* RNG, drops
  chosen TCP frames on purpose (``DropRule``: e.g. the first big server segment after a
  trigger file appears), can reorder a few frames and can limit the rate with
  a bounded queue.  The kernel here has no netem/tbf qdiscs, which is why this exists.  The
  forwarder writes its statistics and the exact list of frames it dropped / reordered as JSON
  (per frame: its 1-based index among the frames read in that direction, the time since the
  forwarder started, the flow ``src:port>dst:port``, raw TCP seq / ack, payload length, flags).
* ``Capture``: tcpdump (pcap) or dumpcap (pcapng) inside a namespace; ``start()`` returns once
  the capture socket is attached, ``stop()`` returns the tool's own packet/drop counts.

Traffic never leaves the namespaces: they have no route to the root namespace or the world.
Every long-running child is wrapped in coreutils ``timeout`` so it dies by itself even if the
recorder is killed with SIGKILL; the forwarder also has its own lifetime.

Run ``python scripts/netlab.py tap-forward --help`` for the forwarder's command line (the Lab
starts it for you).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import fcntl
import hashlib
import heapq
import json
import os
import random
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

NS_PREFIX = "pcl-"
_CLONE_NEWNET = 0x40000000
_TUNSETIFF = 0x400454CA
_IFF_TAP = 0x0002
_IFF_NO_PI = 0x1000


class LabError(RuntimeError):
    """Something in the lab could not be set up (the message says what and why)."""


def run(argv: Sequence[str], *, check: bool = True, timeout: float = 30.0,
        input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command to completion; returns the CompletedProcess (text mode, output captured).

    Raises LabError with the command's stderr when ``check`` and the exit status is not 0.
    """
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                         input=input_text, check=False)
    if check and res.returncode != 0:
        raise LabError(f"{' '.join(argv)!r} failed ({res.returncode}): {res.stderr.strip()}")
    return res


def tool_version(argv: Sequence[str]) -> str:
    """First line a tool prints about its version (stdout or stderr), or '' when it fails."""
    try:
        res = subprocess.run(list(argv), capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (res.stdout or res.stderr).strip()
    return text.splitlines()[0] if text else ""


# --------------------------------------------------------------------------- namespaces

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@dataclass(slots=True)
class Netns:
    """One network namespace created by a Lab (``name`` is its /run/netns name)."""

    name: str
    role: str

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` prefixed so that it runs inside this namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: Sequence[str], *, check: bool = True,
            timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a command in this namespace to completion (see ``run``)."""
        return run(self.argv(argv), check=check, timeout=timeout)

    def ip(self, *args: str) -> None:
        """``ip -n <ns> args...`` (raises LabError on failure)."""
        run(["ip", "-n", self.name, *args])

    def sysctl(self, key: str, value: str | int) -> None:
        """Set a per-namespace sysctl (``net.*`` keys are per namespace)."""
        self.run(["sysctl", "-q", "-w", f"{key}={value}"])

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """Switch the calling thread into this namespace for the ``with`` block.

        Sockets created inside stay in the namespace after the block ends.
        """
        orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            _setns(target)
            try:
                yield
            finally:
                _setns(orig)
        finally:
            os.close(target)
            os.close(orig)

    def socket(self, family: int = socket.AF_INET,
               kind: int = socket.SOCK_STREAM) -> socket.socket:
        """A new socket that lives in this namespace."""
        with self.entered():
            return socket.socket(family, kind)


def list_netns() -> list[str]:
    """Names of the network namespaces in /run/netns."""
    res = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


STATE_DIR = Path("/tmp/pcl-lab-state")


def _pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def _start_time(pid: int) -> int:
    """The process's start time in clock ticks since boot (guards against pid reuse), or -1."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[19])


def cleanup_stale(prefix: str = NS_PREFIX) -> list[str]:
    """Undo what a Lab killed with SIGKILL left behind; returns what it removed.

    Kills the process groups listed in that Lab's state file (only while the group leader is
    still the process that was recorded: same pid and start time) and deletes namespaces named
    ``pcl-<pid>-*`` whose pid is gone.
    A Lab whose process is still alive is left alone.
    """
    removed = []
    if STATE_DIR.is_dir():
        for state in STATE_DIR.glob("*.jsonl"):
            owner = int(state.stem) if state.stem.isdigit() else -1
            if owner == os.getpid() or _pid_alive(owner):
                continue
            for line in state.read_text().splitlines():
                with contextlib.suppress(ValueError, KeyError):
                    rec = json.loads(line)
                    if _start_time(rec["pgid"]) == rec["start"] and rec["start"] >= 0:
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(rec["pgid"], signal.SIGKILL)
                        removed.append(f"process group {rec['pgid']} ({rec['name']})")
            state.unlink()
    for name in list_netns():
        if not name.startswith(prefix):
            continue
        m = re.match(re.escape(prefix) + r"(\d+)-", name)
        if m and int(m.group(1)) != os.getpid() and _pid_alive(int(m.group(1))):
            continue
        _kill_netns_pids(name)
        run(["ip", "netns", "del", name], check=False)
        removed.append(f"netns {name}")
    if ETC_NETNS.is_dir():
        live = set(list_netns())
        for d in ETC_NETNS.glob(f"{prefix}*"):
            m = re.match(re.escape(prefix) + r"(\d+)-", d.name)
            if d.name in live or (m and _pid_alive(int(m.group(1)))):
                continue
            _remove_etc_netns(d.name)
            removed.append(f"{d}")
    return removed


ETC_NETNS = Path("/etc/netns")


def _remove_etc_netns(name: str) -> None:
    """Delete ``/etc/netns/<name>`` (only names this module makes: ``pcl-...``)."""
    d = ETC_NETNS / name
    if not name.startswith(NS_PREFIX) or not d.is_dir():
        return
    for f in d.iterdir():
        with contextlib.suppress(OSError):
            f.unlink()
    with contextlib.suppress(OSError):
        d.rmdir()


def _kill_netns_pids(name: str) -> None:
    res = run(["ip", "netns", "pids", name], check=False)
    for tok in res.stdout.split():
        if tok.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(tok), signal.SIGKILL)


# --------------------------------------------------------------------------- processes

@dataclass(slots=True)
class Proc:
    """A process the Lab started (its own process group; ``pid`` is the group id)."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, sig: int) -> None:
        """Send ``sig`` to the process group (no-op when it already ended)."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, grace: float = 3.0) -> int | None:
        """Signal, wait up to ``grace`` s, then SIGKILL the group; returns the exit status."""
        self.send(sig)
        try:
            return self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.send(signal.SIGKILL)
            try:
                return self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                return None


# --------------------------------------------------------------------------- links

@dataclass(slots=True)
class LinkParams:
    """What the TAP forwarder does to frames; ``a`` and ``b`` are the two ends.

    Loss and reordering only apply to TCP frames (ARP / neighbour discovery always pass), and
    by default never to SYN segments, so connection set-up times stay predictable.  With
    ``loss_udp`` the same seeded loss also applies to UDP datagrams (QUIC); each dropped
    datagram is logged with its flow, UDP payload length and the SHA-256 of its payload (first
    16 hex digits), so it can be found in a capture taken before the link.
    """

    delay_ms: float = 0.0
    loss_ab: float = 0.0
    loss_ba: float = 0.0
    reorder_prob: float = 0.0
    reorder_extra_ms: float = 4.0
    rate_bps: int = 0            # 0 = no rate limit
    queue_frames: int = 256      # frames waiting per direction before tail drop
    seed: int = 1
    spare_syn: bool = True
    lifetime_s: float = 300.0
    loss_udp: bool = False
    #: targeted drops (see ``DropRule``), as dicts so the params stay JSON
    drop_rules: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class DropRule:
    """Drop chosen TCP frames on purpose (``LinkParams.drop_rules`` holds ``asdict()`` of these).

    The rule drops the first ``count`` TCP frames going ``direction`` (``a_to_b`` or
    ``b_to_a``) whose TCP payload is at least ``min_len`` bytes (and, when ``src_port`` is not
    0, come from that port), counted from the moment the file ``arm_file`` exists (at once
    when it is empty).  A sender creates ``arm_file`` just before writing the segment it wants
    lost, so a scripted event can lose one specific segment (e.g. the last one of a
    response).  Every frame a rule drops is logged under ``targeted_drops`` in the statistics
    with the rule's ``name``, the wall-clock time (``t_epoch``, the capture clock) and the
    same fields as the random drops (they are not counted in ``lost`` but in
    ``targeted_lost``, and they draw nothing from the seeded RNG).  ``min_len`` 0 lets a rule
    drop SYNs and pure ACKs too.
    """

    name: str
    direction: str = "b_to_a"
    min_len: int = 1
    count: int = 1
    arm_file: str = ""
    src_port: int = 0


@dataclass(slots=True)
class TapLink:
    """A running TAP link: interface ``if_a`` in ``ns_a`` and ``if_b`` in ``ns_b``."""

    ns_a: Netns
    ns_b: Netns
    if_a: str
    if_b: str
    params: LinkParams
    proc: Proc
    stats_path: Path

    def stop(self) -> dict[str, Any]:
        """Stop the forwarder and return its statistics (``{}`` when it wrote none)."""
        with contextlib.suppress(FileNotFoundError):
            self.stats_path.unlink()  # never report an older run's numbers
        self.proc.stop(signal.SIGTERM, grace=5.0)
        try:
            return dict(json.loads(self.stats_path.read_text()))
        except (OSError, ValueError):
            return {}


# --------------------------------------------------------------------------- the lab

class Lab:
    """Namespaces, links and processes that all go away when the ``with`` block ends."""

    def __init__(self, workdir: Path, *, tag: str = "") -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tag = tag
        self.namespaces: list[Netns] = []
        self.procs: list[Proc] = []
        self.links: list[TapLink] = []
        self._closed = False
        self._seq = 0
        self._state = STATE_DIR / f"{os.getpid()}.jsonl"

    def track(self, proc: Proc) -> Proc:
        """Remember ``proc`` so ``close`` (or ``cleanup_stale`` after a SIGKILL) ends it."""
        self.procs.append(proc)
        STATE_DIR.mkdir(exist_ok=True)
        with open(self._state, "a", encoding="utf-8") as f:
            f.write(json.dumps({"pgid": proc.pid, "start": _start_time(proc.pid),
                                "name": proc.name}) + "\n")
        return proc

    # -- lifecycle
    def __enter__(self) -> Lab:
        atexit.register(self.close)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill every process started here (group by group), then delete the namespaces."""
        if self._closed:
            return
        self._closed = True
        for link in self.links:
            link.proc.stop(signal.SIGTERM, grace=5.0)
        for p in reversed(self.procs):
            p.stop(signal.SIGTERM, grace=3.0)
        for ns in reversed(self.namespaces):
            _kill_netns_pids(ns.name)
            run(["ip", "netns", "del", ns.name], check=False)
            _remove_etc_netns(ns.name)
        with contextlib.suppress(FileNotFoundError):
            self._state.unlink()
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    # -- namespaces
    def netns(self, role: str, *, ipv6: bool = False,
              hosts: dict[str, str] | None = None) -> Netns:
        """Create a namespace for ``role`` with loopback up.

        With ``ipv6=False`` IPv6 is disabled on every interface (no router solicitations or
        MLD reports in the captures); with ``ipv6=True`` router solicitations, DAD and
        autoconfiguration are turned off so only the traffic we make appears.
        ``hosts`` ({name: address}) becomes ``/etc/netns/<name>/hosts``, which ``ip netns
        exec`` bind-mounts over /etc/hosts, so clients started in the namespace resolve those
        names (e.g. a TLS server name) without DNS; the directory goes away with the Lab.
        """
        name = f"{NS_PREFIX}{os.getpid()}-{role}"
        run(["ip", "netns", "add", name])
        ns = Netns(name, role)
        self.namespaces.append(ns)
        if hosts:
            etc = ETC_NETNS / name
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(
                "127.0.0.1 localhost\n::1 localhost\n"
                + "".join(f"{addr} {host}\n" for host, addr in hosts.items()))
        ns.ip("link", "set", "lo", "up")
        if ipv6:
            for scope in ("all", "default"):
                ns.sysctl(f"net.ipv6.conf.{scope}.accept_ra", 0)
                ns.sysctl(f"net.ipv6.conf.{scope}.router_solicitations", 0)
                ns.sysctl(f"net.ipv6.conf.{scope}.accept_dad", 0)
                ns.sysctl(f"net.ipv6.conf.{scope}.autoconf", 0)
        else:
            for scope in ("all", "default"):
                ns.sysctl(f"net.ipv6.conf.{scope}.disable_ipv6", 1)
        return ns

    def _addr(self, ns: Netns, ifname: str, addrs: Sequence[str], mac: str | None,
              mtu: int) -> None:
        if mac:
            ns.ip("link", "set", "dev", ifname, "address", mac)
        ns.ip("link", "set", "dev", ifname, "mtu", str(mtu))
        for a in addrs:
            if ":" in a:
                ns.ip("-6", "addr", "add", a, "dev", ifname, "nodad")
            else:
                ns.ip("addr", "add", a, "dev", ifname)
        ns.ip("link", "set", "dev", ifname, "up")

    def veth(self, a: Netns, b: Netns, *, addrs_a: Sequence[str], addrs_b: Sequence[str],
             if_a: str = "eth0", if_b: str = "eth0", mac_a: str | None = None,
             mac_b: str | None = None, mtu: int = 1500, no_gso: bool = True) -> None:
        """A veth pair between two namespaces, addresses given in CIDR form.

        ``no_gso`` sets gso_max_segs to 1 on both ends, so the kernel hands the wire
        MTU-sized TCP segments (as a real NIC capture would show) instead of 64 KB GSO
        super-frames.
        """
        run(["ip", "link", "add", "name", if_a, "netns", a.name, "type", "veth",
             "peer", "name", if_b, "netns", b.name])
        for ns, ifname in ((a, if_a), (b, if_b)):
            if no_gso:
                ns.ip("link", "set", "dev", ifname, "gso_max_segs", "1")
        self._addr(a, if_a, addrs_a, mac_a, mtu)
        self._addr(b, if_b, addrs_b, mac_b, mtu)

    def tap_link(self, a: Netns, b: Netns, params: LinkParams, *, addrs_a: Sequence[str],
                 addrs_b: Sequence[str], if_a: str = "eth0", if_b: str = "eth0",
                 mac_a: str | None = None, mac_b: str | None = None,
                 mtu: int = 1500) -> TapLink:
        """Two TAP devices joined by the user-space forwarder (see ``LinkParams``).

        The forwarder creates both TAPs in the root namespace under temporary names, then they
        are moved into ``a`` and ``b`` and renamed; they vanish when the forwarder exits.
        """
        self._seq += 1
        tmp_a = f"pcl{os.getpid() % 100000}t{self._seq}a"[:15]
        tmp_b = f"pcl{os.getpid() % 100000}t{self._seq}b"[:15]
        stats_path = self.workdir / f"link{self._seq}.stats.json"
        argv = ["timeout", "-k", "3", str(int(params.lifetime_s) + 5),
                sys.executable, str(Path(__file__).resolve()), "tap-forward",
                "--tap-a", tmp_a, "--tap-b", tmp_b, "--stats", str(stats_path),
                "--params", json.dumps(asdict(params))]
        log = self.workdir / f"link{self._seq}.log"
        logf = open(log, "wb")  # noqa: SIM115 - handed to the child
        popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=logf,
                                 start_new_session=True)
        logf.close()
        proc = self.track(Proc(f"tap-forward-{self._seq}", popen, log))
        assert popen.stdout is not None
        ready = _read_line_with_deadline(popen.stdout, 10.0)
        if ready.strip() != b"ready":
            raise LabError(f"tap forwarder did not start: {ready!r}; see {log}")
        for ns, tmp, ifname in ((a, tmp_a, if_a), (b, tmp_b, if_b)):
            run(["ip", "link", "set", "dev", tmp, "netns", ns.name])
            ns.ip("link", "set", "dev", tmp, "name", ifname)
        self._addr(a, if_a, addrs_a, mac_a, mtu)
        self._addr(b, if_b, addrs_b, mac_b, mtu)
        link = TapLink(a, b, if_a, if_b, params, proc, stats_path)
        self.links.append(link)
        return link

    # -- processes
    def spawn(self, ns: Netns | None, argv: Sequence[str], *, name: str,
              lifetime_s: float = 120.0, stdout: int | IO[bytes] | None = None,
              cwd: Path | None = None) -> Proc:
        """Start ``argv`` in ``ns`` (root namespace when None), bounded by ``timeout``.

        Output goes to ``<workdir>/<name>.log`` unless ``stdout`` is given (stderr always goes
        to the log).  The process gets its own process group; ``Lab.close`` ends it.
        """
        full = ["timeout", "-k", "3", str(int(lifetime_s)), *argv]
        if ns is not None:
            full = ns.argv(full)
        log = self.workdir / f"{name}.log"
        logf = open(log, "wb")  # noqa: SIM115 - handed to the child
        popen = subprocess.Popen(full, stdout=stdout if stdout is not None else logf,
                                 stderr=logf, start_new_session=True, cwd=cwd)
        logf.close()
        return self.track(Proc(name, popen, log))


def _read_line_with_deadline(stream: IO[bytes], seconds: float) -> bytes:
    """One line from a pipe, or b'' if none arrives within ``seconds``."""
    out: list[bytes] = []

    def reader() -> None:
        out.append(stream.readline())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(seconds)
    return out[0] if out else b""


def wait_for_port(ns: Netns, host: str, port: int, *, timeout_s: float = 10.0) -> None:
    """Return once something accepts TCP connections on host:port inside ``ns``.

    Polls with ``ss`` (it does not connect, so the captures see no probe traffic); raises
    LabError after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    want = f":{port}"
    while time.monotonic() < deadline:
        res = ns.run(["ss", "-Hltn"], check=False)
        for line in res.stdout.splitlines():
            cols = line.split()
            if len(cols) >= 4 and cols[3].endswith(want):
                return
        time.sleep(0.05)
    raise LabError(f"nothing listens on {host}:{port} in {ns.name} after {timeout_s} s")


# --------------------------------------------------------------------------- captures

@dataclass(slots=True)
class CaptureResult:
    """What the capture tool said when it stopped."""

    tool: str
    argv: list[str]
    packets_captured: int | None
    packets_dropped: int | None
    stderr: str
    started_ns: int
    stopped_ns: int


class Capture:
    """tcpdump (pcap) or dumpcap (pcapng) on one interface inside a namespace.

    ``linktype`` is passed to ``-y`` (e.g. ``LINUX_SLL``); ``nano`` asks tcpdump for
    nanosecond timestamps (pcap magic 0xa1b23c4d).
    """

    def __init__(self, lab: Lab, ns: Netns, iface: str, path: Path, *, tool: str = "tcpdump",
                 nano: bool = False, linktype: str | None = None, snaplen: int = 262144,
                 bpf: str | None = None, lifetime_s: float = 120.0,
                 buffer_mib: int = 16) -> None:
        self.lab, self.ns, self.iface, self.path = lab, ns, iface, Path(path)
        self.tool = tool
        if tool == "tcpdump":
            # --immediate-mode: without it, packets still in a TPACKET_V3 ring block when
            # tcpdump is interrupted are counted as captured but never written
            # -B: with the default 2 MiB ring, tcpdump once wrote 110 of 129 frames of a
            # veth capture here and still reported 0 drops; 16 MiB has not lost any since
            argv = ["tcpdump", "-n", "-U", "--immediate-mode", "-B", str(buffer_mib * 1024),
                    "-i", iface, "-s", str(snaplen), "-w", str(path)]
            if nano:
                argv += ["--time-stamp-precision=nano"]
            if linktype:
                argv += ["-y", linktype]
        elif tool == "dumpcap":
            argv = ["dumpcap", "-n", "-i", iface, "-B", str(buffer_mib), "-s", str(snaplen),
                    "-w", str(path)]
            if linktype:
                argv += ["-y", linktype]
        else:
            raise LabError(f"unknown capture tool {tool!r}")
        if bpf:
            argv += ["-f", bpf] if tool == "dumpcap" else [bpf]
        self.argv = argv
        self.lifetime_s = lifetime_s
        self.proc: Proc | None = None
        self._stderr: list[str] = []
        self._started_ns = 0

    def start(self, timeout_s: float = 10.0) -> None:
        """Start the tool and return once it reports that it is capturing."""
        full = self.ns.argv(["timeout", "-s", "INT", "-k", "3", str(int(self.lifetime_s)),
                             *self.argv])
        popen = subprocess.Popen(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 start_new_session=True)
        self.proc = self.lab.track(Proc(f"capture-{self.path.name}", popen))
        ready = threading.Event()

        def pump() -> None:
            assert popen.stderr is not None
            for raw in popen.stderr:
                line = raw.decode(errors="replace").rstrip()
                self._stderr.append(line)
                if "listening on" in line or "Capturing on" in line:
                    ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        if not ready.wait(timeout_s) or popen.poll() is not None:
            raise LabError(f"{self.tool} did not start: {' | '.join(self._stderr)}")
        time.sleep(0.1)  # the socket is attached before the message; a little margin
        self._started_ns = time.time_ns()

    def stop(self, settle_s: float = 0.2) -> CaptureResult:
        """Stop with SIGINT after ``settle_s`` and return the tool's own counts."""
        assert self.proc is not None
        time.sleep(settle_s)
        stopped = time.time_ns()
        self.proc.stop(signal.SIGINT, grace=5.0)
        self._pump.join(5.0)
        text = "\n".join(self._stderr)
        captured = dropped = None
        if self.tool == "tcpdump":
            m = re.search(r"(\d+) packets? captured", text)
            captured = int(m.group(1)) if m else None
            m = re.search(r"(\d+) packets? dropped by kernel", text)
            dropped = int(m.group(1)) if m else None
        else:
            m = re.search(r"Packets captured: (\d+)", text)
            captured = int(m.group(1)) if m else None
            m = re.search(r"Packets received/dropped on interface .*?: \d+/(\d+)", text)
            dropped = int(m.group(1)) if m else None
        return CaptureResult(self.tool, list(self.argv), captured, dropped, text,
                             self._started_ns, stopped)


# --------------------------------------------------------------------------- the forwarder

def _open_tap(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TAP | _IFF_NO_PI))
    return fd


def _tcp_info(frame: bytes) -> tuple[str, int, int, int, int] | None:
    """(``src:port>dst:port``, seq, payload length, flags, ack) or None.

    Only untagged Ethernet IPv4/IPv6 without IPv6 extension headers; anything else is None.
    """
    if len(frame) < 14:
        return None
    etype = struct.unpack_from("!H", frame, 12)[0]
    if etype == 0x0800 and len(frame) >= 34:
        ihl = (frame[14] & 0x0F) * 4
        if frame[23] != 6:
            return None
        total = struct.unpack_from("!H", frame, 16)[0]
        src = socket.inet_ntop(socket.AF_INET, frame[26:30])
        dst = socket.inet_ntop(socket.AF_INET, frame[30:34])
        t = 14 + ihl
        ip_end = 14 + total
    elif etype == 0x86DD and len(frame) >= 54:
        if frame[20] != 6:
            return None
        plen = struct.unpack_from("!H", frame, 18)[0]
        src = "[" + socket.inet_ntop(socket.AF_INET6, frame[22:38]) + "]"
        dst = "[" + socket.inet_ntop(socket.AF_INET6, frame[38:54]) + "]"
        t = 54
        ip_end = 54 + plen
    else:
        return None
    if len(frame) < t + 20:
        return None
    sport, dport, seq, ack = struct.unpack_from("!HHII", frame, t)
    doff = (frame[t + 12] >> 4) * 4
    flags = frame[t + 13]
    payload = max(0, min(ip_end, len(frame)) - (t + doff))
    return f"{src}:{sport}>{dst}:{dport}", seq, payload, flags, ack


def _udp_info(frame: bytes) -> tuple[str, int, str] | None:
    """(``src:port>dst:port``, UDP payload length, payload SHA-256 prefix) or None.

    Only untagged Ethernet IPv4/IPv6 without IPv6 extension headers; anything else is None.
    """
    if len(frame) < 14:
        return None
    etype = struct.unpack_from("!H", frame, 12)[0]
    if etype == 0x0800 and len(frame) >= 34 and frame[23] == 17:
        u = 14 + (frame[14] & 0x0F) * 4
        src = socket.inet_ntop(socket.AF_INET, frame[26:30])
        dst = socket.inet_ntop(socket.AF_INET, frame[30:34])
    elif etype == 0x86DD and len(frame) >= 54 and frame[20] == 17:
        u = 54
        src = "[" + socket.inet_ntop(socket.AF_INET6, frame[22:38]) + "]"
        dst = "[" + socket.inet_ntop(socket.AF_INET6, frame[38:54]) + "]"
    else:
        return None
    if len(frame) < u + 8:
        return None
    sport, dport, ulen = struct.unpack_from("!HHH", frame, u)
    payload = frame[u + 8:u + max(8, ulen)]
    return (f"{src}:{sport}>{dst}:{dport}", len(payload),
            hashlib.sha256(payload).hexdigest()[:16])


@dataclass(slots=True)
class _DirStats:
    frames_in: int = 0
    bytes_in: int = 0
    frames_out: int = 0
    lost: int = 0
    queue_drops: int = 0
    reordered: int = 0
    dropped_segments: list[dict[str, Any]] = field(default_factory=list)
    udp_lost: int = 0
    dropped_datagrams: list[dict[str, Any]] = field(default_factory=list)
    reordered_segments: list[dict[str, Any]] = field(default_factory=list)
    targeted_lost: int = 0
    targeted_drops: list[dict[str, Any]] = field(default_factory=list)


def tap_forward_main(argv: Sequence[str]) -> int:
    """The forwarder process: ``netlab.py tap-forward --tap-a A --tap-b B --params JSON``.

    Prints ``ready`` once both TAPs exist, forwards until SIGTERM/SIGINT or the lifetime ends,
    then writes ``--stats`` (JSON).  Returns the exit status.
    """
    ap = argparse.ArgumentParser(prog="netlab.py tap-forward")
    ap.add_argument("--tap-a", required=True)
    ap.add_argument("--tap-b", required=True)
    ap.add_argument("--params", required=True, help="LinkParams as JSON")
    ap.add_argument("--stats", required=True, type=Path)
    args = ap.parse_args(argv)
    p = LinkParams(**json.loads(args.params))
    rules: tuple[list[list[Any]], list[list[Any]]] = ([], [])  # per direction: [rule, left]
    for raw in p.drop_rules:
        rule = DropRule(**raw)
        if rule.direction not in ("a_to_b", "b_to_a") or rule.count < 1:
            raise LabError(f"bad drop rule {raw!r}")
        rules[0 if rule.direction == "a_to_b" else 1].append([rule, rule.count])
    fds = [_open_tap(args.tap_a), _open_tap(args.tap_b)]
    # a plain flag: the handler runs several times (killpg, then timeout forwards the signal)
    # and threading.Event.set() is not reentrant, so an Event can deadlock here
    stop = [False]

    def on_signal(signum: int, frame: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print("ready", flush=True)

    delay = p.delay_ms / 1000.0
    losses = (p.loss_ab, p.loss_ba)
    rngs = (random.Random(p.seed * 2 + 0), random.Random(p.seed * 2 + 1))
    stats = (_DirStats(), _DirStats())
    queued = [0, 0]
    last_depart = [0.0, 0.0]
    heap: list[tuple[float, int, int, bytes]] = []  # (depart, counter, direction, frame)
    counter = 0
    t0 = time.monotonic()
    t0_ns = time.time_ns()
    deadline = t0 + p.lifetime_s
    max_list = 2000

    def note(lst: list[dict[str, Any]], frame_index: int, info: tuple[Any, ...] | None,
             now: float) -> None:
        if len(lst) < max_list and info is not None:
            lst.append({"frame_index": frame_index, "t_rel_ms": round((now - t0) * 1000, 3),
                        "flow": info[0], "seq": info[1], "ack": info[4], "len": info[2],
                        "flags": f"0x{info[3]:02x}"})

    while not stop[0]:
        now = time.monotonic()
        if now >= deadline:
            break
        timeout = 0.05
        if heap:
            timeout = max(0.0, min(timeout, heap[0][0] - now))
        try:
            ready, _, _ = select.select(fds, [], [], timeout)
        except InterruptedError:
            continue
        now = time.monotonic()
        for fd in ready:
            d = fds.index(fd)
            st = stats[d]
            for _ in range(256):  # bounded burst per wake-up
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if not frame:
                    break
                st.frames_in += 1
                st.bytes_in += len(frame)
                idx = st.frames_in
                info = _tcp_info(frame)
                is_syn = info is not None and bool(info[3] & 0x02)
                hit = None
                if rules[d] and info is not None:
                    for r in rules[d]:
                        rule = r[0]
                        if (r[1] > 0 and info[2] >= rule.min_len
                                and (not rule.src_port or info[0].split(">")[0].endswith(
                                    f":{rule.src_port}"))
                                and (not rule.arm_file or os.path.exists(rule.arm_file))):
                            r[1] -= 1
                            hit = rule
                            break
                if hit is not None and info is not None:
                    st.targeted_lost += 1
                    if len(st.targeted_drops) < max_list:
                        st.targeted_drops.append({
                            "rule": hit.name, "frame_index": idx,
                            "t_rel_ms": round((now - t0) * 1000, 3), "t_epoch": time.time(),
                            "flow": info[0], "seq": info[1], "ack": info[4], "len": info[2],
                            "flags": f"0x{info[3]:02x}"})
                    continue
                if (info is not None and not (is_syn and p.spare_syn) and losses[d] > 0
                        and rngs[d].random() < losses[d]):
                    st.lost += 1
                    note(st.dropped_segments, idx, info, now)
                    continue
                if p.loss_udp and info is None and losses[d] > 0:
                    uinfo = _udp_info(frame)
                    if uinfo is not None and rngs[d].random() < losses[d]:
                        st.udp_lost += 1
                        if len(st.dropped_datagrams) < max_list:
                            st.dropped_datagrams.append({
                                "frame_index": idx, "t_rel_ms": round((now - t0) * 1000, 3),
                                "flow": uinfo[0], "udp_len": uinfo[1],
                                "payload_sha256_16": uinfo[2]})
                        continue
                if queued[d] >= p.queue_frames:
                    st.queue_drops += 1
                    continue
                depart = now + delay
                if p.rate_bps > 0:
                    depart = max(depart, last_depart[d] + len(frame) * 8 / p.rate_bps)
                    last_depart[d] = depart
                if (info is not None and info[2] > 0 and p.reorder_prob > 0
                        and rngs[d].random() < p.reorder_prob):
                    depart += p.reorder_extra_ms / 1000.0
                    st.reordered += 1
                    note(st.reordered_segments, idx, info, now)
                counter += 1
                queued[d] += 1
                heapq.heappush(heap, (depart, counter, d, frame))
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            _, _, d, frame = heapq.heappop(heap)
            queued[d] -= 1
            with contextlib.suppress(OSError):
                os.write(fds[1 - d], frame)
                stats[d].frames_out += 1

    out = {"params": asdict(p), "started_ns": t0_ns, "ran_s": round(time.monotonic() - t0, 3),
           "undelivered_at_exit": len(heap)}
    for name, st in (("a_to_b", stats[0]), ("b_to_a", stats[1])):
        out[name] = asdict(st)
    tmp = args.stats.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1))
    tmp.replace(args.stats)
    for fd in fds:
        os.close(fd)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: ``tap-forward ...`` or ``cleanup`` (remove stale pcl- namespaces)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["tap-forward"]:
        return tap_forward_main(args[1:])
    if args[:1] == ["cleanup"]:
        for what in cleanup_stale():
            print(f"removed {what}")
        return 0
    print("usage: netlab.py tap-forward ... | cleanup", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
