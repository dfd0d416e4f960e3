"""End to end: ``pcaptools.load()`` fills cap.tls_handshakes / cap.tls_records as the TLS layer does.

Skipped until the pipeline wires the TLS observer (``load`` grows a ``keylog`` argument and
``TABLES`` gets ``tls_handshakes``); then every row must equal what the TLS layer produces
for the same capture through the test feeder (and so what tshark shows, see
test_tls_vs_tshark.py).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pandas as pd
import pytest
from _tls_feed import run
from conftest import CORPUS

import pcaptools
from pcaptools.tables.tls_tables import TLS_HANDSHAKES, TLS_RECORDS, TlsTablesBuilder

pytestmark = [pytest.mark.corpus]

CASES = {
    "tls12-decryption.pcap": "tls12-decryption.keylog.txt",
    "illustrated-tls13-capture.pcap": "illustrated-tls13-keylog.txt",
    "dsb-tls3.cryptohack.org.pcapng": None,
    "dump.pcapng": "premaster.txt",
    "hrr.pcap": None,
}


def _wired() -> None:
    if "tls_handshakes" not in pcaptools.TABLES:
        pytest.skip("pcaptools.load() does not build TLS tables yet")
    if "keylog" not in inspect.signature(pcaptools.load).parameters:
        pytest.skip("pcaptools.load() has no keylog argument yet")


@pytest.mark.parametrize("name", sorted(CASES))
def test_load_tls_tables_equal_the_tls_layer(name: str) -> None:
    _wired()
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"{name} is not in the corpus")
    keylog = CORPUS / CASES[name] if CASES[name] else None
    cap = pcaptools.load(path, keylog=keylog)  # type: ignore[call-arg]
    TLS_HANDSHAKES.check(cap.tls_handshakes)  # type: ignore[attr-defined]
    TLS_RECORDS.check(cap.tls_records)  # type: ignore[attr-defined]
    expected = TlsTablesBuilder()
    expected.add(run(path, keylog).events)
    pd.testing.assert_frame_equal(
        cap.tls_handshakes.reset_index(drop=True),  # type: ignore[attr-defined]
        expected.handshakes(),
    )
    ours = cap.tls_records.sort_values(["tcp_stream", "direction", "offset"]).reset_index(drop=True)  # type: ignore[attr-defined]
    want = (
        expected.records().sort_values(["tcp_stream", "direction", "offset"]).reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(ours, want, check_categorical=False)


def test_load_smoke() -> None:
    path = Path(CORPUS) / "tls12-decryption.pcap"
    if not path.exists():
        pytest.skip("corpus absent")
    cap = pcaptools.load(path)
    assert len(cap.connections) == 1
