"""quic_packets and quic_connections against tshark 4.0 on the corpus QUIC captures (no key
log: the Initial packets decrypt without one; the Chrome capture's DSB lets tshark decrypt
more, which is not compared).

Per QUIC packet of every frame, in datagram order: header form, long packet type (v1
``quic.long.packet_type``, v2 ``quic.long.packet_type_v2``), ``quic.version``, ``quic.dcid``,
``quic.scid``, ``quic.packet_length``, the packet number of Initial packets, and the
connection index (``quic.connection.number``); per connection, the SNI and ALPN list of the
ClientHello in the Initial CRYPTO frames.

Known differences (asserted as such, not hidden):
- zero bytes after an Initial are padding, not a packet; tshark agrees mostly (a "quic"
  tree with only a padding note, skipped here), but shows the Chrome server's padding in
  frames 48 and 49 as one more short-header "packet";
- a short header's destination connection ID: tshark shows it only while it can follow the
  connection; here it is shown whenever it is a connection ID the connection announced in a
  long header (so it may be present where tshark has none, never different);
- tshark loses the QUIC v2 capture's connection after frame 7 (a client Handshake to a new
  connection ID) and shows no ``quic.connection.number`` from there; the index is compared
  where tshark has one.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import pcaptools
from pcaptools.protocols.quic.packets import VERSION_2

CAPTURES = {
    "chrome-cloudflare-quic-with-secrets.pcapng": ("cloudflare-quic.com", "h3"),
    "illustrated-quic-capture.pcap": ("example.ulfheim.net", "ping/1.0"),
    "quicv2-http3-443.pcap": (None, "h3"),
    "suricata-quic-retry-input.pcap": ("www.gravatar.com", "h3"),
}
_V1_TYPES = {"0": "initial", "1": "0rtt", "2": "handshake", "3": "retry"}
_V2_TYPES = {"0": "retry", "1": "initial", "2": "0rtt", "3": "handshake"}
_FIELDS = ("quic.header_form", "quic.long.packet_type", "quic.long.packet_type_v2",
           "quic.version", "quic.dcid", "quic.scid", "quic.packet_number",
           "quic.packet_length", "quic.connection.number")


def _pairs(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return items  # keep repeated keys ("quic" once per packet of a frame)


def _walk(node: Any, out: dict[str, str]) -> None:
    if isinstance(node, list):
        for k, v in node:
            if k in _FIELDS and isinstance(v, str):
                out.setdefault(k, v)
            else:
                _walk(v, out)


def _client_hellos(node: Any, found: list[dict[str, list[str]]]) -> None:
    if not isinstance(node, list):
        return
    if any(k == "tls.handshake.type" and v == "1" for k, v in node):
        got: dict[str, list[str]] = {"sni": [], "alpn": []}
        _collect(node, got)
        found.append(got)
        return
    for _k, v in node:
        _client_hellos(v, found)


def _collect(node: Any, got: dict[str, list[str]]) -> None:
    if isinstance(node, list):
        for k, v in node:
            if k == "tls.handshake.extensions_server_name" and isinstance(v, str):
                got["sni"].append(v)
            elif k == "tls.handshake.extensions_alpn_str" and isinstance(v, str):
                got["alpn"].append(v)
            else:
                _collect(v, got)


@cache
def _tshark(path: str) -> dict[int, tuple[list[dict[str, str]], list[dict[str, list[str]]]]]:
    """frame -> (the fields of each quic layer, in order; the ClientHellos in the frame)"""
    with tempfile.TemporaryDirectory() as cfg:
        env = dict(os.environ, WIRESHARK_CONFIG_DIR=cfg)
        res = subprocess.run(["tshark", "-n", "-r", path, "-T", "json", "-Y", "quic"],
                             capture_output=True, text=True, env=env, check=True)
    out = {}
    for pkt in json.loads(res.stdout, object_pairs_hook=_pairs):
        layers = dict(pkt)["_source"]
        layers = dict(layers)["layers"]
        frame = int(next(dict(v)["frame.number"] for k, v in layers if k == "frame"))
        quic = []
        hellos: list[dict[str, list[str]]] = []
        for k, v in layers:
            if k == "quic":
                fields: dict[str, str] = {}
                _walk(v, fields)
                quic.append(fields)
                _client_hellos(v, hellos)
        out[frame] = (quic, hellos)
    return out


def _cid(v: str | None) -> str:
    return (v or "").replace(":", "")


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_quic_packets_equal_tshark(corpus: Path, tshark: str, name: str) -> None:
    path = corpus / name
    if not path.exists():
        pytest.skip(f"{name} is not in the corpus")
    ts = _tshark(str(path))
    cap = pcaptools.load(path)
    pk = cap.quic_packets
    assert set(pk["frame"].tolist()) == set(ts)
    padded = compared = 0
    for frame, rows in pk.groupby("frame", sort=True):
        # (tshark shows padding it recognises as a "quic" tree with only an expert note)
        theirs = [t for t in ts[int(frame)][0] if "quic.header_form" in t]
        ours = rows.sort_values("index").to_dict("records")
        if len(theirs) == len(ours) + 1 and theirs[-1].get("quic.header_form") == "0":
            assert ours[-1]["packet_type"] == "initial"  # zero padding after an Initial
            theirs = theirs[:-1]
            padded += 1
        assert len(theirs) == len(ours), frame
        for o, t in zip(ours, theirs, strict=True):
            where = (name, frame, o["index"])
            assert o["long_header"] == (t["quic.header_form"] == "1"), where
            assert o["length"] == int(t["quic.packet_length"]), where
            if t.get("quic.connection.number") is not None:
                assert o["quic_connection"] == int(t["quic.connection.number"]), where
            if o["long_header"]:
                version = int(t["quic.version"], 16)
                assert o["version"] == version, where
                types = _V2_TYPES if version == VERSION_2 else _V1_TYPES
                code = t.get("quic.long.packet_type_v2" if version == VERSION_2
                             else "quic.long.packet_type")
                assert o["packet_type"] == types[str(code)], where
                assert o["dcid"] == _cid(t.get("quic.dcid")), where
                assert o["scid"] == _cid(t.get("quic.scid")), where
            else:
                assert o["packet_type"] == "1rtt"
                if t.get("quic.dcid") is not None:
                    assert o["dcid"] == _cid(t["quic.dcid"]), where
            if o["packet_type"] == "initial":
                assert o["status"] == "decrypted", where
                assert o["packet_number"] == int(t["quic.packet_number"]), where
            compared += 1
    assert compared == len(pk)
    assert padded == (2 if name.startswith("chrome") else 0)


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_quic_connections_sni_and_alpn_equal_tshark(corpus: Path, tshark: str,
                                                    name: str) -> None:
    path = corpus / name
    if not path.exists():
        pytest.skip(f"{name} is not in the corpus")
    ts = _tshark(str(path))
    cap = pcaptools.load(path)
    qc = cap.quic_connections
    numbers = {t["quic.connection.number"] for q, _ in ts.values() for t in q
               if "quic.connection.number" in t}
    assert qc["quic_connection"].tolist() == sorted(int(n) for n in numbers)
    hellos = [(h["sni"], h["alpn"]) for _, hs in ts.values() for h in hs]
    assert len(hellos) >= 1
    want_sni, want_alpn = CAPTURES[name]
    for sni, alpn in hellos:  # (the Retry capture's client sends its ClientHello twice)
        assert (sni or [None])[0] == want_sni
        assert ",".join(alpn) == want_alpn
    row = qc.iloc[0]
    assert (row["sni"] if isinstance(row["sni"], str) else None) == want_sni
    assert row["alpn_offered"] == want_alpn
    assert row["tls_version"] == "TLS 1.3"
    assert row["cipher"] == "TLS_AES_128_GCM_SHA256"
    assert bool(row["needs_keylog"]) == (not name.startswith("chrome"))  # (its DSB has keys)
    assert int(row["initial_failed"]) == 0
    assert bool(row["retry"]) == name.startswith("suricata")
    assert not cap.warnings["code"].astype(str).str.startswith("quic.").any()


def test_the_chrome_capture_connection(corpus: Path) -> None:
    path = corpus / "chrome-cloudflare-quic-with-secrets.pcapng"
    if not path.exists():
        pytest.skip("not in the corpus")
    qc = pcaptools.load(path).quic_connections
    r = qc.iloc[0]
    assert (r["client_addr"], r["client_port"], r["server_addr"], r["server_port"]) == (
        "2001:db8:1::1", 50280, "2606:4700:10::6816:826", 443)
    assert (r["version"], r["original_dcid"], r["client_scid"], r["server_scid"]) == (
        "1", "203f9e9f68698274", "", "0130dfc5a047e6acd230b5c5e047ced9b0a6bbf0")
    assert (r["client_hello_frame"], r["server_hello_frame"]) == (47, 49)
    assert (r["client_datagrams"] + r["server_datagrams"]) == 34  # tshark: 34 QUIC frames
    assert r["ja4"] == "q13d0310h3_55b375c5d22e_cd85d2d88918"
