"""pcaptools.load() against what the recording script *did* (captures/*.facts.json).

The recording script knows how every connection was meant to start and end; these tests
check that the connections and tcp_handshakes tables say the same, connection by connection.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcaptools
from tests.conftest import shipped_captures

CASES = [(p, json.loads(Path(f"{p}.facts.json").read_text())) for p in shipped_captures()
         if Path(f"{p}.facts.json").is_file()]


@pytest.mark.parametrize(("path", "facts"), CASES, ids=[p.name for p, _ in CASES])
def test_connections_match_what_the_script_did(path: Path, facts: dict) -> None:
    cap = pcaptools.load(path, packets=False)
    conns = cap.connections.set_index("tcp_stream")
    hs = cap.tcp_handshakes.set_index("tcp_stream")
    # QUIC connections (transport "quic") are not TCP: tests/test_quic_captures.py has them
    tcp_conns = [c for c in facts["connections"] if c.get("transport", "tcp") == "tcp"]
    assert len(conns) == len(tcp_conns)
    for c in tcp_conns:
        row = conns.loc[c["tshark_stream"]]
        client_addr, client_port = c["client"].rsplit(":", 1)
        server_addr, server_port = c["server"].rsplit(":", 1)
        assert (row.client_addr, row.client_port) == (client_addr.strip("[]"), int(client_port))
        assert (row.server_addr, row.server_port) == (server_addr.strip("[]"), int(server_port))
        assert bool(row.client_inferred) == (c["opened"] == "before-capture")
        end = c["end"]
        if end.startswith("rst-"):
            assert (row.end_reason, row.end_by) == ("rst", end[4:]), c
            assert row.conn_state in ({"RSTO", "RSTOS0"} if end == "rst-client" else {"RSTR", "RSTRH"})
        elif end in ("fin-client-first", "fin-server-first", "fin-both"):
            assert row.end_reason == "fin", c
            # end_by is who sent the second FIN, the one that completed the close
            if end == "fin-client-first":
                assert row.end_by == "server"
            elif end == "fin-server-first":
                assert row.end_by == "client"
            # Zeek calls a closed connection SF even when its start was not captured
            assert row.conn_state == "SF"
        elif end == "open-at-capture-end":
            assert row.end_reason == "open_at_eof"
            assert row.conn_state == "S1"
        if c["opened"] == "before-capture":
            assert c["tshark_stream"] not in hs.index
            continue
        result = hs.at[c["tshark_stream"], "result"]
        expected = {"completed": "established", "refused": "refused", "no-answer": "no_answer",
                    "icmp-rejected": "no_answer"}[c["handshake"]]
        assert result == expected, c
        if c["handshake"] == "refused":
            assert row.conn_state == "REJ"
            assert row.history == "Sr"
        if c["handshake"] in ("no-answer", "icmp-rejected"):
            assert row.conn_state == "S0"


def test_icmp_error_frame_carries_the_stream_of_the_connection_it_quotes() -> None:
    path = next((p for p in shipped_captures() if p.name == "tcp-refused.pcap"), None)
    if path is None:
        pytest.skip("captures/tcp-refused.pcap is absent")
    cap = pcaptools.load(path)
    facts = json.loads(Path(f"{path}.facts.json").read_text())
    icmp = cap.packets[cap.packets["ip_proto"] == 1]
    rejected = [c for c in facts["connections"] if c["handshake"] == "icmp-rejected"]
    assert len(icmp) == len(rejected) == 1
    assert icmp["tcp_stream"].iloc[0] == rejected[0]["tshark_stream"]
    # the ICMP frame is not counted as a packet of the connection
    conn = cap.connections.set_index("tcp_stream").loc[rejected[0]["tshark_stream"]]
    assert conn.server_packets == 0
