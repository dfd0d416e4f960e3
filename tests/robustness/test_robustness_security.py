"""Security of the outputs: strings from a hostile capture never become markup in the HTML
report (nor in the plotly figures, which render a subset of HTML), key log secrets never
appear anywhere, credentials in HTTP headers are redacted by default, and nothing read from
a capture is ever used as a file path."""

from __future__ import annotations

import ast
import html as htmlmod
import json
import re
from pathlib import Path

import pytest

import pcaptools
from pcaptools.capture import Capture
from pcaptools.cli import main as cli_main
from pcaptools.report import write_report
from pcaptools.report.html import plotly_js as get_plotlyjs
from tests.robustness._hostile import BEARER, COOKIE, SET_COOKIE, XSS1, XSS2, hostile_capture_bytes


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Capture]:
    d = tmp_path_factory.mktemp("hostile")
    p = d / f"{XSS2}.pcap"  # the file name itself is hostile (it shows in the report title)
    p.write_bytes(hostile_capture_bytes())
    return p, pcaptools.load(p)


def _all_text(cap: Capture) -> str:
    return "\n".join(df.to_csv() for df in cap.tables.values())


def test_hostile_strings_reach_the_tables(hostile: tuple[Path, Capture]) -> None:
    """Precondition of the escaping tests: the strings are really in the data."""
    _, cap = hostile
    assert cap.tls_handshakes["sni"].tolist() == [XSS1]
    assert XSS2 in cap.tls_handshakes["alpn_offered"].iloc[0]
    paths = cap.http_requests["path"].tolist()
    assert f"/{XSS1}?q=%22%3E" in paths and f"/{XSS1}" in paths
    assert f"/{XSS1}" in cap.http2_streams["path"].tolist()
    assert XSS2 in cap.sse_events["data"].tolist()
    text = _all_text(cap)
    assert XSS1 in text and XSS2 in text


def _unjson(text: str) -> str:
    """Undo JSON string escapes that plotly (and json.dumps) use to hide markup."""
    for esc, ch in (
        ("\\u003c", "<"),
        ("\\u003e", ">"),
        ("\\u0026", "&"),
        ("\\u0027", "'"),
        ('\\"', '"'),
        ("\\/", "/"),
    ):
        text = text.replace(esc, ch)
    return text


def _assert_no_markup(text: str, where: str) -> None:
    for bad in (XSS1, XSS2, "<script>alert", "<img src=x", "onerror=alert(1)>"):
        assert bad not in text, f"{bad!r} unescaped in {where}"


def _assert_script_elements_well_formed(page: str) -> None:
    """Split the page into script elements as an HTML parser does (a ``<script`` tag's content
    runs to the first ``</script``): no ``</script`` outside an element (an injected end tag),
    every element ends, and no content holds ``<!--`` (the double-escaped state, where a
    ``<script`` inside would matter). A ``<script`` inside script content is then plain text,
    e.g. in a comment of the report's own JavaScript."""
    low = page.lower()
    i = elements = 0
    while True:
        o, c = low.find("<script", i), low.find("</script", i)
        if o < 0:
            assert c < 0, f"stray </script> at {c}"
            break
        assert c < 0 or c > o, f"stray </script> at {c}"
        end = low.find("</script", o)
        assert end > o, f"<script at {o} never ends"
        assert "<!--" not in low[o:end], f"<!-- inside the script element at {o}"
        elements += 1
        i = end + len("</script")
    assert elements >= 1


def test_report_escapes_every_hostile_string(hostile: tuple[Path, Capture], tmp_path: Path) -> None:
    _, cap = hostile
    out = tmp_path / "r.html"
    write_report(cap, out)
    page = out.read_text(encoding="utf-8")
    body = page.replace(get_plotlyjs(), "")  # the library itself is not capture data
    _assert_no_markup(body, "the HTML")
    assert "This section failed" not in page  # no section builder chokes on hostile strings
    # plotly draws hover text and legend names as HTML: decoded, the figure JSON must still
    # hold only escaped text
    _assert_no_markup(_unjson(body), "the plotly figure JSON")
    # the report shows capture strings (SNI, paths...): escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    # the hostile file name is the title: shown, escaped
    assert htmlmod.escape(XSS2) in page or "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    _assert_script_elements_well_formed(page)
    # the notebook view escapes too
    _assert_no_markup(cap._repr_html_(), "Capture._repr_html_")


