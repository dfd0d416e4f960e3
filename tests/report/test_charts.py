"""Data preparation behind the report's charts: timeline selection, time bins, figures."""

from __future__ import annotations

import pandas as pd
import pytest

from pcaptools.report import charts
from tests.report.factory import T0, XSS, make_capture


def test_endpoint() -> None:
    assert charts.endpoint("10.0.0.1", 443) == "10.0.0.1:443"
    assert charts.endpoint("2001:db8::1", 443) == "[2001:db8::1]:443"


def test_ns_roundtrip() -> None:
    cap = make_capture()
    assert charts.ns(cap.connections["first_ts"]).tolist() == [
        T0 + i * 1_000_000_000 for i in range(6)
    ]


def test_timeline_keeps_everything_up_to_the_limit() -> None:
    tl = charts.timeline_rows(make_capture().connections, 6)
    assert not tl.downsampled and tl.total == 6
    assert tl.rows["tcp_stream"].tolist() == [0, 1, 2, 3, 4, 5]


def test_timeline_downsampling_prefers_unusual_then_longest() -> None:
    tl = charts.timeline_rows(make_capture().connections, 3)
    assert tl.downsampled and tl.total == 6
    # not SF: 1 (100 ms), 2 (1 ms), 3 (3000 ms), 4 (100 ms): the 3 longest, in tcp.stream order
    assert tl.rows["tcp_stream"].tolist() == [1, 3, 4]


def test_timeline_figure_traces_by_state() -> None:
    cap = make_capture(xss=True)
    fig = charts.timeline_figure(charts.timeline_rows(cap.connections, 100), T0, 10.0)
    assert fig is not None
    assert [t.name for t in fig.data] == ["SF", "S0", "REJ", "RSTO", "OTH"]
    sf = fig.data[0]
    assert list(sf.y) == [0, 5]
    assert list(sf.base) == [0.0, 5.0]
    assert list(sf.x) == pytest.approx([0.1, 0.1])
    rej = fig.data[2]
    assert list(rej.x) == pytest.approx([0.03])  # 1 ms widened to 0.3% of 10 s
    oth = fig.data[4]
    assert XSS not in oth.hovertext[0]
    assert "&lt;script&gt;" in oth.hovertext[0]
    assert "[2001:db8::1]:50004 → [2001:db8::2]:443" in oth.hovertext[0]


def test_timeline_figure_empty() -> None:
    conns = make_capture().connections.head(0)
    assert charts.timeline_figure(charts.timeline_rows(conns, 10), T0, 1.0) is None


@pytest.mark.parametrize(
    ("span", "width"),
    [
        (10.0, 1.0),
        (1200.0, 1.0),
        (1201.0, 10.0),
        (5.0, 0.1),
        (0.5, 0.01),
        (0.05, 0.001),
        (0.001, 0.001),
        (0.0, 0.001),
        (100_000.0, 600.0),
        (3_600_000.0, 3600.0),
        (1e9, 86400.0),
    ],
)
def test_bin_width(span: float, width: float) -> None:
    assert charts.bin_width_s(span) == width


def test_unit_label() -> None:
    assert [
        charts.unit_label(w) for w in (0.001, 0.1, 1.0, 10.0, 60.0, 600.0, 3600.0, 86400.0)
    ] == [
        "1 ms",
        "100 ms",
        "1 s",
        "10 s",
        "1 min",
        "10 min",
        "1 h",
        "1 d",
    ]


def test_retransmission_bins_per_second() -> None:
    cap = make_capture()
    bins = charts.retransmission_bins(cap.retransmissions, T0, 1.0)
    assert bins.to_dict("records") == [
        {"bin_s": 0.0, "kind": "fast_retransmission", "segments": 1},
        {"bin_s": 0.0, "kind": "retransmission", "segments": 2},
        {"bin_s": 0.0, "kind": "spurious_retransmission", "segments": 1},
        {"bin_s": 1.0, "kind": "retransmission", "segments": 1},
        {"bin_s": 3.0, "kind": "retransmission", "segments": 1},
    ]
    assert int(bins["segments"].sum()) == len(cap.retransmissions) == 6


