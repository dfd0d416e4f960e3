"""pcaptools.tcp.connstate: Zeek conn_state and history, table-driven from Zeek's definitions.

Zeek is not installed here, so every expected (conn_state, history) pair below is derived
by hand from Zeek's own definitions: the conn_state() function and the history doc
comment in zeek/zeek scripts/base/protocols/conn/main.zeek, and the endpoint state
machine / update_history() in src/packet_analysis/protocol/tcp/TCPSessionAdapter.cc.
The comment on each case says which rule decides it.
"""

from __future__ import annotations

from typing import Any

import pytest

from pcaptools.net.packet import ACK, FIN, PSH, RST, SYN
from pcaptools.tcp.connstate import CONN_STATES, ConnHistory
from tests.conftest import corpus_files
from tests.oracle import tshark_fields

_FLAG = {"S": SYN, "A": ACK, "F": FIN, "R": RST, "P": PSH}


def run(steps: list[Any], *, client_inferred: bool = False) -> ConnHistory:
    """Feed steps like ``"C S"``, ``"S SA"``, ``"C PA 100"`` or ``("C PA 10", {"gap": True})``."""
    h = ConnHistory(client_inferred=client_inferred)
    for step in steps:
        text, kw = (step, {}) if isinstance(step, str) else step
        parts = text.split()
        flags = 0
        for ch in parts[1] if len(parts) > 1 and parts[1] != "-" else "":
            flags |= _FLAG[ch]
        seg_len = int(parts[2]) if len(parts) > 2 else 0
        h.packet(parts[0] == "C", flags, seg_len, **kw)
    return h


HANDSHAKE = ["C S", "S SA", "C A"]

