"""The payload stack alone (TLS, HTTP/1.1, WebSocket, HTTP/2, SSE), compiled group by group:
CPU seconds of replaying, without the TCP layer and the tables, every call the TCP layer made
on the connection observers during one ``load()`` of a capture (issue #20).

    python benchmarks/payload_replay.py CAPTURE KEYS [--sets core,core+protocols.websocket,...]
                                        [--repeats 5] [--inner 5] [--cpu N]

Why: a payload group takes a few % of ``load()`` off at most, about what one configuration's
``load()`` time varies by on a shared machine (``benchmarks/module_pay.py`` needs many rounds to
see it). Replayed alone, the payload stack runs in about a second, so the same question (how
much CPU does compiling this group save?) is answered with a spread ten times smaller; the
answer in seconds is what ``load()`` saves too, since ``load()`` runs the same payload calls.

First one ``load()`` with ``PCAPTOOLS_PURE=1`` records the calls (``feed``, ``gap``, ``close``,
``finish`` of each connection's observer, with the chunks' bytes) into a temporary file; then
each measured run is a fresh child process that replays them ``--inner`` times into new
observers and reports the fastest. Which modules run compiled is chosen as in
``module_pay.py`` (the build's manifest narrowed to a set, put back at the end); the sets are
run round-robin ``--repeats`` times and medians reported. Needs a build of the modules to
weigh (``scripts/build_accel.py --candidates``). Every replay must return the same number of
events, or it stops.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from module_pay import MANIFEST, set_members  # noqa: E402

RECORD = r"""
import pickle, sys
import pcaptools, pcaptools.pipeline as pl
from pcaptools.protocols.dispatch import ConnectionObserver
log = []
class Recorder:
    def __init__(self, *, tcp_stream, diag, keylog, midstream=False):
        self._t = tcp_stream
        self._o = ConnectionObserver(tcp_stream=tcp_stream, diag=diag, keylog=keylog,
                                     midstream=midstream)
        log.append(("new", tcp_stream, midstream))
    @property
    def wants_bytes(self):
        return self._o.wants_bytes
    def feed(self, c):
        log.append(("feed", self._t, int(c.direction), bytes(c.data), c.ts_ns, c.frame,
                    c.offset))
        return self._o.feed(c)
    def gap(self, d, off, n, ts, fr):
        log.append(("gap", self._t, int(d), off, n, ts, fr))
        return self._o.gap(d, off, n, ts, fr)
    def close(self, d, ts, fr, *, at_eof=False):
        log.append(("close", self._t, int(d), ts, fr, at_eof))
        return self._o.close(d, ts, fr, at_eof=at_eof)
    def finish(self, ts, fr):
        log.append(("finish", self._t, ts, fr))
        return self._o.finish(ts, fr)
pl.ConnectionObserver = Recorder
pcaptools.load(sys.argv[1], keylog=sys.argv[2])
with open(sys.argv[3], "wb") as f:
    pickle.dump(log, f, protocol=5)
"""

REPLAY = r"""
import json, pickle, sys, time
import pcaptools, pcaptools._accel as acc
from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.dispatch import ConnectionObserver
from pcaptools.protocols.tls import KeyLog
from pcaptools.tcp.stream import Direction, StreamChunk
calls, keys_path, inner = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(calls, "rb") as f:
    log = pickle.load(f)
D = (Direction(0), Direction(1))
def run():
    diag = Diagnostics()
    keys = KeyLog.from_file(keys_path, diag)
    obs, n = {}, 0
    for e in log:
        k = e[0]
        if k == "feed":
            n += len(obs[e[1]].feed(StreamChunk(direction=D[e[2]], data=e[3], ts_ns=e[4],
                                                frame=e[5], offset=e[6])))
        elif k == "gap":
            n += len(obs[e[1]].gap(D[e[2]], e[3], e[4], e[5], e[6]))
        elif k == "close":
            n += len(obs[e[1]].close(D[e[2]], e[3], e[4], at_eof=e[5]))
        elif k == "finish":
            n += len(obs[e[1]].finish(e[2], e[3]))
        else:
            obs[e[1]] = ConnectionObserver(tcp_stream=e[1], diag=diag, keylog=keys,
                                           midstream=e[2])
    return n
