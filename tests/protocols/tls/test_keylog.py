"""NSS key log parsing: labels, comments, garbage, secrets kept out of reprs and anomalies."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPUS

from pcaptools.diagnostics import Diagnostics
from pcaptools.errors import KeylogError
from pcaptools.protocols.tls import KeyLog

CR = "ab" * 32
MS = "CD" * 48
S32 = "ef" * 32


def test_all_labels_and_comments() -> None:
    diag = Diagnostics()
    kl = KeyLog()
    kl.add_text(
        "\n".join(
            [
                "# a comment",
                "",
                f"CLIENT_RANDOM {CR} {MS}",
                f"CLIENT_EARLY_TRAFFIC_SECRET {CR} {S32}",
                f"CLIENT_HANDSHAKE_TRAFFIC_SECRET {CR} {S32}",
                f"SERVER_HANDSHAKE_TRAFFIC_SECRET {CR} {S32}",
                f"CLIENT_TRAFFIC_SECRET_0 {CR} {S32}",
                f"SERVER_TRAFFIC_SECRET_0 {CR} {S32}",
                f"SERVER_TRAFFIC_SECRET_3 {CR} {'01' * 48}",
                f"EXPORTER_SECRET {CR} {S32}",
                f"EARLY_EXPORTER_SECRET {CR} {S32}",
                "RSA 0011223344556677 " + "00" * 48,
            ]
        )
        + "\r\n",
        diag,
        source="keys.txt",
    )
    assert diag.rows == []
    assert (kl.lines, kl.ignored_lines, kl.bad_lines, len(kl)) == (7, 3, 0, 1)
    s = kl.lookup(bytes.fromhex(CR))
    assert s is not None
    assert s.master_secret == bytes.fromhex(MS)
    assert s.client_early == s.client_handshake == s.server_handshake == bytes.fromhex(S32)
    assert sorted(s.client_traffic) == [0] and sorted(s.server_traffic) == [0, 3]
    assert s.server_traffic[3] == b"\x01" * 48
    assert kl.lookup(b"\0" * 32) is None
    assert kl.sources == ["keys.txt"]


def test_bad_lines_become_anomalies_with_line_numbers_never_secrets() -> None:
    diag = Diagnostics()
    kl = KeyLog()
    secret_hex = "5e" * 48
    kl.add_text(
        "\n".join(
            [
                f"CLIENT_RANDOM {CR} {secret_hex}",  # 1 good
                f"CLIENT_RANDOM {CR[:-2]} {secret_hex}",  # 2 short random
                f"CLIENT_RANDOM {CR} {secret_hex[:-2]}",  # 3 master not 48 bytes
                f"CLIENT_RANDOM {CR} zz{secret_hex}",  # 4 not hex
                f"CLIENT_RANDOM {CR}",  # 5 two fields
                f"WHATEVER_SECRET {CR} {secret_hex}",  # 6 unknown label
                "hello world",  # 7 garbage
                f"CLIENT_TRAFFIC_SECRET_X {CR} {secret_hex}",  # 8 bad generation
            ]
        ),
        diag,
        source="mixed.log",
    )
    assert kl.lines == 1 and kl.bad_lines == 7
    details = [r.detail for r in diag.rows]
    assert [d.split(":")[0] for d in details] == [f"mixed.log line {n}" for n in range(2, 9)]
    assert {r.code for r in diag.rows} == {"tls.keylog_bad_line"}
    for d in details:
        assert "5e5e" not in d and CR not in d
    assert "5e5e" not in repr(kl) and "5e5e" not in repr(kl.lookup(bytes.fromhex(CR)))
    assert repr(kl.lookup(bytes.fromhex(CR))) == "SessionSecrets(<master_secret>)"


def test_later_lines_replace_earlier_and_bytes_input() -> None:
    diag = Diagnostics()
    kl = KeyLog()
    kl.add_text(f"CLIENT_RANDOM {CR} {'00' * 48}\n".encode(), diag, source="a")
    kl.add_text(f"CLIENT_RANDOM {CR.upper()} {'11' * 48}\n".encode(), diag, source="pcapng DSB #1")
    s = kl.lookup(bytes.fromhex(CR))
    assert s is not None and s.master_secret == b"\x11" * 48
    assert bool(kl) and not bool(KeyLog())


def test_from_file_errors_raise_keylog_error(tmp_path: Path) -> None:
    diag = Diagnostics()
    with pytest.raises(KeylogError, match="cannot read key log"):
        KeyLog.from_file(tmp_path / "missing.txt", diag)
    with pytest.raises(KeylogError):
        KeyLog.from_file(tmp_path, diag)
    p = tmp_path / "k.txt"
    p.write_text(f"# c\nCLIENT_RANDOM {CR} {MS}\n")
    kl = KeyLog.from_file(p, diag)
    assert len(kl) == 1 and kl.sources == ["k.txt"]


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("name", "sessions", "entries", "ignored"),
    [
        ("premaster.txt", 146, 146, 0),
        ("tls_nss_example.keys.txt", 2, 5, 1),
        ("keylogfile.txt", 1, 4, 1),
        ("illustrated-tls13-keylog.txt", 1, 4, 1),
        ("illustrated-tls12-keylog.txt", 1, 1, 0),
    ],
)
def test_corpus_key_logs(
    corpus: Path, name: str, sessions: int, entries: int, ignored: int
) -> None:
    diag = Diagnostics()
    kl = KeyLog.from_file(corpus / name, diag)
    assert (len(kl), kl.lines, kl.ignored_lines, kl.bad_lines) == (sessions, entries, ignored, 0)
    assert diag.rows == []


def test_corpus_constant_is_a_path() -> None:
    assert isinstance(CORPUS, Path)
