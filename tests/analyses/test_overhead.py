"""analyses.overhead: the categories add up to the wire bytes on every real capture, each layer
matches an independent count (packets table, tshark, the protocol tables), and the TLS record
overhead is exact on keyed captures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses import OVERHEAD, overhead
from pcaptools.analyses.overhead import CATEGORIES
from tests.conftest import CAPTURES, CORPUS, CORPUS_KEYS, corpus_files, shipped_captures
from tests.helpers import pcap_file
from tests.oracle import keylog_options, tshark_fields

#: captures whose every TCP payload byte a parser accounts for (other_bytes == 0)
FULLY_PARSED = (
    "http1-basic.pcap",
    "http1-lossy.pcap",
    "demo.pcapng",
    "ws-healthy.pcap",
    "ws-tls.pcapng",
    "ws-blackhole.pcap",
    "h2-ping.pcap",
    "h2-sse-chat.pcapng",
    "sse-h1-cleartext.pcap",
    "tls-resumption.pcapng",
    "compare-h2.pcapng",
)


def _keys(path: Path) -> Path | None:
    if path.parent == CORPUS and path.name in CORPUS_KEYS:
        return CORPUS / CORPUS_KEYS[path.name]
    k = path.with_suffix(".keys")
    return k if k.exists() else None


def _load(path: Path, **kw: Any) -> pcaptools.Capture:
    return pcaptools.load(path, keylog=_keys(path), **kw)


def _corpus(name: str) -> Path:
    p = CORPUS / name
    if not p.is_file():
        pytest.skip(f"corpus capture {name} is absent")
    return p


def _dir_rows(df: pd.DataFrame) -> dict[tuple[int, int], pd.Series]:
    return {
        (int(r["tcp_stream"]), 0 if r["direction"] == "client_to_server" else 1): r
        for _, r in df[~df["total"]].iterrows()
    }


ALL = shipped_captures() + corpus_files()


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_categories_add_up_to_the_wire_bytes(path: Path) -> None:
    cap = _load(path)
    conns = cap.connections
    for by_direction in (False, True):
        df = overhead(cap, by_direction=by_direction)
        OVERHEAD.check(df)
        cats = df[list(CATEGORIES)].to_numpy(np.int64)
        assert (cats.sum(axis=1) == df["wire_bytes"].to_numpy(np.int64)).all()
        assert (cats >= 0).all(), df.loc[(cats < 0).any(axis=1), ["tcp_stream", *CATEGORIES]]
        body, total = df[~df["total"]], df[df["total"]]
        assert len(total) == 1 and total.index[-1] == df.index[-1]
        assert len(body) == len(conns) * (2 if by_direction else 1)
        for c in ("packets", "wire_bytes", *CATEGORIES):
            assert int(total[c].iloc[0]) == int(body[c].sum()), c
    df = overhead(cap)
    wire = (conns["client_wire_bytes"] + conns["server_wire_bytes"]).to_numpy(np.int64)
    assert (df[~df["total"]]["wire_bytes"].to_numpy(np.int64) == wire).all()
    t = df[df["total"]].iloc[0]
    if t["wire_bytes"]:
        assert t["goodput_ratio"] == pytest.approx(t["app_payload_bytes"] / t["wire_bytes"])
        assert t["goodput_max_ratio"] == pytest.approx(
            (t["app_payload_bytes"] + t["tls_encrypted_bytes"] + t["other_bytes"]) / t["wire_bytes"]
        )


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_tcp_categories_match_the_packets_table(path: Path) -> None:
    """Recount the TCP categories frame by frame from the packets table: header bytes
    (frame.len - tcp.len) by the flags of the packet, payload and resent bytes."""
    cap = _load(path)
    pk = cap.packets
    pk = pk[(pk["ip_proto"] == 6).fillna(False) & pk["tcp_stream"].notna()]
    hs_ack = set(cap.tcp_handshakes["ack_frame"].dropna().astype(int).tolist())
    fin = {}
    for r in cap.connections.itertuples():
        fin[(r.tcp_stream, 0)] = r.client_fin_frame
        fin[(r.tcp_stream, 1)] = r.server_fin_frame
    want: dict[tuple[int, int], dict[str, int]] = {}
    for fr, st, d, flags, flen, tlen in zip(
        pk["frame"],
        pk["tcp_stream"],
        pk["direction"].astype(str),
        pk["tcp_flags"],
        pk["frame_len"],
        pk["tcp_len"],
        strict=True,
    ):
        side = 0 if d == "client_to_server" else 1
        w = want.setdefault((int(st), side), dict.fromkeys(CATEGORIES[:4], 0))
        hdr = int(flen) - int(tlen)
        peer_fin = fin[(int(st), 1 - side)]
        if flags & 0x02:
            w["tcp_handshake_bytes"] += hdr
        elif flags & 0x05:
            w["tcp_teardown_bytes"] += hdr
        elif tlen:
            w["tcp_header_bytes"] += hdr
        elif fr in hs_ack:
            w["tcp_handshake_bytes"] += hdr
        elif peer_fin is not pd.NA and peer_fin < fr:
            w["tcp_teardown_bytes"] += hdr
        else:
            w["tcp_ack_bytes"] += hdr
    got = _dir_rows(overhead(cap, by_direction=True))
    for key, row in got.items():
        w = want.get(key, dict.fromkeys(CATEGORIES[:4], 0))
        assert {c: int(row[c]) for c in CATEGORIES[:4]} == w, key


@pytest.mark.parametrize("name", ["demo.pcapng", "ws-tls.pcapng", "tcp-reset.pcap"])
def test_wire_bytes_per_stream_match_tshark(name: str, tshark: str) -> None:
    path = CAPTURES / name
    rows = tshark_fields(path, ("tcp.stream", "frame.len"), display_filter="tcp && !icmp")
    per: dict[int, int] = {}
    for st, n in rows:
        per[int(st)] = per.get(int(st), 0) + int(n)
    df = overhead(_load(path))
    assert {int(r.tcp_stream): int(r.wire_bytes) for r in df[~df["total"]].itertuples()} == per


@pytest.mark.parametrize("name", FULLY_PARSED)
def test_fully_parsed_captures_leave_no_residual(name: str) -> None:
    df = overhead(_load(CAPTURES / name))
    assert (df["other_bytes"] == 0).all()


def test_unparsed_protocols_are_all_residual() -> None:
    """Port 80 without HTTP, port 1043...: no parser took them, so every new payload byte is
    other_bytes (resent bytes stay tcp_resent_bytes)."""
    for name in ("tcp_retransmissions.pcapng", "tcp_zerowindowdead.pcapng", "tcp_dupack.pcapng"):
        cap = pcaptools.load(_corpus(name))
        c = cap.connections
        new = int(
            (
                c["client_bytes"]
                + c["server_bytes"]
                - c["client_resent_bytes"]
                - c["server_resent_bytes"]
            ).sum()
        )
        t = overhead(cap).iloc[-1]
        assert t["other_bytes"] == new
        assert t["app_payload_bytes"] == 0 and t["goodput_ratio"] == 0.0
    t = overhead(pcaptools.load(_corpus("tcp_retransmissions.pcapng"))).iloc[-1]
    assert (t["other_bytes"], t["tcp_resent_bytes"]) == (648, 5 * 648)


# ------------------------------------------------------------------------------------------ TLS


def test_tls12_exact_record_overhead_with_and_without_keys() -> None:
    """The Illustrated TLS 1.2 connection (AES-128-CBC-SHA): 'ping' and 'pong' each travel in a
    48-byte record: 5 + 48 - 4 = 49 bytes of record overhead each. Handshake records are the
    ones tls_handshakes counts (287 client, 1263 server) plus the client's 53-byte alert."""
    path = _corpus("illustrated-tls12-capture.pcap")
    keyed = overhead(pcaptools.load(path, keylog=CORPUS / CORPUS_KEYS[path.name])).iloc[-1]
    assert keyed["tls_handshake_bytes"] == 287 + 1263 + 53
    assert keyed["tls_record_overhead_bytes"] == 2 * 49
    assert keyed["tls_encrypted_bytes"] == 0
    assert keyed["other_bytes"] == 8  # the two 4-byte plaintexts: no parser speaks ping/pong
    plain = overhead(pcaptools.load(path)).iloc[-1]
    assert plain["tls_handshake_bytes"] == keyed["tls_handshake_bytes"]  # wire types tell
    assert plain["tls_record_overhead_bytes"] == 2 * 5
    assert plain["tls_encrypted_bytes"] == 2 * 48
    assert plain["other_bytes"] == 0
    for c in CATEGORIES[:5]:
        assert plain[c] == keyed[c]


