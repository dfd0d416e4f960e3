"""pcaptools.limits: every limit resolves to its home, names a catalogued anomaly code, and
docs/robustness.md shows the current table."""

from __future__ import annotations

from pathlib import Path

from pcaptools.diagnostics import CATALOGUE
from pcaptools.limits import LIMITS, limits_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "robustness.md"
BEGIN, END = "<!-- limits:begin -->\n", "<!-- limits:end -->"


def test_every_limit_resolves_and_its_code_exists() -> None:
    names = [lim.name for lim in LIMITS]
    assert len(names) == len(set(names))
    for lim in LIMITS:
        value = lim.default  # raises if the home moved
        assert value is None or isinstance(value, int), lim.name
        if lim.code is not None:
            assert lim.code in CATALOGUE, lim.code


def test_docs_show_the_current_limits() -> None:
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    assert table == limits_markdown(), "run: python -m pcaptools.limits --write"