SCENARIOS: list[tuple[str, list[Any], str, str]] = [
    # (id, packets, conn_state, history)
    # tcp_refuseconnection.pcapng: SYN answered by RST-ACK. rs == RESET and os == SYN_SENT -> REJ
    ("refused", ["C S", "S RA"], "REJ", "Sr"),
    # SYN retransmitted after the refusal: S is logged once per direction (same sequence number)
    ("refused_then_syn_again", ["C S", "S RA", "C S"], "REJ", "Sr"),
    # normal 3-way handshake, data both ways, FIN both ways: both CLOSED -> SF
    (
        "normal_close",
        [*HANDSHAKE, "C PA 77", "S A", "S PA 491", "C A", "C FA", "S FA", "C A"],
        "SF",
        "ShADadFf",
    ),
    # established, then the originator aborts: os == RESET, responder active -> RSTO
    ("rst_by_client", [*HANDSHAKE, "C PA 10", "S PA 20", "C RA"], "RSTO", "ShADdR"),
    # established, then the responder aborts: rs == RESET, originator active -> RSTR
    ("rst_by_server", [*HANDSHAKE, "C PA 10", "S PA 20", "S RA"], "RSTR", "ShADdr"),
    # RST after both FINs (typical HTTP close): a RST in CLOSED state with a CLOSED peer
    # changes nothing -> SF
    (
        "rst_after_both_fins",
        [*HANDSHAKE, "C PA 10", "S PA 20", "C FA", "S FA", "C R", "C R"],
        "SF",
        "ShADdFfR",
    ),
    # the peer sends FIN then RST, then the other side's FIN: Zeek turns the RST back into
    # CLOSED -> SF
    ("fin_then_rst_then_peer_fin", [*HANDSHAKE, "S FA", "S RA", "C FA"], "SF", "ShAfrF"),
    # client FIN then client RST before the server closed: CLOSED -> RESET -> RSTO
    ("fin_then_rst_one_side", [*HANDSHAKE, "C PA 10", "C FA", "C RA"], "RSTO", "ShADFR"),
    # FIN from the originator only: os == CLOSED, responder active -> S2 (sseapp.pcap)
    (
        "fin_from_client_only",
        [*HANDSHAKE, "C PA 10", "S A", "S PA 5", "C FA", "S A"],
        "S2",
        "ShADadF",
    ),
    # FIN from the responder only -> S3
    ("fin_from_server_only", [*HANDSHAKE, "C PA 10", "S PA 5", "S FA", "C A"], "S3", "ShADdf"),
    # established and still open -> S1
    ("established_open", [*HANDSHAKE, "C PA 10", "S PA 5"], "S1", "ShADd"),
    # SYN only -> S0
    ("syn_only", ["C S"], "S0", "S"),
    # SYN retransmissions: S logged once; no T, a SYN without payload resends no data
    (
        "syn_retransmitted",
        ["C S", ("C S", {"retransmission": True}), ("C S", {"retransmission": True})],
        "S0",
        "S",
    ),
    # ... and then answered: the retransmissions leave no trace
    (
        "syn_retransmitted_then_ok",
        ["C S", ("C S", {"retransmission": True}), "S SA", "C A", "C FA", "S FA"],
        "SF",
        "ShAFf",
    ),
    # responder ACKs the SYN without a SYN-ACK: it stays INACTIVE (not partial) -> S0
    ("syn_acked_without_synack", ["C S", "S A"], "S0", "Sa"),
    # originator SYN then RST, never a SYN-ACK: history matches ^?S[^HAFGIQ]*R.* -> RSTOS0
    ("rst_after_syn_only", ["C S", "C R"], "RSTOS0", "SR"),
    # ... also with a retransmitted SYN and a zero window in between (W is allowed by the pattern)
    ("rst_after_syn_retrans", ["C S", ("C S", {"zero_window": True}), "C R"], "RSTOS0", "SWR"),
    # originator SYN then FIN, no SYN-ACK: os CLOSED, responder inactive -> SH
    ("syn_then_fin", ["C S", "C F"], "SH", "SF"),
    # SYN+FIN in one packet: Q (multi-flag), states SYN_SENT then CLOSED -> SH
    ("syn_fin_same_packet", ["C SF"], "SH", "Q"),
    # responder SYN-ACK then RST, no SYN seen: first packet from the server -> ^, then RSTRH
    ("synack_then_rst", ["S SA", "S R"], "RSTRH", "^hr"),
    # responder SYN-ACK then FIN, no SYN seen -> SHR
    ("synack_then_fin", ["S SA", "S FA"], "SHR", "^hf"),
    # both sides reset without any payload after the handshake -> REJ (os RESET and both sizes 0)
    ("double_reset_no_data", ["C S", "S SA", "C R", "S R"], "REJ", "ShRr"),
    # ... with payload it is the responder's reset that counts -> RSTR
    ("double_reset_with_data", [*HANDSHAKE, "C PA 5", "C R", "S R"], "RSTR", "ShADRr"),
    # mid-stream, client speaks first (tcp_retransmissions.pcapng): both PARTIAL -> OTH;
    # T once for 5 resends
    (
        "mid_stream_client_first",
        ["C PA 648", *[("C PA 648", {"retransmission": True})] * 5],
        "OTH",
        "DT",
    ),
    # mid-stream, server speaks first: Zeek's flip to the likely server port -> ^ first
    ("mid_stream_server_first", ["S PA 10", "C A", "S PA 5", "C A"], "OTH", "^dA"),
    # mid-stream with FINs from both sides: both CLOSED -> SF even without a handshake
    ("mid_stream_closed", ["C PA 10", "S PA 5", "C FA", "S FA"], "SF", "DdFf"),
    # mid-stream, one FIN: os CLOSED, responder PARTIAL (inactive) -> SH
    ("mid_stream_one_fin", ["C PA 10", "S A", "C FA"], "SH", "DaF"),
    # mid-stream originator RST: no S in history -> OTH, not RSTOS0
    ("mid_stream_rst", ["C PA 10", "C R"], "OTH", "DR"),
    # SYN-ACK captured before the SYN (two interfaces): ^ then the normal letters -> SF
    (
        "synack_before_syn",
        ["S SA", "C S", "C A", "C PA 10", "S PA 5", "C FA", "S FA"],
        "SF",
        "^hSADdFf",
    ),
    # FIN+RST in one packet: I (inconsistent); the RST wins for the state -> RSTO
    ("fin_rst_same_packet", [*HANDSHAKE, "C FRA"], "RSTO", "ShAI"),
    # SYN+RST in one packet: Q; os RESET, but the history has no S for the RSTOS0 pattern -> OTH
    ("syn_rst_same_packet", ["C SR"], "OTH", "Q"),
    # TCP Fast Open: data in the SYN is an S (no D); a resent SYN with data is a retransmission: T
    ("tfo_syn_data", ["C S 86", ("C S 86", {"retransmission": True}), "S SA", "C A"], "S1", "SThA"),
    # empty connection object
    ("nothing", [], "OTH", ""),
]


@pytest.mark.parametrize(
    ("name", "steps", "state", "history"), SCENARIOS, ids=[s[0] for s in SCENARIOS]
)
def test_scenarios(name: str, steps: list[Any], state: str, history: str) -> None:
    h = run(steps)
    assert (h.conn_state(), h.history) == (state, history)
    assert h.conn_state() in CONN_STATES


def test_every_conn_state_is_covered() -> None:
    assert {s[2] for s in SCENARIOS} == set(CONN_STATES)