cpu = []
for _ in range(inner):
    t = time.process_time()
    n = run()
    cpu.append(time.process_time() - t)
compiled = sorted(m for m in acc.CANDIDATES
                  if m in sys.modules and not sys.modules[m].__file__.endswith(".py"))
print(json.dumps({"cpu_s": cpu, "events": n, "compiled": compiled}))
"""


def _child(code: str, args: list[str], pure: bool, cpu: int | None) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PCAPTOOLS_PURE", None)
    if pure:
        env["PCAPTOOLS_PURE"] = "1"
    pin = [] if cpu is None else ["taskset", "-c", str(cpu)]
    return subprocess.run([*pin, sys.executable, "-c", code, *args], env=env,
                          capture_output=True, text=True, check=True, timeout=3600).stdout


def measure(cap: Path, keys: Path, names: list[str], repeats: int, inner: int,
            cpu: int | None) -> dict[str, Any]:
    original = MANIFEST.read_text(encoding="utf-8")
    manifest = json.loads(original)
    built = sorted(manifest["sources"])
    subsets = {n: set_members(n, built) for n in names}
    times: dict[str, list[float]] = {n: [] for n in names}
    events: set[int] = set()
    with tempfile.TemporaryDirectory(prefix="pcaptools-replay-") as tmp:
        calls = str(Path(tmp) / "calls.pkl")
        _child(RECORD, [str(cap), str(keys), calls], pure=True, cpu=cpu)
        try:
            for r in range(repeats):
                for name in names:
                    subset = subsets[name]
                    if subset is not None:
                        sub = dict(manifest, sources={m: manifest["sources"][m] for m in subset})
                        MANIFEST.write_text(json.dumps(sub, indent=1) + "\n", encoding="utf-8")
                    out = _child(REPLAY, [calls, str(keys), str(inner)], subset is None, cpu)
                    res = json.loads(out.strip().splitlines()[-1])
                    events.add(res["events"])
                    if len(events) != 1:
                        raise SystemExit(f"{name}: {res['events']} events, others {events}")
                    times[name].append(min(res["cpu_s"]))
                    print(f"payload_replay: {name}: {min(res['cpu_s']):.3f}", flush=True)
                print(f"payload_replay: repeat {r + 1}/{repeats} done", flush=True)
        finally:
            MANIFEST.write_text(original, encoding="utf-8")
    return {"events": events.pop(), "sets": [
        {"name": n, "median_s": round(statistics.median(v), 3),
         "runs_s": [round(x, 3) for x in v]} for n, v in times.items()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("keys", type=Path)
    ap.add_argument("--sets", default="core,core+protocols.websocket,core+protocols.tls",
                    help="comma list of sets as in module_pay.py --sets (none, all, core, "
                    "core+GROUP+...)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--inner", type=int, default=5)
    ap.add_argument("--cpu", type=int, help="pin the measured processes to this CPU")
    args = ap.parse_args(argv)
    if not MANIFEST.is_file():
        raise SystemExit(f"{MANIFEST} missing: run scripts/build_accel.py --candidates first")
    res = measure(args.capture, args.keys, args.sets.split(","), args.repeats, args.inner,
                  args.cpu)
    base = res["sets"][0]["median_s"]
    print(f"{res['events']} events per replay; CPU s, medians of {args.repeats}:")
    for row in res["sets"]:
        print(f"{row['name']}: {row['median_s']:.3f} s (saves {base - row['median_s']:+.3f} s "
              f"against {res['sets'][0]['name']}; runs "
              f"{', '.join(f'{x:.3f}' for x in row['runs_s'])})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
