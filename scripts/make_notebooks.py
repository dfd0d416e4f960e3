"""Writes the notebooks in notebooks/ from the cell sources below (stored without outputs).

    python scripts/make_notebooks.py

Keeping the source here (and giving cells stable ids) makes notebook diffs readable;
tests/test_notebooks.py executes
every notebook top to bottom and checks they are stored without outputs.
"""

# ruff: noqa: E501  (the cells' text: lines as they read in the notebook, not wrapped at 100)
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
    new_markdown_cell(
        "## Token cadence\n\nCumulative SSE events carrying text (`delta_text`) against time since each "
        "request was sent. An event is one chunk the server flushed; how many model tokens it holds "
        "is up to the server (here one word each)."),
    new_code_cell(
        "import plotly.express as px\n\n"
        "lat = stream_latency(h2)\n"
        "ev = h2.sse_events[h2.sse_events['delta_text'].notna()].merge(\n"
        "    lat[['tcp_stream', 'stream_id', 'request_sent_ts']], on=['tcp_stream', 'stream_id'])\n"
        "ev = ev.assign(ms=(ev['ts'] - ev['request_sent_ts']).dt.total_seconds() * 1e3)\n"
        "ev['text_events'] = ev.groupby('stream_id').cumcount() + 1\n"
        "px.line(ev, x='ms', y='text_events', color='stream_id',\n"
        "        labels={'ms': 'ms since the request was sent', 'text_events': 'SSE events with text'},\n"
        "        title='HTTP/2: SSE events carrying text, per stream')"),
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
        "from pcaptools.analyses.heartbeats import heartbeat_summary\n\n"
        "caps = {n: pcaptools.load(captures / f'{n}.pcap') for n in ('ws-healthy', 'ws-blackhole', 'ws-idle-reset')}\n"
        "caps"),
    new_markdown_cell(
        "## Were the pings answered, and how fast?\n\n`cap.heartbeats()` lists every ping of the three "
        "mechanisms (WebSocket ping/pong, HTTP/2 PING, TCP keep-alive) with its answer."),
    new_code_cell(
        "hb = caps['ws-blackhole'].heartbeats()\n"
        "hb[['mechanism', 'sender', 'ping_frame', 'pong_frame', 'rtt_ms', 'interval_ms', 'outcome']]"),
    new_code_cell(
        "c = caps['ws-healthy']\n"
        "heartbeat_summary(c.heartbeats(), connections=c.connections, packets=c.packets)"),
    new_markdown_cell(
        "## The pings on a timeline\n\nEach ping at the time it was sent, its height the time to its "
        "pong; the unanswered ones of `ws-blackhole` sit on the axis, in red, from the moment the path "
        "was cut."),
    new_code_cell(
        "import pandas as pd\n"
        "import plotly.express as px\n\n"
        "rows = []\n"
        "for name, c in caps.items():\n"
        "    h = c.heartbeats()\n"
        "    t0 = c.connections['first_ts'].min()\n"
        "    rows.append(h.assign(capture=name, s=(h['ping_ts'] - t0).dt.total_seconds(),\n"
        "                         pong_ms=h['rtt_ms'].fillna(0.0), outcome=h['outcome'].astype(str)))\n"
        "pings = pd.concat(rows, ignore_index=True)\n"
        "px.scatter(pings, x='s', y='pong_ms', color='outcome', facet_row='capture', symbol='sender',\n"
        "           color_discrete_map={'answered': '#1f77b4', 'unanswered': '#d62728', 'cut_off': '#7f7f7f'},\n"
        "           labels={'s': 's since the connection opened', 'pong_ms': 'time to pong, ms (0: none)'},\n"
        "           title='Heartbeats: sent when, answered how fast', height=600)"),
    new_markdown_cell(
        "## Which connections died, and how?\n\nOne row per connection that did not end cleanly, with "
        "the evidence frames and a Wireshark filter to paste. Every threshold is a parameter. The first "
        "line counts the connections checked, so an empty result still says how many were clean."),
    new_code_cell(
        "cols = ['tcp_stream', 'verdict', 'summary', 'detection_delay_ms', 'display_filter']\n"
        "caps['ws-blackhole'].disconnects()[cols]"),
    new_code_cell("caps['ws-idle-reset'].disconnects(idle_gap_s=5)[cols]"),
    new_code_cell("caps['ws-healthy'].disconnects()  # nothing wrong: the counts say so"),
    new_markdown_cell(
        "## Next, in your own capture\n\n"
        "- `cap.heartbeats().query(\"outcome == 'unanswered'\")`: pings into the void.\n"
        "- `cap.disconnects(idle_gap_s=...)`: set the idle gap to your load balancer's timeout.\n"
        "- A `peer_vanished` row's `detection_delay_ms` is how long your client took to notice."
    ),
]

