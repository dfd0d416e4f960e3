"""Compiled copies of the per-frame modules, used only while they match their Python source.

The Python modules are the source of truth and always work on their own. ``scripts/build_accel.py``
compiles the modules in ``MODULES`` with Cython into ``pcaptools/_compiled/`` and records the
SHA-256 of each source it compiled (the ``.py`` and its ``.pxd``, if any) in
``_compiled/manifest.json``. On import,
``install()`` puts a finder in front of the normal ones that loads a compiled module only when
the source file on disk still has the recorded hash, the interpreter's extension suffix matches
and ``PCAPTOOLS_PURE`` is not set; anything else (no build, an edited or checked-out source, a
build for another Python) imports the ``.py`` file as usual. So a stale build can never run code
that differs from the source, and the test suite proves both ways give identical tables.

``status()`` says, per module, which one was imported and why.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

#: Modules compiled by ``scripts/build_accel.py``, the ones that pay (benchmarks/README.md,
#: "Which compiled modules pay", 2026-12-06; ``benchmarks/module_pay.py --sets`` on the
#: benchmark's WebSocket-heavy capture, CPU s in ``load()``, medians of 8 alternated runs on
#: one pinned core, and ``benchmarks/payload_replay.py`` for the payload stack alone):
#:
#: * the TCP core of the per-frame path (the decoder, the TCP tracker, analyser, history and
#:   reassembler, the packets table), with ``.pxd`` type declarations: 4.09 s;
#: * the WebSocket observer (``protocols/websocket``: state, observer and inflate with
#:   ``.pxd`` declarations that make the per-direction and per-message state C fields, and
#:   frames), then with ``protocols._base`` (the event builder it called once per frame and
#:   message): 4.02 s with the core (-1.7 %); in the replay they take 0.19 s off the payload
#:   stack's 1.22 s. All 11 compiled against pure Python: 3.93 s against 4.39 s (medians of 7).
#:   Since WsFrame and WsMessage are named tuples (2026-12-06, benchmarks/PROFILE.md) nothing
#:   calls that builder once per event, and ``protocols._base`` is left out (2.5 s of compile).
#: * the classic pcap reader (``io/pcap``, with ``.pxd`` declarations: its batches of records
#:   sliced out of a block with C integers; benchmarks/PROFILE.md, 2026-12-06): the ``read``
#:   stage of ``benchmarks/stages.py`` on ``mid.pcap`` 0.127 -> 0.103 CPU s (0.128 s with the
#:   same reader as Python), 21 % fewer instructions; the TCP-only pass 2.7 % fewer
#:   instructions, a gain below what its CPU seconds resolve on the shared machine.
#: * the pcapng reader (``io/pcapng``, with ``.pxd`` declarations: its batches of packet blocks
#:   sliced out of a block with C integers; benchmarks/PROFILE.md, 2026-12-06): reading
#:   ``mid.pcap`` converted to pcapng 0.201 -> 0.115 CPU s (0.187 s with the same reader as
#:   Python); the whole ``load()`` within noise.
#: * the per-frame records and the frame loop (``io/frame``, ``net/packet``: RawFrame and
#:   TcpSegment as extension types; SegmentAnalysis in ``tcp/analysis``; TcpTracker an extension
#:   type; ``frameloop``: the loop of ``load()``; benchmarks/PROFILE.md, 2026-12-06): the
#:   TCP-only pass on ``base.pcap`` 3.32 -> 2.39 G instructions (-28 %), with the packets table
#:   3.92 -> 2.75 G (-30 %).
#: * the tracker's per-connection records (``tcp/gaps``: SeqFollower; ``tcp/connstate``:
#:   ConnHistory; ``tcp/losses``: LossDirection; Connection and DirStats in ``tcp/tracker``: all
#:   extension types, 2026-12-06): the TCP-only pass on ``base.pcap`` (instructions of the
#:   whole ``load()``, cachegrind) 2.30 -> 2.12 G with the first two, 1.85 G with all (-20 %).
#: * the realtime_events builder (``tables/realtime_tables``, with ``.pxd`` declarations: the
#:   member walk of every JSON message a C loop over the dict; benchmarks/PROFILE.md,
#:   2026-12-06): ``load()`` of ``base.pcap`` with its key log 7.27 -> 7.07 G instructions
#:   (-2.7 %) compiled without declarations, -0.5 % more with them and the UTF-8 check's ASCII
#:   shortcut; about 5.5 s of CPU to compile. ``tables/ws_tables`` compiled as well saved
#:   0.3 % more (-0.022 G) for 7 s of compile: left out.
#: * header fields as C integers from the reader to the tracker (2026-12-07, issue #20,
#:   benchmarks/PROFILE.md): the readers and the decoder's fast path read record and header
#:   fields through an ``unsigned char *`` (``_COMPILED`` branches; pure Python unpacks with
#:   struct), the integer fields of RawFrame, TcpSegment, SegmentAnalysis and DirStats are C
#:   integers, a connection's counts live in its DirStats, a TCP segment's packets row is
#:   written in place, and ``Reassembler`` is an extension type (``tcp/reassembly.pxd``, its
#:   ``in_order`` and ``acked`` C methods called from the tracker): ``load()`` of ``base.pcap``
#:   1.919 -> 1.525 G instructions TCP-only (-20.5 %), 6.633 -> 5.861 G with the key log and
#:   every table (-11.6 %); the reassembler's share of that, measured alone, 6.032 -> 5.861 G
#:   (an earlier trial without the tracker's typed calls had found 0.25 %).
#: * the stream chunk and the payload stack's per-byte work (2026-12-07, issue #20,
#:   benchmarks/PROFILE.md): ``StreamChunk`` is an extension type (``tcp/chunk``, made by one C
#:   call to ``new_chunk`` where the reassembler, TLS and HTTP/1.1 set five slots through
#:   Python calls; the WebSocket observer reads its fields as C fields), the WebSocket
#:   ``unmask`` a C loop over the bytes (``protocols/websocket/frames.pxd``; the big-integer
#:   XOR it replaces took ~43 instructions a byte), and the realtime builder's event summary
#:   a C function on a ``dict``: ``load()`` of ``base.pcap`` with its key log 5.855 -> 5.582 G
#:   instructions with the chunk, 5.423 G with unmask, 5.404 G with the summary, 5.374 G with
#:   unmask eight bytes at a time (-8.2 %); ``big.pcap`` 41.29 -> 37.76 G (-8.6 %). The chunk
#:   module compiles in about 1 s.
#: * the TLS record loop (``protocols/tls`` records and observer, with ``.pxd`` declarations,
#:   and the TLS table builder), the WebSocket table builders and the SSE parser (2026-12-07,
#:   issue #20): weighed in instructions, which resolve what CPU seconds on the shared machine
#:   did not (``benchmarks/module_pay.py --sets ... --instructions`` on ``base.pcap`` with its
#:   key log, each group added to the 19 modules before it, 5.2833 G): TLS 5.0759 G (-3.9 %),
#:   the WebSocket table builders 5.2181 G (-1.2 %), SSE 5.2247 G (-1.1 %); about 35 s more of
#:   C compile (CPU, on a busy machine). The CPU-time weighing of 2026-12-06 had found the TLS
#:   loop at 1.0 %, within its noise.
#:
#: * C fields and C writes where the compiled path still looked names up (2026-12-08, issue
#:   #20, benchmarks/PROFILE.md; ``benchmarks/instructions.sh`` on ``base.pcap`` with its key
#:   log, 4.8408 G before): the ws_frames, ws_messages, realtime_events and tls_records rows
#:   written in place through C pointers (struct.pack stays the pure-Python reference) 4.6845
#:   G; the decoder's addresses, options and payload sliced through the frame's C pointer
#:   4.5706 G; the tracker's ``_Streams`` an extension type 4.5219 G; those four table
#:   builders extension types (``.pxd`` for ws_tables and tls_tables) 4.4267 G; ``SseParser``
#:   an extension type and the TLS observer's chunk a ``StreamChunk`` 4.3895 G; the
#:   analyser's last address pair kept 4.3284 G; the packets builder's TCP addresses as C
#:   fields 4.3148 G (-10.9 % in all; the TCP-only pass 1.4810 -> 1.2953 G).
#:   Compiling the dispatcher, the event cap, the TLS decryptors and the HTTP/1 observer as
#:   they are (no ``.pxd``) was weighed in the same count and costs 0.2 % more: Cython's
#:   generic attribute lookups are no faster than the interpreter's specialised ones.
#:
#: Weighed and left out (same count): HTTP/2 (-0.3 %), HTTP/1.1 with the pipeline (-0.7 %),
#: the HTTP table builders (-0.1 %): below the rule's 1 % (nor did the pcapng reader pay
#: before its batches).
MODULES: tuple[str, ...] = (
    "pcaptools.io.frame",
    "pcaptools.io.pcap",
    "pcaptools.io.pcapng",
    "pcaptools.net.packet",
    "pcaptools.net.decode",
    "pcaptools.tcp.analysis",
    "pcaptools.tcp.chunk",
    "pcaptools.tcp.connstate",
    "pcaptools.tcp.gaps",
    "pcaptools.tcp.losses",
    "pcaptools.tcp.reassembly",
    "pcaptools.tcp.tracker",
    "pcaptools.tables.packets",
    "pcaptools.frameloop",
    "pcaptools.protocols.websocket.frames",
    "pcaptools.protocols.websocket.inflate",
    "pcaptools.protocols.websocket.observer",
    "pcaptools.protocols.websocket.state",
    "pcaptools.tables.realtime_tables",
    "pcaptools.protocols.tls.records",
    "pcaptools.protocols.tls.observer",
    "pcaptools.tables.tls_tables",
    "pcaptools.tables.ws_tables",
    "pcaptools.protocols.sse",
)

#: Every module that has been weighed for compiling (``MODULES`` and the payload stack):
#: ``scripts/build_accel.py --candidates`` builds them all, so that ``benchmarks/module_pay.py``
#: can weigh each again (a build of more than ``MODULES`` is stale to ``--if-stale``, so setup
#: brings it back to ``MODULES``).
CANDIDATES: tuple[str, ...] = (
    *MODULES,
    "pcaptools.protocols._base",
    "pcaptools.tables.ws_tables",
    "pcaptools.tables.http_tables",
    "pcaptools.tables.tls_tables",
    "pcaptools.protocols.tls.observer",
    "pcaptools.protocols.tls.records",
    "pcaptools.protocols.http1.observer",
    "pcaptools.protocols.http1.parse",
    "pcaptools.protocols.http2.events",
    "pcaptools.protocols.http2.frames",
    "pcaptools.protocols.http2.observer",
    "pcaptools.protocols.sse",
    "pcaptools.pipeline",
)

PACKAGE_DIR = Path(__file__).resolve().parent
BUILD_DIR = PACKAGE_DIR / "_compiled"
MANIFEST = BUILD_DIR / "manifest.json"
#: Set to any non-empty value other than "0" to import only the Python modules.
PURE_ENV = "PCAPTOOLS_PURE"


def source_path(module: str) -> Path:
    """The ``.py`` file of a module (``pcaptools.tcp.analysis`` -> ``.../tcp/analysis.py``)."""
    return PACKAGE_DIR.joinpath(*module.split(".")[1:]).with_suffix(".py")


def compiled_path(module: str) -> Path:
    """Where the build puts the extension of ``module`` for this interpreter."""
    return BUILD_DIR / (module + importlib.machinery.EXTENSION_SUFFIXES[0])


_CIMPORT = re.compile(r"^from (pcaptools(?:\.\w+)+) cimport ", re.MULTILINE)


def _direct_cimports(module: str) -> set[str]:
    pxd = source_path(module).with_suffix(".pxd")
    if not pxd.is_file():
        return set()
    return set(_CIMPORT.findall(pxd.read_text(encoding="utf-8")))


def cimports(module: str) -> tuple[str, ...]:
    """The pcaptools modules whose extension types the module's ``.pxd`` cimports
    (``from pcaptools.x.y cimport T``), and those their ``.pxd`` cimport, and so on: its
    compiled code is built against their ``.pxd`` (a type it cimports may hold or take
    another's) and needs them compiled too (``()`` without a ``.pxd``)."""
    found: set[str] = set()
    todo = [module]
    while todo:
        for dep in _direct_cimports(todo.pop()):
            if dep not in found and dep != module:
                found.add(dep)
                todo.append(dep)
    return tuple(sorted(found))


def source_hash(module: str) -> str:
    """SHA-256 of the module's ``.py`` source and, when there is one, its ``.pxd`` (Cython type
    declarations beside it), and of the ``.py`` and ``.pxd`` of each module it cimports: what
    a compiled build of the module was made from (an edit to a cimported module makes both
    stale, so both run as Python)."""
    py = source_path(module)
    h = hashlib.sha256(py.read_bytes())
    pxd = py.with_suffix(".pxd")
    if pxd.is_file():
        h.update(b"\0pxd\0" + pxd.read_bytes())
    for dep in cimports(module):
        dep_py = source_path(dep)
        h.update(b"\0cimport " + dep.encode() + b"\0" + dep_py.read_bytes())
        dep_pxd = dep_py.with_suffix(".pxd")
        if dep_pxd.is_file():
            h.update(b"\0pxd\0" + dep_pxd.read_bytes())
    return h.hexdigest()


class _CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled extension of a module in ``MODULES`` while it matches its source."""

    def __init__(self, manifest: dict[str, Any]) -> None:
        sources = manifest.get("sources") if isinstance(manifest, dict) else None
        if not isinstance(sources, dict):
            raise ValueError("no 'sources' object")
        self._sources: dict[str, str] = {
            str(m): str(h) for m, h in sources.items() if isinstance(h, str)}
        self.status: dict[str, str] = {}

    def find_spec(self, fullname: str, path: Any = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._sources:
            return None
        so = compiled_path(fullname)
        if not so.is_file():
            self.status[fullname] = "python: no build for this interpreter"
            return None
        try:
            current = source_hash(fullname)
        except OSError as e:
            self.status[fullname] = f"python: source unreadable ({e.strerror})"
            return None
        if current != self._sources[fullname]:
            self.status[fullname] = "python: source changed since the build"
            return None
        # compiled against the extension types of the modules it cimports: only with them
        # (a build narrowed to a subset, benchmarks/module_pay.py, may leave them out)
        missing = [d for d in cimports(fullname)
                   if d not in self._sources or not compiled_path(d).is_file()]
        if missing:
            self.status[fullname] = f"python: {', '.join(missing)} not compiled with it"
            return None
        self.status[fullname] = "compiled"
        return importlib.util.spec_from_file_location(
            fullname, so, loader=_CompiledLoader(self, fullname, so))


class _CompiledLoader(importlib.machinery.ExtensionFileLoader):
    """Loads a compiled module; when the file does not load (truncated by a full disk, built
    against another ABI), runs the module's ``.py`` instead and says why in ``status()``."""

    def __init__(self, finder: _CompiledFinder, name: str, so: Path) -> None:
        super().__init__(name, str(so))
        self._finder = finder
        self._source: importlib.machinery.SourceFileLoader | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        try:
            return super().create_module(spec)
        except ImportError as e:
            self._finder.status[self.name] = f"python: the compiled file did not load ({e})"
            self._source = importlib.machinery.SourceFileLoader(
                self.name, str(source_path(self.name)))
            return ModuleType(spec.name)  # filled by exec_module from the source

    def exec_module(self, module: ModuleType) -> None:
        if self._source is None:
            super().exec_module(module)
            return
        module.__file__ = self._source.path
        setattr(module, "__cached__", importlib.util.cache_from_source(self._source.path))  # noqa: B010
        self._source.exec_module(module)


_finder: _CompiledFinder | None = None
_why_not: str = "not installed"


def install() -> None:
    """Put the finder in front of ``sys.meta_path`` (once); a no-op without a usable build."""
    global _finder, _why_not
    if _finder is not None or _why_not != "not installed":
        return
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        _why_not = f"python: {PURE_ENV} is set"
        return
    try:
        finder = _CompiledFinder(json.loads(MANIFEST.read_text(encoding="utf-8")))
    except FileNotFoundError:
        _why_not = "python: not built (scripts/build_accel.py)"
        return
    except (OSError, ValueError, UnicodeDecodeError) as e:
        _why_not = f"python: unreadable {MANIFEST.name} ({e})"
        return
    _finder = finder
    sys.meta_path.insert(0, _finder)


def status() -> dict[str, str]:
    """Per module of ``MODULES``: ``"compiled"`` or ``"python: <why>"`` (as imported, or as it
    would be imported)."""
    out: dict[str, str] = {}
    for m in MODULES:
        mod = sys.modules.get(m)
        if mod is not None and getattr(mod, "__file__", "").endswith(".py"):
            if _finder is None:
                out[m] = _why_not
            else:
                out[m] = _finder.status.get(m, "python: not in the build")
        elif mod is not None:
            out[m] = "compiled"
        elif _finder is None:
            out[m] = _why_not
        else:  # not imported yet: what importing it would do
            _finder.find_spec(m)
            out[m] = _finder.status.get(m, "python: not in the build")
    return out


def summary() -> str:
    """One line for ``--version`` and the benchmark: how many of the modules run compiled."""
    st = status()
    n = sum(1 for v in st.values() if v == "compiled")
    if n == len(st):
        return f"compiled: {n} of {n} per-frame modules (Cython)"
    reasons = sorted({v.removeprefix("python: ") for v in st.values() if v != "compiled"})
    return f"python: {n} of {len(st)} per-frame modules compiled ({'; '.join(reasons)})"
