#!/usr/bin/env python3
"""Compile pcaptools' per-frame modules with Cython into pcaptools/_compiled/ (optional).

    python scripts/build_accel.py            # build (needs Cython >= 3, a C compiler, Python.h)
    python scripts/build_accel.py --if-stale # only when a source changed (scripts/setup.sh)
    python scripts/build_accel.py --clean    # remove the build: pcaptools runs pure Python

The modules (``pcaptools._accel.MODULES``) are compiled from their unchanged ``.py`` source. A
``.pxd`` beside a module (``net/decode.pxd``, ``tcp/analysis.pxd``, ``tcp/tracker.pxd``,
``tables/packets.pxd``) adds Cython type declarations (extension types, C integer locals) without
changing the ``.py``. The SHA-256 of each ``.py`` and its ``.pxd`` goes into
``_compiled/manifest.json``, and pcaptools loads a compiled module only while its sources still
have that hash (see ``pcaptools/_accel.py``). Results are identical either way
(tests/test_accel.py); the speed-up is measured in benchmarks/README.md. Exit status 0 on
success, 1 when something needed is missing.
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


def build(jobs: int) -> int:
    accel = _accel_module()
    try:
        import Cython
        from Cython.Build import cythonize
        from setuptools import Distribution, Extension
    except ImportError as e:
        print(f"build_accel: {e.name} is not installed (pip install 'cython>=3'): "
              "pcaptools stays pure Python", file=sys.stderr)
        return 1
    if int(Cython.__version__.split(".")[0]) < 3:
        print(f"build_accel: Cython {Cython.__version__} is too old (need 3.x)", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    os.chdir(ROOT)
    hashes = {m: accel.source_hash(m) for m in accel.MODULES}
    with tempfile.TemporaryDirectory(prefix="pcaptools-accel-") as tmp:
        exts = [Extension(m, [str(accel.source_path(m).relative_to(ROOT))]) for m in accel.MODULES]
        exts = cythonize(exts, build_dir=str(Path(tmp) / "c"), nthreads=jobs, quiet=True,
                         compiler_directives={"language_level": 3, "binding": True,
                                              "annotation_typing": False,
                                              "embedsignature": True})
        dist = Distribution({"name": "pcaptools-accel", "ext_modules": exts})
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
        for m in accel.MODULES:
            built = Path(cmd.get_ext_fullpath(m))
            shutil.copy2(built, staging / accel.compiled_path(m).name)
        # the sources must not have changed while they were compiling
        if any(accel.source_hash(m) != h for m, h in hashes.items()):
            print("build_accel: a source file changed during the build; run it again",
                  file=sys.stderr)
            return 1
        manifest = json.dumps({
            "cython": Cython.__version__, "python": sys.version.split()[0],
            "extension_suffix": accel.compiled_path(accel.MODULES[0]).name[
                len(accel.MODULES[0]):],
            "sources": hashes}, indent=1) + "\n"
        # the manifest goes in last: an interrupted copy (a full disk) leaves no manifest, so
        # pcaptools ignores the half-copied build
        shutil.rmtree(accel.BUILD_DIR, ignore_errors=True)
        shutil.copytree(staging, accel.BUILD_DIR)
        accel.MANIFEST.write_text(manifest, encoding="utf-8")
    print(f"build_accel: {len(accel.MODULES)} modules compiled into "
          f"{accel.BUILD_DIR.relative_to(ROOT)} in {time.monotonic() - t0:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clean", action="store_true", help="remove the compiled modules")
    ap.add_argument("--if-stale", action="store_true",
                    help="do nothing when the build matches every source and this interpreter")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                    help="parallel C compiles (default: all cores)")
    args = ap.parse_args(argv)
    if args.clean:
        shutil.rmtree(_accel_module().BUILD_DIR, ignore_errors=True)
        print("build_accel: removed; pcaptools runs pure Python")
        return 0
    if args.if_stale and _up_to_date():
        print("build_accel: the compiled modules match their sources; nothing to do")
        return 0
    return build(max(1, args.jobs))


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
