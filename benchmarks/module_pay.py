"""Which compiled modules pay: ``load()`` CPU time with every built module, with none, and with
all but one, on a real capture (issue #19: "compile only the modules that pay").

    python benchmarks/module_pay.py CAPTURE KEYS [--repeats 5] [--out results.json]

Needs a build (``scripts/build_accel.py``) of at least the modules to weigh. Each measured run
is a fresh child process that imports pcaptools and times ``pcaptools.load(CAPTURE, keylog=KEYS)``
(every table) ``--inner`` times with ``time.process_time()`` around each call, so imports and
interpreter start are out of it; the fastest of them counts (on a shared machine the least
disturbed one). Which modules run compiled is chosen by rewriting the build's
``_compiled/manifest.json`` with a subset of its ``sources`` (pcaptools loads a compiled module
only when the manifest names it); the original manifest is put back at the end, also on an
error or Ctrl-C. The configurations are run round-robin, ``--repeats`` times, so that a change
of machine load hits them all alike; medians over the rounds are reported. The times so far are
kept in ``OUT.partial.json`` while it runs.

``saves_s`` of a module is median(all but it) - median(all): what compiling it saves, with the
other modules compiled. With ``--by group`` the unit left out is a group of modules
(``group_of``: one protocol's modules together, the reader, the decoder, the TCP modules, each
table builder), which needs far fewer runs. Its C compile time comes from the manifest
(``compile_seconds``, wall seconds with the build's ``jobs`` compiles in parallel). The rule
applied in ``pcaptools/_accel.py`` MODULES is printed with the table (``RULE``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MANIFEST = ROOT / "pcaptools" / "_compiled" / "manifest.json"

#: the rule by which a module stays in MODULES
RULE = ("a module stays compiled when leaving it out of the build makes load() at least 1 % "
        "slower (median of the alternated runs) on the benchmark capture; the others are "
        "dropped from MODULES (their compile time is saved, the run does not get measurably "
        "slower)")
KEEP_SHARE = 0.01

CHILD = r"""
import json, sys, time
import pcaptools, pcaptools._accel as acc
cap, keys, inner = sys.argv[1], sys.argv[2], int(sys.argv[3])
cpu = []
for _ in range(inner):
    t = time.process_time()
    c = pcaptools.load(cap, keylog=keys)
    cpu.append(time.process_time() - t)
    del c
st = acc.status()
print(json.dumps({"cpu_s": cpu,
                  "compiled": sorted(m for m, v in st.items() if v == "compiled")}))
