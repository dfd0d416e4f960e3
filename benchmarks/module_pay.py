"""Which compiled modules pay: ``load()`` CPU time with every built module, with none, with the
TCP core, and with the core plus or minus one unit, on a real capture (issue #19: "compile only
the modules that pay").

    python benchmarks/module_pay.py CAPTURE KEYS [--by group] [--repeats 5] [--cpu 1]
                                    [--out results.json]

Needs a build of the modules to weigh: ``scripts/build_accel.py --candidates`` builds every
module of ``pcaptools._accel.CANDIDATES`` (``scripts/setup.sh`` later rebuilds ``MODULES``).
Each measured run is a fresh child process that imports pcaptools and times
``pcaptools.load(CAPTURE, keylog=KEYS)`` (every table) ``--inner`` times with
``time.process_time()`` around each call, so imports and interpreter start are out of it;
the fastest of them counts (on a shared machine the least
disturbed one). Which modules run compiled is chosen by rewriting the build's
``_compiled/manifest.json`` with a subset of its ``sources`` (pcaptools loads a compiled module
only when the manifest names it); the original manifest is put back at the end, also on an
error or Ctrl-C. The configurations are run round-robin, ``--repeats`` times, so that a change
of machine load hits them all alike; medians over the rounds are reported. The times so far are
kept in ``OUT.partial.json`` while it runs.

The units are weighed from the TCP core outwards, because compiled modules do not add up: on
the WebSocket-heavy benchmark capture (2026-12-06) every module compiled was 9 % slower than
none compiled, while leaving any one group out of the full build made it slower still, so a
leave-one-out from "all" said every group pays and the full build was the slowest of all.
The core (``CORE``: the decoder, the TCP modules and the packets table, the per-frame chain
with ``.pxd`` type declarations) is the base; configurations: none, all, the core, the core
with one other unit added (``+u``), and the core with one of its own units taken out (``-u``).
``saves_s`` of a unit outside the core is median(core) - median(core + it); of a unit inside
it, median(core - it) - median(core). With ``--by group`` a unit is a group of modules
(``group_of``: one protocol's modules together, the reader, the decoder, the TCP modules, each
table builder), with ``--by module`` one module. Its C compile time comes from the manifest
(``compile_seconds``, wall seconds with the build's ``jobs`` compiles in parallel). The rule
applied in ``pcaptools/_accel.py`` MODULES is printed with the table (``RULE``). ``--cpu N``
pins the measured processes to one CPU (``taskset``), away from other work on the machine.
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
RULE = ("a unit of the TCP core stays compiled when taking it out of the core build makes "
        "load() at least 1 % slower, a unit outside the core is compiled when adding it to the "
        "core build makes load() at least 1 % faster (medians of the alternated runs, on the "
        "benchmark capture); the others are left out of MODULES (their compile time is saved, "
        "the run does not get measurably slower)")
#: the per-frame chain with .pxd type declarations: the base the other units are weighed on
CORE = ("net.decode", "tcp", "tables.packets")
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
# every candidate imported (or that would be imported) as an extension module; status()
# covers MODULES only
def _compiled(m):
    if m in sys.modules:
        return not getattr(sys.modules[m], "__file__", "").endswith(".py")
    return acc._finder is not None and acc._finder.find_spec(m) is not None
compiled = [m for m in acc.CANDIDATES if _compiled(m)]
print(json.dumps({"cpu_s": cpu, "compiled": sorted(compiled)}))
"""


def _run(cap: Path, keys: Path, pure: bool, inner: int, cpu: int | None = None
         ) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PCAPTOOLS_PURE", None)
    if pure:
        env["PCAPTOOLS_PURE"] = "1"
    pin = [] if cpu is None else ["taskset", "-c", str(cpu)]
    out = subprocess.run([*pin, sys.executable, "-c", CHILD, str(cap), str(keys), str(inner)],
                         env=env,
                         capture_output=True, text=True, check=True, timeout=1800).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def _configured_run(cap: Path, keys: Path, manifest: dict[str, Any], name: str,
                    subset: list[str] | None, inner: int, cpu: int | None) -> dict[str, Any]:
    """One child's loads with the build narrowed to ``subset`` (the manifest rewritten with
    only those sources; ``None``: pure Python), checked to have run exactly that subset."""
    if subset is not None:
        sub = dict(manifest, sources={m: manifest["sources"][m] for m in subset})
        MANIFEST.write_text(json.dumps(sub, indent=1) + "\n", encoding="utf-8")
    res = _run(cap, keys, pure=subset is None, inner=inner, cpu=cpu)
    if subset is not None and res["compiled"] != sorted(subset):
        raise SystemExit(f"{name}: compiled {res['compiled']}, expected {subset}")
    return res


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


