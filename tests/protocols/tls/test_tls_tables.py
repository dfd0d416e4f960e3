"""tls_handshakes and tls_records: schemas, dtypes and values built from observer events."""

from __future__ import annotations

import _rfc8448 as rfc
import pandas as pd
import pytest
from _tls_feed import run
from test_observer import Harness, _rfc_conversation

from pcaptools.tables.tls_tables import TLS_HANDSHAKES, TLS_RECORDS, TlsTablesBuilder, alert_name


def test_empty_tables_keep_their_columns_and_dtypes() -> None:
    b = TlsTablesBuilder()
    b.add([object(), "not an event"])
    for df, schema in ((b.handshakes(), TLS_HANDSHAKES), (b.records(), TLS_RECORDS)):
        schema.check(df)
        assert len(df) == 0


def test_rfc8448_tables() -> None:
    h = Harness(rfc.KEYLOG)
    _rfc_conversation(h)
    b = TlsTablesBuilder()
    b.add(h.events)
    hs = b.handshakes()
    TLS_HANDSHAKES.check(hs)
    row = hs.iloc[0]
    assert (row.tcp_stream, row.session, row.client_hello_frame, row.server_hello_frame) == (
        7,
        0,
        1,
        2,
    )
    assert (row.sni, row.version, row.client_version, row.offered_versions) == (
        "server",
        "TLS 1.3",
        "TLS 1.2",
        "TLS 1.3",
    )
    assert (row.cipher_suite, row.key_share_group, row.cipher_suites_offered) == (
        "TLS_AES_128_GCM_SHA256",
        "x25519",
        3,
    )
    assert pd.isna(row.alpn_offered) and pd.isna(row.alpn_selected) and pd.isna(row.resumption)
    assert (
        row.cert_chain_len,
        row.cert_chain_bytes,
        row.client_app_bytes,
        row.server_app_bytes,
    ) == (1, 432, 50, 50)
    assert row.handshake_ms == pytest.approx(2.0) and row.time_to_app_data_ms == pytest.approx(4.0)
    assert row.client_hello_ts == pd.Timestamp(1_000_000, unit="ns", tz="UTC")
    assert row.alerts == "server:warning:close_notify,client:warning:close_notify"
    assert (bool(row.decrypted), row.decrypt_status) == (True, "decrypted")
    recs = b.records()
    TLS_RECORDS.check(recs)
    assert len(recs) == 9
    assert (
        list(recs["content_type"].astype(str))
        == ["handshake", "handshake"] + ["application_data"] * 7
    )
    assert list(recs["inner_content_type"].astype(str)) == [
        "handshake",
        "handshake",
        "handshake",
        "handshake",
        "handshake",
        "application_data",
        "application_data",
        "alert",
        "alert",
    ]
    assert list(recs["version"].astype(str)) == ["TLS 1.0"] + ["TLS 1.2"] * 8
    assert list(recs["plaintext_length"]) == [196, 90, 657, 36, 205, 50, 50, 2, 2]
    assert list(recs["offset"]) == [0, 0, 95, 201, 774, 259, 1001, 1073, 331]
    assert list(recs["direction"].astype(str)[:2]) == ["client_to_server", "server_to_client"]
    assert recs["encrypted"].sum() == 7 and recs["decrypted"].sum() == 7


def test_undecrypted_records_have_na_inner_type() -> None:
    h = Harness(None)
    _rfc_conversation(h)
    b = TlsTablesBuilder()
    b.add(h.events)
    recs = b.records()
    assert recs["inner_content_type"].isna().sum() == 7
    assert recs["plaintext_length"].isna().sum() == 7
    row = b.handshakes().iloc[0]
    assert row.decrypt_status == "no_keylog" and bool(row.client_finished_inferred)
    assert pd.isna(row.client_app_bytes) and pd.isna(row.cert_chain_len)


@pytest.mark.corpus
def test_dump_pcapng_tables(corpus: object) -> None:
    r = run(f"{corpus}/dump.pcapng", f"{corpus}/premaster.txt")
    b = TlsTablesBuilder()
    b.add(r.events)
    hs = b.handshakes()
    assert len(hs) == 73 and hs["tcp_stream"].tolist() == list(range(73))
    assert hs["cipher_suite"].nunique() == 73
    assert (hs["decrypt_status"] == "decrypted").all()
    assert hs.loc[hs.tcp_stream == 72, "cipher_suite"].item() == "TLS_RSA_EXPORT_WITH_RC4_40_MD5"
    assert hs["ja3"].isna().sum() == 3  # the SSLv2-format ClientHellos have no JA3 (as in tshark)
    recs = b.records()
    assert (recs.groupby("tcp_stream").size() > 5).all()
    assert recs["version"].astype(str).value_counts()["SSL 2.0"] == 3


def test_alert_name() -> None:
    assert (
        alert_name(40) == "handshake_failure"
        and alert_name(0) == "close_notify"
        and alert_name(200) == "200"
    )
