"""TLS hands decrypted bytes to the HTTP observers (pcaptools.protocols.detect.tls_inner_factory):
the HTTP/2 and HTTP/1.x layers see the same frames and requests as tshark with the key logs
(truth.txt of the corpus)."""

from __future__ import annotations

from collections import Counter

import pytest
from _tls_feed import run
from conftest import CORPUS

pytestmark = [pytest.mark.corpus]

detect = pytest.importorskip("pcaptools.protocols.detect")
http2 = pytest.importorskip("pcaptools.protocols.http2")
http1 = pytest.importorskip("pcaptools.protocols.http1")


def _inner(tcp_stream: int, diag: object) -> object:
    return detect.tls_inner_factory(tcp_stream=tcp_stream, diag=diag)


@pytest.mark.parametrize(
    ("name", "keylog", "frames", "types"),
    [
        # truth.txt: http2: frames=203 types={0:159 1:30 4:4 6:8 8:2}; frames=9 types={0:1 1:2 4:4 8:2}
        ("http2-with-cookies.pcapng", None, 203, {0: 159, 1: 30, 4: 4, 6: 8, 8: 2}),
        ("tls3.cryptohack.org.pcapng", "keylogfile.txt", 9, {0: 1, 1: 2, 4: 4, 8: 2}),
        ("dsb-tls3.cryptohack.org.pcapng", None, 9, {0: 1, 1: 2, 4: 4, 8: 2}),
    ],
)
def test_http2_over_tls_frames_match_tshark(
    name: str, keylog: str | None, frames: int, types: dict[int, int]
) -> None:
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"{name} absent")
    r = run(path, CORPUS / keylog if keylog else None, inner_for=_inner)
    got = [e for e in r.events if isinstance(e, http2.Http2Frame)]
    assert len(got) == frames
    assert Counter(e.type for e in got) == Counter(types)
    assert not [row for row in r.diag.rows if row.layer == "tls"]


@pytest.mark.parametrize(
    ("name", "keylog", "requests"),
    [
        ("dump.pcapng", "premaster.txt", 73),
        ("tls12-decryption.pcap", "tls12-decryption.keylog.txt", 1),
        ("tls_nss_example.pcap", "tls_nss_example.keys.txt", 2),
    ],
)
def test_http1_over_tls_requests_match_tshark(name: str, keylog: str, requests: int) -> None:
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"{name} absent")
    r = run(path, CORPUS / keylog, inner_for=_inner)
    exchanges = [e for e in r.events if isinstance(e, http1.HttpExchange)]
    assert len([e for e in exchanges if e.request is not None]) == requests
