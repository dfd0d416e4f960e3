"""Outputs never destroy data (issue 18): an output naming an input or another output is
refused (exit 2) before the capture is read; a missing or unwritable output folder is found
before the analysis (exit 2 too); every file is written to a temporary file and renamed, so a
symlink at the target is replaced instead of written through, and a failed write keeps the
old file; stdout, /dev/null and named pipes are written into, never replaced, other devices
refused."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import CAPTURES

import pcaptools
from pcaptools import _safewrite, cli, export
from pcaptools.errors import OutputPathError

DEMO = CAPTURES / "ws-idle-reset.pcap"  # small: a real load in well under a second
TLS = CAPTURES / "ws-tls.pcapng"
TLS_KEYS = CAPTURES / "ws-tls.keys"


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Wrap cli.load to record the captures it was asked to read."""
    seen: list[Any] = []
    real = cli.load

    def load(path: Any, **kw: Any) -> Any:
        seen.append(path)
        return real(path, **kw)

    monkeypatch.setattr(cli, "load", load)
    return seen


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    cap = tmp_path / "in.pcapng"
    keys = tmp_path / "in.keys"
    cap.write_bytes(TLS.read_bytes())
    keys.write_bytes(TLS_KEYS.read_bytes())
    return cap, keys


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pcap-report: error: ")
    return err


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (["-o", "{cap}"], "-o {cap} is the capture ({cap}): refusing to overwrite an input"),
        (["--json", "{cap}"], "--json {cap} is the capture ({cap})"),
        (["--json", "{keys}"], "--json {keys} is the key log ({keys})"),
        (["-o", "{keys}"], "-o {keys} is the key log ({keys})"),
        (["-o", "{d}/r.html", "--json", "{d}/r.html"],
         "--json {d}/r.html and -o {d}/r.html are the same file"),
        (["-o", "{d}/sub/../r.html", "--json", "{d}/r.html"],
         "--json {d}/r.html and -o {d}/sub/../r.html are the same file"),
        (["-o", "{d}/link.html"], "-o {d}/link.html is the capture ({cap})"),  # symlink to it
        (["--json", "{d}/hard.json"], "--json {d}/hard.json is the key log ({keys})"),  # hard link
        (["-o", "{d}/t/connections.parquet", "--export", "{d}/t"],
         "--export {d}/t/connections.parquet and -o {d}/t/connections.parquet are the same"),
    ],
    ids=["o=capture", "json=capture", "json=keylog", "o=keylog", "o=json", "o=json-dotdot",
         "o=symlink-to-capture", "json=hardlink-to-keylog", "o=export-file"],
)
def test_output_equal_to_input_or_output_exits_2_before_reading(
    tmp_path: Path, inputs: tuple[Path, Path], loads: list[Any],
    capsys: pytest.CaptureFixture[str], opts: list[str], message: str,
) -> None:
    cap, keys = inputs
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.html").symlink_to(cap)
    os.link(keys, tmp_path / "hard.json")
    before = (cap.read_bytes(), keys.read_bytes())
    fmt = {"cap": cap, "keys": keys, "d": tmp_path}
    argv = [str(cap), "--keylog", str(keys), "-q", *(o.format(**fmt) for o in opts)]
    if "-o" not in opts:
        argv += ["-o", str(tmp_path / "report.html")]
    assert cli.main(argv) == 2
    assert message.format(**fmt) in _err(capsys)
    assert loads == []  # refused before the capture was read
    assert (cap.read_bytes(), keys.read_bytes()) == before
    assert not (tmp_path / "report.html").exists()


