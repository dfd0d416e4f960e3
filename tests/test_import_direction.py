"""The package's import graph goes one way: every module of ``pcaptools`` is parsed with
``ast`` (imports inside functions and under ``if TYPE_CHECKING:`` included), mapped to a layer,
and no module may import a module of a later layer, nor close a cycle of imports.

Layers, first to last (a module may import its own layer and the layers before it):

- ``base``: the package-root helpers every layer uses and that import no layer: ``errors``,
  ``diagnostics`` (anomaly codes), ``limits``, ``_columns`` (typed column buffers),
  ``redaction``, ``_safewrite`` (atomic writes), ``_accel`` (the compiled-build loader),
  ``_slots`` (repr and == of the per-frame record classes);
- ``io`` (``io/``, and ``wireshark``: the other reader of capture files, through tshark);
- ``net``, ``tcp``, ``protocols``;
- ``tables`` (``tables/``, and ``_eventcap``: the per-connection and per-table row caps the
  table builders apply to protocol events);
- ``pipeline``: ``result`` (CaptureSummary, TABLES, Capture), ``pipeline`` (the single pass) and
  ``frameloop`` (its loop over the frames);
- ``scale``: ``parallel``, ``many``, ``distributed``, ``export``, ``select``, and ``capture``,
  the front door: ``load()`` hands the pass to ``pipeline``, ``parallel`` (workers) or
  ``export`` (``out=``), so it sits with the runners it chooses between, above the pass;
- ``analyses``, ``report``, ``cli`` (``cli``, and ``_docgen``, which renders the docs of
  every layer).

``pcaptools/__init__.py`` is the front door of the package: its re-exports may import any
layer (it is left out of the direction check, not of the cycle check). Importing a submodule
also runs its packages' ``__init__``; the graph leaves those implicit edges out (every module
would otherwise be in a cycle with the root).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pcaptools"

LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("base", frozenset({"errors", "diagnostics", "limits", "_columns", "redaction", "_safewrite",
                        "_accel", "_memory", "_slots"})),
    ("io", frozenset({"io", "wireshark"})),
    ("net", frozenset({"net"})),
    ("tcp", frozenset({"tcp"})),
    ("protocols", frozenset({"protocols"})),
    ("tables", frozenset({"tables", "_eventcap"})),
    ("pipeline", frozenset({"result", "pipeline", "frameloop"})),
    ("scale", frozenset({"capture", "parallel", "many", "distributed", "export", "select"})),
    ("analyses", frozenset({"analyses"})),
    ("report", frozenset({"report"})),
    ("cli", frozenset({"cli", "_docgen"})),
)

#: (importer, imported) edges that go up a layer or close a cycle, each with the reason it
#: stays. Every entry must still be in the graph (a stale entry fails the test).
ALLOWED: dict[tuple[str, str], str] = {
    ("pcaptools.result", "pcaptools.export"): (
        "Capture.to_parquet()/to_csv() are conveniences over export.to_parquet/to_csv; export "
        "subclasses Capture (StreamedCapture), so the method imports it inside the call"
    ),
    ("pcaptools.result", "pcaptools.select"): (
        "Capture.subset() is a convenience over select.subset, which builds the subset's Capture "
        "(type(cap)(summary, tables)); imported inside the call"
    ),
    ("pcaptools.result", "pcaptools.analyses.latency"): (
        "Capture.latency() is a convenience over analyses.latency.stream_latency(cap), which "
        "reads a Capture's tables; imported inside the call"
    ),
    ("pcaptools.result", "pcaptools.analyses.disconnects"): (
        "Capture.disconnects() is a convenience over analyses.disconnects(cap); imported "
        "inside the call"
    ),
    ("pcaptools.result", "pcaptools.analyses.slow"): (
        "Capture.request_timing()/stalls()/connection_series() are conveniences over "
        "analyses.slow; imported inside the call"
    ),
    ("pcaptools.result", "pcaptools.analyses.overhead"): (
        "Capture.overhead() is a convenience over analyses.overhead(cap); imported inside the "
        "call"
    ),
    ("pcaptools.result", "pcaptools.analyses.conn_log"): (
        "Capture.conn_log() is a convenience over analyses.conn_log(cap); imported inside the "
        "call"
    ),
}

#: private names (leading underscore) one module imports from another, with the reason;
#: anything else private stays in its module (a shared helper gets a public name).
ALLOWED_PRIVATE: dict[tuple[str, str, str], str] = {
    # (importer, module, private name): why; none today (the modules of one package, such as
    # protocols/http2/ or report/, may share private names: see _package)
}


def _modules() -> dict[str, tuple[Path, bool]]:
    """module name -> (source file, is a package __init__)"""
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = list(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, is_pkg)
    return out


MODULES = _modules()


def _imports(name: str) -> list[tuple[str, str, int]]:
    """(imported module, imported name or "", line) of every import of ``name``'s source that
    names a pcaptools module, at any depth (functions, TYPE_CHECKING blocks)."""
    path, is_pkg = MODULES[name]
    package = name if is_pkg else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, "", node.lineno) for a in node.names
                    if a.name.split(".")[0] == "pcaptools"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "pcaptools":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((sub, "", node.lineno) if sub in MODULES
                           else (target, a.name, node.lineno))
    return out


def _graph() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in _imports(m) if t in MODULES and t != m} for m in MODULES}


def layer_of(module: str) -> int:
    """index in :data:`LAYERS` of a module (``pcaptools.x.y`` by ``x``)"""
    top = module.split(".")[1]
    for i, (_, names) in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """strongly connected components of more than one module (Tarjan)"""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer() -> None:
    missing = [m for m in MODULES if m != "pcaptools" and not any(
        m.split(".")[1] in names for _, names in LAYERS)]
    assert missing == []


def test_no_module_imports_a_later_layer() -> None:
    upward = []
    for m in MODULES:
        if m == "pcaptools":  # the front door of the package re-exports from every layer
            continue
        for t, _, line in _imports(m):
            if t in MODULES and t != "pcaptools" and layer_of(t) > layer_of(m) \
                    and (m, t) not in ALLOWED:
                upward.append(f"{m}:{line} imports {t} "
                              f"({LAYERS[layer_of(m)][0]} -> {LAYERS[layer_of(t)][0]})")
    assert upward == []


def test_importing_the_package_root_only_from_the_top() -> None:
    """``from pcaptools import __version__`` is for the layers above the front door."""
    users = sorted(m for m, deps in _graph().items() if "pcaptools" in deps)
    assert users == ["pcaptools.cli", "pcaptools.report.comparison", "pcaptools.report.html"]


def test_no_import_cycles() -> None:
    graph = _graph()
    for a, b in ALLOWED:
        graph[a].discard(b)
    assert _cycles(graph) == []


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_the_allow_list_is_current() -> None:
    """every allowed edge is still there, and still needs its entry (it goes up a layer or
    closes a cycle)"""
    graph = _graph()
    assert [e for e in ALLOWED if e[1] not in graph[e[0]]] == []
    assert [(a, b) for a, b in ALLOWED
            if not (layer_of(b) > layer_of(a) or a in _reachable(graph, b))] == []


def test_the_allowed_edges_are_what_they_say() -> None:
    # the Capture conveniences, not a stray import: exactly these names, inside a method
    got = {(m, t, n) for m in ("pcaptools.result",) for t, n, _ in _imports(m)
           if t in ("pcaptools.export", "pcaptools.select")}
    assert got == {("pcaptools.result", "pcaptools.export", "to_parquet"),
                   ("pcaptools.result", "pcaptools.export", "to_csv"),
                   ("pcaptools.result", "pcaptools.select", "subset")}
    tree = ast.parse(MODULES["pcaptools.result"][0].read_text(encoding="utf-8"))
    top_level = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert "export" not in top_level and "select" not in top_level


def _package(m: str) -> str:
    """the package a module belongs to (a package's ``__init__`` belongs to itself)"""
    return m if MODULES[m][1] else m.rpartition(".")[0]


def test_no_private_names_across_modules() -> None:
    """A private name may be shared by the modules of one package (``protocols/http2/``'s
    frames, events and observer), never imported from another package."""
    found = {}
    for m in MODULES:
        for t, name, line in _imports(m):
            if name.startswith("_") and not name.startswith("__") and t in MODULES \
                    and _package(t) != _package(m):
                found[(m, t, name)] = line
    assert sorted(k for k in found if k not in ALLOWED_PRIVATE) == []
    assert [k for k in ALLOWED_PRIVATE if k not in found] == []


def test_layer_map_examples() -> None:
    assert LAYERS[layer_of("pcaptools.io.pcapng")][0] == "io"
    assert LAYERS[layer_of("pcaptools.pipeline")][0] == "pipeline"
    assert LAYERS[layer_of("pcaptools.capture")][0] == "scale"
    assert LAYERS[layer_of("pcaptools._eventcap")][0] == "tables"
    assert LAYERS[layer_of("pcaptools._docgen")][0] == "cli"
    assert layer_of("pcaptools.tables.heartbeats") < layer_of("pcaptools.pipeline")