def test_tls13_handshake_by_position_without_keys() -> None:
    """TLS 1.3 hides the handshake in application_data records. With keys their inner type
    says handshake; without, the records up to each side's handshake bytes are. The two
    NewSessionTickets (2 x (5 + 234)) come after the Finished: handshake only when decrypted."""
    path = _corpus("illustrated-tls13-capture.pcap")
    cap_k = pcaptools.load(path, keylog=CORPUS / CORPUS_KEYS[path.name])
    keyed = _dir_rows(overhead(cap_k, by_direction=True))
    plain = _dir_rows(overhead(pcaptools.load(path), by_direction=True))
    hs = cap_k.tls_handshakes.iloc[0]
    assert (
        plain[(0, 0)]["tls_handshake_bytes"]
        == keyed[(0, 0)]["tls_handshake_bytes"]
        == hs["client_handshake_bytes"]
        == 333
    )
    assert plain[(0, 1)]["tls_handshake_bytes"] == hs["server_handshake_bytes"] == 1361
    assert keyed[(0, 1)]["tls_handshake_bytes"] == 1361 + 2 * (5 + 234)
    assert plain[(0, 1)]["tls_encrypted_bytes"] == 2 * 234 + 21
    # AES-256-GCM: 16-byte tag + 1 inner content type per record, 5-byte header
    assert (
        keyed[(0, 0)]["tls_record_overhead_bytes"]
        == keyed[(0, 1)]["tls_record_overhead_bytes"]
        == 5 + 17
    )


