"""``pcaptools.wireshark`` / ``Capture.wireshark``: tshark fields as typed DataFrames.

Values are checked against pcaptools' own tables on the shipped captures (tcp.stream, frame
numbers, timestamps, HTTP/2 stream ids of decrypted frames...), which the rest of the suite
checks against tshark. A fake ``tshark`` shell script covers what a real one will not do on
demand (hang, crash) and the field-type cache.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import struct
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pcaptools
from pcaptools.errors import (
    CaptureFormatError,
    CaptureOpenError,
    KeylogError,
    PcapToolsError,
    TsharkNotFoundError,
    WiresharkError,
    WiresharkFieldError,
    WiresharkFilterError,
    WiresharkTimeoutError,
)
from tests.conftest import CAPTURES
from tests.helpers import dsb

# ``pcaptools.wireshark`` is the function (re-exported); the module is in sys.modules
ws = importlib.import_module("pcaptools.wireshark")

H2 = CAPTURES / "h2-sse-chat.pcapng"
H2_KEYS = CAPTURES / "h2-sse-chat.keys"
HTTP1 = CAPTURES / "http1-basic.pcap"
LOSSY = CAPTURES / "http1-lossy.pcap"

_no_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")


def needs_tshark(f: Any) -> Any:
    """Runs the real tshark: marked ``tshark``, skipped when it is not installed."""
    return pytest.mark.tshark(_no_tshark(f))


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory) -> object:
    """Field-type cache in a scratch directory, never in the user's ~/.cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PCAPTOOLS_CACHE_DIR", str(tmp_path_factory.mktemp("pcaptools-cache")))
    ws._glossary.cache_clear()
    yield
    mp.undo()
    ws._glossary.cache_clear()


@pytest.fixture(scope="module")
def h2cap() -> pcaptools.Capture:
    return pcaptools.load(H2, keylog=H2_KEYS)


# --------------------------------------------------------------------------------------------
# values equal pcaptools' own tables


@needs_tshark
def test_decrypted_http2_frames_equal_pcaptools_http2_frames(h2cap: pcaptools.Capture) -> None:
    df = h2cap.wireshark(
        ["frame.number", "tcp.stream", "http2.streamid", "http2.type", "http2.length"],
        display_filter="http2",
    )
    assert len(df) == 135  # TCP frames carrying HTTP/2, all of them decrypted with the key log
    ex = df.explode(["http2.streamid", "http2.type", "http2.length"])
    h = h2cap.http2_frames
    assert len(ex) == len(h) == 154
    assert list(
        zip(
            ex["frame.number"],
            ex["tcp.stream"],
            ex["http2.streamid"],
            ex["http2.type"],
            ex["http2.length"],
            strict=True,
        )
    ) == list(zip(h.frame, h.tcp_stream, h.stream_id, h.type_code, h.length, strict=True))
    # the HEADERS frames (type 1) of the brief's example: 3 requests and 3 responses
    hd = h2cap.wireshark(
        ["frame.number", "http2.streamid", "http2.header.value"], "http2.type == 1"
    )
    assert hd["frame.number"].tolist() == h[h.type_code == 1].frame.drop_duplicates().tolist()
    assert hd["frame.number"].tolist()[:2] == [12, 22]
    assert hd.loc[0, "http2.header.value"][:4] == [
        "POST",
        "lab.test",
        "https",
        "/v1/chat/completions",
    ]


