"""``import pcaptools`` and a load of a plain TCP/HTTP capture leave out what only other
captures need (issue #20): dpkt (DNS messages), cryptography (a key log), brotli and
zstandard (compressed bodies), the HTTP/3 observer and pylsqpack (HTTP/3), sqlite3, difflib
and html (a connection spill, a field suggestion, a notebook). Each is imported by
the first load that needs it. Every check runs in a fresh interpreter (this one has imported
everything already)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"

LAZY = (
    "dpkt",
    "cryptography",
    "brotli",
    "zstandard",
    "pylsqpack",
    "pcaptools.protocols._dnswire",
    "pcaptools.protocols.http3.observer",
    "sqlite3",  # (the spill of millions of connections, the tshark field glossary)
    "difflib",  # (suggestions for a misspelled tshark field)
    "html",  # (a Capture shown in a notebook; the report)
)
"""modules that neither ``import pcaptools`` nor a load of ``http1-basic.pcap`` imports"""


def _fresh(code: str) -> dict[str, object]:
    """run ``code`` in a fresh interpreter (this checkout first on the path); it sets
    ``out``, returned as parsed JSON"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    script = f"import json, sys\n{code}\nprint(json.dumps(out))"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True)
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_import_pcaptools_leaves_the_lazy_modules_out() -> None:
    out = _fresh(f"import pcaptools\nout = {{'loaded': [m for m in {LAZY!r} if m in sys.modules]}}")
    assert out == {"loaded": []}


def test_loading_a_plain_http_capture_leaves_them_out() -> None:
    out = _fresh(
        "import pcaptools\n"
        f"cap = pcaptools.load({str(CAPTURES / 'http1-basic.pcap')!r})\n"
        f"out = {{'requests': len(cap.http_requests),"
        f" 'loaded': [m for m in {LAZY!r} if m in sys.modules]}}"
    )
    assert out["loaded"] == []
    assert out["requests"] == 8


@pytest.mark.parametrize(
    ("capture", "keylog", "table", "rows", "needs"),
    [
        ("dns-transports.pcap", None, "dns", 11, ["dpkt", "pcaptools.protocols._dnswire"]),
        ("sse-compressed.pcap", None, "sse_events", 63, ["brotli", "zstandard"]),
        ("h3-sse-chat.pcapng", "h3-sse-chat.keys", "http3_streams", 5,
         ["cryptography", "pylsqpack", "pcaptools.protocols.http3.observer"]),
    ],
)
def test_a_capture_that_needs_them_imports_them(
    capture: str, keylog: str | None, table: str, rows: int, needs: list[str]
) -> None:
    """(the tables themselves are checked by the tests of each protocol; this is the count
    of one table, and which lazy modules the load brought in)"""
    kw = f", keylog={str(CAPTURES / keylog)!r}" if keylog else ""
    out = _fresh(
        "import pcaptools\n"
        f"cap = pcaptools.load({str(CAPTURES / capture)!r}{kw})\n"
        f"out = {{'rows': len(cap.{table}), 'loaded': [m for m in {LAZY!r} if m in sys.modules]}}"
    )
    assert out["rows"] == rows
    assert set(needs) <= set(out["loaded"])  # type: ignore[arg-type]


def test_the_lazy_names_of_http3_are_the_observer_modules() -> None:
    import pcaptools.protocols.http3 as http3
    from pcaptools.protocols.http3 import observer

    for name in ("Http3Observer", "MAX_HTTP3_FRAME_BYTES", "MAX_HTTP3_FRAME_ROWS",
                 "MAX_HTTP3_OPEN_STREAMS", "MAX_HTTP3_SSE_ROWS", "MAX_QPACK_PENDING_BYTES"):
        assert name in http3.__all__
        assert getattr(http3, name) is getattr(observer, name)
    with pytest.raises(AttributeError):
        _ = http3.NotAName  # type: ignore[attr-defined]
