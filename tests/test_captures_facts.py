"""Every capture in captures/ has a README entry and a facts file that still describes it.

The captures are recorded by scripts/record_captures.py; these checks are light (no tshark):
they catch a capture re-recorded without its facts, a facts file left behind, or a README
that was not regenerated.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CAPTURES, shipped_captures

FACT_KEYS = ("schema", "capture", "scenario", "file", "hosts", "link", "connections",
             "summary", "events", "recorder", "capinfos", "tshark", "checks")
CONNECTION_KEYS = ("id", "client", "server", "opened", "handshake", "end")
README = CAPTURES / "README.md"
MAX_TOTAL_BYTES = 8 * 1024 * 1024  # the captures stay small: seconds of traffic each
NSS_LABELS = {"CLIENT_RANDOM", "RSA", "CLIENT_EARLY_TRAFFIC_SECRET",
              "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
              "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0", "EARLY_EXPORTER_SECRET",
              "EXPORTER_SECRET"}
TLS_CAPTURES = ("tls-versions-ciphers.pcapng", "tls-resumption.pcapng", "h2-sse-chat.pcapng",
                "compare-h1.pcapng", "compare-h2.pcapng", "ws-tls.pcapng")


def _facts(capture: Path) -> dict[str, Any]:
    return dict(json.loads((capture.parent / f"{capture.name}.facts.json").read_text()))


def _count_records(path: Path) -> int:
    """Packets in a pcap or pcapng file, counted from the record headers alone."""
    data = path.read_bytes()
    magic = data[:4]
    pcap_magics = (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4",
                   b"\xa1\xb2\x3c\x4d")
    if magic in pcap_magics:
        endian = "<" if magic[0] in (0xD4, 0x4D) else ">"
        off, n = 24, 0
        while off + 16 <= len(data):
            incl = struct.unpack_from(endian + "I", data, off + 8)[0]
            off += 16 + incl
            n += 1
        return n
    assert magic == b"\x0a\x0d\x0d\x0a", f"{path.name}: not pcap or pcapng"
    endian = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    off, n = 0, 0
    while off + 12 <= len(data):
        btype, blen = struct.unpack_from(endian + "II", data, off)
        if btype in (2, 3, 6):  # obsolete packet, simple packet, enhanced packet
            n += 1
        off += blen
    return n


CAPS = shipped_captures()
IDS = [p.name for p in CAPS]


def test_there_are_captures() -> None:
    names = {p.name for p in CAPS}
    assert {"demo.pcapng", "http1-basic.pcap", "http1-lossy.pcap", "tcp-refused.pcap",
            "tcp-reset.pcap", "tcp-port-reuse.pcap", "ipv6.pcap",
            "loopback-any.pcap", *TLS_CAPTURES, "sse-h1-cleartext.pcap", "ws-healthy.pcap",
            "ws-blackhole.pcap", "ws-idle-reset.pcap", "h2-ping.pcap"} <= names


@pytest.mark.parametrize("capture", CAPS, ids=IDS)
def test_capture_has_readme_entry(capture: Path) -> None:
    assert f"## {capture.name}\n" in README.read_text(), f"no README section for {capture.name}"


@pytest.mark.parametrize("capture", CAPS, ids=IDS)
def test_facts_describe_the_file(capture: Path) -> None:
    facts = _facts(capture)
    for key in FACT_KEYS:
        assert key in facts, f"{capture.name}: facts lack {key!r}"
    assert facts["schema"] == 1
    assert facts["capture"] == capture.name
    assert facts["file"]["bytes"] == capture.stat().st_size
    assert facts["file"]["sha256"] == hashlib.sha256(capture.read_bytes()).hexdigest()
    assert facts["tshark"]["frames"] == _count_records(capture)
    assert int(facts["capinfos"]["Number of packets"]) == facts["tshark"]["frames"]


@pytest.mark.parametrize("capture", CAPS, ids=IDS)
def test_facts_connections_and_checks(capture: Path) -> None:
    facts = _facts(capture)
    conns = facts["connections"]
    assert conns, f"{capture.name}: no connections recorded"
    for c in conns:
        for key in CONNECTION_KEYS:
            assert key in c, f"{capture.name}: connection {c.get('id')} lacks {key!r}"
    assert facts["summary"]["attempted"] == len(conns)
    failed = [c["check"] for c in facts["checks"] if not c["ok"]]
    assert failed == [], f"{capture.name}: recorded with failing checks {failed}"


def test_every_facts_file_has_its_capture() -> None:
    for facts in sorted(CAPTURES.glob("*.facts.json")):
        if facts.name.startswith("slow-") and not facts.name.endswith(".pcapng.facts.json"):
            # the #16 "injected causes" facts (their own shape): they name their capture
            assert (CAPTURES / json.loads(facts.read_text())["capture"]).is_file(), facts.name
            continue
        assert (CAPTURES / facts.name.removesuffix(".facts.json")).is_file(), facts.name


def test_readme_lists_only_existing_captures() -> None:
    sections = [line[3:].strip() for line in README.read_text().splitlines()
                if line.startswith("## ")]
    assert sorted(sections) == sorted(p.name for p in CAPS)


def test_captures_stay_small() -> None:
    total = sum(p.stat().st_size for p in CAPS)
    assert total < MAX_TOTAL_BYTES, f"captures/ holds {total} bytes of captures"


def test_known_facts_of_named_captures() -> None:
    """A few facts the scenarios guarantee, so a broken re-record is noticed."""
    refused = _facts(CAPTURES / "tcp-refused.pcap")["summary"]
    assert (refused["refused"], refused["no_answer"], refused["icmp_rejected"]) == (1, 1, 1)
    reset = _facts(CAPTURES / "tcp-reset.pcap")
    assert reset["summary"]["reset"] == 3
    assert reset["summary"]["open_at_capture_start"] == 1
    assert reset["summary"]["open_at_capture_end"] == 1
    reuse = _facts(CAPTURES / "tcp-port-reuse.pcap")
    assert {c["client"] for c in reuse["connections"]} == {"192.0.2.10:44000"}
    assert reuse["tshark"]["tcp"]["streams"] == 4
    lossy = _facts(CAPTURES / "http1-lossy-server.pcap")
    assert lossy["tshark"]["tcp"]["fast_retransmission"] >= 1
    assert lossy["link"]["params"]["seed"] == 20240
    for name, encap in (("loopback-any.pcap", "linux-sll2"),
                        ("loopback-any-sll1.pcap", "linux-sll")):
        assert _facts(CAPTURES / name)["capinfos"]["File encapsulation"] == encap
    assert _facts(CAPTURES / "demo.pcapng")["capinfos"]["File type"] == "pcapng"


@pytest.mark.parametrize("name", TLS_CAPTURES)
def test_tls_capture_has_its_key_log(name: str) -> None:
    facts = _facts(CAPTURES / name)
    keys = (CAPTURES / name).with_suffix(".keys")  # h2-sse-chat.pcapng -> h2-sse-chat.keys
    kl = facts["keylog"]
    assert kl["file"] == keys.name
    assert kl["sha256"] == hashlib.sha256(keys.read_bytes()).hexdigest()
    lines = keys.read_text().splitlines()
    assert len(lines) == kl["lines"] > 0
    randoms = set()
    for line in lines:
        label, first, secret = line.split(" ")
        assert label in NSS_LABELS, line[:40]
        assert int(first, 16) >= 0 and int(secret, 16) >= 0  # hex
        if label != "RSA":
            assert len(first) == 64
            randoms.add(first)
    assert len(randoms) == kl["client_randoms"]
    for omitted in kl["omitted"]:
        assert not set(omitted["client_randoms"]) & randoms
    # every TLS connection is decrypted by tshark exactly when its keys are in the file
    streams = {s["stream"]: s for s in facts["tshark"]["app"]["tls"]["streams"]}
    for c in facts["connections"]:
        st = streams[c["tshark_stream"]]
        assert st["decrypted"] == c["tls"]["keys_in_keylog"] == (st["client_random"] in randoms)


def test_every_key_log_has_its_capture() -> None:
    stems = {p.stem for p in CAPS}
    for keys in sorted(CAPTURES.glob("*.keys")):
        assert keys.stem in stems, keys.name


def test_known_facts_of_tls_captures() -> None:
    tv = _facts(CAPTURES / "tls-versions-ciphers.pcapng")
    got = sorted((c["tls"]["version"], c["tls"]["cipher"]) for c in tv["connections"])
    assert got == sorted([
        ("TLSv1.3", "TLS_AES_128_GCM_SHA256"), ("TLSv1.3", "TLS_AES_128_GCM_SHA256"),
        ("TLSv1.3", "TLS_AES_256_GCM_SHA384"), ("TLSv1.3", "TLS_CHACHA20_POLY1305_SHA256"),
        ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"), ("TLSv1.2", "ECDHE-RSA-CHACHA20-POLY1305"),
        ("TLSv1.2", "ECDHE-RSA-AES256-SHA384"), ("TLSv1.2", "AES128-SHA"),
        ("TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384")])
    no_keys = [c for c in tv["connections"] if not c["tls"]["keys_in_keylog"]]
    assert [c["client"] for c in no_keys] == ["192.0.2.10:50008"]
    no_sni = [c for c in tv["connections"] if c["tls"]["sni"] is None]
    assert [(c["client"], c["tls"]["alpn"]) for c in no_sni] == [("192.0.2.10:50009", None)]
    assert tv["tshark"]["http.requests"] == 16  # 8 decryptable connections x 2 requests
    res = _facts(CAPTURES / "tls-resumption.pcapng")
    assert [(c["tls"]["version"], c["tls"]["resumed"]) for c in res["connections"]] == [
        ("TLSv1.2", False), ("TLSv1.2", True), ("TLSv1.2", False), ("TLSv1.2", True),
        ("TLSv1.3", False), ("TLSv1.3", True)]
    resumed = {s["stream"] for s in res["tshark"]["app"]["tls"]["streams"] if s["resumed"]}
    assert resumed == {c["tshark_stream"] for c in res["connections"] if c["tls"]["resumed"]}
    # a resumed handshake has no Certificate (11) message
    for st in res["tshark"]["app"]["tls"]["streams"]:
        assert (11 in st["handshake_types"]) != st["resumed"]


def test_known_facts_of_http2_and_sse_captures() -> None:
    chat = _facts(CAPTURES / "h2-sse-chat.pcapng")
    (conn,) = chat["connections"]
    assert conn["tls"]["alpn"] == "h2"
    reqs = conn["requests"]
    assert [r["h2_stream_id"] for r in reqs] == [1, 3, 5, 7, 9, 11, 13]
    assert [r["tokens_received"] for r in reqs] == [20, 0, 20, 10, 30, 0, 20]
    assert all(r["sse_events_received"] == r["sse_events_sent"] for r in reqs)
    assert chat["link"]["params"]["delay_ms"] == 30.0
    h2 = chat["tshark"]["app"]["http2"]
    assert (h2["connections"], h2["streams"], len(h2["requests"])) == (1, 7, 7)
    h1f, h2f = _facts(CAPTURES / "compare-h1.pcapng"), _facts(CAPTURES / "compare-h2.pcapng")
    assert (h1f["tshark"]["tcp"]["streams"], h2f["tshark"]["tcp"]["streams"]) == (10, 1)
    assert h1f["tshark"]["app"]["tls"]["client_hellos"] == 10
    assert h2f["tshark"]["app"]["http2"]["streams"] == 10
    assert h1f["link"]["params"]["loss_ab"] == h2f["link"]["params"]["loss_ab"] == 0.01
    sse = _facts(CAPTURES / "sse-h1-cleartext.pcap")
    assert [r["sse_events_sent"] for c in sse["connections"] for r in c["requests"]] == [22, 7]
    ping = _facts(CAPTURES / "h2-ping.pcap")
    pings = ping["truth"]["pings"]
    assert [p["payload"] for p in pings] == [f"lab-p{i:03d}" for i in range(1, 7)]
    assert all("t_ack_ns" in p for p in pings)
    frames = ping["tshark"]["app"]["http2"]["frames"]
    assert (frames["PING"], frames["GOAWAY"]) == (12, 1)


def test_known_facts_of_websocket_captures() -> None:
    healthy = _facts(CAPTURES / "ws-healthy.pcap")
    ws = healthy["tshark"]["app"]["websocket"]
    assert ws["opcodes"]["continuation"] == 3 and ws["fin_clear"] == 3
    assert ws["close_codes"] == [1000, 1000]
    assert ws["opcodes"]["ping"] == len(healthy["truth"]["client_pings"]) + len(
        healthy["truth"]["server_pings"])
    tls = _facts(CAPTURES / "ws-tls.pcapng")
    assert tls["tshark"]["app"]["websocket"]["close_codes"] == [1000, 1000]
    bh = _facts(CAPTURES / "ws-blackhole.pcap")
    b = bh["truth"]["blackhole"]
    assert b["server_frames_after"] == 0 and b["client_retransmissions_after"] >= 2
    assert b["last_server_packet_before"]["src"] == "192.0.2.20"
    assert float(b["last_server_packet_before"]["t_epoch"]) * 1e9 < b["installed_ns_from"]
    assert bh["connections"][0]["end"] == "black-hole"
    idle = _facts(CAPTURES / "ws-idle-reset.pcap")["truth"]["idle"]
    assert idle["gap_on_wire_s"] >= 5.5
    assert idle["rst_frame"]["src"] == "192.0.2.20"
    assert idle["rst_frame"]["frame"] == idle["first_frame_after_gap"]["frame"] + 1


@pytest.mark.parametrize("capture", [c for c in CAPS
                                     if "app_out_of_order" in _facts(c).get("tshark", {})],
                         ids=lambda p: p.name)
def test_out_of_order_view_counts_what_the_tables_hold(capture: Path) -> None:
    """Where tshark's view with out-of-order reassembly differs from its default one (the
    captures with loss, and the capture-drop one), the facts file holds it: its HTTP/2 frames
    and HTTP/1.x requests are ours, but for the capture whose missing bytes tshark waits for
    (there tshark's view falls short: tests/test_lossy_vs_tshark.py)."""
    import pcaptools

    view = _facts(capture)["tshark"]["app_out_of_order"]
    keys = capture.with_suffix(".keys")
    cap = pcaptools.load(capture, keylog=keys if keys.exists() else None, packets=False)
    h2 = sum((view.get("http2") or {}).get("frames", {}).values())
    h1 = len((view.get("http") or {}).get("requests", []))
    if capture.name == "http1-keepalive-drops.pcap":
        assert (h1, len(cap.http_requests)) == (15, 42)
    else:
        assert (h2, h1) == (len(cap.http2_frames), len(cap.http_requests))