@pytest.mark.parametrize(
    "name",
    ["ws-tls.pcapng", "h2-sse-chat.pcapng", "tls-versions-ciphers.pcapng", "compare-h1.pcapng"],
)
def test_tls_record_overhead_equals_records_minus_plaintext(name: str) -> None:
    """On keyed captures: record overhead = header + length - plaintext of every decrypted
    application data record (+ the header of undecrypted ones), exactly, per connection."""
    cap = _load(CAPTURES / name)
    rec = cap.tls_records
    inner = rec["inner_content_type"].astype("string")
    app = rec["content_type"].astype("string").eq("application_data") & ~inner.isin(
        ["handshake", "alert", "change_cipher_spec"]
    ).fillna(False)
    want = (5 + rec["length"] - rec["plaintext_length"].fillna(rec["length"])).where(app, 0)
    per = want.groupby(rec["tcp_stream"]).sum().to_dict()
    hs = cap.tls_handshakes
    keyed = set(hs.loc[hs["decrypt_status"].astype(str) == "decrypted", "tcp_stream"].tolist())
    no_keys = set(hs["tcp_stream"].tolist()) - keyed  # tls-versions-ciphers: one without keys
    assert len(keyed) >= 1 and len(no_keys) <= 1
    got = overhead(cap)
    for r in got[~got["total"]].itertuples():
        if r.tcp_stream in keyed:
            assert r.tls_record_overhead_bytes == per.get(r.tcp_stream, 0)
            assert r.tls_encrypted_bytes == 0
        elif r.tcp_stream in no_keys:
            sel = rec[(rec["tcp_stream"] == r.tcp_stream) & app]
            assert (
                r.tls_record_overhead_bytes + r.tls_encrypted_bytes + r.tls_handshake_bytes
                == int((5 + rec.loc[rec["tcp_stream"] == r.tcp_stream, "length"]).sum())
            )
            assert r.tls_encrypted_bytes <= int(sel["length"].sum())


def test_tls_compression_keeps_the_sum() -> None:
    """dump.pcapng (with keys): 70 connections compress their responses with TLS DEFLATE
    (plaintext longer than the record). The HTTP layers, counted decompressed, share the
    compressed fragment bytes in proportion, rounded down; the rounding is other_bytes."""
    path = _corpus("dump.pcapng")
    cap = pcaptools.load(path, keylog=CORPUS / CORPUS_KEYS[path.name])
    rec = cap.tls_records
    grown = rec[(rec["plaintext_length"].fillna(0) > rec["length"]).to_numpy(bool)]
    assert grown["tcp_stream"].nunique() == 70
    assert set(grown["direction"].astype(str)) == {"server_to_client"}
    df = overhead(cap, by_direction=True)
    rows = _dir_rows(df)
    for st in grown["tcp_stream"].unique().tolist():
        r = rows[(int(st), 1)]
        app = rec[
            (rec["tcp_stream"] == st)
            & (rec["direction"] == "server_to_client")
            & rec["content_type"].astype("string").eq("application_data")
        ]
        frag = int(app["length"].sum())
        inner = int(r["http1_header_bytes"] + r["http1_framing_bytes"] + r["app_payload_bytes"])
        assert 0 <= frag - inner <= 3 and r["other_bytes"] == frag - inner
        assert r["tls_record_overhead_bytes"] == 5 * len(app)
    assert (df[list(CATEGORIES)].to_numpy() >= 0).all()


