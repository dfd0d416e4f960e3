"""Shared fixtures: the public corpus (skipped cleanly when absent), shipped captures, tshark."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
CORPUS = Path(os.environ.get("PCAPTOOLS_CORPUS", ROOT.parent / "shared" / "corpus"))
#: corpus captures and their key logs (MANIFEST.md)
CORPUS_KEYS = {
    "illustrated-tls12-capture.pcap": "illustrated-tls12-keylog.txt",
    "illustrated-tls13-capture.pcap": "illustrated-tls13-keylog.txt",
    "tls12-decryption.pcap": "tls12-decryption.keylog.txt",
    "dump.pcapng": "premaster.txt",
    "tls_nss_example.pcap": "tls_nss_example.keys.txt",
    "tls3.cryptohack.org.pcapng": "keylogfile.txt",
}

# No test asserts on elapsed time (speed is measured in benchmarks/, not here): Hypothesis's
# per-example deadline and its too_slow health check (which fails a test whose examples take
# long to generate, by the wall clock) are off in every profile, so a busy machine cannot fail
# a test that computes the right values.
_NO_CLOCK = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", max_examples=200, **_NO_CLOCK)  # type: ignore[arg-type]
settings.register_profile("dev", max_examples=50, **_NO_CLOCK)  # type: ignore[arg-type]
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def corpus_files(*patterns: str) -> list[Path]:
    """Corpus captures matching the glob patterns (empty when the corpus is absent)."""
    if not CORPUS.is_dir():
        return []
    out: set[Path] = set()
    for p in patterns or ("*.pcap", "*.pcapng"):
        out.update(CORPUS.glob(p))
    return sorted(out)


def shipped_captures() -> list[Path]:
    if not CAPTURES.is_dir():
        return []
    return sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng", ".gz", ".zst", ".xz", ".bz2"))


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent")
    return CORPUS


@pytest.fixture(scope="session")
def tshark() -> str:
    exe = shutil.which("tshark")
    if exe is None:
        pytest.skip("tshark is not installed")
    return exe
