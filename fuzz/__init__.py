"""Fuzz harnesses for pcaptools (atheris / libFuzzer) and a runner.

    python -m fuzz list                      the harnesses
    python -m fuzz run NAME [libFuzzer args] one harness, coverage-guided (needs atheris)
    python -m fuzz replay NAME FILE...       run inputs (e.g. a crash-* file) without atheris
    python -m fuzz seeds DIR                 write the seed corpora to DIR/<name>/
    fuzz/run.sh [SECONDS]                    every harness for SECONDS each (default 20)

Each harness is a plain ``test_one_input(data: bytes) -> None`` in :mod:`fuzz.harnesses`; it
raises only on a real bug: an exception escaping pcaptools, or an anomaly code that means
"pcaptools bug" (``tls.internal_error``, ``net.decode_error``, ``tcp.observer_error``).
See docs/robustness.md.
"""
