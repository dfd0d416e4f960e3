"""No test asserts on elapsed time: speed lives in benchmarks/ with measured results. The one
clock-dependent check the test tools bring, Hypothesis's per-example deadline and its
``too_slow`` health check, is off in every profile (tests/conftest.py) and no test turns it
back on."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, settings

TESTS = Path(__file__).resolve().parent


def test_the_loaded_hypothesis_profile_reads_no_clock() -> None:
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check
    for name in ("ci", "dev"):
        p = settings.get_profile(name)
        assert p.deadline is None and HealthCheck.too_slow in p.suppress_health_check, name


def test_no_test_sets_a_deadline_or_the_too_slow_check() -> None:
    bad = []
    for path in sorted(TESTS.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"deadline\s*=\s*(?!None)[\w.(]", text):
            bad.append(f"{path.name}: {text[m.start():m.start() + 30]!r}")
        if path.name not in ("conftest.py", Path(__file__).name) and re.search(
                r"suppress_health_check\s*=\s*\[\s*\]", text):
            bad.append(f"{path.name}: health checks turned back on")
    assert bad == []
