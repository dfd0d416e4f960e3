"""benchmarks/layers.py: the Cython names it looks for and its reading of callgrind's output
(the counts themselves need valgrind and minutes: the script's own run, not a test)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from pcaptools import _accel

LAYERS_PY = Path(__file__).resolve().parent.parent / "benchmarks" / "layers.py"


@pytest.fixture(scope="module")
def layers():
    spec = importlib.util.spec_from_file_location("_pcaptools_bench_layers", LAYERS_PY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# lines as callgrind_annotate --inclusive=yes printed them for a build of every candidate
# (2026-12-07, base.pcap; object paths shortened)
ANNOTATED = """\
6,854,611,725 (100.0%)  PROGRAM TOTALS
 4,862,070,071 (70.93%)  ???:__pyx_pw_9pcaptools_8pipeline_22load_capture [/x/pcaptools.pipeline.so]
 4,462,940,034 (65.11%)  ???:__pyx_pw_9pcaptools_9frameloop_3feed_frames [/x/pcaptools.frameloop.so]
 4,462,939,710 (65.11%)  ???:__pyx_f_9pcaptools_9frameloop_feed_frames [/x/pcaptools.frameloop.so]
 3,892,610,146 (56.79%)  ???:__pyx_f_9pcaptools_3tcp_7tracker_10TcpTracker_segment [/x/t.so]
 1,249,384,954 (18.23%)  ???:__pyx_pw_9pcaptools_9protocols_3tls_8observer_11TlsObserver_7feed [/x/o.so]
 1,248,311,218 (18.21%)  ???:__pyx_f_9pcaptools_9protocols_3tls_8observer_11TlsObserver_feed [/x/o.so]
 1,221,209,053 (17.82%)  ???:__pyx_pw_9pcaptools_8pipeline_7_set_up_9emit [/x/pcaptools.pipeline.so]
   314,207,514 ( 4.58%)  ???:__pyx_pw_9pcaptools_9protocols_5http2_8observer_13Http2Observer_3feed [/x/h.so]
   310,223,283 ( 4.53%)  ???:__pyx_pw_9pcaptools_9protocols_5http2_8observer_13Http2Observer_23_parse [/x/h.so]
   410,643,185 ( 5.99%)  python-build/Python/ceval.c:_PyEval_EvalFrameDefault'2 [/lib/libpython3.11.so.1.0]
   210,643,185 ( 3.07%)  ???:_PyEval_EvalFrameDefault [/lib/libpython3.11.so.1.0]
"""


def test_reads_inclusive_counts_keeping_the_largest_of_a_name(layers) -> None:
    c = layers.inclusive_counts(ANNOTATED)
    assert c["__pyx_pw_9pcaptools_8pipeline_22load_capture"] == 4_862_070_071
    assert c["__pyx_f_9pcaptools_3tcp_7tracker_10TcpTracker_segment"] == 3_892_610_146
    # the recursion suffix ('2) is dropped and the larger count kept
    assert c["_PyEval_EvalFrameDefault"] == 410_643_185
    assert "PROGRAM" not in c and "TOTALS" not in c


def test_finds_each_kind_of_cython_function(layers) -> None:
    c = layers.inclusive_counts(ANNOTATED)
    by_label = {label: (n, sym) for label, n, sym in layers.layer_counts(c)}
    got = {label: n for label, (n, _sym) in by_label.items() if n is not None}
    # a module function (its Python wrapper: no C body listed), a cdef function's C body over
    # its wrapper, a cdef method, a def method (wrapper only, not another method of the class
    # whose name ends the same) and a closure
    assert got["load_capture: the pass and the tables"] == 4_862_070_071
    assert by_label["frame loop (every layer below but the end)"] == (
        4_462_939_710, "__pyx_f_9pcaptools_9frameloop_feed_frames")
    assert got["TCP tracker per segment (with the payload stack)"] == 3_892_610_146
    assert got["TLS observer (the connections' payload inside it)"] == 1_248_311_218
    assert got["HTTP/2 observer (SSE of its streams inside it)"] == 314_207_514
    assert got["events to the table builders (emit)"] == 1_221_209_053
    assert by_label["SSE parser"] == (None, "")


def test_every_layer_names_a_candidate_module_and_an_existing_function(layers) -> None:
    for label, module, cls, fn, table, unit in layers.LAYERS:
        assert module in _accel.CANDIDATES, label
        assert (table is None) == (unit is None), label
        mod = importlib.import_module(module)
        if cls.startswith("_set_up"):  # (a closure: its enclosing function)
            assert callable(getattr(mod, cls)), label
            continue
        obj = getattr(mod, cls)
        if fn:
            assert callable(getattr(obj, fn)), label
