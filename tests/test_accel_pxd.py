"""The Cython declarations (``.pxd`` beside a compiled module) match their ``.py`` source.

An extension type has exactly the attributes its ``.pxd`` declares: an attribute added to a class
in the ``.py`` but not to its ``.pxd`` would raise AttributeError in the compiled build only. This
test needs no build: it reads both files. (Whether the build and the pure modules give identical
tables is tests/test_accel.py.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pcaptools import _accel

# every module that may be compiled (MODULES and the payload modules weighed with them)
_PXDS = [p for m in _accel.CANDIDATES
         if (p := _accel.source_path(m).with_suffix(".pxd")).is_file()]
_CLASS = re.compile(r"cdef class (\w+)\s*:")
_ATTR = re.compile(r"\s+cdef (?:public |readonly )?\w+(?: \w+)* (\w+)\s*$")


def _pxd_classes(pxd: Path) -> dict[str, set[str]]:
    """class name -> attribute names declared in the pxd"""
    out: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in pxd.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _CLASS.match(line)
        if m:
            current = out[m.group(1)] = set()
        elif not line[0].isspace():
            current = None  # the class body ended
        elif current is not None and (a := _ATTR.match(line)):
            current.add(a.group(1))
    return out


def _py_attributes(py: Path, cls: str) -> tuple[set[str], set[str] | None]:
    """(names assigned as ``self.<name>`` in the class, its ``__slots__`` or None)"""
    tree = ast.parse(py.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    assigned: set[str] = set()
    slots: set[str] | None = None
    for n in ast.walk(node):
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = list(n.targets)
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)):
            targets = [n.target]
        for t in targets:
            for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) \
                        and e.value.id == "self":
                    assigned.add(e.attr)
    for n in node.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                             for t in n.targets):
            slots = set(ast.literal_eval(n.value))
    return assigned, slots


def test_there_are_pxd_files() -> None:
    assert {p.name for p in _PXDS} >= {"analysis.pxd", "packets.pxd", "tracker.pxd",
                                       "state.pxd", "records.pxd"}


def _pxd_id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


@pytest.mark.parametrize("pxd", _PXDS, ids=_pxd_id)
def test_pxd_attributes_match_the_python_class(pxd: Path) -> None:
    classes = _pxd_classes(pxd)
    if "cdef class" not in pxd.read_text(encoding="utf-8"):
        return  # (declares functions only: websocket/inflate.pxd)
    assert classes, pxd
    for cls, declared in classes.items():
        assigned, slots = _py_attributes(pxd.with_suffix(".py"), cls)
        assert assigned <= declared, (cls, sorted(assigned - declared))
        if slots is not None:
            assert slots == declared, (cls, sorted(slots ^ declared))


@pytest.mark.parametrize("module", [m for m in _accel.CANDIDATES if _accel.cimports(m)])
def test_cimported_modules_are_compiled_with_their_users(module: str) -> None:
    """A module whose .pxd cimports another's extension types is built against them: the
    other one must be a candidate too, and in MODULES whenever the first one is."""
    for dep in _accel.cimports(module):
        assert dep in _accel.CANDIDATES, (module, dep)
        assert module not in _accel.MODULES or dep in _accel.MODULES, (module, dep)


@pytest.mark.parametrize(("module", "fields", "blank", "writer"), [
    ("pcaptools.tables.packets", "_FIELDS", "_BLANK_ROW", "_put_tcp_row"),
    ("pcaptools.tables.ws_tables", "_FRAME_FIELDS", "_FRAME_BLANK", "_put_frame_row"),
    ("pcaptools.tables.ws_tables", "_MSG_FIELDS", "_MSG_BLANK", "_put_message_row"),
    ("pcaptools.tables.realtime_tables", "_ROW_FIELDS", "_ROW_BLANK", "_put_event_row"),
    ("pcaptools.tables.tls_tables", "_REC_FIELDS", "_REC_BLANK", "_put_record_row"),
])
def test_rows_written_in_place_have_the_layout_struct_packs(
        module: str, fields: str, blank: str, writer: str) -> None:
    """The compiled build writes a row's fields through C pointers, one argument of the writer
    after the other, into a blank row; pure Python packs them with Records' struct. Both give
    the same bytes only while the writer takes the fields in the Records order and the blank
    row is as long as a packed, 8-byte aligned row (the C writes would otherwise run past it or
    leave bytes of the next row)."""
    import importlib
    import inspect

    from pcaptools._columns import Records

    mod = importlib.import_module(module)
    spec = getattr(mod, fields)
    assert Records(spec, align=8).row_bytes == len(getattr(mod, blank))
    if inspect.isfunction(getattr(mod, writer, None)):  # (pure Python: the signature is there)
        params = list(inspect.signature(getattr(mod, writer)).parameters)[1:]  # (after buf)
        expected = [name for name, _ in spec if name != "ip_proto"]  # (packets: always 6)
        assert [{"typ": "type"}.get(p, p) for p in params] == expected
    # widest first: every field of every row aligned
    sizes = [{"q": 8, "i": 4, "h": 2, "b": 1}[code] for _, code in spec]
    assert sizes == sorted(sizes, reverse=True)
