"""Key logs are read line by line: memory grows with the secrets found, not with the file
(``KeyLog.from_file`` used to read the whole file and split it, ~4x its size in memory).
CRLF, comments, blank lines, binary junk, lines of megabytes and files of tens of megabytes
give the same entries and the same ``tls.keylog_bad_line`` rows (line numbers) as parsing the
decoded text at once."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols.tls import KeyLog
from pcaptools.protocols.tls.keylog import MAX_LINE_BYTES

_LABELS_32 = (
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
    "SERVER_HANDSHAKE_TRAFFIC_SECRET",
    "CLIENT_TRAFFIC_SECRET_0",
    "SERVER_TRAFFIC_SECRET_0",
)


def _valid(rng: random.Random, i: int) -> tuple[bytes, bytes, str, bytes]:
    """(line, client random, label, secret): entry ``i``, with varied case, spacing and ending."""
    cr = rng.randbytes(32)
    if i % 3 == 0:
        label, secret = "CLIENT_RANDOM", rng.randbytes(48)
    else:
        label, secret = _LABELS_32[i % 4], rng.randbytes(32 if i % 2 else 48)
    cr_hex = cr.hex().upper() if i % 5 == 0 else cr.hex()
    line = f"{'  ' if i % 7 == 0 else ''}{label} {cr_hex}\t{secret.hex()} ".encode()
    return line + (b"\r\n" if i % 2 else b"\n"), cr, label, secret


def _junk(rng: random.Random, i: int) -> tuple[bytes, int]:
    """(line, bad lines it counts as): garbage of ~1.5 KB, comments, blank lines, binary."""
    kind = i % 6
    if kind == 0:
        return b"# " + b"c" * 1500 + b"\n", 0
    if kind == 1:
        return b"\r\n", 0
    if kind == 2:  # bad hex in a well-formed-looking entry
        return b"CLIENT_RANDOM " + b"zz" * 32 + b" " + b"ab" * 700 + b"\n", 1
    if kind == 3:  # binary, no line break in it (and not starting like a comment)
        body = bytes(b for b in rng.randbytes(1500) if b not in b"\n\r\x0b\x0c\x1c\x1d\x1e")
        return b"\x80" + body + b"\n", 1
    if kind == 4:
        return b"hello " * 250 + b"\n", 1
    return b"CLIENT_RANDOM " + b"11" * 31 + b"\n", 1  # too few fields


def test_fifty_megabytes_of_junk_stream_in_small_memory(tmp_path: Path) -> None:
    rng = random.Random(7)
    path = tmp_path / "huge.keys"
    want: dict[bytes, dict[str, bytes]] = {}
    n_valid = bad = 0
    with path.open("wb") as fh:
        for i in range(44_200):
            line, b = _junk(rng, i)
            fh.write(line)
            bad += b
            if i % 17 == 0:
                line, cr, label, secret = _valid(rng, n_valid)
                fh.write(line)
                want.setdefault(cr, {})[label] = secret
                n_valid += 1
        # lines of megabytes: binary without an end, a comment, garbage
        fh.write(b"# " + b"c" * (3 << 20) + b"\n")
        fh.write(b"x" * (2 << 20) + b"\r\n")
        fh.write(bytes(range(256)).replace(b"\n", b"") * 8192)  # 2 MB of binary, no final LF
        bad += 2
    size = path.stat().st_size
    assert size > 50_000_000
    diag = Diagnostics()
    tracemalloc.start()
    try:
        kl = KeyLog.from_file(path, diag)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # memory: the secrets and the capped warning rows, never the file (it was ~4x its size)
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB"
    # exactly the valid lines, nothing else
    assert kl.lines == n_valid == 2600 and len(kl) == len(want) == 2600
    assert kl.bad_lines == diag.counts["tls.keylog_bad_line"] == bad
    assert len(diag.rows) == 1000  # capped rows, exact count
    for cr, secrets in want.items():
        s = kl.lookup(cr)
        assert s is not None
        for label, secret in secrets.items():
            if label == "CLIENT_RANDOM":
                assert s.master_secret == secret
            elif label.endswith("_0"):
                side = s.client_traffic if label.startswith("CLIENT") else s.server_traffic
                assert side == {0: secret}
            else:
                attr = "client_handshake" if label.startswith("CLIENT") else "server_handshake"
                assert getattr(s, attr) == secret
    for r in diag.rows:  # line numbers, never content
        assert r.detail.startswith("huge.keys line ") and "zz" not in r.detail


def test_long_lines_are_one_bad_line_each(tmp_path: Path) -> None:
    cr, ms = "ab" * 32, "cd" * 48
    path = tmp_path / "k.txt"
    path.write_bytes(
        f"CLIENT_RANDOM {cr} {ms}\n".encode()  # 1
        + b"A" * (MAX_LINE_BYTES + 1) + b"\n"  # 2: one byte too long
        + b"#" + b"c" * MAX_LINE_BYTES + b"\r\n"  # 3: a long comment: skipped
        + b"b" * MAX_LINE_BYTES + b"\n"  # 4: just short enough to be parsed: a bad entry
        + b"\0\xff" * (3 << 20)  # 5: 6 MB of binary, no line end
    )
    diag = Diagnostics()
    kl = KeyLog.from_file(path, diag)
    assert len(kl) == 1 and kl.lines == 1 and kl.bad_lines == 3
    assert [r.detail for r in diag.rows] == [
        f"k.txt line 2: longer than {MAX_LINE_BYTES:,} bytes",
        "k.txt line 4: not a key log entry",
        f"k.txt line 5: longer than {MAX_LINE_BYTES:,} bytes",
    ]


def test_a_capture_file_as_key_log(tmp_path: Path) -> None:
    """Not text: every line bad, numbered, never shown; nothing stored."""
    path = tmp_path / "c.pcap"
    path.write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00" + bytes(range(256)) * 64)
    diag = Diagnostics()
    kl = KeyLog.from_file(path, diag)
    assert len(kl) == 0 and kl.lines == 0
    assert kl.bad_lines == diag.counts["tls.keylog_bad_line"] == len(diag.rows) > 0
    for r in diag.rows:
        assert "\\x" not in r.detail and "\x00" not in r.detail


_PIECES = [
    b"CLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48,
    b"CLIENT_TRAFFIC_SECRET_0 " + b"12" * 32 + b" " + b"ef" * 32,
    b"# comment",
    b"garbage",
    b"\xff\x00",
    b"  ",
    b"",
]
_ENDS = [b"\n", b"\r\n", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\n\n", b"\r\r\n"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(_ENDS)), max_size=30))
def test_streaming_splits_lines_as_the_whole_text_does(parts: list[tuple[bytes, bytes]]) -> None:
    """Any mix of line ends (LF, CRLF, lone CR, the other str.splitlines() breaks): the
    streamed bytes give the entries and line numbers that parsing the decoded text does."""
    data = b"".join(p + e for p, e in parts)
    d1, d2 = Diagnostics(), Diagnostics()
    streamed, whole = KeyLog(), KeyLog()
    streamed.add_text(data, d1, source="s")
    whole.add_text(data.decode("ascii", errors="replace"), d2, source="s")
    assert [r.detail for r in d1.rows] == [r.detail for r in d2.rows]
    assert (streamed.lines, streamed.bad_lines, len(streamed)) == (
        whole.lines,
        whole.bad_lines,
        len(whole),
    )
