"""Record segmentation never changes the events: real captures re-split into random pieces."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from _tls_feed import run
from conftest import CORPUS

pytestmark = [pytest.mark.corpus]


def _splitter(seed: int):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)

    def split(data: bytes) -> Iterator[bytes]:
        pos = 0
        while pos < len(data):
            n = rng.choice((1, 2, 3, 5, 7, 64, 500, 1400))
            yield data[pos : pos + n]
            pos += n

    return split


@pytest.mark.parametrize(
    ("name", "keylog"),
    [
        ("tls3.cryptohack.org.pcapng", "keylogfile.txt"),
        ("tls_nss_example.pcap", "tls_nss_example.keys.txt"),
        ("illustrated-tls12-capture.pcap", "illustrated-tls12-keylog.txt"),
        ("hrr.pcap", None),
    ],
)
@pytest.mark.parametrize("seed", [1, 2])
def test_resplitting_chunks_gives_identical_events(
    name: str, keylog: str | None, seed: int
) -> None:
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"{name} absent")
    kl = CORPUS / keylog if keylog else None
    whole = run(path, kl)
    pieces = run(path, kl, chunker=_splitter(seed))
    assert pieces.events == whole.events
    assert [(r.code, r.frame) for r in pieces.diag.rows] == [
        (r.code, r.frame) for r in whole.diag.rows
    ]
    assert {k: [bytes(x) for x in v.data] for k, v in pieces.inners.items()} == {
        k: [bytes(x) for x in v.data] for k, v in whole.inners.items()
    }
