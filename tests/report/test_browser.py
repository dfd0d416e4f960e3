"""The report in a real browser: headless Chromium opens reports of shipped captures (offline,
file://) and, over the Chrome DevTools Protocol, we check that no script fails, every plotly
chart drew its SVG, the paged tables page and filter, hostile capture strings stay text, and
nothing is fetched from anywhere. A screenshot of each report is kept in the test's tmp path.

Skipped when /usr/bin/chromium (or ``chromium`` on PATH) is absent. Every wait is bounded
(30 s per page at most); the browser never touches the network (the pages are files and
every request they make is checked to be file:, data: or about:).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import struct
import subprocess
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

import pcaptools
from pcaptools.analyses.latency import stream_latency
from pcaptools.report import render_report
from tests.analyses import llmcap
from tests.conftest import CAPTURES, CORPUS
from tests.protocols.tls import _tls_build as tb

websockets_sync = pytest.importorskip("websockets.sync.client")
ConnectionClosed = pytest.importorskip("websockets.exceptions").ConnectionClosed

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None
)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

#: No wait here has a time limit, and no clock is read: the browser is waited for by what it
#: says (its DevTools address on stderr, an answer, an event, a page-side promise that resolves
#: when the state waited for is there); a browser that exits or closes the connection is a
#: CdpError. Loops over messages are bounded by this count. How long the report takes to open
#: is measured in benchmarks/report_speed.py, never asserted here.
MAX_MESSAGES = 100_000
BOX = "document.querySelectorAll('div.ptable')"
HOSTILE = "<img src=x onerror=alert(1)>"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--window-size=1400,900",
    "--remote-debugging-port=0",
]


# --------------------------------------------------------------------------- a tiny CDP client


class CdpError(RuntimeError):
    pass


@dataclass
class Page:
    """One tab, driven over the browser's DevTools websocket (flattened session)."""

    browser: Browser
    session: str
    events: list[dict[str, Any]] = field(default_factory=list)

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def evaluate(self, expr: str) -> Any:
        res = self.send(
            "Runtime.evaluate",
            {"expression": expr, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in res:
            raise CdpError(f"{expr!r} threw: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expr: str) -> Any:
        """The value of ``expr`` once it is truthy: a promise in the page re-evaluates it
        after each turn of the page's event loop and resolves with it (the answer comes when
        the state is there)."""
        return self.evaluate(
            "new Promise(done => { const check = () => { const v = (" + expr + ");"
            " if (v) { done(v); } else { setTimeout(check, 10); } }; check(); })"
        )

    def open(self, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        self.browser.wait_event(self, "Page.loadEventFired")

    def errors(self) -> list[str]:
        """Script errors and console errors seen so far."""
        self.browser.drain(self)
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(json.dumps(p.get("args", []))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(json.dumps(p["entry"])[:500])
            elif m == "Page.javascriptDialogOpening":
                out.append("dialog: " + json.dumps(p)[:500])
        return out

    def requests(self) -> list[str]:
        self.browser.drain(self)
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e["method"] == "Network.requestWillBeSent"
        ]


def _read_to_end(f: IO[str]) -> None:
    with f:
        f.read()


class Browser:
    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # (its renderers in its process group: killed with it)
        )
        # chromium says where its DevTools endpoint is on stderr ("DevTools listening on
        # ws://..."); the end of stderr before that line means it exited
        assert self.proc.stderr is not None
        url = None
        for line in self.proc.stderr:
            if line.startswith("DevTools listening on "):
                url = line.split(" on ", 1)[1].strip()
                break
        if url is None:
            self.close()
            raise CdpError(f"chromium exited with {self.proc.returncode} before DevTools")
        # (the rest of stderr is read, to its end when chromium exits, so that chromium
        # never blocks on a full pipe)
        self._stderr = threading.Thread(target=_read_to_end, args=(self.proc.stderr,),
                                        daemon=True)
        self._stderr.start()
        self._stack = contextlib.ExitStack()  # websockets >= 17.1: connect() is a context manager
        self.ws = self._stack.enter_context(
            websockets_sync.connect(url, max_size=None, open_timeout=None)
        )
        self._ids = itertools.count(1)
        self._pages: dict[str, Page] = {}

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
    ) -> dict[str, Any]:
        msg_id = next(self._ids)
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        for _ in range(MAX_MESSAGES):
            m = self._recv(method)
            if m.get("id") == msg_id:
                if "error" in m:
                    raise CdpError(f"{method}: {m['error']}")
                result: dict[str, Any] = m.get("result", {})
                return result
        raise CdpError(f"no answer to {method} in {MAX_MESSAGES} messages")

    def _recv(self, what: str) -> dict[str, Any]:
        """The browser's next message; CdpError when it closed the connection."""
        try:
            m: dict[str, Any] = json.loads(self.ws.recv())
        except ConnectionClosed:
            raise CdpError(f"chromium closed the connection waiting for {what} "
                           f"(exit status {self.proc.poll()})") from None
        if "method" in m:
            page = self._pages.get(m.get("sessionId", ""))
            if page is not None:
                page.events.append(m)
                if m["method"] == "Page.javascriptDialogOpening":  # never leave a page blocked
                    self.ws.send(
                        json.dumps(
                            {
                                "id": next(self._ids),
                                "sessionId": page.session,
                                "method": "Page.handleJavaScriptDialog",
                                "params": {"accept": False},
                            }
                        )
                    )
        return m

    def wait_event(self, page: Page, method: str) -> dict[str, Any]:
        seen = len(page.events)
        for e in page.events:
            if e["method"] == method:
                return e
        for _ in range(MAX_MESSAGES):
            self._recv(method)
            for e in page.events[seen:]:
                if e["method"] == method:
                    return e
            seen = len(page.events)
        raise CdpError(f"no {method} in {MAX_MESSAGES} messages")

    def drain(self, page: Page) -> None:
        """Collect the events already sent (a round trip flushes them)."""
        self.send("Runtime.evaluate", {"expression": "1"}, session=page.session)

    def new_page(self) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session)
        self._pages[session] = page
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        return page

    def close(self) -> None:
        stack = getattr(self, "_stack", None)
        if stack is not None:
            stack.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # (the browser and every child of it)
        self.proc.wait()
        reader = getattr(self, "_stderr", None)
        if reader is not None:
            reader.join()  # (chromium has exited: its stderr is at its end)
        elif self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()


# --------------------------------------------------------------------------- helpers


def _load(name: str) -> pcaptools.Capture:
    path = CAPTURES / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    keys = path.with_suffix(".keys")
    return pcaptools.load(path, keylog=keys if keys.is_file() else None)


def _write(tmp_path: Path, name: str, html: str) -> str:
    out = tmp_path / f"{name}.report.html"
    out.write_text(html, encoding="utf-8")
    return out.resolve().as_uri()


def _png_pixels_vary(png: bytes) -> bool:
    """True when the PNG is not a single colour (its decompressed scanlines, filter bytes
    dropped, hold more than one pixel value)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    width = height = bpp = 0
    while pos < len(png):
        (n,) = struct.unpack_from(">I", png, pos)
        kind = png[pos + 4 : pos + 8]
        body = png[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack_from(">IIBB", body)
            bpp = {2: 3, 6: 4, 0: 1, 4: 2}[colour] * depth // 8
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp + 1
    assert len(raw) == stride * height
    # unfiltered first row + every row's first pixel is enough to see two colours in any
    # real page; fall back to the whole byte set
    return len(set(raw)) > 8 and height > 0


#: what overflows a 1400 px wide window: the page itself, a table (its scroll box wider than
#: the box), a Wireshark filter or a nav link beyond the right edge
LAYOUT_JS = """(() => {
  const w = window.innerWidth, out = [];
  if (document.documentElement.scrollWidth > w) {
    out.push('page ' + document.documentElement.scrollWidth + ' > ' + w);
  }
  document.querySelectorAll('.table-wrap').forEach((t) => {
    if (t.scrollWidth > t.clientWidth + 1) {
      out.push('table in #' + t.closest('section').id + ' ' + t.scrollWidth + ' > '
               + t.clientWidth);
    }
  });
  document.querySelectorAll('code.filter, nav a').forEach((e) => {
    const r = e.getBoundingClientRect();
    if (r.width && r.right > w) { out.push(e.textContent + ' ends at ' + r.right); }
  });
  return [w, out];
})()"""


def _check_layout(page: Page) -> None:
    """Nothing wider than the 1400 px window: the nav wraps, every table fits without a
    horizontal scroll, every Wireshark filter is in view."""
    width, overflow = page.evaluate(LAYOUT_JS)
    assert width == 1400
    assert overflow == [], "\n".join(overflow)


def _check_page(page: Page, html: str, shot: Path) -> dict[str, Any]:
    """The checks every report gets; returns facts for the caller's own asserts."""
    figures = html.count("Plotly.newPlot(")
    drawn = page.wait_for(
        "(() => { const d = [...document.querySelectorAll('div.plotly-graph-div')];"
        " return d.length && d.every(x => x.querySelector('svg.main-svg')) ? d.length : 0; })()"
        if figures
        else "document.readyState === 'complete' ? -1 : 0"
    )
    assert drawn == (figures or -1)
    tables = page.evaluate("document.querySelectorAll('div.ptable').length")
    ready = page.evaluate(
        "document.querySelectorAll('div.ptable .pt-controls:not([hidden])').length"
    )
    assert ready == tables == html.count('<div class="ptable"')
    assert page.evaluate("document.querySelectorAll('.pt-nojs').length") == 0
    assert page.evaluate("document.querySelectorAll('img[src=x]').length") == 0
    assert page.errors() == []
    _check_layout(page)
    bad = [u for u in page.requests() if not u.startswith(("file:", "data:", "about:", "blob:"))]
    assert bad == []
    png = base64.b64decode(page.send("Page.captureScreenshot", {"format": "png"})["data"])
    shot.write_bytes(png)
    assert len(png) > 20_000, f"{shot}: {len(png)} bytes, a blank page?"
    assert _png_pixels_vary(png), f"{shot} is a single colour"
    return {"figures": figures, "tables": tables}


ROWS_JS = (
    "((i) => [...document.querySelectorAll('div.ptable')[i].querySelectorAll('tbody tr')]"
    ".map(tr => tr.cells[0].textContent))({})"
)
INFO_JS = (
    "((i) => {{ const b = document.querySelectorAll('div.ptable')[i];"
    " return [b.querySelector('.pt-info').textContent, b.querySelector('.pt-count').textContent,"
    " b.querySelector('.pt-prev').disabled, b.querySelector('.pt-next').disabled]; }})({})"
)


def _click(page: Page, i: int, cls: str) -> None:
    page.evaluate(f"document.querySelectorAll('div.ptable')[{i}].querySelector('.{cls}').click()")


def _type(page: Page, i: int, text: str) -> None:
    page.evaluate(
        f"(() => {{ const f = {BOX}[{i}].querySelector('.pt-filter');"
        f" f.value = {json.dumps(text)}; f.dispatchEvent(new Event('input')); }})()"
    )


def _table_index(page: Page, section: str) -> int:
    i = page.evaluate(
        f"[...{BOX}].findIndex(b => b.closest('section').id === '{section}')"
    )
    assert isinstance(i, int) and i >= 0, f"no paged table in #{section}"
    return i


# --------------------------------------------------------------------------- the tests


@pytest.mark.parametrize(
    ("name", "figures"),
    [
        ("demo.pcapng", ["timeline", "irtt", "retransmissions", "tls-handshake", "waterfall",
                         "ttfb", "token-cadence", "slow-split", "slow-seq-2-s", "heartbeats",
                         "overhead"]),
        (
            "h2-sse-chat.pcapng",
            ["timeline", "irtt", "waterfall", "ttfb", "token-cadence", "slow-split",
             "slow-seq-0-s", "overhead"],
        ),
        ("ws-tls.pcapng", ["timeline", "irtt", "waterfall", "ttfb", "slow-split", "heartbeats",
                           "overhead"]),
    ],
)
def test_shipped_capture_report_in_chromium(
    browser: Browser, tmp_path: Path, name: str, figures: list[str]
) -> None:
    cap = _load(name)
    html = render_report(cap)
    page = browser.new_page()
    page.open(_write(tmp_path, name, html))
    facts = _check_page(page, html, tmp_path / f"{name}.png")
    assert facts["figures"] == len(figures)
    drawn = page.evaluate(
        "[...document.querySelectorAll('div.plotly-graph-div')]"
        ".filter(d => d.querySelector('svg.main-svg')).map(d => d.id)"
    )
    assert drawn == [f"fig-{f}" for f in figures]
    # every section made it into the page, the verdicts first
    ids = page.evaluate("[...document.querySelectorAll('main > section')].map(s => s.id)")
    assert ids[:3] == ["verdicts", "capture", "connections"] and "overhead" in ids
    # every checklist line links to a section of the page
    links = page.evaluate("[...document.querySelectorAll('ul.checklist > li > a')]"
                          ".map(a => a.getAttribute('href').slice(1))")
    # (every question but voice and QUIC, which these captures lack; 15 since the Slowest
    # request line, #16)
    assert len(links) == 15 and set(links) <= set(ids)
    # the nav wraps onto more lines instead of running off the window
    assert page.evaluate("document.querySelector('nav').getBoundingClientRect().height") > 30


#: the narrowest a table's layout can be (auto layout, every wrapping cell wrapped), and the
#: width of its scroll box: the table fits while the first is no wider than the second
MIN_WIDTH_JS = """((sel) => {
  const box = document.querySelector(sel), t = box.querySelector('table');
  const was = t.style.width;
  t.style.width = 'min-content';
  const w = t.offsetWidth;
  t.style.width = was;
  return [w, box.clientWidth];
})"""


@pytest.mark.parametrize(
    ("name", "section"),
    [
        ("h3-sse-chat.pcapng", "quic"),  # full and resumed 0-RTT handshakes, HTTP/3 requests
        ("quic-endings.pcapng", "quic"),  # every ending, long close reasons, no-key Initials
        ("h3-sse-lossy.pcapng", "quic"),  # Retry and lost packets both ways
        ("zerortt.pcap", "quic"),  # ../shared/corpus, no keys: 0-RTT, Initial packets only
        ("voice-realtime.pcapng", "voice"),
        ("h2-ping.pcap", "http"),  # HTTP/2 (h2c); its requests table was 1,330 px in 1,327
        # ../shared/corpus, keys in the pcapng: HTTP/2 and HTTP/3 to cloudflare-quic.com, whose
        # host name tipped the requests table over (1,348 px in 1,327)
        ("chrome-cloudflare-quic-with-secrets.pcapng", "http"),
        # ../shared/corpus: IPv6 endpoints, whose TCP connections table needed 1,337 px in
        # 1,327 with client and server in columns of their own
        ("raw_ip.pcap", "connections"),
    ],
)
def test_reports_fit_the_window(
    browser: Browser, tmp_path: Path, name: str, section: str
) -> None:
    """#19: the QUIC and HTTP/3 section (its connection table was 1,524 to 2,007 px wide
    in a 1400 px window), the voice section and the HTTP requests table (17 columns, 1,249
    to 1,526 px at their narrowest on the shipped and corpus captures) fit, as every other
    section does; every QUIC connection's and every request's row and Wireshark filter is on
    the page and in view."""
    cap = pcaptools.load(CORPUS / name) if (CORPUS / name).is_file() else _load(name)
    html = render_report(cap)
    page = browser.new_page()
    page.open(_write(tmp_path, name, html))
    _check_page(page, html, tmp_path / f"{name}.png")  # the layout check among them
    assert page.evaluate(f"document.querySelectorAll('#{section} .table-wrap').length") > 0
    if section == "quic":
        filters = page.evaluate(
            "[...document.querySelectorAll('#quic .table-wrap')[0]"
            ".querySelectorAll('tbody code.filter')].map(c => c.textContent)"
        )
        assert sorted(filters) == sorted(
            f"quic.connection.number eq {int(q)}" for q in cap.quic_connections["quic_connection"]
        )
    if section == "http":
        lat = stream_latency(cap)
        rows = page.evaluate(
            "[...document.querySelectorAll('#http .table-wrap')[0].querySelectorAll('tbody tr')]"
            ".map(tr => [...tr.cells].map(td => td.innerText))"
        )
        assert 0 < len(rows) == len(lat)
        for row, (_, r) in zip(rows, lat.iterrows(), strict=True):
            # related values share a cell, one a line: stream or # over protocol, host over path
            assert len(row) == 10
            assert row[1].split("\n")[1] == r["protocol"]
            assert row[3] == f"{r['host']}\n{r['path']}"
            assert row[9] == r["wireshark_filter"]
        # with room to spare: the host names that tipped the old table over need no more
        width, box = page.evaluate(f"{MIN_WIDTH_JS}('#http .table-wrap')")
        assert width <= box - 200, f"{width} px at its narrowest in a {box} px box"
    if section == "connections":
        conns = cap.connections.sort_values("tcp_stream")
        rows = page.evaluate(
            "[...document.querySelectorAll('#connections .table-wrap')[0]"
            ".querySelectorAll('tbody tr')].map(tr => [...tr.cells].map(td => td.innerText))"
        )
        assert 0 < len(rows) == len(conns)
        for row, (_, r) in zip(rows, conns.iterrows(), strict=True):
            # client over server in one cell; the filter beside the stream number
            assert len(row) == 10 and row[1] == f"tcp.stream eq {int(r['tcp_stream'])}"
            client, server = row[2].split("\n")
            assert client.split(" ")[0].endswith(f":{int(r['client_port'])}")
            assert server.endswith(f":{int(r['server_port'])}")
        width, box = page.evaluate(f"{MIN_WIDTH_JS}('#connections .table-wrap')")
        assert width <= box, f"{width} px at its narrowest in a {box} px box"


def test_quic_table_pages_keep_their_lines(browser: Browser, tmp_path: Path) -> None:
    """The QUIC connection table's cells of several lines (client over server, both
    directions of RTT and loss...) are Markup: its later pages, built from the JSON, show
    the same lines and still fit the window."""
    cap = _load("quic-endings.pcapng")
    html = render_report(cap, page_rows=4)
    page = browser.new_page()
    page.open(_write(tmp_path, "quic-paged", html))
    _check_page(page, html, tmp_path / "quic-paged.png")
    i = _table_index(page, "quic")
    n = len(cap.quic_connections)
    assert page.evaluate(INFO_JS.format(i))[:2] == ["page 1 of 3", f"rows 1\u20134 of {n}"]
    cells = (
        f"[...{BOX}[{i}].querySelectorAll('tbody tr')]"
        ".map(tr => [...tr.cells].map(td => td.innerText))"
    )
    first = page.evaluate(cells)
    _click(page, i, "pt-next")
    second = page.evaluate(cells)
    for row in first + second:
        assert len(row) == 9
        assert row[1].count("\n") == 1 and row[1].split("\n")[1] == "192.0.2.20:443"
        assert row[6].startswith("c\u2192s ") and "\ns\u2192c " in row[6]
        assert "\ndecrypted: " in row[7]
        assert row[8] == f"quic.connection.number eq {int(row[0])}"
    assert page.evaluate(f"{BOX}[{i}].querySelectorAll('tbody br').length") >= 4 * 5
    _check_layout(page)
    assert page.errors() == []


def test_demo_pagination_and_filter(browser: Browser, tmp_path: Path) -> None:
    cap = _load("demo.pcapng")
    html = render_report(cap, page_rows=2)
    page = browser.new_page()
    page.open(_write(tmp_path, "demo-paged", html))
    _check_page(page, html, tmp_path / "demo-paged.png")
    i = _table_index(page, "connections")
    assert page.evaluate(ROWS_JS.format(i)) == ["0", "1"]
    assert page.evaluate(INFO_JS.format(i)) == ["page 1 of 2", "rows 1\u20132 of 3", True, False]
    _click(page, i, "pt-next")
    assert page.evaluate(ROWS_JS.format(i)) == ["2"]
    assert page.evaluate(INFO_JS.format(i)) == ["page 2 of 2", "rows 3\u20133 of 3", False, True]
    _click(page, i, "pt-prev")
    assert page.evaluate(ROWS_JS.format(i)) == ["0", "1"]
    # the filter: every word must appear in the row (here the client port of the WebSocket
    # whose path vanished, from the recorded facts)
    facts = json.loads((CAPTURES / "demo.pcapng.facts.json").read_text())
    dead = next(c for c in facts["connections"] if c["end"] == "black-hole")
    port = dead["client"].rsplit(":", 1)[1]
    stream = cap.connections.loc[cap.connections["client_port"] == int(port), "tcp_stream"]
    _type(page, i, port)
    page.wait_for(f"{ROWS_JS.format(i)}.join() === '{int(stream.iloc[0])}'")
    assert page.evaluate(INFO_JS.format(i)) == [
        "page 1 of 1",
        "rows 1\u20131 of 1 (filtered from 3)",
        True,
        True,
    ]
    _type(page, i, "SF no-such-thing")
    page.wait_for(f"{ROWS_JS.format(i)}.length === 0")
    assert page.evaluate(INFO_JS.format(i))[1] == "no row matches (of 3)"
    _type(page, i, "")
    page.wait_for(f"{ROWS_JS.format(i)}.length === 2")
    # the Wireshark filter cells are code elements again after paging
    assert (
        page.evaluate(
            f"{BOX}[{i}].querySelectorAll('tbody code.filter').length"
        )
        == 2
    )
    assert page.errors() == []


def test_rows_per_page(browser: Browser, tmp_path: Path) -> None:
    cap = _load("tls-versions-ciphers.pcapng")
    html = render_report(cap)
    page = browser.new_page()
    page.open(_write(tmp_path, "tls-versions", html))
    _check_page(page, html, tmp_path / "tls-versions.png")
    i = _table_index(page, "http")  # 16 requests: paged, one page of 50
    assert page.evaluate(INFO_JS.format(i))[:2] == ["page 1 of 1", "rows 1\u201316 of 16"]
    page.evaluate(
        f"(() => {{ const s = {BOX}[{i}].querySelector('.pt-size');"
        " s.value = '10'; s.dispatchEvent(new Event('change')); })()"
    )
    assert page.evaluate(INFO_JS.format(i))[:2] == ["page 1 of 2", "rows 1\u201310 of 16"]
    first = page.evaluate(ROWS_JS.format(i))
    _click(page, i, "pt-next")
    second = page.evaluate(ROWS_JS.format(i))
    assert (len(first), len(second)) == (10, 6)
    want = [
        str(x) for x in cap.http_requests.sort_values(["tcp_stream", "request_index"])["tcp_stream"]
    ]
    assert first + second == want
    # the second page, built from the JSON, keeps the cells' lines (#exchange over protocol)
    lines = page.evaluate(
        f"[...{BOX}[{i}].querySelectorAll('tbody tr')].map(tr => tr.cells[1].innerText)"
    )
    lat = stream_latency(cap).iloc[10:]
    assert lines == [f"#{r.request_index}\n{r.protocol}" for r in lat.itertuples()]
    _check_layout(page)
    assert page.errors() == []


def _hostile_capture(tmp_path: Path, n: int = 12) -> Path:
    """``n`` TLS connections whose SNI and ALPN are markup, and an HTTP/1.1 request whose path
    and Host are: enough rows for the TLS table to be paged (its cells come from JSON)."""
    w = llmcap.Wire()
    for k in range(n):
        t = llmcap.Conn(w, 55000 + k, sport=443)
        at = 100 * k
        t.handshake(at + 1, at + 2, at + 3)
        ch = tb.client_hello(
            bytes([k + 1]) * 32, [0x1301], [tb.sni_ext(HOSTILE), tb.alpn_ext("h2", HOSTILE)]
        )
        t.send(at + 4, True, tb.record(22, ch, 0x0301))
        t.send(
            at + 5,
            False,
            tb.record(22, tb.server_hello(b"\x22" * 32, 0x1301, [tb.ext(43, b"\x03\x04")])),
        )
        t.close(at + 10)
    c = llmcap.Conn(w, 56000)
    c.handshake(5000, 5001, 5002)
    c.send(5003, True, f"GET /{HOSTILE} HTTP/1.1\r\nHost: {HOSTILE}\r\n\r\n".encode())
    c.send(5010, False, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    c.close(5020)
    return w.write(tmp_path / "hostile.pcap")


def test_hostile_strings_stay_text(browser: Browser, tmp_path: Path) -> None:
    cap = pcaptools.load(_hostile_capture(tmp_path))
    assert set(cap.tls_handshakes["sni"]) == {HOSTILE} and len(cap.tls_handshakes) == 12
    html = render_report(cap, page_rows=5)
    assert HOSTILE not in html
    page = browser.new_page()
    page.open(_write(tmp_path, "hostile", html))
    _check_page(page, html, tmp_path / "hostile.png")
    i = _table_index(page, "tls")
    seen = 0
    for _ in range(5):  # every page of the TLS table, rendered from its JSON
        cells = page.evaluate(
            f"[...document.querySelectorAll('div.ptable')[{i}].querySelectorAll('tbody tr')]"
            ".map(tr => tr.cells[2].textContent)"
        )
        assert cells and set(cells) == {HOSTILE}
        seen += len(cells)
        if page.evaluate(INFO_JS.format(i))[3]:
            break
        _click(page, i, "pt-next")
    assert seen == 12
    _type(page, i, "onerror=alert")
    page.wait_for(f"{ROWS_JS.format(i)}.length === 5")
    assert page.evaluate("document.querySelectorAll('img[src=x]').length") == 0
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    # the strings are on the page as text, where a reader sees them
    assert page.evaluate(f"document.body.innerText.includes({json.dumps(HOSTILE)})")
    assert page.errors() == []
