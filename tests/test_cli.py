"""pcap-report called in-process: exit codes, files written, the exact stderr lines, --json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pcaptools.cli as cli
from pcaptools import __version__, _accel
from pcaptools.analyses.summary import headline
from pcaptools.errors import CaptureFormatError
from tests.conftest import CAPTURES
from tests.report.factory import make_capture

ROOT_CAPTURES = Path(__file__).resolve().parent.parent / "captures"


@pytest.fixture
def fake_load(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace load() by one returning the hand-built capture; records its arguments."""
    calls: list[dict[str, Any]] = []

    def load(path: Any, *, keylog: Any = None, packets: bool = True, progress: Any = None,
             **other: Any) -> Any:
        calls.append({"path": path, "packets": packets, "progress": progress})
        if keylog is not None:
            calls[-1]["keylog"] = keylog
        if progress is not None:
            progress(512, 1024)
            progress(1024, 1024)
        return make_capture()

    monkeypatch.setattr(cli, "load", load)
    return calls


def test_writes_report_and_json(
    tmp_path: Path, fake_load: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, js = tmp_path / "r.html", tmp_path / "s.json"
    assert cli.main(["x.pcapng", "-o", str(out), "--json", str(js)]) == 0
    err = capsys.readouterr().err
    assert err == f"analysed 300 frames, 6 connections, 8 warnings -> {out}\n"
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert json.loads(js.read_text()) == headline(make_capture())
    assert js.read_text().startswith('{\n  "file": "mixed.pcapng",')  # indent 2
    assert fake_load == [{"path": "x.pcapng", "packets": True, "progress": None}]


def test_default_output_in_working_directory(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_load: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["/somewhere/else/trace.pcap.gz"]) == 0
    assert (tmp_path / "trace.report.html").is_file()
    assert capsys.readouterr().err.endswith("-> trace.report.html\n")


@pytest.mark.parametrize(
    ("name", "out"),
    [
        ("a.pcapng", "a.report.html"),
        ("a.pcap", "a.report.html"),
        ("b.pcap.zst", "b.report.html"),
        ("dir/c.cap.xz", "c.report.html"),
        ("noext", "noext.report.html"),
        ("x.tar.gz", "x.tar.report.html"),
        (".pcap", ".pcap.report.html"),
    ],
)
def test_default_output_name(name: str, out: str) -> None:
    assert cli.default_output(name) == Path(out)


def test_quiet_prints_nothing(
    tmp_path: Path, fake_load: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["x.pcap", "-q", "-o", str(tmp_path / "r.html")]) == 0
    assert capsys.readouterr() == ("", "")


def test_no_packets_is_passed_to_load(tmp_path: Path, fake_load: list[dict[str, Any]]) -> None:
    assert cli.main(["x.pcap", "--no-packets", "-q", "-o", str(tmp_path / "r.html")]) == 0
    assert fake_load[0]["packets"] is False


def test_keylog_is_passed_to_load(tmp_path: Path, fake_load: list[dict[str, Any]]) -> None:
    keys = tmp_path / "keys.txt"  # (read once before the capture: it must exist)
    keys.write_text("CLIENT_RANDOM " + "ab" * 32 + " " + "cd" * 48 + "\n")
    assert cli.main(["x.pcap", "--keylog", str(keys), "-q", "-o", str(tmp_path / "r.html")]) == 0
    assert fake_load[0]["keylog"] == str(keys)


def test_unreadable_keylog_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = ROOT_CAPTURES / "http1-basic.pcap"
    if not src.is_file():
        pytest.skip("captures/http1-basic.pcap is absent")
    code = cli.main([str(src), "--keylog", str(tmp_path / "missing.keys"), "-q",
                     "-o", str(tmp_path / "r.html")])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("pcap-report: error: ") and "missing.keys" in err
    assert not (tmp_path / "r.html").exists()


def test_title(tmp_path: Path, fake_load: list[dict[str, Any]]) -> None:
    out = tmp_path / "r.html"
    assert cli.main(["x.pcap", "-q", "--title", "Incident 42", "-o", str(out)]) == 0
    assert "<title>Incident 42</title>" in out.read_text(encoding="utf-8")


def test_progress_bar_only_on_a_tty(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_load: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli, "_isatty", lambda stream: True)
    out = tmp_path / "r.html"
    assert cli.main(["x.pcap", "-o", str(out)]) == 0
    assert fake_load[0]["progress"] is not None
    err = capsys.readouterr().err
    assert "reading" in err  # the tqdm bar
    assert err.endswith(f"analysed 300 frames, 6 connections, 8 warnings -> {out}\n")
    # --quiet wins over a TTY
    assert cli.main(["x.pcap", "-q", "-o", str(out)]) == 0
    assert fake_load[1]["progress"] is None
    # one capture on two processes: the bar too (the part read in this process drives it)
    assert cli.main(["x.pcap", "--workers", "2", "-o", str(out)]) == 0
    assert fake_load[2]["progress"] is not None
    assert "reading" in capsys.readouterr().err


def test_unreadable_capture_exits_1_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def load(path: Any, **kw: Any) -> Any:
        raise CaptureFormatError(f"{path}: not a pcap or pcapng file (magic 0x3c21444f)")

    monkeypatch.setattr(cli, "load", load)
    out = tmp_path / "r.html"
    assert cli.main(["notes.txt", "-o", str(out)]) == 1
    assert capsys.readouterr().err == (
        "pcap-report: error: notes.txt: not a pcap or pcapng file (magic 0x3c21444f)\n"
    )
    assert not out.exists()


def test_oserror_while_loading_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def load(path: Any, **kw: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cli, "load", load)
    assert cli.main(["secret.pcap", "-o", str(tmp_path / "r.html")]) == 1
    assert capsys.readouterr().err == "pcap-report: error: secret.pcap: Permission denied\n"


def test_missing_output_folder_exits_2_before_reading(
    tmp_path: Path, fake_load: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing-dir" / "r.html"
    assert cli.main(["x.pcap", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"pcap-report: error: -o {out}: the folder {out.parent} does not exist\n"
    )
    assert fake_load == []  # found before the capture is read


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 2
    assert "the following arguments are required: capture" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["x.pcap", "--bogus"])
    assert e.value.code == 2


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out == f"pcap-report {__version__} ({_accel.summary()})\n"
    assert f"{len(_accel.MODULES)} per-frame modules" in out  # compiled or not, it says which


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: pcap-report [-h]")
    assert "examples:\n  pcap-report capture.pcapng\n" in out
    for opt in ("-o REPORT.html", "--json SUMMARY.json", "--no-packets", "--quiet", "--version"):
        assert opt in out


def test_entry_point_is_registered() -> None:
    import tomllib

    root = Path(__file__).resolve().parent.parent
    with open(root / "pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["pcap-report"] == "pcaptools.cli:main"


# --------------------------------------------------------------------------- real captures


@pytest.mark.corpus
def test_real_capture_end_to_end(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pcaptools

    src = corpus / "wireshark-retrans.pcap"
    out, js = tmp_path / "r.html", tmp_path / "s.json"
    assert cli.main([str(src), "-o", str(out), "--json", str(js)]) == 0
    head = headline(pcaptools.load(src))
    assert capsys.readouterr().err == (
        f"analysed 108 frames, 1 connection, {head['warnings']:,} "
        f"warning{'' if head['warnings'] == 1 else 's'} -> {out}\n"
    )
    got = json.loads(js.read_text())
    assert got == head
    assert got["retransmitted_segments"] == 47
    assert "<h2>Retransmissions over time</h2>" in out.read_text(encoding="utf-8")


@pytest.mark.corpus
def test_real_capture_no_packets(corpus: Path, tmp_path: Path) -> None:
    js = tmp_path / "s.json"
    src = corpus / "wireshark-retrans.pcap"
    assert (
        cli.main(
            [str(src), "-q", "--no-packets", "-o", str(tmp_path / "r.html"), "--json", str(js)]
        )
        == 0
    )
    got = json.loads(js.read_text())
    assert got["retransmitted_segments"] == 47
    assert got["data_segments"] is None or isinstance(got["data_segments"], int)


@pytest.mark.skipif(not (CAPTURES / "demo.pcapng").is_file(), reason="captures/demo.pcapng absent")
def test_demo_capture(tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    assert cli.main([str(CAPTURES / "demo.pcapng"), "-q", "-o", str(out)]) == 0
    assert out.stat().st_size > 1_000_000  # plotly.js inlined


def test_missing_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.pcap"
    assert cli.main([str(missing), "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pcap-report: error: ") and err.count("\n") == 1
    assert "nope.pcap" in err


def test_not_a_capture_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("<!DOCTYPE html> this is not a capture\n" * 10)
    assert cli.main([str(bad), "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pcap-report: error: ") and err.count("\n") == 1


def test_directory_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([str(tmp_path), "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pcap-report: error: ") and err.count("\n") == 1


def test_progress_bar_is_cleared_before_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def load(path: Any, *, keylog: Any = None, packets: bool = True, progress: Any = None,
             **other: Any) -> Any:
        progress(10, 100)
        raise CaptureFormatError(f"{path}: truncated header")

    monkeypatch.setattr(cli, "load", load)
    monkeypatch.setattr(cli, "_isatty", lambda stream: True)
    assert cli.main(["x.pcap", "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    # the bar was drawn, then erased with "\r<spaces>\r", and the error starts its own line
    assert "reading" in err
    assert err.endswith("\rpcap-report: error: x.pcap: truncated header\n")


# --------------------------------------------------------------------------- subset options


def _tshark_count(name: str, display_filter: str) -> int:
    from tests.oracle import keylog_options, tshark_fields

    path = CAPTURES / name
    keys = path.with_suffix(".keys")
    return len(tshark_fields(path, ("frame.number",), keylog_options(keys), display_filter))


@pytest.mark.tshark
def test_subset_report_json_and_header(
    tshark: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = CAPTURES / "compare-h1.pcapng"
    out, js = tmp_path / "r.html", tmp_path / "s.json"
    argv = [str(src), "--keylog", str(src.with_suffix(".keys")), "-o", str(out), "--json", str(js),
            "--stream", "3", "--stream", "5"]
    assert cli.main(argv) == 0
    frames = _tshark_count("compare-h1.pcapng", "tcp.stream in {3,5}")
    assert frames == 62 + 64  # the facts file: 32 + 30 and 33 + 31 frames
    assert capsys.readouterr().err == (
        f"analysed {frames} frames, 2 connections, 0 warnings (subset: tcp.stream 3, 5) -> {out}\n")
    head = json.loads(js.read_text())
    assert (head["frames"], head["tcp_connections"], head["http_requests"]) == (frames, 2, 2)
    assert head["subset"] == "tcp.stream 3, 5"
    assert head["subset_display_filter"] == "tcp.stream in {3,5}"
    html = out.read_text(encoding="utf-8")
    assert "<title>compare-h1.pcapng (subset): pcap-report</title>" in html
    assert (
        '<div class="subset">Subset: tcp.stream 3, 5 (Wireshark: <code class="filter">'
        f"tcp.stream in {{3,5}}</code>); {frames} of 627 frames."
    ) in html
    assert 'TCP connections</a>: 2 connections: 2 closed with FIN.</li>' in html
    assert '<code class="filter">tcp.stream eq 0</code>' not in html


@pytest.mark.tshark
def test_subset_sni_and_time_window(tshark: str, tmp_path: Path) -> None:
    src = CAPTURES / "compare-h1.pcapng"
    js = tmp_path / "s.json"
    argv = [str(src), "-q", "-o", str(tmp_path / "r.html"), "--json", str(js),
            "--sni", "*.TEST", "--port", "443", "--start", "0.5", "--end", "1",
            "--keylog", str(src.with_suffix(".keys"))]
    assert cli.main(argv) == 0
    head = json.loads(js.read_text())
    assert head["frames"] == _tshark_count(
        "compare-h1.pcapng",
        "tcp.port == 443 && frame.time_relative >= 0.5 && frame.time_relative <= 1",
    ) == 85
    assert head["tcp_connections"] == 5
    assert head["subset"] == "port 443, SNI *.TEST, time 0.5 s to 1 s"
    assert head["duration_s"] == 0.5


def test_subset_export_and_compare(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pandas as pd

    demo = CAPTURES / "demo.pcapng"
    assert cli.main([str(demo), "-q", "-o", str(tmp_path / "r.html"), "--port", "8443",
                     "--export", str(tmp_path / "t")]) == 0
    conns = pd.read_parquet(tmp_path / "t" / "connections.parquet")
    assert conns["client_port"].tolist() == [50711, 50712]  # the two WebSockets (facts)
    # --compare: both captures cut the same way
    out = tmp_path / "c.html"
    argv = [str(demo), "--compare", str(demo), "-q", "-o", str(out), "--port", "443"]
    assert cli.main(argv) == 0
    html = out.read_text(encoding="utf-8")
    assert html.count('<div class="subset">') == 2
    assert "A is a subset: port 443" in html and "B is a subset: port 443" in html


def test_subset_several_captures(tmp_path: Path) -> None:
    files = [str(CAPTURES / n) for n in ("demo.pcapng", "tcp-refused.pcap")]
    js = tmp_path / "all.json"
    assert cli.main([*files, "-q", "-o", str(tmp_path / "out"), "--json", str(js), "--host",
                     "192.0.2.20", "--workers", "1"]) == 0
    doc = json.loads(js.read_text())
    assert [(e["capture"], e["subset"]) for e in doc["captures"]] == [
        ("demo.pcapng", "host 192.0.2.20"), ("tcp-refused.pcap", "host 192.0.2.20")]
    assert doc["captures"][0]["tcp_connections"] == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--start", "soon"], "--start 'soon': give seconds since the first frame"),
        (["--end", "x"], "--end 'x': give seconds"),
        (["--port", "70000"], "argument --port: 70000 is not in 0..65535"),
        (["--stream", "a"], "argument --stream: invalid int value: 'a'"),
        (["--max-table-rows", "0"], "argument --max-table-rows: 0 is not at least 1"),
    ],
)
def test_subset_bad_values_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main([str(CAPTURES / "demo.pcapng"), *argv])
    assert exc.value.code == 2
    assert f"pcap-report: error: {message}" in capsys.readouterr().err


def test_subset_start_after_end_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(CAPTURES / "demo.pcapng"), "-q", "-o", str(tmp_path / "r.html"),
            "--start", "2", "--end", "1"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == "pcap-report: error: start '2' is after end '1'\n"
    assert not (tmp_path / "r.html").exists()


def test_max_table_rows(tmp_path: Path) -> None:
    src = CAPTURES / "compare-h1.pcapng"
    out = tmp_path / "r.html"
    assert cli.main([str(src), "-q", "-o", str(out), "--max-table-rows", "3"]) == 0
    html = out.read_text(encoding="utf-8")
    assert (
        '<p class="cut">Showing first 3 of 10 rows; use the DataFrame cap.connections or '
        "pcap-report --export for all (--max-table-rows sets this limit).</p>"
    ) in html


def test_workers_on_one_capture_gives_the_same_summary(tmp_path: Path) -> None:
    """--workers 2 on a single capture: payloads parsed by two processes, same headline."""
    cap = ROOT_CAPTURES / "h2-sse-chat.pcapng"
    keys = ROOT_CAPTURES / "h2-sse-chat.keys"
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    base = [str(cap), "--keylog", str(keys), "-q"]
    assert cli.main([*base, "-o", str(tmp_path / "1.html"), "--json", str(one)]) == 0
    assert cli.main([*base, "--workers", "2", "-o", str(tmp_path / "2.html"),
                     "--json", str(two)]) == 0
    a, b = json.loads(one.read_text()), json.loads(two.read_text())
    assert a == b
    assert a["frames"] > 0


def test_max_packet_rows_and_decompressed_bytes_reach_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[dict[str, Any]] = []
    real = cli.load

    def spy(path: Any, **kw: Any) -> Any:
        seen.append(kw)
        return real(path, **kw)

    monkeypatch.setattr(cli, "load", spy)
    cap = ROOT_CAPTURES / "http1-basic.pcap"
    js = tmp_path / "s.json"
    assert cli.main([str(cap), "-q", "-o", str(tmp_path / "r.html"), "--json", str(js),
                     "--max-packet-rows", "10", "--max-decompressed-bytes", "2K",
                     "--max-events-per-connection", "7", "--max-record-rows", "none"]) == 0
    assert seen[-1]["max_packet_rows"] == 10 and seen[-1]["max_decompressed_bytes"] == 2048
    assert seen[-1]["max_events_per_connection"] == 7 and seen[-1]["max_record_rows"] is None
    assert cli.main([str(cap), "-q", "-o", str(tmp_path / "r2.html"),
                     "--max-packet-rows", "none"]) == 0
    assert seen[-1]["max_packet_rows"] is None and seen[-1]["max_decompressed_bytes"] is None
    assert seen[-1]["max_events_per_connection"] == 1_000_000  # the default (issue 18)
    assert seen[-1]["max_record_rows"] == 2_000_000
    # the 2 KiB limit cut the file: fewer frames than the whole capture, and a warning said so
    whole = real(cap)
    limited = real(cap, max_decompressed_bytes=2048, max_packet_rows=10)
    assert 0 < limited.summary.frames < whole.summary.frames
    assert "capture.decompression_limit" in set(limited.warnings["code"].astype(str))
    assert len(limited.packets) == min(10, limited.summary.frames)


@pytest.mark.parametrize("flag,value", [("--max-decompressed-bytes", "lots"),
                                        ("--max-decompressed-bytes", "0"),
                                        ("--max-packet-rows", "-3")])
def test_bad_limits_exit_2(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["x.pcap", flag, value])
    assert e.value.code == 2
    assert flag in capsys.readouterr().err
