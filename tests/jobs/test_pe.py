"""Tests of ``regionscan pe``: every command on a tiny table, the JSON and chart, bad options."""

from __future__ import annotations

import json

import numpy as np
import pytest

import storage
from jobs import pe
from jobs.pe_stats import format_latency, latency_stats
from jobs.pe_workloads import COMMANDS, format_row, meta_lookup_key, meta_row_key, meta_split_key

ROWS = 120  # per client
LAT_FIELDS = {"count", "min", "mean", "stddev", "p50", "p75", "p95", "p99", "p999", "max"}


def run_pe(tmp_path, *argv, json_name="out.json"):
    """Run pe on a table under tmp_path; return (exit code, parsed JSON or None)."""
    out = tmp_path / json_name
    code = pe.main(["--root", str(tmp_path / "data"), "--valueSize", "24", "--seed", "7", "--json", str(out), *argv])
    doc = json.loads(out.read_text()) if code == 0 else None
    return code, doc


def by_command(doc):
    return {r["command"]: r for r in doc["results"]}


def check_latency(lat, ops):
    assert set(lat) == LAT_FIELDS
    assert lat["count"] == ops
    assert 0 < lat["min"] <= lat["p50"] <= lat["p75"] <= lat["p95"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert lat["min"] <= lat["mean"] <= lat["max"]


def test_write_then_every_read_command(tmp_path, capsys):
    commands = ["sequentialWrite", "sequentialRead", "randomRead", "scan", "reverseScan",
                "scanRange10", "scanRange100", "scanRange1000"]
    code, doc = run_pe(tmp_path, "--rows", str(ROWS), "--presplit", "3", "--flush", *commands, "2")
    assert code == 0
    total = 2 * ROWS
    res = by_command(doc)
    assert list(res) == commands
    for name in commands:
        agg = res[name]["aggregate"]
        assert agg["clients"] == 2
        assert [c["client"] for c in res[name]["clients"]] == [0, 1]
        check_latency(agg["latency_us"], agg["ops"])
        for c in res[name]["clients"]:
            check_latency(c["latency_us"], c["ops"])
    for name in ("sequentialWrite", "sequentialRead", "randomRead", "scan", "reverseScan"):
        # every key these commands touch exists, so each operation moves exactly one row
        assert res[name]["aggregate"]["ops"] == total
        assert res[name]["aggregate"]["rows"] == total
        assert res[name]["aggregate"]["bytes"] == total * (26 + 24)
    for width in (10, 100, 1000):
        agg = res[f"scanRange{width}"]["aggregate"]
        assert agg["ops"] == total
        # each range starts at an existing row and is at most `width` rows long
        assert agg["ops"] <= agg["rows"] <= min(width, total) * agg["ops"]
    assert doc["options"]["clients"] == 2 and doc["options"]["rows"] == ROWS
    regions = storage.connect(str(tmp_path / "data")).table("TestTable").regions()
    assert len(regions) == 3
    text = capsys.readouterr().out
    assert "Summary of timings (ms)" in text
    for label in ("Min:", "Avg:", "StdDev:", "50th:", "75th:", "95th:", "99th:", "99.9th:", "Max:"):
        assert label in text
    assert "[RandomReadTest]" in text and "MB/s" in text and "rows/s" in text


def test_random_write_counts_and_clients_option(tmp_path):
    code, doc = run_pe(tmp_path, "--rows", "50", "--clients", "3", "--autoFlush", "randomWrite")
    assert code == 0
    agg = by_command(doc)["randomWrite"]["aggregate"]
    assert agg["clients"] == 3 and agg["ops"] == 150 and agg["rows"] == 150
    table = storage.connect(str(tmp_path / "data")).table("TestTable")
    keys = [k for k, _ in table.scan()]
    assert 0 < len(keys) <= 150
    assert all(len(k) == 26 and int(k) < 150 for k in keys)


def test_read_on_missing_table_loads_it_first(tmp_path, capsys):
    code, doc = run_pe(tmp_path, "--rows", "80", "randomRead")
    assert code == 0
    agg = by_command(doc)["randomRead"]["aggregate"]
    assert agg["ops"] == 80 and agg["rows"] == 80
    assert "is missing: loading 80 rows" in capsys.readouterr().out


def test_multi_get_reads_the_keys_in_batches(tmp_path, capsys):
    # 2 clients x 120 keys in multi-gets of 50: 3 operations each (50, 50, 20 keys)
    code, doc = run_pe(tmp_path, "--rows", str(ROWS), "--presplit", "3", "--flush", "sequentialWrite",
                       "randomRead", "2", "--multiGet", "50")
    assert code == 0
    res = by_command(doc)
    writes, reads = res["sequentialWrite"]["aggregate"], res["randomRead"]["aggregate"]
    assert writes["ops"] == 2 * ROWS  # --multiGet leaves the other commands alone
    assert reads["ops"] == 6 and reads["rows"] == 2 * ROWS  # every key drawn exists
    assert reads["bytes"] == 2 * ROWS * (26 + 24)
    check_latency(reads["latency_us"], 6)
    for client in res["randomRead"]["clients"]:
        assert client["ops"] == 3 and client["rows"] == ROWS
    assert "[RandomReadTest] starting: 2 client(s) x 120 gets in 3 multi-gets of 50" in capsys.readouterr().out


def test_increment_counts_every_client_on_the_same_rows(tmp_path):
    code, doc = run_pe(tmp_path, "--rows", "40", "--presplit", "2", "sequentialWrite", "increment", "3")
    assert code == 0
    agg = by_command(doc)["increment"]["aggregate"]
    assert agg["clients"] == 3 and agg["ops"] == 120 and agg["rows"] == 120
    check_latency(agg["latency_us"], 120)
    table = storage.connect(str(tmp_path / "data")).table("TestTable")
    # three clients incremented rows 0..39 concurrently: none of the 120 increments is lost
    assert [table.counter_get(format_row(i), b"info:IncrementTest") for i in range(40)] == [3] * 40
    assert table.counter_get(format_row(40), b"info:IncrementTest") == 0
    assert len(table.row(format_row(0))[b"info:0"]) == 24  # the row's value is left as it was


def test_filter_scan_and_filter_all(tmp_path):
    code, doc = run_pe(tmp_path, "--rows", "60", "--sampleRate", "0.1", "sequentialWrite", "filterScan")
    assert code == 0
    agg = by_command(doc)["filterScan"]["aggregate"]
    assert agg["ops"] == 6  # 10% of 60 full filtered scans
    assert agg["rows"] == 0  # random values never equal a stored one
    code, doc = run_pe(tmp_path, "--rows", "60", "--filterAll", "scan", "scanRange10", "randomRead", "filterScan",
                       "--sampleRate=0.5", json_name="all.json")
    assert code == 0
    res = by_command(doc)
    for name in ("scan", "scanRange10", "randomRead", "filterScan"):
        assert res[name]["aggregate"]["rows"] == 0, name  # the filter drops every row server-side
    assert res["scanRange10"]["aggregate"]["ops"] == 30
    assert res["randomRead"]["aggregate"]["ops"] == 30
    # the scanner ends on its first next(): one operation, and a note saying why
    assert res["scan"]["aggregate"]["ops"] == 1
    assert res["scan"]["notes"]


def test_meta_write_then_meta_random_read(tmp_path):
    code, doc = run_pe(tmp_path, "--rows", "100", "metaWrite", "metaRandomRead", "2")
    assert code == 0
    res = by_command(doc)
    assert res["metaWrite"]["aggregate"]["ops"] == 200 and res["metaWrite"]["aggregate"]["rows"] == 200
    agg = res["metaRandomRead"]["aggregate"]
    assert agg["ops"] == 200 and agg["rows"] == 200  # every lookup finds its region row
    meta = storage.connect(str(tmp_path / "data")).table("TestTable-meta")
    rows = [k for k, _ in meta.scan()]
    assert len(rows) == 200
    assert all(k.startswith(b"TestTable,") for k in rows)


def test_meta_lookup_finds_the_region_holding_the_key(tmp_path):
    conn = storage.connect(str(tmp_path / "meta"))
    table = conn.create_table("m", {"info": {}})
    for i in (0, 10, 20, 30):
        table.put(meta_row_key("T", i, 1234), {b"info:server": b"s%d" % i})
    table.put(b"U,zzz,1", {b"info:server": b"other"})
    for key, expect in ((5, 0), (10, 10), (29, 20), (99, 30)):
        found = list(table.scan(row_start=meta_lookup_key("T", meta_split_key(key)), reverse=True, limit=1))
        assert len(found) == 1
        assert found[0][1][b"info:server"] == b"s%d" % expect
    conn.close()


def test_chart_html(tmp_path):
    chart = tmp_path / "pe.html"
    code, _ = run_pe(tmp_path, "--rows", "40", "sequentialWrite", "scan", "--chart", str(chart))
    assert code == 0
    page = chart.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert page.count("<svg") == 1  # one figure: throughput + one latency panel per command
    assert "sequentialWrite" in page and "scan: latency" in page and "99.9th" in page


@pytest.mark.parametrize(
    "argv, option",
    [
        (["--rows", "0", "scan"], "--rows"),
        (["--valueSize", "-1", "scan"], "--valueSize"),
        (["--compress", "GZ", "scan"], "--compress"),
        (["--bloomFilter", "ROWCOL", "scan"], "--bloomFilter"),
        (["--sampleRate", "1.5", "scan"], "--sampleRate"),
        (["--caching", "0", "scan"], "--caching"),
        (["--blockSize", "10", "sequentialWrite"], "--blockSize"),
        (["--presplit", "-2", "sequentialWrite"], "--presplit"),
        (["--clients", "2", "scan", "3"], "--clients"),
        (["--chart", "x.gif", "scan"], "--chart"),
        (["--json", "/no/such/folder/out.json", "scan"], "--json"),
        (["--table", "bad/name", "scan"], "--table"),
        (["scna"], "'scna'"),
        (["scan", "0"], "client count"),
        (["--multiGet", "-1", "randomRead"], "--multiGet"),
        (["--multiGet", "10", "scan"], "--multiGet applies to randomRead only"),
        (["--multiGet", "10", "--filterAll", "randomRead"], "--multiGet cannot be combined with --filterAll"),
    ],
)
def test_bad_options_exit_2_naming_the_option(tmp_path, capsys, argv, option):
    code = pe.main(["--root", str(tmp_path / "data"), *argv])
    assert code == 2
    err = capsys.readouterr().err
    assert option in err
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


@pytest.mark.parametrize("argv, option", [(["--rows", "abc", "scan"], "--rows"), (["--filterAll=maybe", "scan"], "--filterAll")])
def test_unparsable_values_exit_2(tmp_path, capsys, argv, option):
    with pytest.raises(SystemExit) as exc:
        pe.main(["--root", str(tmp_path / "data"), *argv])
    assert exc.value.code == 2
    assert option in capsys.readouterr().err


def test_latency_stats_match_numpy():
    ns = np.arange(1, 1001, dtype=np.int64) * 1000  # 1..1000 us
    s = latency_stats(ns)
    assert s.count == 1000 and s.min == 1.0 and s.max == 1000.0
    assert s.mean == pytest.approx(500.5)
    assert s.p50 == pytest.approx(np.percentile(np.arange(1, 1001), 50))
    assert s.p999 == pytest.approx(np.percentile(np.arange(1, 1001), 99.9))
    line = format_latency(s)
    assert line.startswith("Min: 1.00, Avg: 500, StdDev: 289, 50th: 500, 75th: 750, 95th: 950, 99th: 990, 99.9th: 999")
    assert line.endswith("Max: 1,000")
    assert latency_stats(np.empty(0, np.int64)).count == 0


def test_command_table_and_keys():
    assert set(COMMANDS) == {
        "sequentialWrite", "randomWrite", "sequentialRead", "randomRead", "scan", "reverseScan", "scanRange10",
        "scanRange100", "scanRange1000", "filterScan", "metaWrite", "metaRandomRead", "increment",
    }
    assert format_row(42) == b"00000000000000000000000042"
    assert meta_split_key(7) == b"00000000007"


def test_chart_latency_bars_are_log_scaled_and_in_percentile_order(tmp_path):
    import matplotlib.pyplot as plt
    import numpy as np

    from jobs.pe_chart import figure
    from jobs.pe_stats import ClientResult, CommandResult

    # latencies over four orders of magnitude, as a write's and a full scan's are
    rng = np.random.default_rng(3)
    results = [CommandResult(name, name, [ClientResult(0, 0, 1000, 1000, 10_000, 10**9,
                                                       (rng.lognormal(8 + k, 2, 1000)).astype(np.int64))], 10**9)
               for k, name in enumerate(["sequentialWrite", "scan"])]
    fig = figure(results)
    try:
        throughput, *latency = fig.axes
        assert [t.get_text() for t in throughput.get_yticklabels()][::-1] == ["sequentialWrite", "scan"]
        assert len(latency) == 2
        for ax in latency:
            assert ax.get_xscale() == "log" and "log scale" in ax.get_title()
            # top to bottom: min, the percentiles, max, then the mean
            assert [t.get_text() for t in ax.get_yticklabels()][::-1] == [
                "min", "50th", "95th", "99th", "99.9th", "max", "mean"]
            widths = [p.get_width() for p in ax.patches][::-1]
            assert widths[:6] == sorted(widths[:6])
    finally:
        plt.close(fig)
    for suffix, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml")):
        chart = tmp_path / f"pe{suffix}"
        code, _ = run_pe(tmp_path, "--rows", "40", "scan", "--chart", str(chart))
        assert code == 0 and chart.read_bytes().startswith(magic)