def _cimports(module: str) -> tuple[str, ...]:
    """The modules whose extension types ``module``'s ``.pxd`` cimports (pcaptools/_accel.py,
    read on its own: this process does not import pcaptools)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_pcaptools_accel",
                                                  ROOT / "pcaptools" / "_accel.py")
    assert spec is not None and spec.loader is not None
    accel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(accel)
    return tuple(accel.cimports(module))


def in_core(module: str) -> bool:
    return group_of(module) in CORE or module.split(".", 1)[1] in CORE


def measure(cap: Path, keys: Path, repeats: int, inner: int, log: Any = print,
            save: Any = None, by: str = "module", cpu: int | None = None) -> dict[str, Any]:
    original = MANIFEST.read_text(encoding="utf-8")
    manifest = json.loads(original)
    built = sorted(manifest["sources"])
    units = {m: (group_of(m) if by == "group" else m) for m in built}
    core = [m for m in built if in_core(m)]
    configs: list[tuple[str, list[str] | None]] = [("all", built), ("none", None),
                                                    ("core", core)]
    for u in sorted(set(units.values())):
        members = [x for x in built if units[x] == u]
        if all(x in core for x in members):
            configs.append((f"-{u}", [x for x in core if units[x] != u]))
        else:
            # (with the modules their .pxd cimports: the loader runs them only together)
            added = members + [d for x in members for d in _cimports(x) if d in built]
            configs.append((f"+{u}", core + sorted({x for x in added if x not in core})))
    times: dict[str, list[float]] = {name: [] for name, _ in configs}
    load_avg = [round(os.getloadavg()[0], 2)]
    try:
        for r in range(repeats):
            for name, subset in configs:
                res = _configured_run(cap, keys, manifest, name, subset, inner, cpu)
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
        members = [m for m in built if units[m] == u]
        inside = f"-{u}" in med
        name = f"-{u}" if inside else f"+{u}"
        saves = (med[name] - med["core"]) if inside else (med["core"] - med[name])
        cs = [compile_s[m] for m in members if m in compile_s]
        rows.append({"module": u, "modules": members, "in_core": inside,
                     "saves_s": round(saves, 3),
                     "saves_share": round(saves / med["core"], 4),
                     "runs_s": [round(x, 3) for x in times[name]],
                     "compile_s": round(sum(cs), 1) if len(cs) == len(members) else None,
                     "keep": saves >= KEEP_SHARE * med["core"]})
    rows.sort(key=lambda r: -r["saves_s"])
    return {"capture": str(cap), "file_size": cap.stat().st_size, "repeats": repeats,
            "inner": inner,
            "date": time.strftime("%Y-%m-%d"), "load_average": load_avg,
            "all_s": round(med["all"], 3), "none_s": round(med["none"], 3),
            "core_s": round(med["core"], 3), "core_runs": [round(x, 3) for x in times["core"]],
            "all_runs": [round(x, 3) for x in times["all"]],
            "none_runs": [round(x, 3) for x in times["none"]],
            "spread_all": spread["all"], "jobs": manifest.get("jobs"), "by": by,
            "rule": RULE, "modules": rows}


def set_members(name: str, built: list[str]) -> list[str] | None:
    """The modules of a named set (``--sets``): ``all``, ``none`` (pure Python, ``None``),
    ``core``, or ``core+GROUP+GROUP...`` with group names of ``group_of``."""
    if name == "none":
        return None
    if name == "all":
        return list(built)
    first, *more = name.split("+")
    if first != "core":
        raise SystemExit(f"--sets: {name!r} is not all, none, core or core+GROUP...")
    groups = {group_of(m) for m in built}
    unknown = [g for g in more if g not in groups]
    if unknown:
        raise SystemExit(f"--sets: unknown group(s) {unknown}; groups: {sorted(groups)}")
    return [m for m in built if in_core(m) or group_of(m) in more]


def _instructions(cap: Path) -> float:
    """G instructions of ``load(cap, keylog=cap.keys)`` with the build as the manifest now
    says (``benchmarks/instructions.sh``: exact from run to run)."""
    out = subprocess.run(["bash", str(HERE / "instructions.sh"), str(ROOT), str(cap)],
                         env=dict(os.environ, PYTHON=sys.executable), capture_output=True,
                         text=True, check=True, timeout=3600).stdout
    return float(out.split()[0])


def measure_sets(cap: Path, keys: Path, names: list[str], repeats: int, inner: int,
                 log: Any = print, cpu: int | None = None,
                 instructions: bool = False) -> dict[str, Any]:
    """Whole sets of compiled modules against each other, round-robin (``--sets``): the check
    that the set the per-unit rule chose is faster than its neighbours as a whole. With
    ``instructions``, each set's load is also counted in instructions (``_instructions``),
    once: the count does not vary from run to run, and it resolves differences that the CPU
    time's spread on a shared machine hides."""
    if instructions and keys.resolve() != cap.resolve().with_suffix(".keys"):
        raise SystemExit("--instructions counts load(CAPTURE, keylog=CAPTURE.keys): "
                         f"KEYS must be {cap.with_suffix('.keys')}")
    counts: dict[str, float] = {}
    original = MANIFEST.read_text(encoding="utf-8")
    manifest = json.loads(original)
    built = sorted(manifest["sources"])
    subsets = {n: set_members(n, built) for n in names}
    times: dict[str, list[float]] = {n: [] for n in names}
    load_avg = [round(os.getloadavg()[0], 2)]
    try:
        for r in range(repeats):
            for name in names:
                subset = subsets[name]
                res = _configured_run(cap, keys, manifest, name, subset, inner, cpu)
                times[name].append(min(res["cpu_s"]))
                if instructions and name not in counts:
                    counts[name] = _instructions(cap)  # (the manifest still narrowed)
                log(f"module_pay: {name}: {min(res['cpu_s']):.3f}"
                    + (f", {counts[name]:.4f} G instructions" if name in counts else "")
                    + f" (load {os.getloadavg()[0]:.2f})")
            log(f"module_pay: repeat {r + 1}/{repeats} done")
    finally:
        MANIFEST.write_text(original, encoding="utf-8")
    load_avg.append(round(os.getloadavg()[0], 2))
    return {"capture": str(cap), "file_size": cap.stat().st_size, "repeats": repeats,
            "inner": inner, "date": time.strftime("%Y-%m-%d"), "load_average": load_avg,
            "sets": [{"name": n, "modules": len(built) if subsets[n] is None and n == "all"
                      else len(subsets[n] or []),
                      "median_s": round(statistics.median(times[n]), 3),
                      "runs_s": [round(x, 3) for x in times[n]],
                      "g_instructions": counts.get(n)} for n in names]}


