"""pcap-report's handling of its inputs, in-process on small shipped captures: key logs found
beside a capture (one file, a directory, --compare), a key log without a single key line,
TLS decryption failures on stderr, a subset that matches nothing (exit status 2, the filter
named), --workers 0, and the directory index's per-capture answers."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import pcaptools.cli as cli
from tests.conftest import CAPTURES

H2 = CAPTURES / "h2-sse-chat.pcapng"  # one TLS 1.3 + HTTP/2 SSE connection, 225 frames
WS = CAPTURES / "ws-blackhole.pcap"  # one WebSocket whose path vanishes, 37 frames

pytestmark = pytest.mark.skipif(not (H2.is_file() and WS.is_file()),
                                reason="shipped captures absent")


@pytest.fixture
def no_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTML report replaced by a stub (these tests read stderr, the JSON and the index;
    the report itself is tested in tests/report): a CLI run takes a fraction of the time."""
    import pcaptools.report as report

    def write(cap: object, out: object, *a: object, **kw: object) -> dict[str, object]:
        Path(str(out)).write_text("<!DOCTYPE html>stub\n", encoding="utf-8")
        return {}  # no index facts (write_report returns what the directory index shows)

    def write_two(a: object, b: object, out: object, *x: object, **kw: object) -> None:
        Path(str(out)).write_text("<!DOCTYPE html>stub\n", encoding="utf-8")

    monkeypatch.setattr(cli, "write_report", write)
    monkeypatch.setattr(report, "write_comparison", write_two)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".keys", ".keys.log", ".keylog"])
def test_keylog_beside_the_capture_is_found(suffix: str, tmp_path: Path) -> None:
    cap = tmp_path / "chat.pcapng"
    shutil.copy(H2, cap)
    assert cli.keylog_beside(cap) is None
    shutil.copy(H2.with_suffix(".keys"), tmp_path / f"chat{suffix}")
    assert cli.keylog_beside(cap) == tmp_path / f"chat{suffix}"
    assert cli.keylog_beside(tmp_path / "chat.pcapng.gz") == tmp_path / f"chat{suffix}"
    assert cli.keylog_beside("-") is None


def test_keylog_beside_is_used_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_report: None
) -> None:
    cap = tmp_path / "chat.pcapng"
    shutil.copy(H2, cap)
    shutil.copy(H2.with_suffix(".keys"), tmp_path / "chat.keys")
    js = tmp_path / "s.json"
    code, err = _run([str(cap), "-o", str(tmp_path / "r.html"), "--json", str(js)], capsys)
    assert code == 0
    assert err.splitlines()[0] == (
        f"pcap-report: using the key log found beside chat.pcapng: {tmp_path / 'chat.keys'} "
        "(--no-auto-keylog: do not)")
    assert json.loads(js.read_text())["tls_decrypt_status"] == {"decrypted": 1}
    assert len(err.splitlines()) == 2  # that line and the summary line: nothing failed

    # --no-auto-keylog: not used, and stderr says the session was not decrypted and why
    code, err = _run([str(cap), "--no-auto-keylog", "-o", str(tmp_path / "r.html"), "--json",
                      str(js)], capsys)
    assert code == 0
    assert json.loads(js.read_text())["tls_decrypt_status"] == {"no_keylog": 1}
    assert err.splitlines()[0] == (
        "pcap-report: The TLS session could not be decrypted: no key log was given "
        "(pcap-report --keylog KEYS.txt; record with SSLKEYLOGFILE set).")
    # with --quiet, "no key log" alone is not a failure: nothing is printed
    assert _run([str(cap), "--no-auto-keylog", "-q", "-o", str(tmp_path / "r.html")],
                capsys) == (0, "")


