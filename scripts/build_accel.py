#!/usr/bin/env python3
"""Compile pcaptools' per-frame modules with Cython into pcaptools/_compiled/ (optional).

    python scripts/build_accel.py            # build (needs Cython >= 3, a C compiler, Python.h)
    python scripts/build_accel.py --if-stale # only when a source changed (scripts/setup.sh)
    python scripts/build_accel.py --clean    # remove the build: pcaptools runs pure Python
    python scripts/build_accel.py --candidates  # also the modules that do not pay (module_pay.py)

The modules (``pcaptools._accel.MODULES``, the pcap and pcapng readers, the TCP core, the
WebSocket observer, the TLS record loop, the SSE parser and the realtime_events, TLS and
WebSocket table builders: the ones that pay, see its comment) are
compiled from their unchanged ``.py`` source. A ``.pxd`` beside a module (``io/frame.pxd``,
``io/pcap.pxd``, ``io/pcapng.pxd``, ``net/packet.pxd``, ``net/decode.pxd``,
``tcp/analysis.pxd``, ``tcp/connstate.pxd``, ``tcp/gaps.pxd``, ``tcp/losses.pxd``,
``tcp/tracker.pxd``, ``frameloop.pxd``, ``tables/packets.pxd``, ``tables/realtime_tables.pxd``,
``protocols/websocket/{state,observer,inflate}.pxd``, ``protocols/tls/{records,observer}.pxd``)
adds Cython type declarations (extension types, C
integer locals) without changing the ``.py``; one may cimport another's extension types, and
then both must be built together (checked here and by the loader). The
SHA-256 of each ``.py`` and its ``.pxd`` (with those of the modules it cimports) goes into
``_compiled/manifest.json``, and pcaptools loads a compiled module only while its sources still
have that hash (see ``pcaptools/_accel.py``). Results are identical either way
(tests/test_accel.py); the speed-up is measured in benchmarks/README.md. Exit status 0 on success,
1 when something needed is missing.

What it prints: one line before it starts (what, on how many cores, roughly how long, how to
skip it), one line per module as its C compile finishes, and the total time. The C that
Cython generates is compiled with ``-w`` (its warnings are about generated code, not ours:
none is actionable), ``-g0`` (no debug information: it roughly halves gcc's time and the
modules run the same) and ``-O1`` (the interpreter's build asks for ``-O3``: 16 modules took
69 s of CPU with it, 57 s with ``-O2``; 18 modules two thirds of ``-O2``'s time with ``-O1``,
for 1-2 % more instructions in ``load()``, 2026-12-06: see ``C_FLAGS``);
the compiles run in parallel (``--jobs``, default: the cores this
process may use), largest first so that no core is left with a big module at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _accel_module():
    """pcaptools/_accel.py on its own, without importing pcaptools (and pandas)."""
    spec = importlib.util.spec_from_file_location("_pcaptools_accel",
                                                  ROOT / "pcaptools" / "_accel.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(jobs: int, candidates: bool = False) -> int:
    accel = _accel_module()
    modules = accel.CANDIDATES if candidates else accel.MODULES
    try:
        # (build_ext imported now, not when the compiles start: setup.sh runs this build
        # while pip installs the rest into the same virtualenv)
        import Cython
        from Cython.Build import cythonize
        from setuptools import Distribution, Extension
        from setuptools.command import build_ext  # noqa: F401
    except ImportError as e:
        print(f"build_accel: {e.name} is not installed (pip install 'cython>=3'): "
              "pcaptools stays pure Python", file=sys.stderr)
        return 1
    if int(Cython.__version__.split(".")[0]) < 3:
        print(f"build_accel: Cython {Cython.__version__} is too old (need 3.x)", file=sys.stderr)
        return 1
    unbuilt = sorted({d for m in modules for d in accel.cimports(m)} - set(modules))
    if unbuilt:  # (a .pxd cimports the extension types of a module left out of the list)
        print(f"build_accel: {', '.join(unbuilt)} must be compiled too (cimported)",
              file=sys.stderr)
        return 1
    t0 = time.monotonic()
    os.chdir(ROOT)
    n = len(modules)
    _say(f"compiling {n} modules with Cython {Cython.__version__} and the C compiler, "
         f"{jobs} at a time: about {_estimate(jobs, n)} on this machine's {jobs} core"
         f"{'' if jobs == 1 else 's'} when idle (PCAPTOOLS_PURE=1 scripts/setup.sh skips "
         "this; pcaptools then runs as pure Python, same results)")
    hashes = {m: accel.source_hash(m) for m in modules}
    with tempfile.TemporaryDirectory(prefix="pcaptools-accel-") as tmp:
        exts = [Extension(m, [str(accel.source_path(m).relative_to(ROOT))],
                          extra_compile_args=list(C_FLAGS)) for m in modules]
        exts = cythonize(exts, build_dir=str(Path(tmp) / "c"), nthreads=jobs, quiet=True,
                         include_path=[str(ROOT)],  # (for cimports between our .pxd files)
                         compiler_directives={"language_level": 3, "binding": True,
                                              "annotation_typing": False,
                                              "embedsignature": True})
        _say(f"C generated in {time.monotonic() - t0:.0f} s; compiling it")
        # largest C file first: with N cores, the last module to start is a small one
        exts.sort(key=lambda e: -os.path.getsize(e.sources[0]))
        dist = Distribution({"name": "pcaptools-accel", "ext_modules": exts})
        dist.cmdclass["build_ext"] = _progress_build_ext(n, t0)
        cmd = dist.get_command_obj("build_ext")
        cmd.build_lib = str(Path(tmp) / "lib")
        cmd.build_temp = str(Path(tmp) / "obj")
        cmd.parallel = jobs
        cmd.ensure_finalized()
        try:
            cmd.run()
        except Exception as e:  # compiler missing, Python.h missing: stay pure Python
            print(f"build_accel: the C build failed ({e}): pcaptools stays pure Python",
                  file=sys.stderr)
            return 1
        staging = Path(tmp) / "out"
        staging.mkdir()
        for m in modules:
            built = Path(cmd.get_ext_fullpath(m))
            shutil.copy2(built, staging / accel.compiled_path(m).name)
        # the sources must not have changed while they were compiling
        if any(accel.source_hash(m) != h for m, h in hashes.items()):
            print("build_accel: a source file changed during the build; run it again",
                  file=sys.stderr)
            return 1
        manifest = json.dumps({
            "cython": Cython.__version__, "python": sys.version.split()[0],
            "extension_suffix": accel.compiled_path(modules[0]).name[
                len(modules[0]):],
            "sources": hashes, "compile_seconds": dict(sorted(COMPILE_SECONDS.items())),
            "jobs": jobs}, indent=1) + "\n"
        # the manifest goes in last: an interrupted copy (a full disk) leaves no manifest, so
        # pcaptools ignores the half-copied build
        shutil.rmtree(accel.BUILD_DIR, ignore_errors=True)
        shutil.copytree(staging, accel.BUILD_DIR)
        accel.MANIFEST.write_text(manifest, encoding="utf-8")
    print(f"build_accel: {len(modules)} modules compiled into "
          f"{accel.BUILD_DIR.relative_to(ROOT)} in {time.monotonic() - t0:.0f} s")
    return 0


#: added after the interpreter's own flags (the last -g/-O wins): no warnings from generated
#: C, no debug information (half of gcc's time; the same machine code runs), -O1 rather than
#: the interpreter's -O3. Measured 2026-12-06 on the 18 modules of MODULES then (two builds of
#: each, alternated, on the same busy 2-core machine): 88 s and 94 s of CPU with -O2, 60 s and
#: 63 s with -O1 (-O3 was a fifth slower than -O2 on 16 modules). The code -O1 makes runs 2.4 %
#: more instructions in the TCP-only load() of base.pcap (1.872 against 1.829 G, cachegrind)
#: and 0.8 % more in the full load with the key log (8.258 against 8.190 G): the price of
#: compiling the per-connection records too without making setup slower than before them.
C_FLAGS = ("-w", "-g0", "-O1")

#: CPU seconds (user + system) of the build per module, measured 2026-12-06 (Cython 3.3.1,
#: gcc 12): the 6 modules of the TCP core in 40 s, the 23 of CANDIDATES in 161 s (73 s wall on
#: an idle 2-core machine); the 11 of MODULES with the WebSocket observer in 55 s (the pcap and
#: pcapng readers, added later, about 4 s more each). With -O2 (2026-12-06): the 16 of MODULES
#: (the per-frame records and the frame loop added) in 57 s of CPU, 31 s wall on 2 cores. With
#: -O1 (2026-12-06): the 18 of MODULES (the per-connection records and realtime_events added)
#: in 49 s of CPU, 25 s wall. The estimate printed is this times the module count, spread over
#: the parallel compiles
_CPU_S_PER_MODULE = 2.7


def _estimate(jobs: int, modules: int) -> str:
    s = _CPU_S_PER_MODULE * modules / max(1, min(jobs, modules, 8))
    return f"{s / 60:.0f} min" if s >= 90 else f"{s:.0f} s"


#: wall seconds of each module's C compile in this build (written to the manifest, so the
#: cost of a module can be weighed against what it saves: benchmarks/module_pay.py)
COMPILE_SECONDS: dict[str, float] = {}


def _say(text: str) -> None:
    print(f"build_accel: {text}", flush=True)


def _progress_build_ext(total: int, t0: float) -> type:
    """setuptools' build_ext, printing one line as each module is compiled (from the
    compile threads: the lock keeps the count and the lines whole)."""
    import threading

    from setuptools.command.build_ext import build_ext

    lock = threading.Lock()
    done = [0]

    class ProgressBuildExt(build_ext):  # type: ignore[misc,valid-type]
        def build_extension(self, ext: object) -> None:
            t = time.monotonic()
            super().build_extension(ext)
            took = time.monotonic() - t
            name = str(getattr(ext, "name", ext))
            with lock:
                done[0] += 1
                COMPILE_SECONDS[name] = round(took, 1)
                _say(f"[{done[0]}/{total}] {name} ({took:.0f} s of C compile; "
                     f"{time.monotonic() - t0:.0f} s so far)")

    return ProgressBuildExt


def _cores() -> int:
    """the cores this process may run on (a container's CPU set, not the host's)"""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clean", action="store_true", help="remove the compiled modules")
    ap.add_argument("--if-stale", action="store_true",
                    help="do nothing when the build matches every source and this interpreter")
    ap.add_argument("--candidates", action="store_true",
                    help="build every module of pcaptools._accel.CANDIDATES, not only MODULES "
                    "(for benchmarks/module_pay.py; setup's --if-stale rebuilds MODULES)")
    ap.add_argument("-j", "--jobs", type=int, default=_cores(),
                    help="parallel C compiles (default: the cores this process may use)")
    args = ap.parse_args(argv)
    if args.clean:
        shutil.rmtree(_accel_module().BUILD_DIR, ignore_errors=True)
        print("build_accel: removed; pcaptools runs pure Python")
        return 0
    if args.if_stale and _up_to_date():
        print("build_accel: the compiled modules match their sources; nothing to do")
        return 0
    return build(max(1, args.jobs), args.candidates)


def _up_to_date() -> bool:
    accel = _accel_module()
    try:
        sources = json.loads(accel.MANIFEST.read_text(encoding="utf-8"))["sources"]
    except (OSError, ValueError, KeyError):
        return False
    return set(sources) == set(accel.MODULES) and all(
        accel.compiled_path(m).is_file() and accel.source_hash(m) == h
        for m, h in sources.items())


if __name__ == "__main__":
    sys.exit(main())