@needs_tshark
def test_frame_numbers_streams_and_times_equal_cap_packets() -> None:
    cap = pcaptools.load(LOSSY)
    df = cap.wireshark(
        [
            "frame.number",
            "tcp.stream",
            "frame.time_epoch",
            "frame.time",
            "frame.len",
            "tcp.flags",
            "tcp.len",
            "tcp.srcport",
            "tcp.analysis.ack_rtt",
            "tcp.analysis.retransmission",
            "frame.time_relative",
        ]
    )
    p = cap.packets
    assert len(df) == len(p) == 478
    assert df["frame.number"].tolist() == p.frame.tolist() == list(range(1, 479))
    assert df["tcp.stream"].equals(p.tcp_stream)
    assert (df["frame.time_epoch"] == p.ts).all()  # to the nanosecond
    assert (df["frame.time"] == p.ts).all()
    assert df["frame.len"].tolist() == p.frame_len.tolist()
    # (the same values and NAs; our bounded columns are narrower ints than tshark's Int64)
    assert df["tcp.flags"].equals(p.tcp_flags.astype("Int64"))  # tshark prints 0x0018: hex
    assert df["tcp.len"].equals(p.tcp_len.astype("Int64"))
    assert df["tcp.srcport"].equals(p.sport.astype("Int64"))
    assert np.allclose(df["tcp.analysis.ack_rtt"] * 1e3, p.ack_rtt_ms, equal_nan=True, atol=1e-6)
    retrans = df.loc[df["tcp.analysis.retransmission"], "frame.number"].tolist()
    assert sorted(retrans) == sorted(cap.retransmissions.frame.tolist()) and len(retrans) == 8
    rel = (p.ts - p.ts.iloc[0]).dt.total_seconds()
    assert np.allclose(df["frame.time_relative"], rel, atol=1e-9)


@needs_tshark
def test_dtypes() -> None:
    df = pcaptools.wireshark(
        H2,
        [
            "frame.number",
            "frame.time",
            "frame.time_epoch",
            "frame.time_relative",
            "tcp.stream",
            "tcp.flags",
            "tcp.flags.syn",
            "ip.src",
            "eth.src",
            "tcp.payload",
            "tcp.analysis.ack_rtt",
            "tcp.analysis.retransmission",
            "http2",
            "tls.handshake.ciphersuite",
            "ip.id",
            "_ws.col.Protocol",
            "tcp.window_size_scalefactor",
        ],
        keylog=H2_KEYS,
        occurrence="first",
    )
    assert {c: str(t) for c, t in df.dtypes.items()} == {
        "frame.number": "Int64",
        "frame.time": "datetime64[ns, UTC]",
        "frame.time_epoch": "datetime64[ns, UTC]",
        "frame.time_relative": "float64",
        "tcp.stream": "Int64",
        "tcp.flags": "Int64",
        "tcp.flags.syn": "boolean",
        "ip.src": "string",
        "eth.src": "string",
        "tcp.payload": "string",
        "tcp.analysis.ack_rtt": "float64",
        "tcp.analysis.retransmission": "boolean",
        "http2": "boolean",
        "tls.handshake.ciphersuite": "Int64",
        "ip.id": "Int64",
        "_ws.col.Protocol": "string",
        "tcp.window_size_scalefactor": "Int64",
    }
    r = df.set_index("frame.number")
    assert r.loc[3, "tcp.flags"] == 0x002 and r.loc[4, "tcp.flags"] == 0x012
    assert bool(r.loc[3, "tcp.flags.syn"]) is True and bool(r.loc[5, "tcp.flags.syn"]) is False
    assert r.loc[3, "ip.src"] == "192.0.2.10" and r.loc[4, "eth.src"] == "02:00:00:00:00:20"
    assert pd.isna(r.loc[1, "ip.src"])  # frames 1-2 are ARP
    assert r.loc[3, "ip.id"] == 0x949F  # BASE_HEX_DEC, printed 0x949f
    assert r.loc[6, "tls.handshake.ciphersuite"] == 0x1302  # first of the ClientHello's list
    assert r.loc[11, "tcp.payload"].startswith("1703030063")  # hex, no separators
    assert r.loc[4, "tcp.analysis.ack_rtt"] == pytest.approx(0.060408702)
    assert r.loc[3, "frame.time_epoch"] == pd.Timestamp("2026-11-29 21:31:02.718101666", tz="UTC")
    assert (
        r.loc[3, "_ws.col.Protocol"] == "TCP" and bool(r.loc[11, "http2"]) and not r.loc[3, "http2"]
    )
    assert (
        pd.isna(r.loc[3, "tcp.window_size_scalefactor"])
        and r.loc[5, "tcp.window_size_scalefactor"] == 1024
    )