# ------------------------------------------------------------------------- HTTP, SSE, WebSocket


def test_http1_layers_equal_the_request_table() -> None:
    cap = _load(CAPTURES / "http1-basic.pcap")
    req = cap.http_requests
    t = overhead(cap).iloc[-1]
    assert t["http1_header_bytes"] == int(
        req["request_header_bytes"].sum() + req["response_header_bytes"].sum()
    )
    assert t["app_payload_bytes"] == int(
        req["request_body_bytes"].sum() + req["response_body_bytes"].sum()
    )
    assert t["http1_framing_bytes"] == int(
        (
            req["response_wire_bytes"] - req["response_header_bytes"] - req["response_body_bytes"]
        ).sum()
    )
    assert t["other_bytes"] == 0


def test_sse_data_is_payload_and_the_rest_is_framing() -> None:
    cap = _load(CAPTURES / "sse-h1-cleartext.pcap")
    req, ev = cap.http_requests, cap.sse_events
    assert len(ev) > 0
    t = overhead(cap).iloc[-1]
    sse = req["sse_events"] > 0
    bodies = int(req["request_body_bytes"].sum() + req.loc[~sse, "response_body_bytes"].sum())
    assert t["app_payload_bytes"] == bodies + int(ev["data_bytes"].sum())
    assert t["sse_framing_bytes"] == int(
        req.loc[sse, "response_body_bytes"].sum() - ev["data_bytes"].sum()
    )
    assert t["sse_framing_bytes"] > 0


def test_h2_sse_chat_layers_equal_the_frame_table() -> None:
    cap = _load(CAPTURES / "h2-sse-chat.pcapng")
    fr = cap.http2_frames
    t = overhead(cap).iloc[-1]
    assert t["http2_frame_header_bytes"] == 9 * len(fr)
    assert t["hpack_bytes"] == int(fr["header_block_bytes"].sum())
    ev = cap.sse_events
    data = int(fr["data_bytes"].sum())
    sse_bodies = int(
        cap.http2_streams.loc[cap.http2_streams["sse_events"] > 0, "server_data_bytes"].sum()
    )
    assert t["app_payload_bytes"] == data - sse_bodies + int(ev["data_bytes"].sum())
    assert t["http2_control_bytes"] == 24 + int(
        (fr["length"] - fr["data_bytes"].fillna(0) - fr["header_block_bytes"].fillna(0)).sum()
    )
    assert t["tls_encrypted_bytes"] == 0 and t["other_bytes"] == 0


def test_websocket_layers_equal_the_frame_table() -> None:
    cap = _load(CAPTURES / "ws-healthy.pcap")
    wf = cap.ws_frames
    control = wf["opcode_name"].astype(str).isin(["close", "ping", "pong"])
    t = overhead(cap).iloc[-1]
    assert t["ws_frame_header_bytes"] == int(wf["header_bytes"].sum())
    assert t["ws_control_bytes"] == int(wf.loc[control, "payload_len"].sum())
    assert t["app_payload_bytes"] == int(
        wf.loc[~control, "payload_len"].sum()
    )  # GET/101: no bodies
    assert t["http1_header_bytes"] == int(
        cap.http_requests["request_header_bytes"].sum()
        + cap.http_requests["response_header_bytes"].sum()
    )
    assert t["protocol"] == "total" and overhead(cap).iloc[0]["protocol"] == "http1/websocket"


def test_packets_false_gives_the_same_result() -> None:
    for path in shipped_captures():
        a = overhead(_load(path))
        b = overhead(_load(path, packets=False))
        pd.testing.assert_frame_equal(a, b, check_categorical=False)


def test_empty_capture_total_row(tmp_path: Path) -> None:
    path = tmp_path / "empty.pcap"
    path.write_bytes(pcap_file([]))
    df = overhead(pcaptools.load(path))
    OVERHEAD.check(df)
    assert len(df) == 1 and bool(df["total"].iloc[0]) and df["wire_bytes"].iloc[0] == 0
    assert np.isnan(df["goodput_ratio"].iloc[0])


def test_tls_keylog_options_helper_is_consistent() -> None:
    # the corpus key mapping mirrors MANIFEST.md (tshark needs the same files)
    for cap, key in CORPUS_KEYS.items():
        if (CORPUS / cap).is_file():
            assert (CORPUS / key).is_file()
            assert keylog_options(CORPUS / key)[1].endswith(key)
