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


def main() -> None:
    NOTEBOOKS.mkdir(exist_ok=True)
    nb = new_notebook(cells=QUICKSTART, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    nbformat.write(nb, NOTEBOOKS / "01-quickstart.ipynb")


if __name__ == "__main__":
    main()
