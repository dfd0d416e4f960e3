"""Does memory stay flat when the same traffic is repeated? (the foundation's scaling check)

Builds 1x, 2x, ... Nx copies of a capture in which each repetition is shifted in time and moved
to fresh client ports (so it is new TCP connections with the same packets), then runs
``pcaptools.load`` on each in a child process and reports wall time and peak RSS.

    python benchmarks/memory_scaling.py captures/http1-lossy.pcapng --factors 1 10 [--packets]

Only Ethernet/IPv4/IPv6 TCP frames are rewritten (ports); other frames are repeated as they are.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import dpkt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pcaptools.diagnostics import Diagnostics  # noqa: E402
from pcaptools.io import open_capture  # noqa: E402


def repeat_capture(src: Path, dst: Path, factor: int) -> int:
    """Write ``factor`` shifted copies of src (Ethernet link type expected) to dst; return frames."""
    with open_capture(src, Diagnostics()) as reader:
        frames = [(f.ts_ns, f.data, f.linktype) for f in reader.frames()]
    if not frames:
        raise SystemExit("empty capture")
    linktype = frames[0][2]
    span = frames[-1][0] - frames[0][0] + 1_000_000_000
    n = 0
    with open(dst, "wb") as fh:
        w = dpkt.pcap.Writer(fh, linktype=linktype, nano=True)
        for k in range(factor):
            for ts, data, _ in frames:
                if k and linktype == 1:
                    data = _shift_ports(data, k)
                w.writepkt(data, ts=(ts + k * span) / 1e9)
                n += 1
    return n


def _shift_ports(data: bytes, k: int) -> bytes:
    try:
        eth = dpkt.ethernet.Ethernet(data)
        ip = eth.data
        tcp = ip.data
        if not isinstance(tcp, dpkt.tcp.TCP):
            return data
        # the higher port is the client's ephemeral port: move it to a fresh one per repetition
        if tcp.sport > tcp.dport:
            tcp.sport = 1024 + (tcp.sport - 1024 + 997 * k) % 64000
        else:
            tcp.dport = 1024 + (tcp.dport - 1024 + 997 * k) % 64000
        return bytes(eth)
    except (dpkt.UnpackError, AttributeError):
        return data


CHILD = """
import json, resource, sys, time
import pcaptools
t = time.perf_counter()
cap = pcaptools.load(sys.argv[1], packets=sys.argv[2] == '1')
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "frames": cap.summary.frames, "connections": len(cap.connections),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(path: Path, packets: bool) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), "1" if packets else "0"],
                         capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", type=Path)
    ap.add_argument("--factors", type=int, nargs="+", default=[1, 10])
    ap.add_argument("--packets", action="store_true", help="also build the per-frame packets table")
    args = ap.parse_args()
    base = measure_baseline()
    print(f"python + pandas + pcaptools imported: {base:.1f} MB peak RSS")
    print(f"{'factor':>6} {'frames':>9} {'conns':>6} {'MB file':>8} {'seconds':>8} {'frames/s':>9} {'peak MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for f in args.factors:
            p = Path(tmp) / f"x{f}.pcap"
            repeat_capture(args.capture, p, f)
            r = measure(p, args.packets)
            print(f"{f:>6} {r['frames']:>9,} {r['connections']:>6} {p.stat().st_size / 1e6:>8.1f} "
                  f"{r['seconds']:>8.2f} {r['frames'] / r['seconds']:>9,.0f} {r['peak_rss_mb']:>8.1f}")
    return 0


def measure_baseline() -> float:
    code = "import resource, pcaptools; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    return float(out.stdout)


if __name__ == "__main__":
    raise SystemExit(main())