def test_retransmission_bins_fine() -> None:
    cap = make_capture()
    bins = charts.retransmission_bins(cap.retransmissions, T0, 0.01)
    # frames 20, 40, 60, 80 at 20/40/60/80 ms; 1500 at 1.5 s; 3000 at 3 s
    assert bins["bin_s"].tolist() == [0.02, 0.04, 0.06, 0.08, 1.5, 3.0]


def test_retransmission_bins_empty() -> None:
    ev = make_capture().tcp_events.head(0)
    bins = charts.retransmission_bins(ev, T0, 1.0)
    assert len(bins) == 0 and list(bins.columns) == ["bin_s", "kind", "segments"]
    assert charts.retransmissions_figure(bins, 1.0, 10.0) is None


def test_retransmissions_figure_stacks_kinds() -> None:
    cap = make_capture()
    bins = charts.retransmission_bins(cap.retransmissions, T0, 1.0)
    fig = charts.retransmissions_figure(bins, 1.0, 10.0)
    assert fig is not None
    assert [t.name for t in fig.data] == [
        "retransmission",
        "fast retransmission",
        "spurious retransmission",
    ]
    assert list(fig.data[0].y) == [2, 1, 1]
    assert list(fig.data[0].x) == [0.0, 1.0, 3.0]  # bars start at the bin start
    assert fig.data[0].offset == 0 and fig.data[0].width == 1.0
    assert fig.layout.barmode == "stack"


def test_irtt_figure() -> None:
    assert charts.irtt_figure(pd.Series([None, float("nan")], dtype="float64")) is None
    fig = charts.irtt_figure(make_capture().tcp_handshakes["irtt_ms"])
    assert fig is not None
    # the histogram is drawn as bars counted here: bins of 1 ms from 10 ms, one value in each
    # of [10, 11), [20, 21) and [30, 31), bars at the bin centres
    bars = fig.data[0]
    assert bars.type == "bar" and bars.width == 1.0
    assert list(bars.x) == [10.5, 20.5, 30.5] and list(bars.y) == [1, 1, 1]
    texts = [a.text for a in fig.layout.annotations]
    assert texts == ["median 20 ms", "p95 29 ms"]
    # counts: integer ticks only
    assert fig.layout.yaxis.dtick == 1 and fig.layout.yaxis.tickformat == ",d"
    assert fig.layout.yaxis.title.text == "connections"


def test_histogram_bars_count_like_plotly() -> None:
    import numpy as np

    v = np.asarray([0.0, 0.04, 0.05, 0.05, 0.149, 1.0])
    centres, counts = charts.histogram_bars(v, 0.0, 0.05)
    # a value on an edge counts in the bin it starts; empty bins are left out
    assert centres.tolist() == [0.025, 0.075, 0.125, 1.025]
    assert counts.tolist() == [2, 2, 1, 1]
    assert sum(counts) == len(v)


def test_count_axis_integer_ticks() -> None:
    assert charts.count_axis("n", 3) == {"title": "n", "rangemode": "tozero", "tickformat": ",d",
                                         "dtick": 1, "tick0": 0}
    assert "dtick" not in charts.count_axis("n", 11)


@pytest.mark.parametrize(
    ("values", "start", "size"),
    [
        ([10.0, 20.0, 30.0], 10.0, 1.0),
        ([0.041, 0.043, 1.2], 0.0, 0.05),
        ([12.0], 11.5, 1.0),
        ([0.0], -0.0005, 0.001),
        ([0.2, 0.5], 0.2, 0.01),
    ],
)
def test_histogram_bins(values: list[float], start: float, size: float) -> None:
    import numpy as np

    assert charts.histogram_bins(np.asarray(values)) == (start, size)