@needs_tshark
def test_multi_occurrence_lists_first_and_last() -> None:
    f = ["frame.number", "tcp.stream", "http2.streamid", "http2.header.value", "http2.flags"]
    every = pcaptools.wireshark(H2, f, "frame.number in {11,12,13,22}", keylog=H2_KEYS)
    assert every["frame.number"].tolist() == [11, 12, 13, 22]
    assert every["tcp.stream"].dtype == "Int64"  # never more than one value: stays scalar
    assert every["http2.streamid"].dtype == object
    assert every["http2.streamid"].tolist() == [[0, 0], [1, 1], [1], [1, 1]]
    assert every["http2.flags"].tolist() == [[0, 0], [4, 0], [0], [4, 0]]  # BASE_HEX items in lists
    assert every["http2.header.value"].tolist()[0] is None  # SETTINGS frames: no header at all
    assert every.loc[1, "http2.header.value"] == [
        "POST",
        "lab.test",
        "https",
        "/v1/chat/completions",
        "gzip, deflate, zstd",
        "python-httpx/0.28.1",
        "chat-1",
        "text/event-stream",
        "144",
        "application/json",
    ]
    assert every.loc[3, "http2.header.value"][2] == "Sun, 29 Nov 2026 21:31:02 GMT"  # commas kept
    first = pcaptools.wireshark(
        H2, f, "frame.number in {11,12,13,22}", keylog=H2_KEYS, occurrence="first"
    )
    last = pcaptools.wireshark(
        H2, f, "frame.number in {11,12,13,22}", keylog=H2_KEYS, occurrence="last"
    )
    assert first["http2.streamid"].dtype == "Int64" and first["http2.streamid"].tolist() == [
        0,
        1,
        1,
        1,
    ]
    assert first["http2.header.value"].dtype == "string"
    assert first["http2.header.value"].tolist()[1:] == ["POST", pd.NA, "200"]
    assert last["http2.header.value"].tolist()[1:] == ["application/json", pd.NA, "chat-1"]
    assert last["http2.flags"].tolist() == [0, 0, 0, 0]


@needs_tshark
def test_display_filter_and_max_frames() -> None:
    syn = pcaptools.wireshark(LOSSY, ["frame.number", "tcp.flags"], "tcp.flags.syn == 1")
    cap = pcaptools.load(LOSSY, payloads=False)
    p = cap.packets
    assert syn["frame.number"].tolist() == p.frame[(p.tcp_flags & 0x02) > 0].tolist()
    assert syn["frame.number"].tolist() == [3, 4, 384, 385] and syn["tcp.flags"].tolist() == [
        2,
        0x12,
        2,
        0x12,
    ]
    head = pcaptools.wireshark(LOSSY, ["frame.number"], max_frames=10)
    assert head["frame.number"].tolist() == list(range(1, 11))
    # -c counts frames read, not rows: the SYNs among the first 10 frames only
    both = pcaptools.wireshark(LOSSY, ["frame.number"], "tcp.flags.syn == 1", max_frames=10)
    assert both["frame.number"].tolist() == [3, 4]
    none = pcaptools.wireshark(
        LOSSY, ["frame.number", "tcp.stream", "http.request.uri"], "tcp.port == 1"
    )
    assert len(none) == 0 and list(none.columns) == [
        "frame.number",
        "tcp.stream",
        "http.request.uri",
    ]
    assert [str(t) for t in none.dtypes] == ["Int64", "Int64", "string"]


@needs_tshark
def test_decode_as() -> None:
    f = ["frame.number", "http.request.method", "data.len", "tcp.len"]
    plain = pcaptools.wireshark(HTTP1, f, "tcp.len > 0")
    methods = pcaptools.load(HTTP1).http_requests.method.tolist()
    assert plain["http.request.method"].dropna().tolist() == methods and "HEAD" in methods
    assert plain["data.len"].dropna().tolist() == [65536, 20000]  # two bodies shown as data
    raw = pcaptools.wireshark(HTTP1, f, "tcp.len > 0", decode_as={"tcp.port==80": "data"})
    assert raw["http.request.method"].isna().all()
    assert raw["data.len"].tolist() == raw["tcp.len"].tolist()
    cmd = raw.attrs["wireshark"]["command"]
    assert cmd[cmd.index("-d") + 1] == "tcp.port==80,data"


