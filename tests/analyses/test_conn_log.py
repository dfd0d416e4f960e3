"""analyses.conn_log: Zeek's connection boundaries and letters, on the zeek-rules recordings
(scripts/record_captures.py scenario zeek-rules) and hand-built edge cases; gaps on
connections no parser wants (connections.history) and checksum validation (load option)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import pcaptools
from pcaptools.analyses import CONN_LOG, conn_log
from pcaptools.tcp.gaps import SeqFollower
from tests.conftest import CAPTURES
from tests.helpers import ethernet, ipv4, ipv6, pcap_file, tcp

RULES = CAPTURES / "zeek-rules.pcap"
DROPS = CAPTURES / "zeek-rules-drops.pcap"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    return path


@pytest.fixture(scope="module")
def rules() -> pcaptools.Capture:
    return pcaptools.load(_need(RULES))


@pytest.fixture(scope="module")
def drops() -> pcaptools.Capture:
    return pcaptools.load(_need(DROPS), check_checksums=True)


def _facts(path: Path) -> dict:
    return json.loads(path.with_name(path.name + ".facts.json").read_text())


def _rows(z, port: int) -> list[tuple[str, str, str]]:
    r = z[z["client_port"] == port]
    return list(zip(r["conn_state"].astype(str), r["history"], r["end_reason"].astype(str),
                    strict=True))


def test_schema_and_one_row_per_zeek_connection(rules: pcaptools.Capture) -> None:
    z = conn_log(rules)
    CONN_LOG.check(z)
    assert z.equals(rules.conn_log())
    # parts number the Zeek connections cut from one tcp_stream
    assert (z.groupby("tcp_stream")["part"].apply(lambda p: list(p) == list(range(len(p))))).all()


def test_three_refused_attempts_are_three_rej_rows(rules: pcaptools.Capture) -> None:
    z = conn_log(rules)
    assert _facts(RULES)["truth"]["zeek"]["rej_attempts_on_one_4tuple"] == 3
    assert _rows(z, 45001) == [("REJ", "Sr", "reused"), ("REJ", "Sr", "reused"),
                               ("REJ", "Sr", "eof")]
    # Wireshark numbers them as three tcp.streams too: the same rows
    c = rules.connections
    assert c[c["client_port"] == 45001]["tcp_stream"].tolist() == \
        z[z["client_port"] == 45001]["tcp_stream"].tolist()


def test_syn_after_close_starts_a_new_connection(rules: pcaptools.Capture) -> None:
    z = conn_log(rules)
    assert _rows(z, 45010) == [("SF", "ShADadfF", "reused"), ("SF", "ShADadfF", "eof")]
    r = z[z["client_port"] == 45010]
    assert r["tcp_stream"].nunique() == 2
    # Zeek's orig_bytes / resp_bytes from sequence numbers: the request and the 3 chunks
    assert r["client_bytes"].tolist() == [69, 69]
    assert len(set(r["server_bytes"])) == 1


def test_attempt_unanswered_past_attempt_delay_is_two_s0_rows(rules: pcaptools.Capture) -> None:
    c = rules.connections
    one = c[c["client_port"] == 45002]
    assert len(one) == 1 and one["conn_state"].iloc[0] == "S0"  # one tcp.stream
    syns = int(one["client_packets"].iloc[0])
    z = conn_log(rules)
    r = z[z["client_port"] == 45002]
    assert _rows(z, 45002) == [("S0", "S", "attempt_timeout"), ("S0", "S", "eof")]
    assert r["client_packets"].sum() == syns
    # the second row starts with the first SYN at least 5 s after the first one
    gap = (r["first_ts"].iloc[1] - r["first_ts"].iloc[0]).total_seconds()
    assert gap >= 5.0
    # with attempts that never time out, one row again
    assert _rows(conn_log(rules, attempt_delay_s=0), 45002) == [("S0", "S", "eof")]


def test_inactivity_timeout_splits_an_idle_connection(rules: pcaptools.Capture) -> None:
    assert _rows(conn_log(rules), 45030) == [("SF", "ShADaFdf", "eof")]
    z = conn_log(rules, inactivity_timeout_s=2.0)  # the capture's silence is 2.5 s
    assert _rows(z, 45030) == [("S1", "ShADa", "inactivity_timeout"), ("SF", "DaFdAf", "eof")]
    r = z[z["client_port"] == 45030]
    assert r["client_packets"].sum() == 7 and r["server_packets"].sum() == 5


def test_gap_on_a_connection_no_parser_wants(rules: pcaptools.Capture,
                                             drops: pcaptools.Capture) -> None:
    """The removed segment (acknowledged, never captured) is a G in connections.history, a
    tcp.reassembly_gap row and a capture_drop row, as on parsed connections."""
    lost = _facts(DROPS)["truth"]["zeek"]["gap_bytes"]
    for cap, hist, gaps in ((rules, "ShADaFdf", 0), (drops, "ShADaGFdf", 1)):
        c = cap.connections
        row = c[c["server_port"] == 2121].iloc[0]
        assert row["history"] == hist
        w = cap.warnings
        g = w[(w["code"] == "tcp.reassembly_gap") & (w["tcp_stream"] == row["tcp_stream"])]
        assert len(g) == gaps
    st = int(c[c["server_port"] == 2121]["tcp_stream"].iloc[0])
    assert f"{lost} bytes at stream offset 11 never captured (acked)" in g["detail"].iloc[0]
    loss = drops.tcp_losses
    drop = loss[(loss["tcp_stream"] == st) & (loss["kind"] == "capture_drop")]
    assert drop["len"].tolist() == [lost]
    z = conn_log(drops)
    r = z[z["server_port"] == 2121].iloc[0]
    assert (r["history"], r["missed_bytes"]) == ("ShADaGFdf", lost)


def test_checksums_agree_with_tshark(drops: pcaptools.Capture, tshark: str) -> None:
    """Every segment of the veth capture carries a partial checksum (offloaded): tshark
    validating says Bad for exactly those, pcaptools calls them partial, never bad."""
    out = subprocess.run([tshark, "-n", "-r", str(DROPS), "-o", "tcp.check_checksum:TRUE",
                          "-Y", "tcp", "-T", "fields", "-e", "tcp.checksum.status"],
                         capture_output=True, text=True, check=True).stdout.split()
    st = drops.summary.extra["tcp_checksums"]
    assert st["partial"] == out.count("0") and st["good"] == out.count("1")
    assert st["bad"] == 0 and st["partial"] + st["good"] == len(out)
    w = drops.warnings
    assert (w["code"] == "tcp.checksum_offloaded").sum() == 1


# ------------------------------------------------------------------ hand-built edge cases

C4, S4 = "10.0.0.1", "10.0.0.2"


def _seg(ts: int, sport: int, dport: int, seq: int, ack: int, flags: int, data: bytes = b"",
         *, v6: bool = False, good: bool = True) -> tuple[int, bytes]:
    src, dst = (C4, S4) if sport == 40000 else (S4, C4)
    if v6:
        src, dst = ("2001:db8::1", "2001:db8::2") if sport == 40000 else ("2001:db8::2",
                                                                        "2001:db8::1")
    t = tcp(sport, dport, seq, ack, flags, data, src=src, dst=dst)
    if not good:  # corrupt the checksum field
        t = t[:16] + struct.pack("!H", struct.unpack("!H", t[16:18])[0] ^ 0x5555) + t[18:]
    ip = ipv6(t, src, dst) if v6 else ipv4(t, src, dst)
    return ts, ethernet(ip, ethertype=0x86DD) if v6 else ethernet(ip)


def _conversation(*, bad_data: bool = False, fin_first: bool = False,
                  v6: bool = False) -> list[tuple[int, bytes]]:
    ms = 1_000_000
    c, s = 1000, 5000
    pk = [
        _seg(1 * ms, 40000, 2222, c, 0, 0x02, v6=v6),
        _seg(2 * ms, 2222, 40000, s, c + 1, 0x12, v6=v6),
        _seg(3 * ms, 40000, 2222, c + 1, s + 1, 0x10, v6=v6),
    ]
    data = _seg(4 * ms, 40000, 2222, c + 1, s + 1, 0x18, b"hello", v6=v6, good=not bad_data)
    fin = _seg(5 * ms, 40000, 2222, c + 6, s + 1, 0x11, v6=v6)
    if fin_first:  # the FIN captured before the data it ends
        pk += [(data[0], fin[1]), (fin[0], data[1])]
    else:
        pk += [data, fin]
    pk += [_seg(6 * ms, 2222, 40000, s + 1, c + 7, 0x11, v6=v6),
           _seg(7 * ms, 40000, 2222, c + 7, s + 2, 0x10, v6=v6)]
    return pk


def _load(tmp_path: Path, name: str, pk: list[tuple[int, bytes]], **kw: object):
    p = tmp_path / name
    p.write_bytes(pcap_file(pk))
    return p, pcaptools.load(p, **kw)


def test_fin_before_its_data_gives_zeek_t(tmp_path: Path) -> None:
    """Zeek's T is a sequence-space test: the data ends below the FIN already seen. tshark
    calls the same frame out_of_order, so connections (tshark's flags) has no T."""
    _, cap = _load(tmp_path, "finfirst.pcap", _conversation(fin_first=True))
    assert conn_log(cap)[["conn_state", "history", "client_bytes"]].values.tolist() == \
        [["SF", "ShAFDTf", 5]]
    assert cap.connections["history"].tolist() == ["ShAFDf"]
    ev = cap.tcp_events
    assert ev[ev["frame"] == 5]["kind"].tolist() == ["out_of_order"]
    # in order: no retransmission letter in either
    _, cap2 = _load(tmp_path, "inorder.pcap", _conversation())
    assert conn_log(cap2)["history"].tolist() == cap2.connections["history"].tolist() == \
        ["ShADFf"]


@pytest.mark.parametrize("v6", [False, True])
def test_bad_checksum_dropped_by_conn_log_with_c(tmp_path: Path, v6: bool) -> None:
    p, cap = _load(tmp_path, "bad.pcap", _conversation(bad_data=True, v6=v6),
                   check_checksums=True)
    assert cap.summary.extra["tcp_checksums"] == {"good": 6, "bad": 1, "partial": 0,
                                                  "unverified": 0}
    ev = cap.tcp_events
    assert ev[ev["kind"] == "bad_checksum"]["frame"].tolist() == [4]
    assert (cap.warnings["code"] == "tcp.bad_checksum").sum() == 1
    # connections follows tshark: the segment is analysed (D), no C
    assert "C" not in cap.connections["history"].iloc[0]
    z = conn_log(cap)
    r = z.iloc[0]
    assert "C" in r["history"] and r["bad_checksums"] == 1 and r["client_packets"] == 4
    # zeek -C: checksums ignored
    assert "C" not in conn_log(cap, check_checksums=False)["history"].iloc[0]
    # a load without validation cannot apply them
    with pytest.raises(ValueError):
        conn_log(pcaptools.load(p), check_checksums=True)
    if shutil.which("tshark"):
        out = subprocess.run(["tshark", "-n", "-r", str(p), "-o", "tcp.check_checksum:TRUE",
                              "-T", "fields", "-e", "tcp.checksum.status"],
                             capture_output=True, text=True, check=True).stdout.split()
        assert out == ["1", "1", "1", "0", "1", "1", "1"]  # 0 = Bad, 1 = Good


def test_synack_first_from_a_likely_server_port_flips(tmp_path: Path) -> None:
    ms = 1_000_000
    pk = [_seg(1 * ms, 2222, 40000, 5000, 1001, 0x12), _seg(2 * ms, 40000, 2222, 1001, 5001, 0x10)]
    _, cap = _load(tmp_path, "synack.pcap", pk)
    assert conn_log(cap)["history"].iloc[0] == "Ha"  # 2222 is no likely server port
    z = conn_log(cap, likely_server_ports={2222})
    assert z["history"].iloc[0] == "^hA" and z["client_port"].iloc[0] == 40000
    # the connections table guessed the same roles (lower port is the server)
    assert int(cap.connections["client_port"].iloc[0]) == 40000 and not z["flipped"].iloc[0]


def test_seq_follower_gaps() -> None:
    f = SeqFollower()
    out: list = []
    f.segment(0, 0, 0, 0, True, False, out)       # SYN: offset 0 is seq 1
    f.segment(0, 1, 10, 10, False, False, out)
    f.segment(0, 21, 5, 5, False, False, out)     # 10 bytes missing at offset 10
    assert out == []
    f.acked(0, 26, out)
    assert out == [(0, 10, 10, "acked")]
    out.clear()
    f.segment(0, 26, 8, 3, False, False, out)      # snaplen kept 3 of 8
    assert out == [(0, 28, 5, "snaplen")]
    out.clear()
    f.segment(0, 40, 4, 4, False, True, out)       # a hole before the FIN
    f.finish(out)
    assert out == [(0, 33, 6, "end")]


def test_analysis_limit_is_one_x() -> None:
    from pcaptools.tcp.connstate import ConnHistory

    h = ConnHistory()
    h.packet(True, 0x02, 0)
    h.analysis_limit()
    h.packet(False, 0x12, 0)
    h.analysis_limit()  # logged once per connection, whoever hit the limit
    assert h.history == "SXh"


def test_x_when_a_real_limit_was_reached() -> None:
    """Zeek's X through a real analysis limit: h2-sse-chat loaded with a per-connection event
    cap of 5 gives table.events_truncated rows, and exactly those connections get X (once)."""
    cap = pcaptools.load(_need(CAPTURES / "h2-sse-chat.pcapng"),
                         keylog=CAPTURES / "h2-sse-chat.keys", max_events_per_connection=5)
    w = cap.warnings
    limited = set(w.loc[w["code"] == "table.events_truncated", "tcp_stream"].dropna().astype(int))
    assert limited
    z = conn_log(cap)
    with_x = set(z.loc[z["history"].str.contains("X", regex=False), "tcp_stream"].astype(int))
    assert with_x == limited
    assert (z.loc[z["tcp_stream"].isin(limited), "history"].str.count("X") == 1).all()
    # the same capture without the cap: no X anywhere
    full = conn_log(pcaptools.load(CAPTURES / "h2-sse-chat.pcapng",
                                   keylog=CAPTURES / "h2-sse-chat.keys"))
    assert not full["history"].str.contains("X", regex=False).any()


def test_cli_check_checksums(tmp_path: Path) -> None:
    """pcap-report --check-checksums passes the option to load(): the JSON facts count the
    bad segment; without the flag nothing is validated."""
    from pcaptools.cli import main

    p, _ = _load(tmp_path, "bad.pcap", _conversation(bad_data=True))
    out = {}
    for flag in (True, False):
        j = tmp_path / f"r{flag}.json"
        argv = [str(p), "-o", str(tmp_path / f"r{flag}.html"), "--json", str(j), "--quiet"]
        assert main(argv + (["--check-checksums"] if flag else [])) == 0
        out[flag] = j.read_text()
    assert '"tcp.bad_checksum"' in out[True] and '"tcp.bad_checksum"' not in out[False]