def test_endpoint_states() -> None:
    h = run(["C S"])
    assert (h.orig_state, h.resp_state) == ("SYN_SENT", "INACTIVE")
    h = run(["C S", "S SA"])
    assert (h.orig_state, h.resp_state) == ("ESTABLISHED", "ESTABLISHED")
    h = run(["C PA 5"], client_inferred=True)
    assert (h.orig_state, h.resp_state) == ("PARTIAL", "INACTIVE")
    assert h.client_inferred is True


# --------------------------------------------------------------------------- repeated letters


@pytest.mark.parametrize(
    ("count", "letters"), [(1, 1), (9, 1), (10, 2), (99, 2), (100, 3), (1000, 4)]
)
def test_retransmission_letter_is_logarithmic(count: int, letters: int) -> None:
    """ScaledHistoryEntry: the letter at the 1st, 10th, 100th, 1000th occurrence."""
    h = run(
        [
            *HANDSHAKE,
            *[("C PA 10", {"retransmission": True})] * count,
            *[("S PA 10", {"retransmission": True})] * 10,
        ]
    )
    assert h.history == "ShAD" + "T" * letters + "dtt"


@pytest.mark.parametrize("count", [1, 10, 100])
def test_zero_window_letter_is_logarithmic(count: int) -> None:
    h = run([*HANDSHAKE, *[("S A", {"zero_window": True})] * count])
    assert h.history == "ShA" + "a" + "w" * {1: 1, 10: 2, 100: 3}[count]


def test_bad_checksum_letter_and_packet_ignored() -> None:
    """A bad checksum logs C (logarithmically) and Zeek drops the packet: no D, no state change."""
    h = run(
        [*HANDSHAKE, *[("C PA 10", {"bad_checksum": True})] * 10, ("S FA", {"bad_checksum": True})]
    )
    assert h.history == "ShACCc"
    assert h.conn_state() == "S1"


def test_content_gap_letter_only_when_both_established() -> None:
    h = run([*HANDSHAKE, ("S PA 10", {"gap": True})])
    for _ in range(9):
        h.content_gap(False)
    h.content_gap(True)
    assert h.history == "ShAdggG"
    # mid-stream (PARTIAL endpoints): Zeek does not log gaps, they are unreliable there
    h = run(["C PA 10", ("S PA 10", {"gap": True})], client_inferred=True)
    h.content_gap(True)
    assert h.history == "Dd"
    # after a clean close from established both are still "clean"
    h = run([*HANDSHAKE, "C FA", "S FA"])
    h.content_gap(True)
    assert h.history == "ShAFfG"


def test_zero_window_conditions() -> None:
    # with a RST, or after the peer's FIN, or after own RST: not logged
    h = run([*HANDSHAKE, ("C RA", {"zero_window": True})])
    assert h.history == "ShAR"
    h = run([*HANDSHAKE, "S FA", ("C A", {"zero_window": True})])
    assert h.history == "ShAf"
    # after its *own* FIN an endpoint can still advertise a zero window
    h = run([*HANDSHAKE, "C FA", ("C A", {"zero_window": True})])
    assert h.history == "ShAFW"


def test_no_retransmission_letter_after_own_reset() -> None:
    h = run([*HANDSHAKE, "C R", ("C PA 10", {"retransmission": True})])
    assert h.history == "ShARD"


def test_once_letters() -> None:
    h = run([*HANDSHAKE, *["C PA 10"] * 5, *["S A"] * 5, *["C A"] * 3])
    assert h.history == "ShADa"


def test_fin_and_rst_repeat_when_sequence_number_changes() -> None:
    h = ConnHistory()
    h.packet(True, SYN, 0, seq=100)
    h.packet(False, SYN | ACK, 0, seq=500)
    h.packet(True, ACK | FIN, 0, seq=101)
    h.packet(True, ACK | FIN, 0, seq=101)  # retransmitted FIN: same sequence number
    h.packet(False, RST, 0, seq=501)
    h.packet(False, RST, 0, seq=501)
    h.packet(False, RST, 0, seq=9999)  # a RST with another sequence number
    assert h.history == "ShFrr"
    h.packet(True, ACK | FIN, 10, seq=101)  # FIN at another position (after 10 more bytes)
    assert h.history == "ShFrrF"


def test_repeats_need_sequence_numbers() -> None:
    h = run([*HANDSHAKE, "S R", "S R"])
    assert h.history == "ShAr"


