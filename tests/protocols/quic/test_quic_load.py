"""The QUIC tables through load(): the same with workers=2 (UDP is worker 0's), empty with
payloads=False, cut by subset() with the other tables, and the coverage row of the flow."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pcaptools

RETRY = "suricata-quic-retry-input.pcap"


def _path(corpus: Path, name: str) -> Path:
    p = corpus / name
    if not p.exists():
        pytest.skip(f"{name} is not in the corpus")
    return p


def test_workers_and_payloads_off(corpus: Path) -> None:
    path = _path(corpus, RETRY)
    one = pcaptools.load(path)
    two = pcaptools.load(path, workers=2)
    for t in ("quic_connections", "quic_packets", "coverage"):
        pd.testing.assert_frame_equal(getattr(one, t), getattr(two, t), check_categorical=False)
    assert len(one.quic_packets) == 40 and len(one.quic_connections) == 1
    off = pcaptools.load(path, payloads=False)
    assert len(off.quic_packets) == 0 and len(off.quic_connections) == 0
    assert off.coverage["status"].astype(str).tolist() == ["not_parsed"]
    cov = one.coverage.iloc[0]
    assert (cov["protocol"], cov["status"]) == ("quic", "encrypted_no_key")


def test_subset_keeps_the_quic_connection_and_its_packets(corpus: Path) -> None:
    cap = pcaptools.load(_path(corpus, RETRY))
    by_sni = cap.subset(sni="*.gravatar.com")
    assert len(by_sni.quic_connections) == 1 and len(by_sni.quic_packets) == 40
    assert len(by_sni.packets) == 38  # every datagram of the connection
    other = cap.subset(host="192.0.2.99")
    assert len(other.quic_connections) == 0 and len(other.quic_packets) == 0
    assert len(cap.subset(stream=0).quic_connections) == 0  # tcp.stream names TCP only
    late = cap.subset(start=20.0)
    assert len(late.quic_connections) == 1
    assert late.quic_packets["ts"].min() >= cap.packets["ts"].iloc[0] + pd.Timedelta(seconds=20)


def test_zerortt_has_two_connections_where_tshark_numbers_three(corpus: Path) -> None:
    """zerortt.pcap: tshark 4.0 gives frames 79-104 a third quic.connection.number, because the
    client's Initial in frame 79 goes to a destination connection ID it has not seen
    (3ec82f67). That Initial is connection 1's: same UDP 5-tuple, it decrypts with the keys of
    connection 1's original destination connection ID and its packet number (1) follows the
    client's first Initial (0); it acknowledges the server's Initial. So it stays connection
    1 here (tshark itself loses the connection in frame 80: no quic.connection.number)."""
    cap = pcaptools.load(_path(corpus, "zerortt.pcap"))
    qc = cap.quic_connections
    assert qc["quic_connection"].tolist() == [0, 1]
    pk = cap.quic_packets
    f79 = pk[(pk["frame"] == 79) & (pk["packet_type"] == "initial")].iloc[0]
    assert (f79["quic_connection"], f79["dcid"], f79["status"], f79["packet_number"]) == (
        1, "3ec82f67", "decrypted", 1)
    first = pk[(pk["quic_connection"] == 1) & (pk["packet_type"] == "initial")
               & (pk["direction"] == "client_to_server")]
    assert first["packet_number"].tolist() == [0, 1]
    assert int(qc["initial_failed"].iloc[1]) == 0
    assert set(pk.loc[pk["frame"] >= 79, "quic_connection"]) == {1}


def test_keyed_tables_are_the_same_with_two_workers() -> None:
    from tests.conftest import CAPTURES
    path = CAPTURES / "h3-sse-chat.pcapng"
    if not path.exists():
        pytest.skip("h3-sse-chat.pcapng is absent")
    keys = path.with_suffix(".keys")
    one = pcaptools.load(path, keylog=keys)
    two = pcaptools.load(path, keylog=keys, workers=2)
    for t in ("quic_connections", "quic_packets", "quic_frames", "coverage"):
        pd.testing.assert_frame_equal(getattr(one, t), getattr(two, t), check_categorical=False)
    assert len(one.quic_frames) == 279
    assert one.coverage.query("protocol == 'quic'")["status"].astype(str).tolist() == [
        "decrypted", "decrypted"]  # (two connections, two UDP flows)