"""


def _run(cap: Path, keys: Path, pure: bool, inner: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PCAPTOOLS_PURE", None)
    if pure:
        env["PCAPTOOLS_PURE"] = "1"
    out = subprocess.run([sys.executable, "-c", CHILD, str(cap), str(keys), str(inner)],
                         env=env,
                         capture_output=True, text=True, check=True, timeout=1800).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def group_of(module: str) -> str:
    """The part of pcaptools a module belongs to (``by="group"``): the modules of one protocol
    call each other per record and are weighed together; the reader, the decoder, the TCP
    modules and each table builder are groups of their own."""
    parts = module.split(".")
    if parts[1] == "protocols":
        return ".".join(parts[1:3])
    if parts[1] in ("io", "tcp"):
        return parts[1]
    return ".".join(parts[1:])


def measure(cap: Path, keys: Path, repeats: int, inner: int, log: Any = print,
            save: Any = None, by: str = "module") -> dict[str, Any]:
    original = MANIFEST.read_text(encoding="utf-8")
    manifest = json.loads(original)
    built = sorted(manifest["sources"])
    units = {m: (group_of(m) if by == "group" else m) for m in built}
    configs: list[tuple[str, list[str] | None]] = [("all", built), ("none", None)]
    configs += [(f"-{u}", [x for x in built if units[x] != u])
                for u in sorted(set(units.values()))]
    times: dict[str, list[float]] = {name: [] for name, _ in configs}
    load_avg = [round(os.getloadavg()[0], 2)]
    try:
        for r in range(repeats):
            for name, subset in configs:
                if subset is not None:
                    sub = dict(manifest, sources={m: manifest["sources"][m] for m in subset})
                    MANIFEST.write_text(json.dumps(sub, indent=1) + "\n", encoding="utf-8")
                res = _run(cap, keys, pure=subset is None, inner=inner)
                if subset is not None and res["compiled"] != sorted(subset):
                    raise SystemExit(f"{name}: compiled {res['compiled']}, expected {subset}")
                # the fastest of the loads in one process: the one least disturbed by others
                times[name].append(min(res["cpu_s"]))
                log(f"module_pay: {name}: {' '.join(f'{x:.3f}' for x in res['cpu_s'])} "
                    f"(load {os.getloadavg()[0]:.2f})")
                if save is not None:
                    save({"partial": True, "times": times})
            log(f"module_pay: repeat {r + 1}/{repeats} done, load {os.getloadavg()[0]:.2f}")
    finally:
        MANIFEST.write_text(original, encoding="utf-8")
    load_avg.append(round(os.getloadavg()[0], 2))
    med = {k: statistics.median(v) for k, v in times.items()}
    spread = {k: (min(v), max(v)) for k, v in times.items()}
    compile_s = manifest.get("compile_seconds", {})
    rows = []
    for u in sorted(set(units.values())):
        saves = med[f"-{u}"] - med["all"]
        members = [m for m in built if units[m] == u]
        cs = [compile_s[m] for m in members if m in compile_s]
        rows.append({"module": u, "modules": members, "saves_s": round(saves, 3),
                     "saves_share": round(saves / med["all"], 4),
                     "without_s": [round(x, 3) for x in times[f"-{u}"]],
                     "compile_s": round(sum(cs), 1) if len(cs) == len(members) else None,
                     "keep": saves >= KEEP_SHARE * med["all"]})
    rows.sort(key=lambda r: -r["saves_s"])
    return {"capture": str(cap), "file_size": cap.stat().st_size, "repeats": repeats,
            "inner": inner,
            "date": time.strftime("%Y-%m-%d"), "load_average": load_avg,
            "all_s": round(med["all"], 3), "none_s": round(med["none"], 3),
            "all_runs": [round(x, 3) for x in times["all"]],
            "none_runs": [round(x, 3) for x in times["none"]],
            "spread_all": spread["all"], "jobs": manifest.get("jobs"), "by": by,
            "rule": RULE, "modules": rows}


def table(res: dict[str, Any]) -> str:
    lines = ["| module | CPU s saved by compiling it | share of load() | C compile s | "
             "kept |", "|---|---:|---:|---:|---|"]
    for r in res["modules"]:
        cs = "-" if r["compile_s"] is None else f"{r['compile_s']:.0f}"
        lines.append(f"| `{r['module']}` | {r['saves_s']:+.3f} | {100 * r['saves_share']:+.1f} % "
                     f"| {cs} | {'yes' if r['keep'] else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("keys", type=Path)
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds over all configurations (default 1)")
    ap.add_argument("--inner", type=int, default=3,
                    help="loads per child process; the fastest counts (default 3)")
    ap.add_argument("--by", choices=("module", "group"), default="module",
                    help="leave out one module at a time, or one group (group_of)")
    ap.add_argument("--out", type=Path, help="merge the result into this JSON file "
                    "(key module_pay), e.g. benchmarks/results.json")
    args = ap.parse_args(argv)
    if not MANIFEST.is_file():
        raise SystemExit(f"{MANIFEST} missing: run scripts/build_accel.py first")
    partial = Path(str(args.out or "module_pay") + ".partial.json")

    def save(state: dict[str, Any]) -> None:
        partial.write_text(json.dumps(state) + "\n")

    res = measure(args.capture, args.keys, args.repeats, args.inner, save=save, by=args.by)
    partial.unlink(missing_ok=True)
    print(f"all compiled {res['all_s']:.3f} s, none {res['none_s']:.3f} s (CPU s in load(), "
          f"medians of {args.repeats})")
    print(table(res))
    print("rule:", RULE)
    if args.out:
        data = json.loads(args.out.read_text()) if args.out.is_file() else {}
        data["module_pay"] = res
        args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
