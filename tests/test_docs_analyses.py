"""docs/analyses/: every page is linked from the README, every import in its python blocks
resolves, and every worked example still prints what the page says (a python block followed by
a text block is run, one namespace per page, from the repository root)."""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs" / "analyses").glob("*.md"))
PYTHON = re.compile(r"```python\n(.*?)```", re.S)
EXAMPLE = re.compile(r"```python\n(.*?)```\n\n```text\n(.*?)```", re.S)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_there_is_a_page_per_analysis() -> None:
    assert {p.stem for p in PAGES} >= {
        "tcp-connections",
        "retransmissions",
        "tls",
        "http-latency",
        "sse-token-cadence",
        "websocket-heartbeats",
        "disconnects",
        "overhead",
        "compare",
    }


def test_every_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {(ROOT / m).resolve() for m in LINK.findall(readme)}
    missing = [p.name for p in PAGES if p.resolve() not in linked]
    assert missing == []
    for target in linked:  # and every relative link of the README resolves
        assert target.exists(), target


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_links_and_imports_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for m in LINK.findall(text):
        if "://" not in m:
            assert (page.parent / m).exists(), f"{page.name}: broken link {m}"
    blocks = PYTHON.findall(text)
    assert blocks, f"{page.name} has no example"
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)
            elif isinstance(node, ast.ImportFrom):
                assert node.module is not None and node.level == 0
                mod = importlib.import_module(node.module)
                for alias in node.names:
                    assert (
                        hasattr(mod, alias.name)
                        or importlib.util.find_spec(f"{node.module}.{alias.name}") is not None
                    ), (page.name, node.module, alias.name)
    # the captures the page works on are shipped
    for name in set(re.findall(r"captures/([\w.-]+\.(?:pcapng|pcap|keys))", text)):
        assert (ROOT / "captures" / name).is_file(), f"{page.name}: captures/{name} is missing"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_worked_example_prints_what_the_page_says(
    page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    text = page.read_text(encoding="utf-8")
    examples = EXAMPLE.findall(text)
    assert examples, f"{page.name}: no python block followed by its output"
    ns: dict[str, object] = {}
    for code, expected in examples:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(page), "exec"), ns)
        assert out.getvalue() == expected, f"{page.name}: the example's output changed"
