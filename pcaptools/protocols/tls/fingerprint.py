"""Client and server hello fingerprints: JA3 / JA3S (as tshark 4.0 computes them) and JA4 / JA4S (FoxIO).

JA3 (Salesforce): ``version,ciphers,extensions,groups,point_formats`` with decimal values
joined by ``-``; GREASE values (RFC 8701) are dropped from the cipher, extension and group
lists, exactly as tshark 4.0's ``tls.handshake.ja3_full`` does; ``ja3`` is its MD5.
JA3S: ``version,cipher,extensions`` of the ServerHello.

JA4 (FoxIO spec, technical_details/JA4.md): ``t<ver><d|i><nn ciphers><nn exts><alpn>``
``_<sha256(sorted ciphers)[:12]>_<sha256(sorted exts minus SNI/ALPN + "_" + sig algs)[:12]>``.
"""

from __future__ import annotations

import hashlib

from .handshake import ClientHello, ServerHello
from .suites import is_grease

_JA4_VERSIONS = {
    0x0304: "13",
    0x0303: "12",
    0x0302: "11",
    0x0301: "10",
    0x0300: "s3",
    0x0002: "s2",
    0x0200: "s2",
    0xFEFF: "d1",
    0xFEFD: "d2",
    0xFEFC: "d3",
}


def _dash(values: tuple[int, ...] | list[int]) -> str:
    return "-".join(str(v) for v in values if not is_grease(v))


def ja3_full(ch: ClientHello) -> str | None:
    """The JA3 string of a ClientHello (GREASE removed as tshark 4.0 does); None for SSLv2 hellos."""
    if ch.sslv2:
        return None
    return ",".join(
        (
            str(ch.legacy_version),
            _dash(ch.cipher_suites),
            _dash(ch.extensions),
            _dash(ch.supported_groups),
            "-".join(str(v) for v in ch.ec_point_formats),
        )
    )


def ja3s_full(sh: ServerHello) -> str:
    """The JA3S string of a ServerHello."""
    return f"{sh.legacy_version},{sh.cipher_suite},{_dash(sh.extensions)}"


def md5_hex(text: str) -> str:
    return hashlib.md5(text.encode("ascii"), usedforsecurity=False).hexdigest()


def _alpn_chars(alpn: bytes | None) -> str:
    if not alpn:
        return "00"
    first, last = alpn[0], alpn[-1]

    def alnum(b: int) -> bool:
        return 0x30 <= b <= 0x39 or 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A

    if alnum(first) and alnum(last):
        return chr(first) + chr(last)
    h = alpn.hex()
    return h[0] + h[-1]


def _sha12(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:12]


def _ja4_version(ch: ClientHello) -> str:
    versions = [v for v in ch.supported_versions if not is_grease(v)]
    v = max(versions) if versions else ch.legacy_version
    return _JA4_VERSIONS.get(v, "00")


def ja4(ch: ClientHello, transport: str = "t") -> str | None:
    """JA4 fingerprint of a ClientHello (``transport``: t = TLS over TCP, q = QUIC, d = DTLS);
    None for an SSLv2-format hello."""
    return None if ch.sslv2 else _ja4(ch, transport, raw=False)


def ja4_r(ch: ClientHello, transport: str = "t") -> str | None:
    """JA4_r: the raw (sorted, unhashed) form of JA4."""
    return None if ch.sslv2 else _ja4(ch, transport, raw=True)


def _ja4(ch: ClientHello, transport: str, *, raw: bool) -> str:
    ciphers = [c for c in ch.cipher_suites if not is_grease(c)]
    exts = [e for e in ch.extensions if not is_grease(e)]
    sni = "d" if 0 in exts else "i"
    a = (
        f"{transport}{_ja4_version(ch)}{sni}{min(len(ciphers), 99):02d}{min(len(exts), 99):02d}"
        f"{_alpn_chars(ch.alpn[0] if ch.alpn else None)}"
    )
    cipher_list = ",".join(f"{c:04x}" for c in sorted(ciphers))
    ext_list = ",".join(f"{e:04x}" for e in sorted(e for e in exts if e not in (0x0000, 0x0010)))
    sigs = ",".join(f"{s:04x}" for s in ch.signature_algorithms if not is_grease(s))
    c_text = f"{ext_list}_{sigs}" if sigs else ext_list
    if raw:
        return f"{a}_{cipher_list}_{c_text}"
    b = _sha12(cipher_list) if cipher_list else "000000000000"
    c = _sha12(c_text) if ext_list else "000000000000"
    return f"{a}_{b}_{c}"


def ja4s(sh: ServerHello, transport: str = "t") -> str:
    """JA4S fingerprint of a ServerHello (FoxIO technical_details/JA4S.md)."""
    exts = [e for e in sh.extensions if not is_grease(e)]
    v = sh.supported_version if sh.supported_version is not None else sh.legacy_version
    a = f"{transport}{_JA4_VERSIONS.get(v, '00')}{min(len(exts), 99):02d}{_alpn_chars(sh.alpn)}"
    ext_list = ",".join(f"{e:04x}" for e in exts)
    return f"{a}_{sh.cipher_suite:04x}_{_sha12(ext_list) if ext_list else '000000000000'}"
