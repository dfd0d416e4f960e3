"""How long ``scripts/setup.sh`` takes from a fresh virtualenv, for two revisions side by side
(issue #20: the compiled build "must not make setup slower than today").

    python benchmarks/setup_time.py [--old REV] [--new REV|worktree] [--runs 3] [--test]
                                    [--pure] [--out benchmarks/results.json]

Each revision is exported into its own temporary folder (``git archive``; ``worktree`` copies
the tracked files as they are on disk, uncommitted edits included). A run deletes that folder's
``.venv`` and ``pcaptools/_compiled`` and times ``scripts/setup.sh`` (``--test``: with the test
dependencies) in a child: wall seconds, and the CPU seconds (user + system) of the child and
everything it started. Runs alternate old, new, old, new... so that a change of machine load
hits both alike; the medians are printed with every run. ``--pure`` adds both revisions with
``PCAPTOOLS_PURE=1`` (pip only, no compiled build): what setup costs without the build at all.

What it does not measure: apt (the system packages are assumed installed, as on a machine that
ran setup before) and downloads from the package index beyond what the machine's pip
configuration serves (here: local wheel folders, so pip's own CPU dominates; on a slow network
the new setup's overlap of the build with pip hides more of the build). The bytecode that the
new setup no longer writes at install time is written by the first import instead; setup's
own import of pcaptools writes it for what ``pcap-report`` runs, which the time includes.
``--out`` stores the runs and medians in a JSON file under ``setup`` (``setup_test`` with
``--test``), with the date and the revisions' commits; ``benchmarks/run.py --sections readme``
puts them in the goals table of ``benchmarks/README.md``. Exit status 0, or 1 when a setup failed (its output is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def export(rev: str, dest: Path) -> None:
    """the tracked files of ``rev`` (``worktree``: as on disk now) into ``dest``"""
    dest.mkdir(parents=True)
    if rev == "worktree":
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                               capture_output=True).stdout.split(b"\0")
        for name in filter(None, files):
            src = ROOT / os.fsdecode(name)
            if src.is_file():
                (dest / src.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / src.relative_to(ROOT))
        return
    with tempfile.TemporaryFile() as tar:
        subprocess.run(["git", "archive", "--format=tar", rev], cwd=ROOT, check=True, stdout=tar)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as t:
            t.extractall(dest, filter="data")


def one_setup(tree: Path, test: bool, pure: bool) -> tuple[float, float]:
    """wall and CPU seconds of ``scripts/setup.sh`` in ``tree`` from a fresh virtualenv"""
    shutil.rmtree(tree / ".venv", ignore_errors=True)
    shutil.rmtree(tree / "pcaptools" / "_compiled", ignore_errors=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PCAPTOOLS_PURE", "VIRTUAL_ENV")}
    if pure:
        env["PCAPTOOLS_PURE"] = "1"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(["scripts/setup.sh", *(["--test"] if test else [])], cwd=tree, env=env,
                          capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout + proc.stderr)
        raise SystemExit(f"setup_time: scripts/setup.sh failed in {tree} ({proc.returncode})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", default="HEAD", help="the revision to compare against (HEAD)")
    ap.add_argument("--new", default="worktree", help="a revision, or worktree (the default)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each configuration (3)")
    ap.add_argument("--test", action="store_true", help="scripts/setup.sh --test")
    ap.add_argument("--pure", action="store_true",
                    help="also both revisions with PCAPTOOLS_PURE=1 (no compiled build)")
    ap.add_argument("--out", type=Path, help="store the results in this JSON file "
                    "(benchmarks/results.json)")
    args = ap.parse_args(argv)
    args.old, args.new = (_short(rev) for rev in (args.old, args.new))
    configs = [(f"old ({args.old})", args.old, False), (f"new ({args.new})", args.new, False)]
    if args.pure:
        configs += [(f"old ({args.old}), PCAPTOOLS_PURE=1", args.old, True),
                    (f"new ({args.new}), PCAPTOOLS_PURE=1", args.new, True)]
    with tempfile.TemporaryDirectory(prefix="pcaptools-setup-time-") as tmp:
        trees: dict[str, Path] = {}
        for _label, rev, _pure in configs:
            if rev not in trees:
                trees[rev] = Path(tmp) / f"tree{len(trees)}"
                export(rev, trees[rev])
        times: dict[str, list[tuple[float, float]]] = {label: [] for label, _r, _p in configs}
        load0 = os.getloadavg()[0]
        for run in range(args.runs):
            for label, rev, pure in configs:
                wall, cpu = one_setup(trees[rev], args.test, pure)
                times[label].append((wall, cpu))
                print(f"run {run + 1}: {label}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
        load1 = os.getloadavg()[0]
    commits = _commits(args.old, args.new)
    lines = [f"`scripts/setup.sh{' --test' if args.test else ''}` from a fresh .venv, "
             f"{args.runs} alternated runs, {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d')}; 1-minute load average {load0:.2f} before, "
             f"{load1:.2f} after ({commits}):"]
    rows: list[dict[str, object]] = []
    for (label, _rev, pure), runs in zip(configs, times.values(), strict=True):
        wall = statistics.median(w for w, _c in runs)
        cpu = statistics.median(c for _w, c in runs)
        lines.append(f"- {label}: median {wall:.1f} s wall "
                     f"(runs {', '.join(f'{w:.1f}' for w, _c in runs)}), {cpu:.1f} s CPU")
        rows.append({
            "label": label, "pure": pure, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "runs_wall_s": [round(w, 1) for w, _c in runs]})
    print("\n" + "\n".join(lines))
    result = {"date": time.strftime("%Y-%m-%d"), "commits": commits, "cores": os.cpu_count(),
              "load_average": [round(load0, 2), round(load1, 2)], "runs": args.runs,
              "configs": rows}
    if args.out:
        data = json.loads(args.out.read_text()) if args.out.is_file() else {}
        data["setup_test" if args.test else "setup"] = result
        args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


def _short(rev: str) -> str:
    """a revision as its short commit (``worktree`` stays: HEAD with the uncommitted edits)"""
    if rev == "worktree":
        return rev
    return subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()


def _commits(*revs: str) -> str:
    """what the revisions were (``worktree``: HEAD's commit with the uncommitted edits)"""
    return "; ".join(f"worktree = {_short('HEAD')} with the uncommitted edits"
                     if rev == "worktree" else rev for rev in revs)


if __name__ == "__main__":
    sys.exit(main())
