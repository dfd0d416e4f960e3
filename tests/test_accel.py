"""The optional compiled modules (pcaptools/_accel.py, scripts/build_accel.py).

A compiled module is used only while its source has the hash recorded at build time; the tables
of real captures are identical with and without the build.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools import _accel

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
BUILT = _accel.MANIFEST.is_file()


def _fresh_finder(tmp_path: Path, sources: dict[str, str]) -> _accel._CompiledFinder:
    return _accel._CompiledFinder({"sources": sources})


def test_module_list_names_real_source_files() -> None:
    for m in _accel.MODULES:
        assert _accel.source_path(m).is_file(), m
        assert _accel.compiled_path(m).parent == _accel.BUILD_DIR


def test_finder_ignores_modules_not_in_the_build(tmp_path: Path) -> None:
    f = _fresh_finder(tmp_path, {})
    assert f.find_spec("pcaptools.tcp.analysis") is None
    assert f.find_spec("json") is None


@pytest.mark.skipif(not BUILT, reason="no compiled build (scripts/build_accel.py)")
def test_finder_refuses_a_build_whose_source_changed(tmp_path: Path) -> None:
    m = "pcaptools.tcp.analysis"
    stale = _fresh_finder(tmp_path, {m: "0" * 64})
    assert stale.find_spec(m) is None
    assert stale.status[m] == "python: source changed since the build"
    good = _fresh_finder(tmp_path, {d: _accel.source_hash(d) for d in (m, *_accel.cimports(m))})
    spec = good.find_spec(m)
    assert spec is not None and spec.origin == str(_accel.compiled_path(m))
    assert good.status[m] == "compiled"


def test_finder_without_a_file_for_this_interpreter(tmp_path: Path, monkeypatch) -> None:
    m = "pcaptools.tcp.analysis"
    monkeypatch.setattr(_accel, "BUILD_DIR", tmp_path)
    f = _fresh_finder(tmp_path, {m: _accel.source_hash(m)})
    assert f.find_spec(m) is None
    assert f.status[m] == "python: no build for this interpreter"


def test_a_module_is_hashed_with_the_modules_it_cimports() -> None:
    m, dep = "pcaptools.protocols.websocket.observer", "pcaptools.protocols.websocket.state"
    assert _accel.cimports(m) == (dep, "pcaptools.tcp.chunk")
    assert _accel.cimports(dep) == ()
    assert _accel.cimports("pcaptools.tcp.connstate") == ()  # (no cimport: hash unchanged)
    assert _accel.cimports("pcaptools.tcp.analysis") == ("pcaptools.net.packet",)
    alone = hashlib.sha256(_accel.source_path(m).read_bytes())
    alone.update(b"\0pxd\0" + _accel.source_path(m).with_suffix(".pxd").read_bytes())
    assert _accel.source_hash(m) != alone.hexdigest()


def test_cimports_are_followed_through_the_modules_cimported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A type a module cimports may hold or take another module's type: the module is built
    against that one's .pxd too, so it is hashed and loaded with it (cycles end)."""
    direct = {"a": {"b"}, "b": {"c", "a"}, "c": set(), "d": set()}
    monkeypatch.setattr(_accel, "_direct_cimports", lambda m: direct[m])
    assert _accel.cimports("a") == ("b", "c")
    assert _accel.cimports("b") == ("a", "c")
    assert _accel.cimports("d") == ()


def test_finder_loads_a_module_only_with_the_modules_it_cimports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m, dep = "pcaptools.tcp.analysis", "pcaptools.net.packet"
    assert _accel.cimports(m) == (dep,)
    monkeypatch.setattr(_accel, "BUILD_DIR", tmp_path)
    for x in (m, dep):
        _accel.compiled_path(x).write_bytes(b"")  # (found, not loaded: find_spec only)
    alone = _fresh_finder(tmp_path, {m: _accel.source_hash(m)})
    assert alone.find_spec(m) is None
    assert alone.status[m] == f"python: {dep} not compiled with it"
    both = _fresh_finder(tmp_path, {x: _accel.source_hash(x) for x in (m, dep)})
    assert both.find_spec(m) is not None and both.status[m] == "compiled"
    _accel.compiled_path(dep).unlink()
    assert both.find_spec(m) is None


@pytest.mark.parametrize("manifest", [[], {}, {"sources": ["a"]}, "x"])
def test_a_garbled_manifest_is_refused(manifest: object) -> None:
    with pytest.raises(ValueError):
        _accel._CompiledFinder(manifest)  # type: ignore[arg-type]


def test_install_with_a_garbled_manifest_stays_pure(tmp_path: Path, monkeypatch) -> None:
    bad = tmp_path / "manifest.json"
    bad.write_bytes(b"\xff{not json")
    monkeypatch.setattr(_accel, "MANIFEST", bad)
    monkeypatch.setattr(_accel, "_finder", None)
    monkeypatch.setattr(_accel, "_why_not", "not installed")
    monkeypatch.delenv(_accel.PURE_ENV, raising=False)
    before = list(sys.meta_path)
    _accel.install()
    assert sys.meta_path == before
    assert _accel._why_not.startswith("python: unreadable manifest.json")