def test_syn_not_repeated_while_open() -> None:
    """Zeek re-bases the endpoint on a new SYN while it is open: the letter does not repeat."""
    h = ConnHistory()
    h.packet(True, SYN, 0, seq=100)
    h.packet(True, SYN, 0, seq=200)
    assert h.history == "S"
    h.packet(True, FIN, 0, seq=201)
    h.packet(True, SYN, 0, seq=300)  # after its own FIN: logged again
    assert h.history == "SFS"


def test_flip_roles() -> None:
    """Zeek's FlipRoles: ^ appended, letters keep their case, endpoint states swap."""
    h = run(["C PA 10", "S A"], client_inferred=True)
    h.flip_roles()
    assert (h.orig_state, h.resp_state) == ("PARTIAL", "PARTIAL")
    h.packet(True, ACK | FIN, 0)  # the new client (the old server) closes
    h.packet(False, ACK | FIN, 0)
    assert h.history == "Da^Ff"
    assert h.conn_state() == "SF"


def test_weird_flag_values_never_raise() -> None:
    h = ConnHistory()
    for flags in range(0, 0x200, 7):
        h.packet(
            bool(flags & 0x40),
            flags,
            flags % 3,
            retransmission=bool(flags & 1),
            zero_window=bool(flags & 2),
        )
    assert h.conn_state() in CONN_STATES
    assert set(h.history) <= set("SHADFRICQTWGshadfricqtwg^")


# --------------------------------------------------------------------------- corpus


def _feed_from_tshark(path: str) -> dict[int, ConnHistory]:
    """Drive ConnHistory per tcp.stream from tshark's view of a capture.

    Roles: the sender of a SYN without ACK is the client; without one, the lower port is
    the server. Retransmissions are tshark's flags, zero windows the raw window field.
    """
    rows = tshark_fields(
        path,
        (
            "tcp.stream",
            "tcp.srcport",
            "tcp.dstport",
            "tcp.flags",
            "tcp.len",
            "tcp.window_size_value",
            "tcp.analysis.retransmission",
            "tcp.seq_raw",
        ),
        (),
        "tcp",
    )
    streams: dict[int, list[list[str]]] = {}
    for row in rows:
        streams.setdefault(int(row[0]), []).append(row)
    out: dict[int, ConnHistory] = {}
    for stream, pkts in streams.items():
        syn_senders = [int(p[1]) for p in pkts if int(p[3], 16) & (SYN | ACK) == SYN]
        inferred = not syn_senders
        client_port = max(int(pkts[0][1]), int(pkts[0][2])) if inferred else syn_senders[0]
        h = ConnHistory(client_inferred=inferred)
        for _s, sport, _d, flags, seg_len, win, retrans, seq in pkts:
            h.packet(
                int(sport) == client_port,
                int(flags, 16),
                int(seg_len),
                retransmission=bool(retrans),
                zero_window=win == "0",
                seq=int(seq),
            )
        out[stream] = h
    return out


CORPUS_EXPECTED = {
    # SYN answered by RST-ACK
    "tcp_refuseconnection.pcapng": {0: ("REJ", "Sr")},
    # mid-stream, 1048 -> 1043 data only, 5 retransmissions; no ^: the client (higher port)
    # speaks first
    "tcp_retransmissions.pcapng": {0: ("OTH", "DT")},
    # mid-stream, the server (port 80) speaks first; the client advertises a zero window
    # 4 times (W once)
    "tcp_zerowindowdead.pcapng": {0: ("OTH", "^dAWa")},
    # two clean HTTP connections (IPv4 and IPv6)
    "http_ip4and6.pcapng": {0: ("SF", "ShADadFf"), 1: ("SF", "ShADadFf")},
    # SSE: the client closes, the server never sends its FIN
    "sseapp.pcap": {0: ("S2", "ShADadF")},
    # WebSocket: stream 0 closed by both; stream 1 closed by both, then two client RSTs with
    # different sequence numbers (frames 32, 33: FIN's seq, then FIN's seq + 1): R logged twice
    "wsapp.pcap": {0: ("SF", "ShADadFf"), 1: ("SF", "ShADadFfRR")},
}


@pytest.mark.corpus
@pytest.mark.tshark
@pytest.mark.parametrize("name", sorted(CORPUS_EXPECTED))
def test_corpus_connections(name: str, corpus, tshark) -> None:  # type: ignore[no-untyped-def]
    got = _feed_from_tshark(str(corpus / name))
    assert {k: (h.conn_state(), h.history) for k, h in got.items()} == CORPUS_EXPECTED[name]


def test_corpus_expectations_name_real_files() -> None:
    files = {p.name for p in corpus_files()}
    if not files:
        pytest.skip("../shared/corpus is absent")
    assert set(CORPUS_EXPECTED) <= files