def test_keylog_without_key_lines_says_what_it_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# notes\n\nnot a key\nCLIENT_RANDOM too short\n", encoding="utf-8")
    js = tmp_path / "s.json"
    code, err = _run([str(H2), "--keylog", str(notes), "-q", "-o", str(tmp_path / "r.html"),
                      "--json", str(js)], capsys)
    assert code == 0
    assert err.splitlines() == [
        f"pcap-report: warning: --keylog {notes}: 4 lines read, none of them a key log line "
        "(CLIENT_RANDOM or a TLS 1.3 secret; 2 tls.keylog_bad_line warnings): it decrypts "
        "nothing",
        # a decryption failure: said even with --quiet, and not as "no key log was given"
        "pcap-report: The TLS session could not be decrypted: no key in the key log (see "
        "tls.no_key_for_session).",
    ]
    head = json.loads(js.read_text())
    assert head["tls_decrypt_status"] == {"no_keys": 1}
    assert head["warnings_by_code"] == {"tls.keylog_bad_line": 2, "tls.no_key_for_session": 1}
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "no key log was given" not in html


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stream", "99"], "--stream 99 matches nothing in h2-sse-chat.pcapng (its only "
                             "tcp.stream is 0)"),
        (["--stream", "7", "--stream", "8"],
         "--stream 7 --stream 8 matches nothing in h2-sse-chat.pcapng (its only tcp.stream is 0)"),
        (["--sni", "api.example.com"], "--sni api.example.com matches nothing in "
                                       "h2-sse-chat.pcapng (server names seen: lab.test)"),
        (["--start", "500"], "--start 500 matches nothing in h2-sse-chat.pcapng (its frames "
                             "span 0 to 4.359 s after the first one)"),
        (["--port", "443", "--host", "192.0.2.99"],
         "--host 192.0.2.99 matches nothing in h2-sse-chat.pcapng (no address, server name, "
         "Host or :authority matches it)"),
    ],
)
def test_empty_subset_exits_2_naming_the_filter(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    code, err = _run([str(H2), "-q", "-o", str(out), *argv], capsys)
    assert code == 2
    assert err == f"pcap-report: error: {message}\n"
    assert not out.exists()


def test_workers_0_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main([str(WS), "--workers", "0"])
    assert exc.value.code == 2
    assert "argument --workers: 0 is not at least 1" in capsys.readouterr().err


def test_directory_key_logs_and_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # the real reports: the index shows what they computed
    src = tmp_path / "in"
    src.mkdir()
    for p in (H2, H2.with_suffix(".keys"), WS):
        shutil.copy(p, src / p.name)
    out = tmp_path / "out"
    code, err = _run([str(src), "-o", str(out), "--workers", "1"], capsys)
    assert code == 0
    assert err.splitlines()[0] == (
        f"pcap-report: using the key log found beside h2-sse-chat.pcapng: "
        f"{src / 'h2-sse-chat.keys'} (--no-auto-keylog: do not)")
    html = (out / "index.html").read_text(encoding="utf-8")
    cells = {m[0]: re.findall(r"<td class=n>([^<]*)</td>", m[1])[-5:-1]
             for m in re.findall(r'<tr><td><a href="[^"]+">([^<]+)</a></td>(.*?)</tr>', html)}
    # TTFT median (ms), TLS decrypted, unclean connections, missed heartbeats ("–": does
    # not apply: no heartbeats sent, no TLS, no SSE)
    assert cells["h2-sse-chat.pcapng"][1:] == ["1 of 1", "0", "–"]
    assert re.fullmatch(r"\d+(\.\d+)?", cells["h2-sse-chat.pcapng"][0])
    # the path vanished: one connection, not clean; the last of its 5 pings never answered
    assert cells["ws-blackhole.pcap"] == ["–", "–", "1", "1"]
    for label in ("TTFT median ms", "TLS decrypted", "unclean connections", "missed heartbeats"):
        assert f">{label}</th>" in html

    # nothing matches in any capture: exit status 2 before any report is written
    code, err = _run([str(src), "-q", "-o", str(tmp_path / "out2"), "--workers", "1",
                      "--stream", "50"], capsys)
    assert code == 2
    assert err == "pcap-report: error: --stream 50 matches nothing in any of the 2 captures\n"
    assert not (tmp_path / "out2" / "index.html").exists()


def test_compare_uses_each_capture_s_own_key_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_report: None
) -> None:
    a, b = tmp_path / "a.pcapng", tmp_path / "b.pcapng"
    shutil.copy(H2, a)
    shutil.copy(H2, b)
    shutil.copy(H2.with_suffix(".keys"), tmp_path / "a.keys")  # b has none
    js = tmp_path / "c.json"
    code, err = _run([str(a), "--compare", str(b), "-o", str(tmp_path / "c.html"), "--json",
                      str(js)], capsys)
    assert code == 0
    doc = json.loads(js.read_text())
    assert doc["a"]["tls_decrypt_status"] == {"decrypted": 1}
    assert doc["b"]["tls_decrypt_status"] == {"no_keylog": 1}
    lines = err.splitlines()
    assert lines[0].startswith("pcap-report: using the key log found beside a.pcapng: ")
    assert lines[1] == ("pcap-report: B: The TLS session could not be decrypted: no key log "
                        "was given (pcap-report --keylog KEYS.txt; record with SSLKEYLOGFILE "
                        "set).")
