"""Writes the notebooks in notebooks/ from the cell sources below (stored without outputs).

    python scripts/make_notebooks.py

Keeping the source here makes notebook diffs readable; tests/test_notebooks.py executes
every notebook top to bottom and checks they are stored without outputs.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

QUICKSTART = [
    new_markdown_cell(
        "# pcaptools quickstart\n\n"
        "`pcaptools.load()` reads a capture once and gives every answer as a pandas DataFrame. "
        "This notebook opens `captures/demo.pcapng`: HTTP/1.1 over a link with 20 ms of delay and 2% "
        "loss, recorded from real curl and nginx in network namespaces (see `captures/README.md`). "
        "Every table is documented column by column in `docs/tables.md`; `frame` and `tcp_stream` are "
        "Wireshark's numbers, so `tcp.stream eq N` in Wireshark shows the same connection."
    ),
    new_code_cell(
        "from pathlib import Path\n\n"
        "import pcaptools\n\n"
        "root = Path.cwd() if (Path.cwd() / 'captures').is_dir() else Path.cwd().parent\n"
        "cap = pcaptools.load(root / 'captures' / 'demo.pcapng')\n"
        "cap"
    ),
    new_markdown_cell(
        "## Connections\n\nOne row per TCP connection, with Zeek's `conn_state` and `history` "
        "(client letters upper case), and how and when it ended."
    ),
    new_code_cell(
        "cap.connections[['tcp_stream', 'client_port', 'server_port', 'conn_state', 'history',\n"
        "                 'end_reason', 'end_by', 'client_bytes', 'server_bytes', 'retransmissions']]"
    ),
    new_markdown_cell(
        "## Handshakes\n\n`irtt_ms` is tshark's `tcp.analysis.initial_rtt`. A refused connection "
        "shows `result == 'refused'`."
    ),
    new_code_cell(
        "cap.tcp_handshakes[['tcp_stream', 'syn_count', 'result', 'irtt_ms', 'client_mss', "
        "'client_wscale', 'server_wscale']]"
    ),
    new_markdown_cell(
        "## Retransmissions and other TCP analysis flags\n\n"
        "`tcp_events` has one row per (frame, flag) for every flag tshark 4.0 sets. The "
        "retransmission kinds are exclusive here; `cap.retransmissions` is their union, which is what "
        "tshark's `tcp.analysis.retransmission` filter matches. `resent` is the plain fact that every "
        "byte of a segment had been seen before, without tshark's heuristics."
    ),
    new_code_cell("cap.tcp_events.groupby('kind', observed=True).size().sort_values(ascending=False)"),
    new_code_cell("cap.retransmissions[['frame', 'ts', 'tcp_stream', 'direction', 'kind', 'seq', 'len']]"),
    new_markdown_cell(
        "## Anything else: Wireshark's dissectors\n\n`cap.wireshark(fields, display_filter)` runs tshark "
        "on the same file (and key log) and returns any of Wireshark's fields as a typed DataFrame, one "
        "row per frame. Here tshark's own verdict on the retransmissions above, next to pcaptools' kind."
    ),
    new_code_cell(
        "ws = cap.wireshark(['frame.number', 'tcp.stream', 'tcp.seq', 'tcp.len', 'tcp.analysis.rto', '_ws.col.Info'],\n"
        "                   display_filter='tcp.analysis.retransmission')\n"
        "ws.assign(pcaptools_kind=ws['frame.number'].map(cap.retransmissions.set_index('frame')['kind']))"
    ),
    new_markdown_cell(
        "## A plot: sequence numbers over time\n\nThe `packets` table has one row per frame; here the "
        "server's data segments of the largest download, with retransmissions marked."
    ),
    new_code_cell(
        "import plotly.express as px\n\n"
        "big = cap.connections.sort_values('server_bytes').iloc[-1].tcp_stream\n"
        "p = cap.packets.query('tcp_stream == @big and direction == \"server_to_client\" and tcp_len > 0')\n"
        "resent = set(cap.retransmissions.frame)\n"
        "p = p.assign(retransmitted=p.frame.isin(resent))\n"
        "px.scatter(p, x='ts', y='seq', color='retransmitted', title=f'tcp.stream eq {big}: server data')"
    ),
    new_markdown_cell(
        "## Warnings\n\nAnything odd in the file (a truncated record, a malformed header...) is a row "
        "here, never an exception; codes are listed in `docs/anomalies.md`."
    ),
    new_code_cell("cap.warnings"),
    new_markdown_cell(
        "## Next, in your own capture\n\n"
        "- `pcaptools.load('yours.pcapng', packets=False)` for captures of many millions of frames.\n"
        "- Sort `cap.tcp_handshakes` by `irtt_ms` to find slow paths; compare `syn_count > 1` "
        "(SYN retransmissions cost a full second each).\n"
        "- `cap.connections.query(\"conn_state in ['RSTO', 'RSTR', 'S0', 'REJ']\")` lists connections "
        "that did not end cleanly.\n"
        "- `pcap-report yours.pcapng` writes the same answers as one offline HTML page."
    ),
]


_SETUP = (
    "from pathlib import Path\n\n"
    "import pcaptools\n\n"
    "root = Path.cwd() if (Path.cwd() / 'captures').is_dir() else Path.cwd().parent\n"
    "captures = root / 'captures'"
)

LATENCY = [
    new_markdown_cell(
        "# Streaming latency: HTTP/1.1 vs HTTP/2, time to first byte and first token\n\n"
        "`captures/compare-h1.pcapng` and `compare-h2.pcapng` hold the same workload (10 streamed chat "
        "requests, 20 tokens each, over a link with 40 ms one-way delay and 1% loss): once with a new "
        "TCP + TLS connection per request, once on one HTTP/2 connection. Both were recorded with their "
        "TLS key logs, so the HTTP layers are visible."
    ),
    new_code_cell(_SETUP + "\n"
        "from pcaptools.analyses.latency import stream_latency\n"
        "from pcaptools.analyses.compare import compare\n\n"
        "h1 = pcaptools.load(captures / 'compare-h1.pcapng', keylog=captures / 'compare-h1.keys')\n"
        "h2 = pcaptools.load(captures / 'compare-h2.pcapng', keylog=captures / 'compare-h2.keys')\n"
        "h1, h2"),
    new_markdown_cell(
        "## One row per request\n\n`stream_latency` joins the TCP, TLS, HTTP and SSE tables: what the "
        "connection cost (0 when it was reused), time to first byte, time to first token (first SSE event "
        "with text) and the gaps between tokens."
    ),
    new_code_cell(
        "cols = ['tcp_stream', 'stream_id', 'reused', 'connect_ms', 'tls_ms', 'ttfb_ms', 'ttft_ms',\n"
        "        'ttft_from_start_ms', 'token_events', 'token_gap_median_ms', 'total_ms']\n"
        "stream_latency(h1)[cols]"),
    new_code_cell("stream_latency(h2)[cols]"),
    new_markdown_cell("## Side by side\n\nThe same table `pcap-report A --compare B` puts first."),
    new_code_cell("compare(h1, h2)"),
    new_markdown_cell("## Token cadence\n\nCumulative tokens against time since each request was sent."),
    new_code_cell(
        "import plotly.express as px\n\n"
        "lat = stream_latency(h2)\n"
        "ev = h2.sse_events[h2.sse_events['delta_text'].notna()].merge(\n"
        "    lat[['tcp_stream', 'stream_id', 'request_sent_ts']], on=['tcp_stream', 'stream_id'])\n"
        "ev = ev.assign(ms=(ev['ts'] - ev['request_sent_ts']).dt.total_seconds() * 1e3)\n"
        "ev['tokens'] = ev.groupby('stream_id').cumcount() + 1\n"
        "px.line(ev, x='ms', y='tokens', color='stream_id', title='HTTP/2: tokens per stream')"),
    new_markdown_cell(
        "## Next, in your own capture\n\n"
        "- Record with `SSLKEYLOGFILE=keys.txt` set for the client, then `pcaptools.load(p, keylog='keys.txt')`.\n"
        "- Sort `stream_latency(cap)` by `ttft_ms`: is the first token late because of the network "
        "(`connect_ms`, `tls_ms`, `ttfb_ms`) or the model (`ttft_ms - ttfb_ms`)?\n"
        "- `reused == False` on every request means no connection pooling: each one pays the handshakes."
    ),
]

HEARTBEATS = [
    new_markdown_cell(
        "# WebSocket heartbeats and silent disconnects\n\n"
        "Three recorded WebSocket sessions: `ws-healthy` (pings every 2 s, clean close), `ws-blackhole` "
        "(the path dropped everything in both directions after a few seconds) and `ws-idle-reset` "
        "(an idle gap, then a firewall RST). The recording script wrote down when it cut the path "
        "(`*.facts.json`); pcaptools finds it from the packets alone."
    ),
    new_code_cell(_SETUP + "\n"
        "from pcaptools.analyses import disconnects\n"
        "from pcaptools.analyses.heartbeats import heartbeat_summary\n\n"
        "caps = {n: pcaptools.load(captures / f'{n}.pcap') for n in ('ws-healthy', 'ws-blackhole', 'ws-idle-reset')}\n"
        "caps"),
    new_markdown_cell("## Were the pings answered, and how fast?"),
    new_code_cell(
        "hb = caps['ws-blackhole'].ws_heartbeats\n"
        "hb[['mechanism', 'sender', 'ping_frame', 'pong_frame', 'rtt_ms', 'interval_ms', 'outcome']]"),
    new_code_cell(
        "c = caps['ws-healthy']\n"
        "heartbeat_summary(c.ws_heartbeats, connections=c.connections, packets=c.packets)"),
    new_markdown_cell(
        "## Which connections died, and how?\n\nOne row per connection that did not end cleanly, with "
        "the evidence frames and a Wireshark filter to paste. Every threshold is a parameter."),
    new_code_cell(
        "cols = ['tcp_stream', 'verdict', 'summary', 'detection_delay_ms', 'display_filter']\n"
        "disconnects(caps['ws-blackhole'])[cols]"),
    new_code_cell("disconnects(caps['ws-idle-reset'], idle_gap_s=5)[cols]"),
    new_markdown_cell(
        "## Next, in your own capture\n\n"
        "- `cap.ws_heartbeats.query(\"outcome == 'unanswered'\")`: pings into the void.\n"
        "- `disconnects(cap, idle_gap_s=...)`: set the idle gap to your load balancer's timeout.\n"
        "- A `peer_vanished` row's `detection_delay_ms` is how long your client took to notice."
    ),
]

OVERHEAD = [
    new_markdown_cell(
        "# Protocol overhead: where the bytes went\n\n`overhead(cap)` splits every connection's bytes on "
        "the wire into headers, handshakes, ACKs, retransmissions, TLS, HTTP/2 and WebSocket framing and "
        "payload; the categories add up to the wire bytes. Here: the HTTP/1.1 vs HTTP/2 pair."
    ),
    new_code_cell(_SETUP + "\n"
        "from pcaptools.analyses import overhead\n\n"
        "h1 = pcaptools.load(captures / 'compare-h1.pcapng', keylog=captures / 'compare-h1.keys', packets=False)\n"
        "h2 = pcaptools.load(captures / 'compare-h2.pcapng', keylog=captures / 'compare-h2.keys', packets=False)\n"
        "o1, o2 = overhead(h1), overhead(h2)\n"
        "o1.tail(1).T.join(o2.tail(1).T, lsuffix=' HTTP/1.1', rsuffix=' HTTP/2')"),
    new_markdown_cell("## Goodput per connection"),
    new_code_cell("o1[['tcp_stream', 'wire_bytes', 'goodput_ratio']]"),
    new_markdown_cell(
        "## Next, in your own capture\n\n"
        "- Without keys, TLS application data shows as encrypted bytes; the layers below are still split.\n"
        "- Many short connections: look at the handshake and teardown categories.\n"
        "- `overhead(cap, by_direction=True)` separates upload from download."
    ),
]


def main() -> None:
    NOTEBOOKS.mkdir(exist_ok=True)
    meta = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    for name, cells in (("01-quickstart", QUICKSTART), ("02-streaming-latency", LATENCY),
                        ("03-heartbeats-and-disconnects", HEARTBEATS), ("04-protocol-overhead", OVERHEAD)):
        nbformat.write(new_notebook(cells=cells, metadata=meta), NOTEBOOKS / f"{name}.ipynb")


if __name__ == "__main__":
    main()
