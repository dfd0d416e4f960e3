"""Generates docs/tables.md and docs/anomalies.md from the schemas and the anomaly catalogue.

    python -m pcaptools._docgen          # rewrite docs/
    python -m pcaptools._docgen --check  # exit 1 if docs/ is out of date
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from .analyses.compare import COMPARISON
from .analyses.conn_log import CONN_LOG
from .analyses.coverage import COVERAGE_SUMMARY
from .analyses.disconnects import DISCONNECTS
from .analyses.latency import STREAM_LATENCY
from .analyses.overhead import OVERHEAD
from .analyses.realtime import (
    CADENCE,
    HEARTBEAT_AUDIT,
    RECONNECT_ATTEMPTS,
    RECONNECT_STORMS,
    TURNS,
)
from .analyses.slow import CONNECTION_SERIES, QUIC_RESENDS, REQUEST_TIMING, STALLS
from .diagnostics import CATALOGUE
from .tables.registry import TABLES
from .tables.schema import TableSchema

DOCS = Path(__file__).resolve().parent.parent / "docs"

#: tables that analyses compute from a Capture's tables (documented after the Capture tables)
DERIVED: tuple[TableSchema, ...] = (STREAM_LATENCY, COMPARISON, DISCONNECTS, OVERHEAD,
                                    COVERAGE_SUMMARY, TURNS, CADENCE, RECONNECT_STORMS,
                                    RECONNECT_ATTEMPTS, HEARTBEAT_AUDIT, CONN_LOG,
                                    REQUEST_TIMING, STALLS, CONNECTION_SERIES, QUIC_RESENDS)


def tables_markdown() -> str:
    head = (
        "# pcaptools tables\n\n"
        "Generated from `pcaptools/tables/*.py` by `python -m pcaptools._docgen`; do not edit by hand.\n\n"
        "Conventions: `frame` and `tcp_stream` are Wireshark's `frame.number` and `tcp.stream` "
        "(paste `frame.number == N` or `tcp.stream eq N` into Wireshark). Times (`ts`, `*_ts`) are "
        "`datetime64[ns, UTC]`; durations are float milliseconds (`*_ms`). `client_`/`server_` prefixes "
        "follow the SYN sender; `connections.client_inferred` says when no SYN was captured. "
        "Nullable `Int64`/`boolean` columns use NA for \"unknown / not applicable\". "
        "An empty table still has all its columns and dtypes.\n\n"
        "Integer widths: counts, byte totals, sequence numbers, frame numbers and `tcp_stream` are "
        "64-bit. A column whose values the protocol bounds is narrower (`packets`: ports, "
        "`tcp_len`, `window`, `cap_len` and `interface` 32-bit, `tcp_flags` and `ip_proto` "
        "16-bit, `ip_version` 8-bit; `ws_frames.opcode` and `header_bytes` 8-bit, "
        "`close_code` 32-bit; `tls_records.length` and `plaintext_length` 32-bit): always "
        "signed, with room beyond the protocol's range, so differences and comparisons are "
        "exact and sums and cumulative sums come back 64-bit. Products do not widen: cast "
        "first for arithmetic that can leave the column's range, e.g. "
        "`pk.sport.astype(\"Int64\") * 65536 + pk.dport` (numpy and pandas wrap a 32-bit "
        "overflow silently).\n\n"
        "A `string` column that no row of a table fills (a close reason no connection gave, a "
        "field no event carried) is the same missing `string` column as "
        "`pd.array([None] * n, dtype=\"string\")`, but from 65,536 rows its zeros are mapped, "
        "not allocated: it holds no resident memory, while `DataFrame.memory_usage(deep=True)` "
        "still counts 8 bytes a row for it.\n\n"
        "The `packets` table is the only one that grows with the number of frames (128 bytes per "
        "frame in memory): load with `pcaptools.load(path, packets=False)` for captures of many "
        "millions of frames when you do not need per-packet plots.\n\n"
        "Checksums: like tshark, `load()` does not validate TCP checksums by default, and every "
        "table analyses a segment whatever its checksum. `load(check_checksums=True)` validates "
        "them (IPv4 and IPv6 pseudo-header): a bad one adds a `tcp_events` row of kind "
        "`bad_checksum` and a `tcp.bad_checksum` warning, and no other table changes (they "
        "follow tshark, which analyses bad segments too); partial checksums (offloaded to the "
        "NIC, loopback) are counted in `summary.extra[\"tcp_checksums\"]`, never called bad. "
        "Only `conn_log` (derived, below) follows Zeek's default and drops bad segments "
        "(history `C`); `conn_log(cap, check_checksums=False)` is `zeek -C`. `connections` "
        "keeps Wireshark's `tcp.stream` boundaries and tshark's retransmission flags for its "
        "Zeek letters; `conn_log` applies Zeek's own connection boundaries and `T` rule "
        "(docs/analyses/zeek-conn-log.md).\n\n"
    )
    derived = (
        "\n# Derived tables\n\n"
        "Computed from the tables above by functions in `pcaptools.analyses` (pure functions: "
        "no capture is read again).\n\n"
    )
    return (
        head
        + "\n".join(schema.markdown() for schema in TABLES.values())
        + derived
        + "\n".join(schema.markdown() for schema in DERIVED)
        + summary_markdown()
    )


#: how export writes a CaptureSummary field that is not a plain scalar (export.summary_row)
_SUMMARY_EXPORT_TYPE = {"linktypes": "text: comma-separated integers",
                        "extra": "text: JSON object"}


def _summary_fields() -> list[tuple[str, str, str]]:
    """(name, annotation, docstring) of CaptureSummary's fields, read from result.py's source
    (the attribute docstrings are not kept at run time)."""
    tree = ast.parse((Path(__file__).resolve().parent / "result.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CaptureSummary")
    out = []
    for stmt, nxt in zip(cls.body, [*cls.body[1:], None], strict=True):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            doc = ""
            if (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                doc = " ".join(nxt.value.value.split())
            out.append((stmt.target.id, ast.unparse(stmt.annotation), doc))
    return out


def summary_markdown() -> str:
    """``captures.parquet``: the CaptureSummary row written next to the tables by exports."""
    lines = [
        "\n# captures.parquet (`Capture.summary`)\n",
        "`to_parquet`, `load(out=...)` and `pcaptools.distributed` write one row per capture "
        "next to the tables: the fields of `Capture.summary` (`pcaptools.CaptureSummary`), plus "
        "`duration_s`. For a `ManyCaptures`, `captures.parquet` is `ManyCaptures.summaries` "
        "instead: `capture`, `path`, `format`, `compression`, `file_size`, `frames`, "
        "`first_ts_ns`, `last_ts_ns`, `duration_s`, `wire_bytes`, `tcp_frames`, `udp_frames`, "
        "`tcp_connections`, `warnings` and `error` (the message of a file that failed to load), "
        "with the same meanings.\n",
        "| column | type | meaning |",
        "|---|---|---|",
    ]
    for name, ann, doc in _summary_fields():
        kind = _SUMMARY_EXPORT_TYPE.get(name, ann.replace(" | None", " or null"))
        lines.append(f"| `{name}` | {kind} | {doc} |")
    lines.append("| `duration_s` | float | last_ts_ns - first_ts_ns, seconds "
                 "(0.0 without frames) |")
    return "\n".join(lines) + "\n"


def anomalies_markdown() -> str:
    lines = [
        "# Anomaly codes (`Capture.warnings.code`)",
        "",
        "Generated from `pcaptools/diagnostics.py` by `python -m pcaptools._docgen`; do not edit by hand.",
        "",
        "Every problem found in a capture becomes a row of `Capture.warnings`; the rest of the capture "
        "is still analysed. At most 1000 rows per code are kept (`load(max_warnings_per_code=...)`); "
        "beyond that one summary row gives the number of further occurrences.",
        "",
        "| code | meaning |",
        "|---|---|",
    ]
    lines += [f"| `{code}` | {meaning} |" for code, meaning in sorted(CATALOGUE.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    wanted = {"tables.md": tables_markdown(), "anomalies.md": anomalies_markdown()}
    if "--check" in argv:
        stale = [n for n, text in wanted.items()
                 if not (DOCS / n).is_file() or (DOCS / n).read_text(encoding="utf-8") != text]
        if stale:
            sys.stderr.write(f"out of date: {', '.join(stale)} (run python -m pcaptools._docgen)\n")
            return 1
        return 0
    DOCS.mkdir(exist_ok=True)
    for name, text in wanted.items():
        (DOCS / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