def test_compare_output_equal_to_the_second_capture(
    tmp_path: Path, inputs: tuple[Path, Path], loads: list[Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    cap, _ = inputs
    b = tmp_path / "b.pcap"
    b.write_bytes(DEMO.read_bytes())
    assert cli.main([str(cap), "--compare", str(b), "-q", "-o", str(b)]) == 2
    assert f"-o {b} is the capture ({b})" in _err(capsys)
    assert loads == [] and b.read_bytes() == DEMO.read_bytes()


def test_several_captures_whose_reports_collide(
    tmp_path: Path, loads: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """a.pcap and a.pcapng would both write a.report.html: one report would be lost."""
    d = tmp_path / "caps"
    d.mkdir()
    (d / "a.pcap").write_bytes(DEMO.read_bytes())
    (d / "a.pcapng").write_bytes(TLS.read_bytes())
    assert cli.main([str(d), "-q", "-o", str(tmp_path / "out"), "--workers", "1"]) == 2
    err = _err(capsys)
    assert "the report of a.pcapng" in err and "the report of a.pcap " in err
    assert "are the same file" in err and loads == []


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (["-o", "{d}/missing/r.html"], "-o {d}/missing/r.html: the folder {d}/missing does "
         "not exist"),
        (["--json", "{d}/missing/s.json"], "--json {d}/missing/s.json: the folder {d}/missing "
         "does not exist"),
        (["-o", "{d}/afile/r.html"], "-o {d}/afile/r.html: {d}/afile is not a folder"),
        (["--export", "{d}/afile/t"], "--export {d}/afile/t: {d}/afile is not a folder"),
        (["--export", "{d}/afile"], "--export {d}/afile exists and is not a folder"),
        (["-o", "{d}"], "-o {d} is a folder: give a file name"),
    ],
    ids=["o-missing-folder", "json-missing-folder", "o-under-a-file", "export-under-a-file",
         "export-is-a-file", "o-is-a-folder"],
)
def test_unwritable_outputs_are_found_before_the_analysis(
    tmp_path: Path, loads: list[Any], capsys: pytest.CaptureFixture[str],
    opts: list[str], message: str,
) -> None:
    (tmp_path / "afile").write_text("not a folder")
    argv = [str(DEMO), "-q", *(o.format(d=tmp_path) for o in opts)]
    if "-o" not in opts:
        argv += ["-o", str(tmp_path / "r.html")]
    assert cli.main(argv) == 2
    assert message.format(d=tmp_path) in _err(capsys)
    assert loads == []


def test_read_only_folder_is_found_before_the_analysis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loads: list[Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The folder is probed by creating a file in it (root ignores permission bits, so a
    read-only file system is simulated: mkstemp fails as it would there)."""
    def mkstemp(*a: Any, **kw: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(_safewrite.tempfile, "mkstemp", mkstemp)
    assert cli.main([str(DEMO), "-q", "-o", str(tmp_path / "r.html")]) == 2
    assert f"-o {tmp_path}/r.html: cannot write in {tmp_path} (Read-only file system)" in \
        _err(capsys)
    assert loads == []


# --------------------------------------------------------------------------- symlinks


def test_symlinks_at_every_output_are_replaced_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run as root, a symlink planted in an output folder pointed at a system file and the
    report was written into it. Now each symlink is replaced by the new file."""
    victim = tmp_path / "etc-passwd"
    victim.write_text("root:x:0:0::/root:/bin/sh\n")
    out = tmp_path / "out"
    (out / "t").mkdir(parents=True)
    links = [out / "r.html", out / "s.json", out / "t" / "connections.parquet",
             out / "t" / "captures.parquet"]
    for link in links:
        link.symlink_to(victim)
    assert cli.main([str(DEMO), "-q", "-o", str(links[0]), "--json", str(links[1]),
                     "--export", str(out / "t")]) == 0
    assert victim.read_text() == "root:x:0:0::/root:/bin/sh\n"
    for link in links:
        assert not link.is_symlink() and link.is_file(), link
    assert links[0].read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert '"frames": ' in links[1].read_text()
    want = pcaptools.load(DEMO)
    got = pd.read_parquet(links[2])
    assert got["tcp_stream"].tolist() == want.connections["tcp_stream"].tolist()
    assert [p.name for p in out.rglob("*partial*")] == []


def test_csv_export_and_streaming_export_replace_symlinks(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    csv_dir, pq_dir = tmp_path / "csv", tmp_path / "pq"
    csv_dir.mkdir()
    pq_dir.mkdir()
    (csv_dir / "connections.csv").symlink_to(victim)
    (pq_dir / "packets.parquet").symlink_to(victim)
    cap = pcaptools.load(DEMO)
    export.to_csv(cap, csv_dir)
    streamed = pcaptools.load(DEMO, out=pq_dir)
    assert victim.read_text() == "keep me"
    assert not (csv_dir / "connections.csv").is_symlink()
    assert pd.read_csv(csv_dir / "connections.csv")["tcp_stream"].tolist() == \
        cap.connections["tcp_stream"].tolist()
    assert not (pq_dir / "packets.parquet").is_symlink()
    assert streamed.rows["packets"] == cap.summary.frames == len(pd.read_parquet(
        pq_dir / "packets.parquet"))


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    out = tmp_path / "r.html"
    out.write_text("the old report")
    with pytest.raises(RuntimeError, match="disk full"), _safewrite.atomic_open(out) as f:
        f.write("half a report")
        raise RuntimeError("disk full")
    assert out.read_text() == "the old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]  # no temporary file left


def test_file_modes_as_a_plain_open_would_give(tmp_path: Path) -> None:
    new = tmp_path / "new.html"
    _safewrite.write_text(new, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
    old = tmp_path / "old.html"
    old.write_text("y")
    old.chmod(0o640)
    _safewrite.write_text(old, "z")
    assert stat.S_IMODE(old.stat().st_mode) == 0o640 and old.read_text() == "z"


def test_report_into_the_capture_folder_is_fine(tmp_path: Path) -> None:
    """Only exact collisions are refused: a report beside its capture is the common case."""
    cap = tmp_path / "x.pcap"
    cap.write_bytes(DEMO.read_bytes())
    assert cli.main([str(cap), "-q", "-o", str(tmp_path / "x.report.html"),
                     "--json", str(tmp_path / "x.json")]) == 0
    assert cap.read_bytes() == DEMO.read_bytes()
    assert (tmp_path / "x.report.html").stat().st_size > 10_000


# --------------------------------------------------------------------------- streams and devices
# Every target below is reached through a symlink in tmp_path (or is a node made there), so a
# regression replaces only that entry, never the system's /dev/stdout or /dev/null.


def test_json_to_stdout_is_written_into_it_not_replaced(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``--json /dev/stdout``: run as root, the old writer renamed a file over the
    /dev/stdout symlink. Now it writes through stdout's own descriptor."""
    link = tmp_path / "stdout.json"
    link.symlink_to("/proc/self/fd/1")
    null = tmp_path / "null.html"
    null.symlink_to(os.devnull)
    assert cli.main([str(DEMO), "-q", "-o", str(null), "--json", str(link)]) == 0
    out = capfd.readouterr().out
    assert json.loads(out)["frames"] == 16
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    assert null.is_symlink() and os.readlink(null) == os.devnull
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null.html", "stdout.json"]
    # /dev/null collides with nothing; two outputs into one stream do
    _safewrite.check_outputs([("-o", null), ("--json", os.devnull)], [])
    with pytest.raises(OutputPathError, match="are the same file"):
        _safewrite.check_outputs([("-o", link), ("--json", "/proc/self/fd/1")], [])


def test_report_into_a_named_pipe(tmp_path: Path) -> None:
    """``mkfifo p; reader < p & pcap-report cap -o p``: the reader gets the report, the
    FIFO stays a FIFO; two outputs into one pipe are refused."""
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    assert cli.main([str(DEMO), "-q", "-o", str(fifo)]) == 0
    t.join()  # (the report is written and the FIFO closed: the reader is at its end)
    assert got and got[0].startswith(b"<!DOCTYPE html>") and got[0].rstrip().endswith(b"</html>")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (tmp_path / "also.json").symlink_to(fifo)
    assert cli.main([str(DEMO), "-q", "-o", str(fifo), "--json", str(tmp_path / "also.json")]
                    ) == 2


def test_other_devices_are_refused_before_reading(
    tmp_path: Path, loads: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A device node other than /dev/null (here a copy of /dev/zero's, made in tmp_path) is
    neither written into nor replaced; a symlink to one is replaced like any symlink."""
    zero = tmp_path / "zero"
    try:
        os.mknod(zero, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    assert cli.main([str(DEMO), "-q", "-o", str(zero)]) == 2
    assert f"-o {zero} is a device: refusing to write into it or replace it" in _err(capsys)
    assert loads == [] and stat.S_ISCHR(os.lstat(zero).st_mode)
    link = tmp_path / "r.html"
    link.symlink_to(zero)
    assert _safewrite.target_kind(link) == _safewrite.FILE  # the symlink would be replaced
    _safewrite.write_text(link, "report")
    assert not link.is_symlink() and link.read_text() == "report"
    assert stat.S_ISCHR(os.lstat(zero).st_mode)


def test_write_report_refuses_the_capture_it_was_loaded_from(tmp_path: Path) -> None:
    """The Python API keeps the CLI's promise: ``write_report(cap, <its capture>)``."""
    from pcaptools.report import write_comparison, write_report

    cap_path = tmp_path / "in.pcap"
    keys = tmp_path / "in.keys"
    cap_path.write_bytes(DEMO.read_bytes())
    keys.write_bytes(TLS_KEYS.read_bytes())
    cap = pcaptools.load(cap_path, keylog=keys)
    for target in (cap_path, keys):
        with pytest.raises(OutputPathError, match=f"is the (capture|key log) \\({target}\\)"):
            write_report(cap, target)
        with pytest.raises(OutputPathError, match="refusing to overwrite an input"):
            write_comparison(cap, cap, target)
    assert cap_path.read_bytes() == DEMO.read_bytes() and keys.read_bytes() == TLS_KEYS.read_bytes()