def test_cli_report_and_json_escape_and_redact(
    hostile: tuple[Path, Capture], tmp_path: Path
) -> None:
    path, _ = hostile
    out, js = tmp_path / "cli.html", tmp_path / "cli.json"
    assert cli_main([str(path), "-o", str(out), "--json", str(js), "-q"]) == 0
    page = out.read_text(encoding="utf-8").replace(get_plotlyjs(), "")
    _assert_no_markup(page, "the CLI report")
    _assert_no_markup(_unjson(page), "the CLI report's JSON")
    doc = json.loads(js.read_text(encoding="utf-8"))
    blob = json.dumps(doc)
    for secret in (COOKIE, BEARER, SET_COOKIE):
        assert secret not in page and secret not in blob


# --------------------------------------------------------------------------- credentials


def _header_values(cap: Capture) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for table, cols in (
        ("http_requests", ("request_headers", "response_headers")),
        ("http2_streams", ("request_headers", "response_headers")),
        ("http2_frames", ("headers",)),
    ):
        for col in cols:
            for hs in cap.tables[table][col].dropna():
                out += list(hs)
    return out


def test_credentials_are_redacted_by_default(hostile: tuple[Path, Capture]) -> None:
    _, cap = hostile
    values = dict(_header_values(cap))
    assert values["cookie"] == f"<redacted: {len(COOKIE)} bytes>"
    assert values["authorization"] == f"<redacted: {len(BEARER)} bytes>"
    assert values["set-cookie"] == f"<redacted: {len(SET_COOKIE)} bytes>"
    assert values["x-title"] == XSS1  # other headers untouched
    text = _all_text(cap)
    for secret in (COOKIE, BEARER, SET_COOKIE, "s3cr3t", "sk-live"):
        assert secret not in text


def test_show_secrets_keeps_them(hostile: tuple[Path, Capture]) -> None:
    path, _ = hostile
    cap = pcaptools.load(path, show_secrets=True)
    pairs = _header_values(cap)
    assert ("cookie", COOKIE) in pairs and ("authorization", BEARER) in pairs
    assert ("set-cookie", SET_COOKIE) in pairs


def test_cli_show_secrets_flag(hostile: tuple[Path, Capture], tmp_path: Path) -> None:
    path, _ = hostile
    assert cli_main([str(path), "-o", str(tmp_path / "a.html"), "-q", "--show-secrets"]) == 0


# --------------------------------------------------------------------------- key log secrets

CLIENT_RANDOM = "72" * 32  # b"r" * 32, the random of the ClientHello above
MASTER = "5ec2e7" * 16


def test_key_log_contents_never_appear_anywhere(
    hostile: tuple[Path, Capture], tmp_path: Path
) -> None:
    path, _ = hostile
    keylog = tmp_path / "keys.txt"
    garbage = "DEADBEEF" * 8
    keylog.write_text(
        f"# SSL/TLS secrets log file\nCLIENT_RANDOM {CLIENT_RANDOM} {MASTER}\n"
        f"CLIENT_HANDSHAKE_TRAFFIC_SECRET {CLIENT_RANDOM} {MASTER[:64]}\n"
        f"garbage {garbage} {MASTER}\nCLIENT_RANDOM {garbage}\n",
        encoding="ascii",
    )
    cap = pcaptools.load(path, keylog=keylog)
    counts = cap.summary.extra["warning_counts"]
    assert isinstance(counts, dict) and counts["tls.keylog_bad_line"] == 2
    out, js = tmp_path / "k.html", tmp_path / "k.json"
    assert (
        cli_main([str(path), "--keylog", str(keylog), "-o", str(out), "--json", str(js), "-q"]) == 0
    )
    texts = {
        "tables": _all_text(cap),
        "warnings": "\n".join(cap.warnings["detail"]),
        "report": out.read_text(encoding="utf-8"),
        "json": js.read_text(encoding="utf-8"),
        "repr": repr(cap) + cap._repr_html_() + repr(cap.summary),
    }
    for where, text in texts.items():
        for secret in (MASTER, MASTER[:64], garbage, MASTER.upper()):
            assert secret not in text, where