def test_a_compiled_file_that_does_not_load_falls_back_to_the_source(
        tmp_path: Path, monkeypatch) -> None:
    """A truncated .so (a full disk during the build) must not make pcaptools unimportable."""
    m = "pcaptools.tcp.connstate"  # (cimports nothing: found with no other module built)
    assert _accel.cimports(m) == ()
    monkeypatch.setattr(_accel, "BUILD_DIR", tmp_path)
    _accel.compiled_path(m).write_bytes(b"\x7fELF truncated")
    f = _fresh_finder(tmp_path, {m: _accel.source_hash(m)})
    spec = f.find_spec(m)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.__file__ == str(_accel.source_path(m))
    assert mod.ConnHistory.__name__ == "ConnHistory"
    assert f.status[m].startswith("python: the compiled file did not load")


def _status_in_child(env: dict[str, str]) -> dict[str, str]:
    code = ("import json, pcaptools, pcaptools._accel as a; "
            "print(json.dumps(a.status()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env}, cwd=ROOT, check=True)
    return json.loads(out.stdout)


def test_pure_env_imports_python_modules() -> None:
    st = _status_in_child({_accel.PURE_ENV: "1"})
    assert set(st) == set(_accel.MODULES)
    assert all(v == f"python: {_accel.PURE_ENV} is set" for v in st.values()), st


@pytest.mark.skipif(not os.environ.get("PCAPTOOLS_REQUIRE_ACCEL"),
                    reason="PCAPTOOLS_REQUIRE_ACCEL not set (CI sets it)")
def test_ci_runs_the_compiled_build() -> None:
    """In CI the suite must exercise the compiled modules, not silently fall back."""
    assert _accel.summary().startswith("compiled"), _accel.status()


_CASES = [("h2-sse-chat.pcapng", "h2-sse-chat.keys"), ("ws-tls.pcapng", "ws-tls.keys"),
          ("http1-lossy.pcap", None), ("demo.pcapng", None)]


@pytest.mark.skipif(not BUILT, reason="no compiled build (scripts/build_accel.py)")
def test_compiled_and_python_give_identical_tables(tmp_path: Path) -> None:
    """Every table of four real captures, compiled (this process) vs pure Python (a child)."""
    assert _accel.summary().startswith("compiled"), _accel.status()
    cases = [(str(CAPTURES / c), str(CAPTURES / k) if k else None) for c, k in _CASES]
    for path, keys in cases:
        assert Path(path).is_file(), path
        if keys:
            assert Path(keys).is_file(), keys
    out = tmp_path / "pure.pkl"
    code = ("import sys, pickle, pcaptools, pcaptools._accel as a\n"
            "assert not any(v == 'compiled' for v in a.status().values())\n"
            f"cases = {cases!r}\n"
            "res = [pcaptools.load(p, keylog=k).tables for p, k in cases]\n"
            f"open({str(out)!r}, 'wb').write(pickle.dumps(res))\n")
    subprocess.run([sys.executable, "-c", code], env={**os.environ, _accel.PURE_ENV: "1"},
                   cwd=ROOT, check=True)
    pure = pickle.loads(out.read_bytes())
    checked = 0
    for (path, keys), want in zip(cases, pure, strict=True):
        got = pcaptools.load(path, keylog=keys).tables
        assert set(got) == set(want)
        for name, df in want.items():
            pd.testing.assert_frame_equal(got[name], df, check_exact=True, obj=f"{path}:{name}")
            checked += len(df)
    assert checked > 1_000  # rows compared, over all tables


@pytest.mark.skipif(not BUILT, reason="no compiled build (scripts/build_accel.py)")
def test_compiled_and_python_agree_on_every_shipped_and_corpus_capture(tmp_path: Path) -> None:
    """Every table of every shipped capture and every corpus capture (when it is there), each
    with its key log: pure Python (a child) against the compiled build (a child), compared
    exactly (values, dtypes, categories) by scripts/snapshot.py. The compiled readers and
    decoder read header fields as C integers where pure Python unpacks them with struct, so
    this is the proof that both give the same tables."""
    script = str(ROOT / "scripts" / "snapshot.py")
    pure = subprocess.run(
        [sys.executable, script, "write", str(tmp_path), "--options", "default"],
        env={**os.environ, _accel.PURE_ENV: "1"}, cwd=ROOT, capture_output=True, text=True)
    assert pure.returncode == 0, pure.stdout + pure.stderr
    modules = len(_accel.MODULES)
    assert f"0 of {modules} per-frame modules compiled" in pure.stdout, pure.stdout
    written = int(pure.stdout.split(" snapshots written")[0].split()[-1])
    shipped = sum(1 for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
    assert written >= shipped >= 40
    env = {k: v for k, v in os.environ.items() if k != _accel.PURE_ENV}
    got = subprocess.run([sys.executable, script, "compare", str(tmp_path), "--options", "default"],
                         env=env, cwd=ROOT, capture_output=True, text=True)
    assert got.returncode == 0, got.stdout + got.stderr
    assert f"{written} snapshots compared, 0 differences" in got.stdout, got.stdout
    assert f"compiled: {modules} of {modules} per-frame modules" in got.stdout, got.stdout
