"""The public surface and the generated docs stay in step with the code."""

from __future__ import annotations

import pcaptools
from pcaptools import _docgen
from pcaptools.diagnostics import CATALOGUE, Diagnostics


def test_exported_members() -> None:
    assert sorted(pcaptools.__all__) == sorted(
        ["TABLES", "Capture", "CaptureFormatError", "CaptureOpenError", "CaptureSummary",
         "KeylogError", "ManyCaptures", "PcapToolsError", "WiresharkError", "__version__", "load",
         "load_many", "wireshark"]
    )
    for name in pcaptools.__all__:
        assert hasattr(pcaptools, name)


def test_generated_docs_are_up_to_date() -> None:
    assert _docgen.main(["--check"]) == 0, "run: python -m pcaptools._docgen"


def test_every_table_schema_builds_empty_with_its_dtypes() -> None:
    for schema in pcaptools.TABLES.values():
        df = schema.frame([])
        schema.check(df)
        assert len(df) == 0


def test_anomaly_codes_are_dotted_snake_case() -> None:
    for code in CATALOGUE:
        layer, _, name = code.partition(".")
        assert layer and name and code == code.lower() and " " not in code


def test_diagnostics_caps_rows_but_counts_everything() -> None:
    d = Diagnostics(max_rows_per_code=3)
    for i in range(10):
        d.add("tcp.reassembly_gap", f"gap {i}", frame=i + 1)
    assert len(d.rows) == 3
    assert d.counts["tcp.reassembly_gap"] == 10
    assert d.suppressed() == {"tcp.reassembly_gap": 7}
