"""The fuzz harnesses (fuzz/) in the test suite, cheaply.

- Always: every harness replays its seeds and a few hundred seeded random mutations of them,
  in-process (no atheris needed): the harnesses keep working as the code changes.
- When atheris is installed: each harness runs coverage-guided for a few thousand iterations
  in a subprocess. (libFuzzer ends its process when the run is over, so "in-process" cannot
  mean inside pytest's own process.) Crash files go to a temporary folder and fail the test
  with the harness's output.

Longer runs: ``fuzz/run.sh 300`` (see docs/robustness.md for the figures of the last one).
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.harnesses import HARNESSES
from fuzz.seeds import all_seeds

ROOT = Path(__file__).resolve().parents[2]
HAVE_ATHERIS = importlib.util.find_spec("atheris") is not None
#: iterations of the coverage-guided smoke run; the whole-pipeline harness is ~50x slower
RUNS = {"reader": 100, "pipeline": 1000}
DEFAULT_RUNS = 3000


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 2, 4, 16))):
        op = rng.randrange(5)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:  # flip a byte
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif op == 1:  # insert random bytes
            b[pos:pos] = rng.randbytes(rng.randrange(1, 16))
        elif op == 2 and b:  # delete a range
            del b[pos : pos + rng.randrange(1, 64)]
        elif op == 3 and b:  # duplicate a range
            b[pos:pos] = b[pos : pos + rng.randrange(1, 256)]
        else:  # interesting integers
            b[pos:pos] = rng.choice(
                (
                    b"\xff\xff\xff\xff",
                    b"\x00\x00\x00\x00",
                    b"\x7f\xff",
                    b"\x80\x00\x00\x00",
                    b"\xff",
                )
            )
    return bytes(b)


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_harness_replays_seeds_and_mutations(name: str) -> None:
    seeds = all_seeds()[name]
    assert seeds, name
    target = HARNESSES[name]
    for s in seeds:
        target(s)
    rng = random.Random(f"fuzz-smoke-{name}")
    n = 25 if name == "reader" else 300
    for _ in range(n):
        target(_mutate(rng, rng.choice(seeds)))


REGRESSIONS = ROOT / "fuzz" / "regressions"


@pytest.mark.parametrize(
    "path",
    sorted(REGRESSIONS.glob("*/*")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_fuzz_findings_stay_fixed(path: Path) -> None:
    """Every input a fuzzer once crashed on (fuzz/regressions/<harness>/<name>) now passes."""
    HARNESSES[path.parent.name](path.read_bytes())


@pytest.mark.skipif(not HAVE_ATHERIS, reason="atheris is not installed")
@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_harness_coverage_guided_smoke_run(name: str, tmp_path: Path) -> None:
    runs = RUNS.get(name, DEFAULT_RUNS)
    env = {**os.environ, "PCAPTOOLS_FUZZ_WORK": str(tmp_path)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fuzz",
            "run",
            name,
            f"-runs={runs}",
            "-seed=1",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    crashes = sorted(p.name for p in (tmp_path / "crashes" / name).iterdir())
    tail = proc.stderr[-4000:]
    assert proc.returncode == 0 and crashes == [], f"{name}: rc={proc.returncode} {crashes}\n{tail}"
    assert f"stat::number_of_executed_units: {runs}" in proc.stderr
    assert "no interesting inputs" not in proc.stderr  # the code under test is instrumented