def table(res: dict[str, Any]) -> str:
    lines = ["| module | in the core | CPU s saved by compiling it | share of load() | "
             "C compile s | kept |", "|---|---|---:|---:|---:|---|"]
    for r in res["modules"]:
        cs = "-" if r["compile_s"] is None else f"{r['compile_s']:.0f}"
        lines.append(f"| `{r['module']}` | {'yes' if r['in_core'] else 'no'} "
                     f"| {r['saves_s']:+.3f} | {100 * r['saves_share']:+.1f} % "
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
                    help="weigh one module at a time, or one group (group_of)")
    ap.add_argument("--sets", help="compare whole sets instead of weighing units: a comma "
                    "list of all, none, core, core+GROUP+... (see set_members)")
    ap.add_argument("--cpu", type=int, help="pin the measured processes to this CPU (taskset)")
    ap.add_argument("--instructions", action="store_true",
                    help="with --sets: also count each set's load() in instructions "
                    "(instructions.sh; needs valgrind, KEYS = CAPTURE with .keys)")
    ap.add_argument("--out", type=Path, help="merge the result into this JSON file "
                    "(key module_pay), e.g. benchmarks/results.json")
    args = ap.parse_args(argv)
    if not MANIFEST.is_file():
        raise SystemExit(f"{MANIFEST} missing: run scripts/build_accel.py first")
    partial = Path(str(args.out or "module_pay") + ".partial.json")

    def save(state: dict[str, Any]) -> None:
        partial.write_text(json.dumps(state) + "\n")

    if args.sets:
        res = measure_sets(args.capture, args.keys, args.sets.split(","), args.repeats,
                           args.inner, cpu=args.cpu, instructions=args.instructions)
        for row in res["sets"]:
            g = row["g_instructions"]
            print(f"{row['name']}: {row['modules']} modules compiled, median {row['median_s']:.3f}"
                  f" s (runs {', '.join(f'{x:.3f}' for x in row['runs_s'])})"
                  + (f", {g:.4f} G instructions in load()" if g is not None else ""))
        if args.out:
            data = json.loads(args.out.read_text()) if args.out.is_file() else {}
            data["module_sets"] = res
            args.out.write_text(json.dumps(data, indent=1) + "\n")
        return 0
    res = measure(args.capture, args.keys, args.repeats, args.inner, save=save, by=args.by,
                  cpu=args.cpu)
    partial.unlink(missing_ok=True)
    print(f"all compiled {res['all_s']:.3f} s, the core {res['core_s']:.3f} s, none "
          f"{res['none_s']:.3f} s (CPU s in load(), medians of {args.repeats})")
    print(table(res))
    print("rule:", RULE)
    if args.out:
        data = json.loads(args.out.read_text()) if args.out.is_file() else {}
        data["module_pay"] = res
        args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
