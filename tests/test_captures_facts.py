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
MAX_TOTAL_BYTES = 5 * 1024 * 1024  # the brief: a few MB at most


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
            "loopback-any.pcap"} <= names


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
