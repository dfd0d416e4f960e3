"""The ``made`` fixture of test_cold_syns and test_cold_spill (each imports it: a second
conftest.py would shadow the ``conftest`` module other tests import)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", name="made")
def made_fixture(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Captures of cold connections (test_cold_syns, test_cold_spill): ``syns``, SYNs of
    every shape; ``scan``, SYN-only connections around four that go further; ``flood``,
    40,000 one-SYN connections (``benchmarks/synflood.py``)."""
    from tests.tcp._pcapgen import write_pcap
    from tests.tcp.test_cold_syns import _syns
    from tests.tcp.test_lazy_state import _scan

    d = tmp_path_factory.mktemp("cold")
    flood = d / "flood.pcap"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "synflood.py"), str(flood),
                    "--connections", "40000"], check=True, capture_output=True)
    return {"syns": write_pcap(d / "syns.pcap", _syns()),
            "scan": write_pcap(d / "scan.pcap", _scan()), "flood": flood}
