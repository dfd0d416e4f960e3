"""One fact, one home (#14): each shared constant is defined once, in the lowest layer that
needs it, and the modules above import that very object (old import paths keep working)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pcaptools
from pcaptools import capture, many, result
from pcaptools.analyses import summary
from pcaptools.io import linktypes, pcapng
from pcaptools.net.decode import SUPPORTED_LINKTYPES
from pcaptools.report import charts, html
from pcaptools.tcp import analysis, tracker

# (pcaptools.analyses.disconnects is also the name of a function the package exports)
disconnects = importlib.import_module("pcaptools.analyses.disconnects")
PACKAGE = Path(pcaptools.__file__).resolve().parent


def _defined_at_module_level(name: str) -> list[str]:
    """Modules of the package that assign ``name`` at module level (imports do not count)."""
    out = []
    for py in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(py.read_text(encoding="utf-8"))
        for node in tree.body:
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.FunctionDef) and node.name == name:
                out.append(str(py.relative_to(PACKAGE)))
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                out.append(str(py.relative_to(PACKAGE)))
    return out


def test_retransmission_kinds_has_one_home() -> None:
    assert _defined_at_module_level("RETRANSMISSION_KINDS") == ["tcp/analysis.py"]
    assert frozenset(
        {"retransmission", "fast_retransmission", "spurious_retransmission"}
    ) == analysis.RETRANSMISSION_KINDS
    for mod in (tracker, result, many, disconnects):
        assert mod.RETRANSMISSION_KINDS is analysis.RETRANSMISSION_KINDS, mod.__name__


def test_secrets_tls_keylog_has_one_home() -> None:
    assert _defined_at_module_level("SECRETS_TLS_KEYLOG") == ["io/pcapng.py"]
    assert pcapng.SECRETS_TLS_KEYLOG == 0x544C534B
    assert capture.SECRETS_TLS_KEYLOG == pcapng.SECRETS_TLS_KEYLOG


def test_fmt_ms_has_one_home() -> None:
    assert _defined_at_module_level("fmt_ms") == ["analyses/_format.py"]
    assert charts.fmt_ms is summary.fmt_ms and html.fmt_ms is summary.fmt_ms
    texts = [summary.fmt_ms(v) for v in (1204.4, 12.44, 0.0423)]
    assert texts == ["1,204 ms", "12.4 ms", "0.0423 ms"]


def test_tcp_analysis_flag_names_have_one_home() -> None:
    """The tcp.analysis flag kinds are analysis.KIND_NAMES; the report's tshark field names
    follow from it (the old tables.foundation.TCP_EVENT_KINDS copy is gone)."""
    assert analysis.KIND_NAMES[:4] == (
        "retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order",
    )
    assert len(analysis.KIND_NAMES) == 15 and "resent" not in analysis.KIND_NAMES
    assert list(html._TSHARK_FLAG) == list(analysis.KIND_NAMES)
    assert html._TSHARK_FLAG["zero_window_probe_ack"] == "tcp.analysis.zero_window_probe_ack"
    assert _defined_at_module_level("TCP_EVENT_KINDS") == []


def test_link_type_names_live_in_io_linktypes() -> None:
    assert _defined_at_module_level("_LINKTYPES") == []
    assert set(linktypes.LINKTYPE_LABELS) <= set(linktypes.LINKTYPE_NAMES)
    assert set(linktypes.LINKTYPE_LABELS) <= SUPPORTED_LINKTYPES
    assert linktypes.LINKTYPE_LABELS[276] == "Linux cooked v2"
    assert linktypes.linktype_name(1) == "LINKTYPE_ETHERNET (1)"
    assert not [n for n in vars(linktypes) if n.startswith("LINKTYPE_") and n not in (
        "LINKTYPE_NAMES", "LINKTYPE_LABELS")]


def test_tcp_header_flags_have_one_home() -> None:
    """net.packet.TCP_FLAGS: the flag bits, the packets table's letters and the docs' list."""
    from pcaptools.net import packet
    from pcaptools.tables import packets
    from pcaptools.tables.foundation import PACKETS

    assert [b for b, _ in packet.TCP_FLAGS] == [1 << i for i in range(9)]
    assert (packet.SYN, packet.ACK, packet.NS) == (0x02, 0x10, 0x100)
    assert packets._FLAG_TEXT[packet.SYN | packet.ACK] == "AS"
    assert packets._FLAG_TEXT[0x1FF] == "NCEUAPRSF"
    docs = {c.name: c.doc for c in PACKETS.columns}
    assert docs["tcp_flags"].endswith("FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 URG=0x20 "
                                      "ECE=0x40 CWR=0x80 NS=0x100")
    assert "N C E U A P R S F" in docs["flags"]
