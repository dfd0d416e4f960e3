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