# --------------------------------------------------------------------------- file paths

#: the only places that may open or create files, and why
_FILE_ACCESS_ALLOWED = {
    "pcaptools/io/open.py",  # the capture path the caller gave
    "pcaptools/protocols/tls/keylog.py",  # the key log path the caller gave
    "pcaptools/report/html.py",  # write_report(cap, path)
    "pcaptools/report/comparison.py",  # write_comparison(..., path)
    "pcaptools/result.py",  # Capture.to_parquet/to_csv(directory) -> export
    "pcaptools/cli.py",  # -o / --json / --export paths from the command line
    "pcaptools/_docgen.py",  # docs/*.md of the repository
    "pcaptools/limits.py",  # docs/robustness.md of the repository (--write)
    "pcaptools/export.py",  # export(cap, directory) from the caller
    "pcaptools/_safewrite.py",  # atomic writes of the output paths report/export/cli were given
    "pcaptools/many.py",  # capture files of a directory the caller gave
    "pcaptools/distributed.py",  # the same, across processes
    "pcaptools/_accel.py",  # its own _compiled/manifest.json and the package's .py sources
    "pcaptools/wireshark.py",  # the capture / key log paths given; its tshark field cache in
    # $PCAPTOOLS_CACHE_DIR (else ~/.cache/pcaptools), named by a hash of tshark's path+version
}
#: calls that touch the file system whatever they are called on
_FILE_CALLS = {
    "open",
    "write_text",
    "write_bytes",
    "read_text",
    "read_bytes",
    "mkdir",
    "to_parquet",
    "to_csv",
    "iterdir",
    "glob",
    "rglob",
    "touch",
    "symlink_to",
}
#: names that are file-system calls only on os / shutil / Path(...)
_OS_CALLS = {
    "remove",
    "unlink",
    "rename",
    "replace",
    "makedirs",
    "listdir",
    "scandir",
    "walk",
    "rmtree",
    "copy",
    "copyfile",
    "move",
    "chmod",
}


def _call_name(f: ast.expr) -> str:
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _on_os_or_path(f: ast.expr) -> bool:
    if not isinstance(f, ast.Attribute):
        return False
    v = f.value
    if isinstance(v, ast.Name):
        return v.id in ("os", "shutil", "Path")
    return isinstance(v, ast.Call) and _call_name(v.func) == "Path"


def test_file_access_only_where_the_caller_names_the_path() -> None:
    """Static check: file-system calls appear only in the modules that take a path from the
    caller. Nothing read from a capture (pcapng interface names, HTTP paths, Content-Disposition
    file names, WebSocket messages...) can reach a file-system call elsewhere."""
    root = Path(pcaptools.__file__).resolve().parent
    offenders = []
    for py in sorted(root.rglob("*.py")):
        rel = py.relative_to(root.parent).as_posix()
        if rel in _FILE_ACCESS_ALLOWED:
            continue
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = _call_name(node.func)
                if name in _FILE_CALLS or (name in _OS_CALLS and _on_os_or_path(node.func)):
                    offenders.append(f"{rel}:{node.lineno} {name}()")
    assert offenders == [], offenders


def test_no_capture_string_is_used_as_a_path() -> None:
    """In the allowed modules, paths come from arguments: no table column or event field is
    joined into a path (a crude but useful guard: no f-string or join into Path(...) of
    names that come from the capture)."""
    root = Path(pcaptools.__file__).resolve().parent
    suspicious = re.compile(r"Path\([^)]*(?:\.path\b|\.host\b|\.sni\b|filename|if_name|\.target\b)")
    hits = []
    for rel in sorted(_FILE_ACCESS_ALLOWED):
        p = root.parent / rel
        if p.is_file():
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if suspicious.search(line) and "summary.path" not in line and "s.path" not in line:
                    hits.append(f"{rel}:{i}: {line.strip()}")
    assert hits == []