@needs_tshark
def test_two_pass_fills_fields_that_need_later_frames() -> None:
    f = ["frame.number", "http.response_in", "http.request_in"]
    one = pcaptools.wireshark(HTTP1, f, "http.request")
    two = pcaptools.wireshark(HTTP1, f, "http.request", two_pass=True)
    assert one["http.response_in"].isna().all()  # the response comes later: unknown in one pass
    req = pcaptools.load(HTTP1).http_requests
    assert two["frame.number"].tolist() == req.request_frame.tolist()
    assert two["http.response_in"].tolist() == req.response_frame.tolist()
    assert two["http.response_in"].tolist()[:3] == [8, 11, 63]


@needs_tshark
def test_keylog_bookkeeping_and_embedded_keys(h2cap: pcaptools.Capture, tmp_path: Path) -> None:
    assert h2cap.summary.extra["keylog"] == str(H2_KEYS.resolve())
    f = ["frame.number", "http2.streamid"]
    assert len(h2cap.wireshark(f, "http2")) == 135
    bare = pcaptools.load(H2, packets=False, payloads=False)
    assert "keylog" not in bare.summary.extra
    assert len(bare.wireshark(f, "http2")) == 0  # still encrypted
    assert len(bare.wireshark(f, "http2", keylog=H2_KEYS)) == 135
    # the keys in a pcapng Decryption Secrets Block: tshark uses them with no keylog=
    data = H2.read_bytes()
    shb_len = struct.unpack_from("<I", data, 4)[0]
    idb_len = struct.unpack_from("<I", data, shb_len + 4)[0]
    cut = shb_len + idb_len
    embedded = tmp_path / "embedded.pcapng"
    embedded.write_bytes(data[:cut] + dsb(0x544C534B, H2_KEYS.read_bytes()) + data[cut:])
    cap = pcaptools.load(embedded, packets=False)
    assert cap.summary.tls_secrets == 1 and "keylog" not in cap.summary.extra
    df = cap.wireshark(f, "http2")
    assert (
        len(df) == 135
        and df["http2.streamid"].explode().tolist() == h2cap.http2_frames.stream_id.tolist()
    )


@needs_tshark
def test_on_a_subset_only_its_frames() -> None:
    if not hasattr(pcaptools.Capture, "subset"):
        pytest.skip("no Capture.subset")
    sub = pcaptools.load(CAPTURES / "tcp-port-reuse.pcap").subset(stream=1)
    df = sub.wireshark(["frame.number", "tcp.stream"])
    assert df["frame.number"].tolist() == sub.packets.frame.tolist() == list(range(13, 23))
    assert set(df["tcp.stream"]) == {1}
    syn = sub.wireshark(["frame.number"], "tcp.flags.syn == 1")
    assert (
        syn["frame.number"].tolist() == sub.packets.frame[(sub.packets.tcp_flags & 2) > 0].tolist()
    )


# --------------------------------------------------------------------------------------------
# errors


@needs_tshark
def test_unknown_field_names_suggest_close_ones() -> None:
    with pytest.raises(WiresharkFieldError) as e:
        pcaptools.wireshark(H2, ["frame.number", "tcp.strem", "htpp2.streamid"])
    assert sorted(e.value.fields) == ["htpp2.streamid", "tcp.strem"]
    assert e.value.suggestions["tcp.strem"][0] == "tcp.stream"
    assert e.value.suggestions["htpp2.streamid"][0] == "http2.streamid"
    msg = str(e.value)
    assert "'tcp.strem'" in msg and "did you mean 'tcp.stream'" in msg and "tshark -G fields" in msg
    assert isinstance(e.value, WiresharkError) and isinstance(e.value, PcapToolsError)
    with pytest.raises(WiresharkFieldError, match=r"'nosuchproto\.zzz': no close name"):
        pcaptools.wireshark(H2, ["nosuchproto.zzz"])
    assert (
        ws.suggest_fields(
            "ssl.handshake.type",
            ws._glossary(
                os.path.realpath(shutil.which("tshark") or ""),
                ws.tshark_version(shutil.which("tshark") or ""),
            ),
        )[0]
        == "tls.handshake.type"
    )


