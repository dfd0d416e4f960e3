"""The front door and the pass behind it: ``load()`` is ``load_with(path, LoadOptions(...))``,
LoadOptions mirrors load()'s keyword arguments, and the pipeline's steps give load()'s tables."""

from __future__ import annotations

import dataclasses
import inspect
import ipaddress
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools import _accel, pipeline
from pcaptools.capture import TABLES, Capture, CaptureSummary, load, load_with
from pcaptools.errors import UnsupportedInputError
from pcaptools.frameloop import shard_of
from pcaptools.pipeline import LoadOptions
from pcaptools.result import Capture as ResultCapture

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
H2 = CAPTURES / "h2-sse-chat.pcapng"
H2_KEYS = CAPTURES / "h2-sse-chat.keys"


def test_load_options_are_load_keyword_arguments() -> None:
    params = {n: p.default for n, p in inspect.signature(load).parameters.items() if n != "path"}
    fields = {f.name: f.default for f in dataclasses.fields(LoadOptions)}
    assert fields == params
    assert list(fields) == list(params)  # same order as load()'s signature


def test_every_option_is_documented() -> None:
    # (the source file, not inspect.getsource: pipeline.py is compiled in CI)
    text = _accel.source_path("pcaptools.pipeline").read_text(encoding="utf-8")
    src = text[text.index("class LoadOptions"):]
    for f in dataclasses.fields(LoadOptions):
        after = src.split(f"    {f.name}: ", 1)[1].split("\n", 2)
        assert after[1].lstrip().startswith('"""'), f.name


def test_load_options_are_frozen() -> None:
    o = LoadOptions(packets=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.packets = True  # type: ignore[misc]
    assert dataclasses.replace(o, shard=(1, 2)).shard == (1, 2)
    with pytest.raises(TypeError):
        LoadOptions(frames=False)  # type: ignore[call-arg]


def test_documented_names_still_import() -> None:
    assert pcaptools.Capture is Capture is ResultCapture
    assert pcaptools.CaptureSummary is CaptureSummary
    assert pcaptools.TABLES is TABLES
    assert pcaptools.load is load


def _same(a: Capture, b: Capture) -> None:
    assert list(a.tables) == list(b.tables)
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert dataclasses.asdict(a.summary) == dataclasses.asdict(b.summary)


def test_load_is_load_with_options() -> None:
    a = load(H2, keylog=H2_KEYS, packets=False)
    b = load_with(H2, LoadOptions(keylog=H2_KEYS, packets=False))
    _same(a, b)
    assert a.summary.frames == 225  # (tshark: 225 frames, one TCP connection)
    assert len(a.connections) == 1
    assert len(a.http2_streams) == 7
    assert len(a.sse_events) == 110
    assert len(a.packets) == 0


def test_pipeline_run_returns_the_tables_of_load() -> None:
    res = pipeline.run(H2, LoadOptions(keylog=H2_KEYS))
    assert res.pump is None
    assert res.capture_end == res.summary.last_ts_ns
    assert set(res.tables) == set(TABLES)
    _same(Capture(res.summary, res.tables), load(H2, keylog=H2_KEYS))


def test_shard_keeps_its_connections_only() -> None:
    """One connection: the worker its address pair belongs to follows it, the other has
    nothing of it, and worker 0 has the two frames that are not TCP."""
    whole = load(H2, keylog=H2_KEYS)
    c = whole.connections.iloc[0]
    owner = shard_of(ipaddress.ip_address(c["client_addr"]).packed, int(c["client_port"]),
                     ipaddress.ip_address(c["server_addr"]).packed, int(c["server_port"]), 2)
    assert owner == 1  # (then worker 0 has only what is not TCP)
    own = pipeline.run(H2, LoadOptions(keylog=H2_KEYS, shard=(1, 2)))
    other = pipeline.run(H2, LoadOptions(keylog=H2_KEYS, shard=(0, 2)))
    def rows(t: dict[str, pd.DataFrame]) -> tuple[int, int, int]:
        return len(t["connections"]), len(t["http2_streams"]), len(t["packets"])

    assert rows(whole.tables) == (1, 7, 225)
    assert rows(own.tables) == (1, 7, 223)
    assert rows(other.tables) == (0, 0, 2)
    assert own.summary.extra["tcp_stream_opened"] == [int(c["first_frame"])]
    assert other.summary.extra["tcp_stream_opened"] == []


def test_front_door_checks() -> None:
    with pytest.raises(ValueError, match="one process"):
        load(H2, out="x", workers=2)
    with open(H2, "rb") as fh, pytest.raises(UnsupportedInputError, match="workers=2"):
        load(fh, workers=2)


def test_progress_reaches_the_end() -> None:
    seen: list[tuple[int, int]] = []
    load_with(H2, LoadOptions(progress=lambda done, total: seen.append((done, total)),
                              payloads=False))
    size = H2.stat().st_size
    assert seen[-1] == (size, size)


def test_large_blocks_mapped_during_the_pass_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mmap threshold is fixed at 128 KiB for the pass, at glibc's dynamic maximum after
    it, and never touched when the environment chose one."""
    from pcaptools import _memory

    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(_memory, "_MALLOPT", lambda p, v: calls.append((p, v)) or 1)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    with _memory.large_blocks_mapped() as fixed:
        assert not fixed
    load_with(H2, LoadOptions(packets=False))
    assert not calls
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    monkeypatch.delenv("PCAPTOOLS_KEEP_MALLOC", raising=False)
    with _memory.large_blocks_mapped() as fixed:
        assert fixed and calls == [(_memory.M_MMAP_THRESHOLD, 128 * 1024)]
    assert calls[-1] == (_memory.M_MMAP_THRESHOLD, 32 * 1024 * 1024)
    calls.clear()
    load_with(H2, LoadOptions(packets=False))
    assert calls == [(_memory.M_MMAP_THRESHOLD, 128 * 1024),
                     (_memory.M_MMAP_THRESHOLD, 32 * 1024 * 1024)]


def test_arrow_pool_is_the_system_allocator_during_the_pass_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow's default pool is the system allocator while a capture is read and its tables are
    made (the string columns are built then), the pool it was afterwards (the tables' arrays
    still valid); with passes overlapping (threads), the last one out restores it; an
    ``ARROW_DEFAULT_MEMORY_POOL`` chosen in the environment is left alone."""
    import pyarrow as pa

    from pcaptools import _memory

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("PCAPTOOLS_KEEP_MALLOC", raising=False)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    before = pa.default_memory_pool().backend_name
    seen: list[str] = []
    real_frame = pipeline._assemble

    def spying(*args: object, **kwargs: object) -> object:
        seen.append(pa.default_memory_pool().backend_name)
        return real_frame(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "_assemble", spying)
    cap = load(H2, keylog=H2_KEYS)
    assert seen == ["system"]
    assert pa.default_memory_pool().backend_name == before
    sse = cap.sse_events
    assert len(sse) and sse["data"].str.len().sum() > 0  # (arrays of the system pool, readable)

    with _memory.large_blocks_mapped():
        with _memory.large_blocks_mapped():  # (a second pass begins while the first runs)
            assert pa.default_memory_pool().backend_name == "system"
        assert pa.default_memory_pool().backend_name == "system"  # (the first still runs)
    assert pa.default_memory_pool().backend_name == before

    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", before)
    seen.clear()
    load_with(H2, LoadOptions())
    assert seen == [before]