OVERHEAD = [
    new_markdown_cell(
        "# Protocol overhead: where the bytes went\n\n`cap.overhead()` splits every connection's bytes on "
        "the wire into headers, handshakes, ACKs, retransmissions, TLS, HTTP/2 and WebSocket framing and "
        "payload; the categories add up to the wire bytes. Here: the HTTP/1.1 vs HTTP/2 pair."
    ),
    new_code_cell(_SETUP + "\n"
        "import pandas as pd\n\n"
        "from pcaptools.analyses.overhead import CATEGORIES\n\n"
        "h1 = pcaptools.load(captures / 'compare-h1.pcapng', keylog=captures / 'compare-h1.keys', packets=False)\n"
        "h2 = pcaptools.load(captures / 'compare-h2.pcapng', keylog=captures / 'compare-h2.keys', packets=False)\n"
        "o1, o2 = h1.overhead(), h2.overhead()\n"
        "# the total row of each (the last one), side by side: bytes per category, then goodput\n"
        "totals = pd.DataFrame({'HTTP/1.1': o1[o1['total']].iloc[0], 'HTTP/2': o2[o2['total']].iloc[0]})\n"
        "totals = totals.loc[['wire_bytes', *CATEGORIES, 'goodput_ratio']].astype('float64')\n"
        "shown = totals.map('{:,.0f}'.format)  # bytes as whole numbers, the ratio with 3 decimals\n"
        "shown.loc['goodput_ratio'] = totals.loc['goodput_ratio'].map('{:.3f}'.format)\n"
        "shown"),
    new_markdown_cell(
        "## The same, as a chart\n\nWire bytes of each capture split by category (non-zero ones): "
        "HTTP/2 saves the handshakes of nine connections and repeats fewer headers."),
    new_code_cell(
        "import plotly.express as px\n\n"
        "cats = [c for c in CATEGORIES if totals.loc[c].astype('float64').sum() > 0]\n"
        "long = totals.loc[cats].astype('int64').rename_axis('category').reset_index().melt(\n"
        "    id_vars='category', var_name='capture', value_name='bytes')\n"
        "px.bar(long, x='capture', y='bytes', color='category', title='Bytes on the wire, by category',\n"
        "       color_discrete_sequence=px.colors.qualitative.Dark24)"),
    new_markdown_cell("## Goodput per connection"),
    new_code_cell("o1[['tcp_stream', 'wire_bytes', 'app_payload_bytes', 'goodput_ratio']]"),
    new_markdown_cell(
        "## Next, in your own capture\n\n"
        "- Without keys, TLS application data shows as encrypted bytes; the layers below are still split.\n"
        "- Many short connections: look at the handshake and teardown categories.\n"
        "- `cap.overhead(by_direction=True)` separates upload from download."
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
        for i, cell in enumerate(cells):
            cell["id"] = f"{name[:2]}-{i:02d}"  # stable ids: regenerating changes only what changed
        nbformat.write(new_notebook(cells=cells, metadata=meta), NOTEBOOKS / f"{name}.ipynb")


if __name__ == "__main__":
    main()