@needs_tshark
def test_bad_display_filter_and_bad_options() -> None:
    with pytest.raises(
        WiresharkFilterError, match=r"bad display filter 'tcp.port ==': Unexpected end"
    ):
        pcaptools.wireshark(H2, ["frame.number"], "tcp.port ==")
    with pytest.raises(WiresharkFilterError, match=r"must be a field or function, not foo\.bar"):
        pcaptools.wireshark(H2, ["frame.number"], "foo.bar == 1")
    with pytest.raises(WiresharkError, match='Unknown protocol -- "nosuchproto"') as e:
        pcaptools.wireshark(
            H2, ["frame.number"], "tcp", decode_as={"tcp.port==8080": "nosuchproto"}
        )
    assert not isinstance(e.value, WiresharkFilterError)
    assert "more lines)" in str(e.value)  # tshark lists 300 protocols: cut to a few lines
    with pytest.raises(WiresharkError, match="unknown preference"):
        pcaptools.wireshark(H2, ["frame.number"], prefs={"nosuch.pref": 1})


def test_bad_arguments_are_value_errors() -> None:
    for kw, msg in [
        ({"occurrence": "every"}, "occurrence"),
        ({"max_frames": 0}, "max_frames"),
        ({"engine": "scapy"}, "engine"),
        ({"timeout": 0}, "timeout"),
        ({"decode_as": {"tcp.port 80": "http"}}, "decode_as"),
    ]:
        with pytest.raises(ValueError, match=msg):
            pcaptools.wireshark(H2, ["frame.number"], **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one field"):
        pcaptools.wireshark(H2, [])
    with pytest.raises(ValueError, match="more than once"):
        pcaptools.wireshark(H2, ["tcp.stream", "tcp.stream"])


@needs_tshark
def test_files_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(CaptureOpenError, match="cannot open capture"):
        pcaptools.wireshark(tmp_path / "missing.pcap", ["frame.number"])
    with pytest.raises(CaptureOpenError, match="not a regular file"):
        pcaptools.wireshark(tmp_path, ["frame.number"])
    (tmp_path / "empty.pcap").write_bytes(b"")
    with pytest.raises(CaptureFormatError, match="empty"):
        pcaptools.wireshark(tmp_path / "empty.pcap", ["frame.number"])
    (tmp_path / "notes.pcap").write_text("not a capture\n" * 10)
    with pytest.raises(CaptureFormatError, match="isn't a capture file"):
        pcaptools.wireshark(tmp_path / "notes.pcap", ["frame.number"])
    with pytest.raises(KeylogError, match="cannot read key log"):
        pcaptools.wireshark(H2, ["frame.number"], keylog=tmp_path / "missing.keys")


@needs_tshark
def test_capture_cut_short_returns_the_frames_read(tmp_path: Path) -> None:
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(H2.read_bytes()[:30000])
    df = pcaptools.wireshark(cut, ["frame.number", "tcp.stream"])
    assert df["frame.number"].tolist() == list(range(1, 124))
    assert any(
        "cut short in the middle of a packet" in w for w in df.attrs["wireshark"]["warnings"]
    )


def test_tshark_missing_from_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert shutil.which("tshark") is None
    with pytest.raises(
        TsharkNotFoundError, match=r"tshark not found on PATH: install tshark \(Debian"
    ):
        pcaptools.wireshark(H2, ["frame.number"])
    with pytest.raises(TsharkNotFoundError, match="apt install tshark"):
        pcaptools.wireshark(H2, ["frame.number"], tshark_path=tmp_path / "tshark")
    cap = pcaptools.load(H2, packets=False, payloads=False)
    with pytest.raises(TsharkNotFoundError):
        cap.wireshark(["frame.number"])


# --------------------------------------------------------------------------------------------
# a fake tshark: hangs, crashes, the field-type cache

FAKE = """#!/bin/sh
case "$1" in
  -v) echo "TShark (Wireshark) 99.9.9 (fake for pcaptools tests)"; exit 0;;
  -G) echo run >> "$FAKE_COUNTER"
      printf 'P\\tFake\\tfake\\nF\\tNumber\\tfake.n\\tFT_UINT32\\tfake\\tBASE_HEX\\t0x0\\t\\n'
      printf 'F\\tWhen\\tfake.t\\tFT_ABSOLUTE_TIME\\tfake\\t\\t0x0\\t\\n'
      printf 'F\\tOn\\tfake.on\\tFT_BOOLEAN\\tfake\\t8\\t0x1\\t\\n'
      exit 0;;
esac
case "$FAKE_MODE" in
  hang) tail -f /dev/null >/dev/null 2>&1 & echo $! > "$FAKE_CHILD"; wait;;
  segv) kill -SEGV $$;;
  rows) printf 'fake.n\\tfake.t\\tfake.on\\tfake.other\\n'
        printf '0x10\\tJan  2, 2026 03:04:05.000000007 UTC\\t1\\ta\\\\tb\\n'
        printf '0x20\\0370x30\\t\\t0\\t\\n';;
esac
"""


@pytest.fixture
def fake_tshark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if sys.platform == "win32":
        pytest.skip("shell script")
    exe = tmp_path / "bin" / "tshark"
    exe.parent.mkdir()
    exe.write_text(FAKE)
    exe.chmod(0o755)
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "glossary-runs"))
    monkeypatch.setenv("PCAPTOOLS_CACHE_DIR", str(tmp_path / "cache"))
    ws._glossary.cache_clear()
    yield exe
    ws._glossary.cache_clear()


