"""Record a large REAL capture for the benchmarks: nginx (TLS 1.2/1.3, HTTP/1.1 and HTTP/2)
and curl clients in two network namespaces joined by a veth pair, tcpdump on the server side,
and the clients' TLS key log (SSLKEYLOGFILE).

    python benchmarks/record_big.py OUT.pcap --size-mb 300   # OUT.pcap, OUT.keys, OUT.json

Traffic per round (rounds repeat until the capture reaches ``--size-mb``, ``--max-rounds`` or
``--max-seconds``, whichever comes first):

* one HTTP/2 connection (``curl --http2 -Z``) multiplexing 22 transfers: a 2 MiB file, four
  256 KiB files, ten small JSON answers, two SSE files (``text/event-stream``, ~60 KiB of
  ``data:`` events each) and five HTML pages;
* one HTTP/1.1 keep-alive connection fetching 11 of the same files one after the other;
* four short connections (two HTTP/2, two HTTP/1.1) with three small transfers each;
* four WebSocket connections (``benchmarks/ws_bench.py``, python ``websockets``): ws and wss
  (TLS through Python's ``ssl``, key log ``OUT.keys``), each with and without
  permessage-deflate; per connection ``--ws-requests`` prompts answered by 60 JSON token
  messages each, 12 binary 3,200-byte "audio" messages echoed per prompt, one ping per prompt,
  a close handshake;
* every other round both clients are limited to TLS 1.2 (ECDHE-RSA-AES128-GCM-SHA256 /
  AES256-GCM / CHACHA20), the others negotiate TLS 1.3.

Loss: ``--loss`` (default 0.5 %) of the TCP segments other than SYN / SYN-ACK are dropped at
random by the receiving namespace (``iptables -t raw ... -m statistic --mode random``, in
PREROUTING of both namespaces, so the kernel drops them on arrival as a lossy link would).
tcpdump on the server's interface sees every client segment before the drop and none of the
server segments the client dropped twice, so the capture shows the retransmissions, dup-acks and
SACKs a capture taken at the server of a lossy path shows.

Frames are Ethernet, MTU 1500, no GSO super-frames (``gso_max_segs 1``), so the frame count
is what a NIC capture of the same transfer would show. Requires root and the programs of
:data:`NEEDS` (Debian 12: ``apt-get install nginx-light curl tcpdump openssl iproute2 iptables``;
see ``captures/README.md``): it names the missing ones before it starts. Nothing leaves the two
namespaces.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import netlab  # noqa: E402

CLIENT4, SERVER4 = "192.0.2.10", "192.0.2.20"  # RFC 5737 documentation range
HOST = "bench.test"
TLS12_CIPHERS = ("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:"
                 "ECDHE-RSA-CHACHA20-POLY1305")

H2_PATHS = (["/data/2m.bin"] + ["/data/256k.bin"] * 4 + ["/api/small.json"] * 10
            + ["/sse/stream.sse"] * 2 + ["/index.html"] * 5)
H1_PATHS = (["/data/2m.bin", "/data/256k.bin", "/data/256k.bin"] + ["/api/small.json"] * 5
            + ["/sse/stream.sse"] + ["/index.html"] * 2)

SHORT_PATHS = ["/api/small.json", "/sse/stream.sse", "/api/small.json"]
SHORT_CONNECTIONS = 4  # short-lived connections per round (2 HTTP/2, 2 HTTP/1.1)
WS_PORT, WSS_PORT = 8080, 8443
WS_BENCH = Path(__file__).resolve().parent / "ws_bench.py"


def _ws_clients(keylog: Path, cacert: Path, requests: int, seed: int) -> list[list[str]]:
    """The four WebSocket clients of a round: ws, ws + deflate, wss, wss + deflate."""
    out = []
    for url in (f"ws://{SERVER4}:{WS_PORT}/chat", f"wss://{SERVER4}:{WSS_PORT}/chat"):
        for deflate in (False, True):
            argv = [sys.executable, str(WS_BENCH), "client", "--url", url, "--requests",
                    str(requests), "--seed", str(seed), "--deadline", "80"]
            if deflate:
                argv.append("--deflate")
            if url.startswith("wss:"):
                argv += ["--cacert", str(cacert), "--keylog", str(keylog)]
            out.append(argv)
    return out


def _drop_at_random(ns: netlab.Netns, loss: float) -> None:
    """Drop ``loss`` of the TCP segments arriving in ``ns`` (not SYN / SYN-ACK)."""
    if loss > 0:
        ns.run(["iptables", "-t", "raw", "-A", "PREROUTING", "-p", "tcp", "!", "--tcp-flags",
                "SYN", "SYN", "-m", "statistic", "--mode", "random", "--probability",
                f"{loss:.6f}", "-j", "DROP"])


def _dropped(ns: netlab.Netns) -> int:
    """Packets the random-drop rule of ``ns`` dropped so far (0 without the rule)."""
    res = ns.run(["iptables", "-t", "raw", "-L", "PREROUTING", "-v", "-x", "-n"], check=False)
    total = 0
    for line in (res.stdout or "").splitlines():
        f = line.split()
        if "DROP" in f and f[0].isdigit():
            total += int(f[0])
    return total


def _www(root: Path) -> dict[str, int]:
    """Deterministic files for nginx; returns {url path: size}."""
    rnd = random.Random(20240601)
    files: dict[str, bytes] = {
        "/data/2m.bin": rnd.randbytes(2 * 1024 * 1024),
        "/data/256k.bin": rnd.randbytes(256 * 1024),
        "/api/small.json": json.dumps(
            {"model": "bench", "choices": [{"index": i, "text": f"token {i}"} for i in range(12)]}
        ).encode() + b"\n",
        "/index.html": b"<!doctype html><title>bench</title>"
        + b"".join(b"<p>pcaptools benchmark line %d</p>\n" % i for i in range(60)),
    }
    events = []
    for i in range(600):
        delta = json.dumps({"id": "chatcmpl-bench", "choices": [{"delta": {"content": f" w{i}"}}]})
        events.append(f"id: {i}\nevent: message\ndata: {delta}\n\n")
    files["/sse/stream.sse"] = ("".join(events) + "data: [DONE]\n\n").encode()
    for rel, data in files.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return {k: len(v) for k, v in files.items()}


NGINX_CONF = """\
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
  types {{ text/html html; application/json json; application/octet-stream bin;
          text/event-stream sse; }}
  access_log off;
  sendfile off;
  keepalive_requests 10000;
  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp;
  uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;
  server {{
    listen {ip}:443 ssl http2;
    server_name {host};
    root {d}/www;
    ssl_certificate {d}/cert.pem;
    ssl_certificate_key {d}/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers {ciphers};
    ssl_session_cache off;
    ssl_session_tickets off;
  }}
}}
"""


def _curl(paths: list[str] | tuple[str, ...], *, http2: bool, tls12: bool, keylog: Path,
          cipher: str) -> list[str]:
    argv = ["env", f"SSLKEYLOGFILE={keylog}", "curl", "-sSk", "--resolve",
            f"{HOST}:443:{SERVER4}", "--max-time", "60"]
    argv += ["--http2", "-Z", "--parallel-max", "32"] if http2 else ["--http1.1"]
    if tls12:
        argv += ["--tls-max", "1.2", "--ciphers", cipher]
    for p in paths:
        argv += [f"https://{HOST}{p}", "-o", "/dev/null"]
    return argv


def record(out: Path, *, size_mb: float = 300.0, max_rounds: int = 2000,
           max_seconds: float = 900.0, work: Path | None = None, loss: float = 0.005,
           ws_requests: int = 20) -> dict[str, Any]:
    """Record ``out`` (pcap), ``out.with_suffix('.keys')`` and ``.json`` (facts); returns the facts.

    Stops after the round during which the capture reached ``size_mb`` MB, or at ``max_rounds``
    rounds / ``max_seconds`` seconds. Raises ``netlab.LabError`` if the lab cannot be built.
    """
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    keys = out.with_suffix(".keys")
    work = Path(work) if work else out.parent / (out.stem + ".work")
    work.mkdir(parents=True, exist_ok=True)
    d = work / "nginx"
    (d / "tmp").mkdir(parents=True, exist_ok=True)
    sizes = _www(d / "www")
    netlab.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", f"/CN={HOST}", "-addext", f"subjectAltName=DNS:{HOST}",
                "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")])
    (d / "nginx.conf").write_text(NGINX_CONF.format(d=d, ip=SERVER4, host=HOST,
                                                    ciphers=TLS12_CIPHERS))
    keys.unlink(missing_ok=True)
    out.unlink(missing_ok=True)
    ciphers = TLS12_CIPHERS.split(":")
    started = time.monotonic()
    rounds = connections = h2_requests = h1_requests = ws_connections = ws_prompts = 0
    ws_keys = keys.with_suffix(".ws.keys")
    ws_keys.unlink(missing_ok=True)
    failures: list[str] = []
    with netlab.Lab(work, tag="bench") as lab:
        c = lab.netns("client")
        s = lab.netns("server")
        lab.veth(c, s, addrs_a=[f"{CLIENT4}/24"], addrs_b=[f"{SERVER4}/24"],
                 mac_a="02:00:00:00:00:10", mac_b="02:00:00:00:00:20")
        lab.spawn(s, ["nginx", "-p", str(d), "-c", str(d / "nginx.conf"), "-g",
                      "daemon off;"], name="nginx", lifetime_s=max_seconds + 120)
        ws_argv = [sys.executable, str(WS_BENCH), "serve", "--host", SERVER4,
                   "--lifetime", str(int(max_seconds + 120))]
        lab.spawn(s, [*ws_argv, "--port", str(WS_PORT)], name="ws",
                  lifetime_s=max_seconds + 120)
        lab.spawn(s, [*ws_argv, "--port", str(WSS_PORT), "--certfile", str(d / "cert.pem"),
                      "--keyfile", str(d / "key.pem")], name="wss",
                  lifetime_s=max_seconds + 120)
        for port in (443, WS_PORT, WSS_PORT):
            netlab.wait_for_port(s, SERVER4, port)
        _drop_at_random(c, loss)
        _drop_at_random(s, loss)
        cap = netlab.Capture(lab, s, "eth0", work / "capture.pcap", buffer_mib=256,
                             lifetime_s=max_seconds + 60,
                             bpf=f"tcp port 443 or tcp port {WS_PORT} or tcp port {WSS_PORT}")
        cap.start()
        while (rounds < max_rounds and time.monotonic() - started < max_seconds
               and (work / "capture.pcap").stat().st_size < size_mb * 1e6):
            tls12 = rounds % 2 == 1
            cipher = ciphers[(rounds // 2) % len(ciphers)]
            runs = [(H2_PATHS, True), (H1_PATHS, False)] + [
                (SHORT_PATHS, i % 2 == 0) for i in range(SHORT_CONNECTIONS)]
            procs = [subprocess.Popen(c.argv(_curl(paths, http2=h2, tls12=tls12, keylog=keys,
                                                   cipher=cipher)), stderr=subprocess.PIPE)
                     for paths, h2 in runs]
            ws_runs = _ws_clients(ws_keys, d / "cert.pem", ws_requests, rounds)
            procs += [subprocess.Popen(c.argv(argv), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE) for argv in ws_runs]
            for p in procs:
                _, err = p.communicate(timeout=90)
                if p.returncode:
                    failures.append(f"round {rounds}: curl exit {p.returncode}: "
                                    f"{err.decode(errors='replace').strip()[:200]}")
            if len(failures) > 20:
                raise netlab.LabError("curl keeps failing: " + " | ".join(failures[:3]))
            rounds += 1
            connections += len(runs) + len(ws_runs)
            ws_connections += len(ws_runs)
            ws_prompts += ws_requests * len(ws_runs)
            h2_requests += sum(len(p) for p, h2 in runs if h2)
            h1_requests += sum(len(p) for p, h2 in runs if not h2)
        res = cap.stop(settle_s=0.5)
        dropped = {"by_client": _dropped(c), "by_server": _dropped(s)}
    (work / "capture.pcap").replace(out)
    if ws_keys.is_file():  # the WebSocket clients' key log, after curl's
        with keys.open("ab") as f:
            f.write(ws_keys.read_bytes())
        ws_keys.unlink()
    facts: dict[str, Any] = {
        "capture": out.name,
        "keylog": keys.name,
        "file_size": out.stat().st_size,
        "rounds": rounds,
        "tcp_connections": connections,
        "http2_requests": h2_requests,
        "http1_requests": h1_requests,
        "ws_connections": ws_connections,
        "ws_prompts": ws_prompts,
        "tls12_rounds": rounds // 2,
        "loss": loss,
        "segments_dropped": dropped,
        "record_seconds": round(time.monotonic() - started, 1),
        "packets_captured": res.packets_captured,
        "packets_dropped": res.packets_dropped,
        "curl_failures": failures,
        "files": sizes,
        "versions": {t: netlab.tool_version(a) for t, a in (
            ("nginx", ["nginx", "-v"]), ("curl", ["curl", "--version"]),
            ("tcpdump", ["tcpdump", "--version"]),
            ("websockets", [sys.executable, "-c",
                            "import websockets; print(websockets.__version__)"]))},
    }
    out.with_suffix(".json").write_text(json.dumps(facts, indent=1) + "\n")
    return facts


NEEDS = ("nginx", "curl", "tcpdump", "openssl", "ip", "iptables")
"""the programs a recording runs (``ip``: iproute2)"""


def missing_tools() -> str:
    """A message naming the programs of :data:`NEEDS` that are not installed ('' if none)."""
    missing = [p for p in NEEDS if shutil.which(p) is None]
    if not missing:
        return ""
    return (f"not installed: {', '.join(missing)} (Debian 12: apt-get install "
            "nginx-light curl tcpdump openssl iproute2 iptables)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--size-mb", type=float, default=300.0)
    ap.add_argument("--max-rounds", type=int, default=2000)
    ap.add_argument("--max-seconds", type=float, default=900.0)
    ap.add_argument("--loss", type=float, default=0.005,
                    help="share of TCP segments dropped at random (default 0.005)")
    ap.add_argument("--ws-requests", type=int, default=20,
                    help="prompts per WebSocket connection (default 20)")
    args = ap.parse_args(argv)
    problem = missing_tools()
    if problem:
        print(f"record_big: {problem}", file=sys.stderr)
        return 1
    facts = record(args.out, size_mb=args.size_mb, max_rounds=args.max_rounds,
                   max_seconds=args.max_seconds, loss=args.loss,
                   ws_requests=args.ws_requests)
    print(json.dumps({k: v for k, v in facts.items() if k != "files"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
