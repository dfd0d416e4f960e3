"""TcpAnalyzer against tshark 4.0.17, frame by frame, on every capture we have.

For every TCP frame: tcp.stream, tcp.seq, tcp.ack, tcp.window_size, the set of analysis flags
(retransmission kinds compared as our mutually exclusive kinds: tshark's generic
``tcp.analysis.retransmission`` is dropped where fast/spurious is set), duplicate ACK number
and frame, ack RTT (ns) and the frame it acknowledges, and the initial RTT wherever tshark
shows it. Captures: the public corpus, captures/ (shipped), hand-made corner cases
(``_scenarios.py``) and seeded simulated transfers (``_pcapgen.simulate``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CORPUS, corpus_files, shipped_captures
from tests.tcp._compare import analyse, compare
from tests.tcp._pcapgen import simulate, write_pcap
from tests.tcp._scenarios import SCENARIOS

CAPTURES = [*shipped_captures(), *corpus_files()]
SIM_SEEDS = list(range(24))

#: Documented, asserted differences from tshark: capture name -> {(frame, what): reason}.
#: Each listed difference must still occur (so the list cannot go stale). None are known.
KNOWN_DIFFERENCES: dict[str, dict[tuple[int, str], str]] = {}


def _check(path: Path) -> None:
    res = compare(path)
    known = KNOWN_DIFFERENCES.get(path.name, {})
    unexpected = {k: v for k, v in res.mismatches.items() if k not in known}
    assert unexpected == {}, (
        f"{path.name}: {len(unexpected)} differences, first: {sorted(unexpected.items())[:10]}"
    )
    assert set(known) <= set(res.mismatches), (
        "a documented difference no longer occurs: update KNOWN_DIFFERENCES"
    )
    assert res.our_frames == res.tshark_frames


@pytest.mark.tshark
@pytest.mark.corpus
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_capture_matches_tshark(path: Path, tshark: str) -> None:
    _check(path)


@pytest.fixture(scope="module")
def generated_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tcp_analysis")
    for name, build in SCENARIOS.items():
        write_pcap(d / f"scenario_{name}.pcap", build())
    for seed in SIM_SEEDS:
        write_pcap(
            d / f"sim_{seed:03d}.pcap", simulate(seed, n_conns=2 + seed % 4, n_data=40 + seed % 80)
        )
    return d


@pytest.mark.tshark
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_tshark(name: str, generated_dir: Path, tshark: str) -> None:
    _check(generated_dir / f"scenario_{name}.pcap")


@pytest.mark.tshark
@pytest.mark.parametrize("seed", SIM_SEEDS)
def test_simulated_transfer_matches_tshark(seed: int, generated_dir: Path, tshark: str) -> None:
    _check(generated_dir / f"sim_{seed:03d}.pcap")


@pytest.mark.tshark
def test_simulations_exercise_every_flag(generated_dir: Path, tshark: str) -> None:
    """The simulated + hand-made captures make tshark raise every flag we compare."""
    total: dict[str, int] = {}
    for p in sorted(generated_dir.glob("*.pcap")):
        for k, n in compare(p).flag_frames.items():
            total[k] = total.get(k, 0) + n
    assert set(total) == {
        "retransmission",
        "fast_retransmission",
        "spurious_retransmission",
        "out_of_order",
        "lost_segment",
        "ack_lost_segment",
        "duplicate_ack",
        "keep_alive",
        "keep_alive_ack",
        "zero_window",
        "zero_window_probe",
        "zero_window_probe_ack",
        "window_full",
        "window_update",
        "reused_ports",
    }


# --------------------------------------------------------------------------- concrete values
# Per-capture flag counts (frames), as tshark 4.0.17 reports them; checked without tshark.
EXPECTED_KINDS: dict[str, dict[str, int]] = {
    "wireshark-retrans.pcap": {
        "retransmission": 28,
        "fast_retransmission": 14,
        "spurious_retransmission": 5,
        "duplicate_ack": 27,
        "out_of_order": 1,
        "keep_alive": 1,
    },
    "syn_retransmit_with_ts.pcap": {
        "retransmission": 16,
        "fast_retransmission": 2,
        "duplicate_ack": 53,
        "out_of_order": 1,
        "window_update": 25,
    },
    "tcp_dupack.pcapng": {"duplicate_ack": 3, "fast_retransmission": 1},
    "tcp_retransmissions.pcapng": {"retransmission": 5},
    "tcp_zerowindowdead.pcapng": {"zero_window": 4, "keep_alive": 3},
    "tcp_zerowindowrecovery.pcapng": {"zero_window": 1, "window_update": 1},
    "hrr.pcap": {"lost_segment": 1, "duplicate_ack": 1, "out_of_order": 1},
    "tls13_psk_succesfull.pcap": {"lost_segment": 1, "retransmission": 1},
    "tls-13draft19-early-data.pcap": {"retransmission": 1, "window_update": 1},
    "dump.pcapng": {},
    "tcp-fast-open.pcap": {},
}
EXPECTED_STREAMS = {
    "dump.pcapng": 73,
    "tcp-fast-open.pcap": 2,
    "http_ip4and6.pcapng": 2,
    "raw_ip.pcap": 6,
}


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(EXPECTED_KINDS))
def test_flag_counts(name: str, corpus: Path) -> None:
    an, rows = analyse(corpus / name, with_quoted=True)
    counts: dict[str, int] = {}
    for _seg, a, _irtt in rows:
        for k in a.kinds:
            counts[k] = counts.get(k, 0) + 1
    assert counts == EXPECTED_KINDS[name]
    if name in EXPECTED_STREAMS:
        assert len(an.conversations) == EXPECTED_STREAMS[name]


@pytest.mark.corpus
def test_wireshark_retrans_details(corpus: Path) -> None:
    """Frame-level values from wireshark-retrans.pcap, as tshark shows them."""
    _an, rows = analyse(corpus / "wireshark-retrans.pcap")
    by = {seg.frame: a for seg, a, _ in rows}
    assert by[2].kinds == ("retransmission",)  # SYN sent again
    assert by[4].acked_frame == 1 and by[4].ack_rtt_ns == 2_920_000
    assert by[7].kinds == ("duplicate_ack",) and (by[7].dup_ack_num, by[7].dup_ack_frame) == (1, 6)
    assert by[20].dup_ack_num == 3 and by[20].dup_ack_frame == 17
    assert by[22].kinds == ("fast_retransmission",)
    assert by[30].kinds == ("spurious_retransmission",)
    assert by[10].kinds == ("out_of_order",)
    assert (by[17].rel_seq, by[17].rel_ack, by[17].window) == (1, 199, 32768)
    assert by[6].conv.irtt_ns == 2_247_000


def _truth_tcp_lines() -> dict[str, dict[str, int]]:
    truth = CORPUS / "truth.txt"
    out: dict[str, dict[str, int]] = {}
    if not truth.is_file():
        return out
    name = ""
    for line in truth.read_text().splitlines():
        if line.startswith("== "):
            name = line[3:].strip()
        elif line.startswith("tcp: ") and name:
            out[name] = {k: int(v) for k, v in (kv.split("=") for kv in line[5:].split())}
    return out


TRUTH = _truth_tcp_lines()


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(TRUTH))
def test_truth_summary_counts(name: str, corpus: Path) -> None:
    """The summary counts of the shared truth.txt (tshark 4.0.17): frames, streams, flag frames."""
    t = TRUTH[name]
    an, rows = analyse(corpus / name, with_quoted=True)
    kinds = [a.kinds for _s, a, _ in rows]

    def n(*ks: str) -> int:
        return sum(1 for k in kinds if any(x in k for x in ks))

    ours = {
        "frames": len(rows),
        "streams": len(an.conversations),
        "retransmission": n("retransmission", "fast_retransmission", "spurious_retransmission"),
        "fast_retransmission": n("fast_retransmission"),
        "spurious_retransmission": n("spurious_retransmission"),
        "duplicate_ack": n("duplicate_ack"),
        "zero_window": n("zero_window"),
        "zero_window_probe": n("zero_window_probe"),
        "keep_alive": n("keep_alive"),
        "out_of_order": n("out_of_order"),
        "lost_segment": n("lost_segment"),
    }
    assert ours == {k: t[k] for k in ours}