def _killed(pid: int) -> bool:
    """The process was killed: it is gone, a zombie, or has a SIGKILL pending (the kernel
    ends it the next time it runs). Read once from /proc: nothing waits, no clock."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    if fields.get("State", "")[:1] in ("Z", "X"):
        return True
    kill_bit = 1 << (signal.SIGKILL - 1)
    return any(int(fields.get(k, "0"), 16) & kill_bit for k in ("SigPnd", "ShdPnd"))


class _WhenReady:
    """Stands in for the ``threading.Timer`` of a ``timeout=``: it fires when the hanging fake
    tshark has started its child (its pid comes through a FIFO, which blocks until both
    sides are there), not when a time has passed, so the test does not depend on how fast
    the machine starts a shell. What it checks is what happens when the timer fires."""

    def __init__(self, fifo: Path, pids: list[int], function: Any,
                 args: tuple[Any, ...]) -> None:
        self.daemon = True
        self._fifo, self._pids, self._fire = fifo, pids, (function, args)

    def _run(self) -> None:
        self._pids.append(int(self._fifo.read_text()))
        function, args = self._fire
        function(*args)

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def cancel(self) -> None:
        pass


def test_timeout_kills_tshark_and_its_children(fake_tshark: Path, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    fifo = tmp_path / "child.pid"
    os.mkfifo(fifo)
    pids: list[int] = []
    monkeypatch.setenv("FAKE_MODE", "hang")
    monkeypatch.setenv("FAKE_CHILD", str(fifo))
    monkeypatch.setattr(ws.threading, "Timer",
                        lambda _interval, function, args: _WhenReady(fifo, pids, function, args))
    # the timer is the stand-in above: it fires on an event (the child started), never on a
    # clock, and the timeout given is one no test run reaches, so nothing here waits for or
    # measures time; what is checked is what firing it does (the error, the children killed)
    with pytest.raises(WiresharkTimeoutError, match=r"tshark did not finish .* and was killed") \
            as e:
        pcaptools.wireshark(H2, ["fake.n"], tshark_path=fake_tshark, timeout=86_400)
    assert isinstance(e.value, TimeoutError)
    # what the fake tshark started was killed with it (its process group), not left running
    assert len(pids) == 1 and _killed(pids[0])


def test_tshark_crash(fake_tshark: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MODE", "segv")
    with pytest.raises(WiresharkError, match=r"tshark crashed \(killed by SIGSEGV\)"):
        pcaptools.wireshark(H2, ["fake.n"], tshark_path=fake_tshark)


def test_types_come_from_the_glossary_and_it_is_cached_on_disk(
    fake_tshark: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "rows")
    runs = Path(os.environ["FAKE_COUNTER"])
    df = pcaptools.wireshark(
        H2, ["fake.n", "fake.t", "fake.on", "fake.other"], tshark_path=fake_tshark
    )
    assert df["fake.n"].dtype == object and df["fake.n"].tolist() == [[16], [32, 48]]
    assert df["fake.t"].dtype == "datetime64[ns, UTC]"
    assert df["fake.t"].iloc[0] == pd.Timestamp("2026-01-02 03:04:05.000000007", tz="UTC")
    assert pd.isna(df["fake.t"].iloc[1])
    assert df["fake.on"].dtype == "boolean" and df["fake.on"].tolist() == [True, False]
    assert df["fake.other"].dtype == "string" and df["fake.other"].tolist() == [
        "a\tb",
        pd.NA,
    ]  # unescaped
    assert df.attrs["wireshark"]["field_types"] == {
        "fake.n": "FT_UINT32",
        "fake.t": "FT_ABSOLUTE_TIME",
        "fake.on": "FT_BOOLEAN",
        "fake.other": "",
    }
    assert runs.read_text().count("run") == 1
    cached = list((Path(os.environ["PCAPTOOLS_CACHE_DIR"])).glob("tshark-fields-*.sqlite"))
    assert len(cached) == 1
    ws._glossary.cache_clear()  # a new session: read from disk, tshark -G not run again
    assert ws.field_types(["fake.n", "nope"], tshark_path=fake_tshark) == {
        "fake.n": ws.FieldType("fake.n", "FT_UINT32", "BASE_HEX")
    }
    assert runs.read_text().count("run") == 1
    cached[0].write_bytes(b"garbage")  # a damaged cache is rebuilt
    ws._glossary.cache_clear()
    assert ws.field_types(None, tshark_path=fake_tshark)["fake.on"].kind == "bool"
    assert runs.read_text().count("run") == 2


def test_unwritable_cache_dir_still_works(
    fake_tshark: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("PCAPTOOLS_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    monkeypatch.setenv("FAKE_MODE", "rows")
    df = pcaptools.wireshark(
        H2, ["fake.n", "fake.t", "fake.on", "fake.other"], tshark_path=fake_tshark
    )
    assert df["fake.n"].tolist() == [[16], [32, 48]]
    assert not (blocker / "cache").exists()


# --------------------------------------------------------------------------------------------
# pyshark engine


@needs_tshark
def test_pyshark_engine_gives_the_identical_dataframe() -> None:
    pytest.importorskip("pyshark")
    f = [
        "frame.number",
        "frame.time",
        "frame.time_epoch",
        "frame.time_relative",
        "tcp.stream",
        "tcp.flags",
        "tcp.flags.syn",
        "http2.streamid",
        "http2.header.value",
        "ip.src",
        "eth.src",
        "tcp.payload",
        "tcp.analysis.ack_rtt",
        "http2",
        "tcp.analysis.retransmission",
        "tls.handshake.ciphersuite",
    ]
    a = pcaptools.wireshark(H2, f, keylog=H2_KEYS)
    b = pcaptools.wireshark(H2, f, keylog=H2_KEYS, engine="pyshark")
    assert len(a) == 225
    pd.testing.assert_frame_equal(a, b)
    assert b.attrs["wireshark"]["engine"] == "pyshark"
    a = pcaptools.wireshark(
        LOSSY,
        ["frame.number", "tcp.stream", "http.request.uri"],
        "tcp.len > 0",
        max_frames=100,
        two_pass=True,
    )
    b = pcaptools.wireshark(
        LOSSY,
        ["frame.number", "tcp.stream", "http.request.uri"],
        "tcp.len > 0",
        max_frames=100,
        two_pass=True,
        engine="pyshark",
    )
    assert len(a) == 50 and a["frame.number"].max() == 100
    pd.testing.assert_frame_equal(a, b)
    # the same errors as the direct engine
    with pytest.raises(WiresharkFieldError, match=r"tcp\.strem"):
        pcaptools.wireshark(H2, ["tcp.strem"], engine="pyshark")


# --------------------------------------------------------------------------------------------
# parsing, without tshark


def test_parse_abs_time_formats() -> None:
    ns = 1795987862_657599795
    assert ws.parse_abs_time("Nov 29, 2026 21:31:02.657599795 UTC") == ns
    assert ws.parse_abs_time("1795987862.657599795") == ns  # exact, no float rounding
    assert ws.parse_abs_time("2026/333 21:31:02.657599795 UTC") == ns
    assert ws.parse_abs_time("2026-11-29T21:31:02.657599795Z") == ns
    assert ws.parse_abs_time("2026-11-29T22:31:02.657599795+01:00") == ns
    assert ws.parse_abs_time("Jan  2, 2026 03:04:05 UTC") == 1767323045 * 10**9
    assert ws.parse_abs_time("-1.5") == -1_500_000_000
    assert ws.parse_abs_time("NULL") is None
    with pytest.raises(ValueError):
        ws.parse_abs_time("yesterday")


def test_typed_columns_edge_cases() -> None:
    def col(ftype: str, base: str, raw: list[str], occurrence: str = "all") -> object:
        return ws._typed_column(ws.FieldType("x.y", ftype, base), raw, occurrence, True)

    big = str(2**64 - 1)
    assert list(col("FT_UINT64", "BASE_DEC", [big, "", "1"])) == [2**64 - 1, pd.NA, 1]
    assert str(col("FT_UINT64", "BASE_DEC", [big]).dtype) == "UInt64"
    assert list(col("FT_UINT16", "BASE_OCT", ["0755"])) == [0o755]
    assert list(col("FT_UINT24", "BASE_OUI", ["00:50:c2"])) == [0x0050C2]
    assert list(col("FT_INT32", "BASE_DEC", ["-5", "007"])) == [-5, 7]
    # a value that is not a number keeps the whole column as text, nothing becomes NA
    odd = col("FT_UINT32", "BASE_DEC", ["12", "n/a"])
    assert str(odd.dtype) == "string" and list(odd) == ["12", "n/a"]
    assert list(col("FT_BYTES", "", ["aa:bb:cc", "<MISSING>", ""])) == ["aabbcc", pd.NA, pd.NA]
    assert list(col("FT_STRING", "", ["Host: x\\r\\n", "a\\tb"])) == ["Host: x\r\n", "a\tb"]
    assert list(col("FT_STRING", "", ["a\x1fb", "c"])) == [["a", "b"], ["c"]]
    assert list(col("FT_NONE", "", ["1\x1f1", ""])) == [True, False]  # presence: never a list
    assert list(col("FT_BOOLEAN", "8", ["True", "False", ""])) == [True, False, pd.NA]
    dbl = col("FT_DOUBLE", "", ["1e-05", "", "inf"])
    assert dbl[0] == 1e-05 and np.isnan(dbl[1]) and dbl[2] == np.inf  # type: ignore[index]
    lst = col("FT_ABSOLUTE_TIME", "", ["1.5\x1f2", ""])
    assert list(lst) == [
        [
            pd.Timestamp(1_500_000_000, unit="ns", tz="UTC"),
            pd.Timestamp(2_000_000_000, unit="ns", tz="UTC"),
        ],
        None,
    ]
