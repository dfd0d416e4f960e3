"""pcaptools against tshark 4.0 on one capture, layer by layer (the big benchmark capture).

    python benchmarks/parity.py /tmp/pcaptools-bench/big.pcap     # key log: big.keys beside it
    python benchmarks/parity.py CAPTURE --keylog KEYS

The test suite makes these comparisons on the shipped and corpus captures (tests/tcp,
tests/test_load_vs_tshark.py, tests/test_lossy_vs_tshark.py, tests/protocols); this script makes
them on a capture too big to ship, such as the benchmark's (benchmarks/record_big.py: 420,630
frames with 0.5 % random loss). Per layer it prints how many rows pcaptools and tshark have and
how many are only in one of them:

- TCP: every TCP frame's tcp.stream, relative seq/ack, window, analysis flags, duplicate-ACK
  numbers, ACK RTT and acked frame, initial RTT (``tests/tcp/_compare.py``, tshark defaults);
- TLS handshakes over TCP (the first ClientHello of each connection, frame and SNI; the
  ServerHello, not a HelloRetryRequest: frame, negotiated version and cipher suite), TLS records
  (frame, length), HTTP/1.x requests (frame) and responses (frame, status), HTTP/2 frames
  (frame, stream id, type), HTTP/2 requests (frame, method, path) and responses (frame,
  status), and WebSocket frames (frame, opcode, payload length), with the key log and
  ``tcp.reassemble_out_of_order:TRUE`` (tshark 4.0's default leaves resent segments that arrive
  after later ones out of its reassembly: see ``pcaptools.wireshark``).

Known differences show as mismatches (on the shipped and corpus captures, these are the only
ones): a header block continued in CONTINUATION frames has its method, path and status on the
frame that completes it in pcaptools (docs/tables.md), on the HEADERS frame in tshark
(``suricata-http2-continuation-input.pcap``, ``http2-nghttp2.pcap``); an HTTP/0.9 exchange (no
version, no status line) is a request and a response row to pcaptools, neither or a request
only to tshark (``http1-keepalive.pcap``); where the capture itself missed bytes, tshark with
out-of-order reassembly stops at the gap (``http1-keepalive-drops.pcap``: see
``pcaptools.wireshark``). HTTP/2 without TLS on a port other than 80 needs ``--decode-as``.

Exit status 0 when every layer agrees, 1 otherwise (a tshark row whose values do not line up,
such as a path holding tshark's "," separator, counts as a difference: it is shown as
"unparsed tshark row"). Runs tshark once per layer.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pcaptools  # noqa: E402
from pcaptools.protocols.tls._names import CIPHER_SUITES  # noqa: E402
from tests.oracle import tshark_fields  # noqa: E402
from tests.tcp._compare import compare  # noqa: E402

OUT_OF_ORDER = ("-o", "tcp.reassemble_out_of_order:TRUE")
#: not the ICMP errors that quote a TCP segment (tshark dissects the quoted bytes too: an HTTP
#: status line quoted by a "fragmentation needed" is no response)
_NO_ICMP = " && !icmp && !icmpv6"

Key = tuple[int, ...]


def _theirs(path: Path, opts: tuple[str, ...], fields: tuple[str, ...], display_filter: str,
            rows_of: Callable[[list[str]], Iterable[Key]]) -> Counter[Key]:
    out: Counter[Key] = Counter()
    for row in tshark_fields(path, fields, opts, display_filter):
        try:
            out.update(list(rows_of(row)))
        except (ValueError, IndexError):  # (values misaligned, e.g. a "," inside a path)
            out[(row[0], "unparsed tshark row")] += 1  # type: ignore[index]
    return out


def _ws_lengths(row: list[str]) -> Iterable[Key]:
    frame, ops, lens, ext16, ext64 = row
    e16 = [int(x) for x in ext16.split(",") if x]
    e64 = [int(x) for x in ext64.split(",") if x]
    for op, ln in zip(ops.split(","), lens.split(","), strict=True):
        n = int(ln)
        n = e16.pop(0) if n == 126 else e64.pop(0) if n == 127 else n
        yield (int(frame), int(op), n)


def _split(row: list[str], *, status: bool = False) -> Iterable[Key]:
    frame, *cols = row
    values = [[int(v) for v in c.split(",") if v] for c in cols]
    if status:  # (frame, response code) per response
        yield from ((int(frame), v) for v in values[0])
        return
    yield from ((int(frame), *vals) for vals in zip(*values, strict=True))


#: tshark's version numbers as pcaptools names them (tls_handshakes.version)
_VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2",
             0x0304: "TLS 1.3"}
#: the ServerHello.random of a HelloRetryRequest (RFC 8446 4.1.3): tls_handshakes names the
#: ServerHello that follows it
_HRR_RANDOM = "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c"


def _version(v: int) -> str:
    if v >> 8 == 0x7F:  # (TLS 1.3 drafts)
        return f"TLS 1.3 (draft {v & 0xFF})"
    return _VERSIONS.get(v, hex(v))


def _server_hellos(row: list[str]) -> Iterable[tuple[object, ...]]:
    """(frame, version, cipher suite) of each ServerHello of a tshark row that is not a
    HelloRetryRequest: the supported_versions extension's version (TLS 1.3) or the hello's
    own."""
    frame, types, versions, supported, suites, randoms = row
    n_hellos = sum(1 for t in types.split(",") if t == "2")
    own, sup = versions.split(","), [v for v in supported.split(",") if v]
    rnd = randoms.split(",")
    for n, suite in enumerate(suites.split(",")[:n_hellos]):
        if n < len(rnd) and rnd[n].replace(":", "") == _HRR_RANDOM:
            continue
        version = int(sup[n] if n < len(sup) else own[n], 16)
        yield (int(frame), _version(version), CIPHER_SUITES.get(int(suite, 16), suite))


def _first_per_stream() -> Callable[[list[str]], Iterable[Key]]:
    """(frame, SNI) of the first ClientHello of each TCP connection (a second one answers a
    HelloRetryRequest: tls_handshakes has one row per handshake)"""
    seen: set[str] = set()

    def rows_of(row: list[str]) -> Iterable[tuple[object, ...]]:
        frame, stream, sni = row
        if stream not in seen:
            seen.add(stream)
            yield (int(frame), sni.split(",")[0])
    return rows_of


def _pairs(row: list[str]) -> Iterable[tuple[object, ...]]:
    """(frame, a, b) for the aligned values of two multi-occurrence text fields"""
    frame, a, b = row
    yield from ((int(frame), x, y) for x, y in zip(a.split(","), b.split(","), strict=True))


def layers(path: Path, keylog: Path | None, tshark_opts: tuple[str, ...] = ()
           ) -> list[tuple[str, Counter[Key], Counter[Key]]]:
    """(layer, pcaptools' rows, tshark's rows) of the payload layers; ``tshark_opts``: more
    tshark options (``-d tcp.port==8080,http2`` for HTTP/2 without TLS on another port)."""
    # (credentials as on the wire, as tshark shows them: the redacted text would differ)
    cap = pcaptools.load(path, keylog=keylog, packets=False, show_secrets=True)
    opts = (*OUT_OF_ORDER, *(("-o", f"tls.keylog_file:{keylog}") if keylog else ()),
            *tshark_opts)
    rec, rq, h2, ws = cap.tls_records, cap.http_requests, cap.http2_frames, cap.ws_frames
    resp = rq[rq["response_frame"].notna()]
    hs = cap.tls_handshakes
    ch = hs[hs["client_hello_frame"].notna()]
    sh = hs[hs["server_hello_frame"].notna()]
    h2q = h2[h2["method"].notna()]
    h2s = h2[h2["status"].notna()]
    return [
        ("TLS ClientHellos (frame, SNI)",
         Counter(zip(ch["client_hello_frame"].astype("int64"), ch["sni"].fillna(""),
                     strict=True)),
         _theirs(path, opts, ("frame.number", "tcp.stream",
                              "tls.handshake.extensions_server_name"),
                 f"tcp && tls.handshake.type == 1{_NO_ICMP}", _first_per_stream())),
        ("TLS ServerHellos (frame, version, cipher suite)",
         Counter(zip(sh["server_hello_frame"].astype("int64"), sh["version"].astype(str),
                     sh["cipher_suite"].astype(str), strict=True)),
         _theirs(path, opts, ("frame.number", "tls.handshake.type", "tls.handshake.version",
                              "tls.handshake.extensions.supported_version",
                              "tls.handshake.ciphersuite", "tls.handshake.random"),
                 f"tcp && tls.handshake.type == 2{_NO_ICMP}", _server_hellos)),
        ("TLS records (frame, length)",
         Counter(zip(rec["frame"], rec["length"], strict=True)),
         _theirs(path, opts, ("frame.number", "tls.record.length"), f"tcp && tls.record{_NO_ICMP}", _split)),
        ("HTTP/1.x requests (frame)",
         Counter((int(f),) for f in rq["request_frame"].dropna()),
         _theirs(path, opts, ("frame.number", "http.request.method"), f"http.request{_NO_ICMP}",
                 lambda r: [(int(r[0]),)] * len(r[1].split(",")))),
        ("HTTP/1.x responses (frame, status)",
         Counter(zip(resp["response_frame"].astype("int64"),
                     resp["status"].astype("Int64").fillna(-1).astype("int64"), strict=True)),
         _theirs(path, opts, ("frame.number", "http.response.code"), f"http.response{_NO_ICMP}",
                 lambda r: _split(r, status=True))),
        ("HTTP/2 frames (frame, stream id, type)",
         Counter(zip(h2["frame"], h2["stream_id"], h2["type_code"], strict=True)),
         _theirs(path, opts, ("frame.number", "http2.streamid", "http2.type"), f"http2{_NO_ICMP}", _split)),
        ("HTTP/2 requests (frame, method, path)",
         Counter(zip(h2q["frame"], h2q["method"].astype(str), h2q["path"].astype(str),
                     strict=True)),
         _theirs(path, opts, ("frame.number", "http2.headers.method", "http2.headers.path"),
                 f"http2.headers.method{_NO_ICMP}", _pairs)),
        ("HTTP/2 responses (frame, status)",
         Counter(zip(h2s["frame"], h2s["status"].astype("int64"), strict=True)),
         _theirs(path, opts, ("frame.number", "http2.headers.status"), f"http2.headers.status{_NO_ICMP}",
                 lambda r: _split(r, status=True))),
        ("WebSocket frames (frame, opcode, payload length)",
         Counter(zip(ws["frame"], ws["opcode"], ws["payload_len"], strict=True)),
         _theirs(path, opts, ("frame.number", "websocket.opcode", "websocket.payload_length",
                              "websocket.payload_length_ext_16",
                              "websocket.payload_length_ext_64"), f"websocket{_NO_ICMP}", _ws_lengths)),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("--keylog", type=Path, help="default: CAPTURE with .keys, if it exists")
    ap.add_argument("--decode-as", action="append", default=[], metavar="CRITERION,PROTO",
                    help="tshark -d for the payload layers, e.g. tcp.port==8080,http2 "
                         "(HTTP/2 without TLS elsewhere than port 80 needs it; repeatable)")
    args = ap.parse_args(argv)
    keylog = args.keylog or args.capture.with_suffix(".keys")
    keylog = keylog if keylog.exists() else None
    ok = True
    tcp = compare(args.capture)
    kinds = Counter(what for _, what in tcp.mismatches)
    print(f"TCP frames: pcaptools {tcp.our_frames:,}, tshark {tcp.tshark_frames:,}; "
          f"{tcp.streams:,} streams, {tcp.ack_rtts:,} ACK RTTs, flags "
          f"{dict(sorted(tcp.flag_frames.items()))}; mismatched fields: "
          f"{dict(kinds) or 'none'}")
    ok &= not tcp.mismatches
    decode_as = tuple(x for d in args.decode_as for x in ("-d", d))
    for name, ours, theirs in layers(args.capture, keylog, decode_as):
        only_ours, only_theirs = ours - theirs, theirs - ours
        print(f"{name}: pcaptools {sum(ours.values()):,}, tshark {sum(theirs.values()):,}; "
              f"only pcaptools {sum(only_ours.values()):,}, only tshark "
              f"{sum(only_theirs.values()):,}"
              + (f" (e.g. {sorted(only_ours)[:3]} / {sorted(only_theirs)[:3]})"
                 if only_ours or only_theirs else ""))
        ok &= not only_ours and not only_theirs
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
