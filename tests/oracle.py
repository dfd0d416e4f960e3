"""tshark as a test oracle: run ``tshark -T fields`` once per (capture, fields, options), cached.

Every call runs with a scratch WIRESHARK_CONFIG_DIR so personal preferences never change
the reference values, and with ``-n`` (no name resolution).
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from pathlib import Path


@functools.lru_cache(maxsize=256)
def tshark_fields(
    path: str | Path,
    fields: tuple[str, ...],
    options: tuple[str, ...] = (),
    display_filter: str | None = None,
) -> list[list[str]]:
    """Rows of tshark field values (strings; multi-occurrence fields joined by ',')."""
    args = ["tshark", "-n", "-r", str(path), *options, "-T", "fields",
            "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    if display_filter:
        args += ["-Y", display_filter]
    for f in fields:
        args += ["-e", f]
    with tempfile.TemporaryDirectory() as cfg:
        env = dict(os.environ, WIRESHARK_CONFIG_DIR=cfg)
        res = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    rows = []
    for line in res.stdout.splitlines():
        cols = line.split("\t")
        cols += [""] * (len(fields) - len(cols))
        rows.append(cols)
    return rows


def keylog_options(keylog: str | Path | None) -> tuple[str, ...]:
    return ("-o", f"tls.keylog_file:{keylog}") if keylog else ()
