"""import_tsv, export / import and copy_table on small tables, in-process on the suite's Spark
session: contents checked cell by cell, failures checked to leave the target as it was."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

import storage

from jobs import copy_table, export, import_, import_tsv

pytestmark = pytest.mark.spark

MAPPING = "k STRING :key, n INT f:n, s STRING f:s, d DATE g:d#s"


def _cells(root: str, name: str) -> list[tuple]:
    """Every version of every cell: (row, family, qualifier, timestamp, value)."""
    conn = storage.connect(root, read_only=True)
    try:
        table = conn.table(name)
        out = []
        for batch in table.scan_batches(output="cells", max_versions=100):
            d = batch.to_pydict()
            out += list(zip(d["row"], d["family"], d["qualifier"], d["timestamp"], d["value"]))
        return out
    finally:
        conn.close()


def _split_keys(root: str, name: str) -> list[bytes]:
    conn = storage.connect(root, read_only=True)
    try:
        return [r["start_key"] for r in conn.table(name).regions()][1:]
    finally:
        conn.close()


def _leftovers(root: str, name: str) -> list[str]:
    staging = os.path.join(root, name, ".staging")
    # an aborted job leaves only its small abort marker (late task attempts look for it)
    return [n for n in os.listdir(staging) if not n.endswith(".aborted")] if os.path.isdir(staging) else []


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Table ``src``: 3 regions, families f (3 versions) and g, typed values for MAPPING."""
    path = str(tmp_path_factory.mktemp("load") / "tables")
    conn = storage.connect(path)
    table = conn.create_table("src", {"f": {"max_versions": 3}, "g": {}}, split_keys=[b"k3", b"k6"])
    for i in range(9):
        key = b"k%d" % i
        table.put(key, {b"f:n": (i * 3 - 5).to_bytes(4, "big", signed=True), b"g:d": b"2021-03-%02d" % (i + 1),
                        b"g:raw": b"\x00\xff\\,\"%d\n" % i}, timestamp=100)
        table.put(key, {b"f:s": b"text %d" % i}, timestamp=200)
        if i % 2:
            table.put(key, {b"f:s": b"newer %d" % i}, timestamp=300)
    table.flush()
    conn.close()
    return path


def test_import_tsv_loads_good_lines_and_reports_bad_ones(spark, tmp_path, capsys):
    root = str(tmp_path / "tables")
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.tsv").write_bytes(b"r1\t11\tone\t5\nr2\t22\ttwo\t6\nr3\t33\n\t44\tfour\t7\nr5\t55\tfive\tx\n")
    (data / "b.tsv").write_bytes(b"r6\t66\tsix\t8\textra\r\nr7\t77\tseven\t9\r\n")
    (data / "_SUCCESS").write_bytes(b"")
    argv = ["--root", root, "-Dimporttsv.columns=HBASE_ROW_KEY,cf:n,cf:s,HBASE_TS_KEY", "t", str(data)]
    assert import_tsv.main(argv) == 0
    captured = capsys.readouterr()
    assert "Bad Lines=4" in captured.out and "Lines read=7" in captured.out
    assert "created table t with families cf" in captured.out
    assert "a.tsv:3: No timestamp" in captured.err
    assert "a.tsv:4: Empty row key" in captured.err
    assert "a.tsv:5: Invalid timestamp" in captured.err
    assert "b.tsv:1: Excessive columns" in captured.err
    assert sorted(_cells(root, "t")) == sorted([
        (b"r1", b"cf", b"n", 5, b"11"), (b"r1", b"cf", b"s", 5, b"one"),
        (b"r2", b"cf", b"n", 6, b"22"), (b"r2", b"cf", b"s", 6, b"two"),
        (b"r7", b"cf", b"n", 9, b"77"), (b"r7", b"cf", b"s", 9, b"seven"),
    ])
    assert _leftovers(root, "t") == []


def test_import_tsv_strict_mode_fails_and_leaves_the_table_as_it_was(spark, tmp_path, capsys):
    root = str(tmp_path / "tables")
    conn = storage.connect(root)
    conn.create_table("t", {"cf": {}}).put(b"keep", {b"cf:a": b"1"}, timestamp=1)
    conn.close()
    before = _cells(root, "t")
    good, bad = tmp_path / "good.tsv", tmp_path / "bad.tsv"
    good.write_bytes(b"".join(b"g%04d,%d\n" % (i, i) for i in range(500)))
    bad.write_bytes(b"x1,1\nx2,2,3\n")
    argv = ["--root", root, "-D", "importtsv.columns=HBASE_ROW_KEY,cf:a", "-Dimporttsv.separator=,",
            "-Dimporttsv.skip.bad.lines=false", "-Dimporttsv.timestamp=42", "t", str(good), str(bad)]
    assert import_tsv.main(argv) == 2
    err = capsys.readouterr().err
    assert "bad.tsv:2: Excessive columns" in err and "Traceback" not in err
    assert _cells(root, "t") == before
    assert _leftovers(root, "t") == []
    assert import_tsv.main(argv[:5] + argv[6:]) == 0  # without the strict setting: bad line skipped
    cells = _cells(root, "t")
    assert len(cells) == 1 + 500 + 1 and {c[3] for c in cells if c[0] != b"keep"} == {42}


@pytest.mark.parametrize("fmt", ["parquet", "avro", "csv"])
def test_raw_export_and_import_round_trip_every_version(spark, root, tmp_path, fmt, capsys):
    out = str(tmp_path / "exported")
    assert export.main(["--root", root, "src", out, "--format", fmt, "--versions", "3"]) == 0
    names = sorted(os.listdir(out))
    assert "_SUCCESS" in names and export.METADATA in names and "_temporary" not in names
    assert [n for n in names if n.startswith("part-")] == [f"part-m-0000{i}.{fmt}" for i in range(3)]
    meta = json.loads(open(os.path.join(out, export.METADATA)).read())
    assert meta["mode"] == "cells" and meta["records"] == len(_cells(root, "src"))
    assert import_.main(["--root", root, "copy", out]) == 1  # missing table, no --create
    assert "pass --create" in capsys.readouterr().err
    capsys.readouterr()
    assert import_.main(["--root", root, f"copy_{fmt}", out, "--create"]) == 0
    # raw files hold cells: both the progress summary and the result line count cells, not rows
    printed = capsys.readouterr().out
    n = meta["records"]
    assert f"import copy_{fmt}: {n:,} cells," in printed and f"imported {n:,} cells from" in printed, printed
    assert " rows" not in printed, printed
    assert _cells(root, f"copy_{fmt}") == _cells(root, "src")
    assert _split_keys(root, f"copy_{fmt}") == [b"k3", b"k6"]


def test_mapped_export_is_typed_and_imports_back(spark, root, tmp_path, capsys):
    out = str(tmp_path / "typed")
    assert export.main(["--root", root, "src", out, "--mapping", MAPPING, "--startrow", "k2", "--stoprow", "k7"]) == 0
    assert "exported 5 rows" in capsys.readouterr().out
    table = pq.read_table(out)
    rows = sorted(table.to_pylist(), key=lambda r: r["k"])
    assert [r["k"] for r in rows] == ["k2", "k3", "k4", "k5", "k6"]
    assert (rows[0]["n"], rows[0]["s"], str(rows[0]["d"])) == (1, "text 2", "2021-03-03")
    assert rows[1]["s"] == "newer 3"
    assert import_.main(["--root", root, "typed", out, "--create"]) == 0
    latest = {}
    for r, f, q, ts, v in sorted(_cells(root, "src"), key=lambda c: c[3]):
        if b"k2" <= r < b"k7" and (f, q) in ((b"f", b"n"), (b"f", b"s"), (b"g", b"d")):
            latest[(r, f, q)] = v
    got = {(r, f, q): v for r, f, q, _, v in _cells(root, "typed")}
    assert got == latest


def test_export_refuses_a_non_empty_folder_and_csv_of_nested_columns(spark, root, tmp_path, capsys):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert export.main(["--root", root, "src", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert export.main(["--root", root, "src", str(tmp_path / "n"), "--format", "csv",
                        "--mapping", "k STRING :key, m MAP<STRING,STRING> f:"]) == 2
    assert "nested" in capsys.readouterr().err
    assert not (tmp_path / "n").exists()


def test_failed_import_leaves_the_target_unchanged(spark, root, tmp_path, capsys):
    out = str(tmp_path / "exp")
    assert export.main(["--root", root, "src", out]) == 0
    with open(os.path.join(out, "part-m-00001.parquet"), "r+b") as f:
        f.seek(8)
        f.write(b"garbage!" * 8)  # one of the three parts is now unreadable
    capsys.readouterr()
    assert import_.main(["--root", root, "broken", out, "--create"]) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("regionscan import: failed:") and "part-m-00001.parquet" in last
    assert not storage.connect(root, read_only=True).is_table_available("broken")  # the table it created is gone
    assert not os.path.exists(os.path.join(root, "broken"))
    conn = storage.connect(root)
    conn.create_table("kept", {"f": {"max_versions": 3}, "g": {}}).put(b"k0", {b"g:d": b"old"}, timestamp=1)
    conn.close()
    before = _cells(root, "kept")
    assert import_.main(["--root", root, "kept", out]) == 1
    assert _cells(root, "kept") == before  # nothing of the two readable parts landed
    assert _leftovers(root, "kept") == []


def test_copy_table_renames_families_and_filters_rows_times_and_versions(spark, root, tmp_path, capsys):
    argv = ["--root", root, "--new.name=dst", "--families=f:h", "--versions=2", "--starttime=150",
            "--startrow=k1", "--stoprow=k8", "src"]
    assert copy_table.main(argv) == 1  # the target does not exist
    assert "--create" in capsys.readouterr().err
    assert copy_table.main(argv + ["--create"]) == 0
    want = [(r, b"h", q, ts, v) for r, f, q, ts, v in _cells(root, "src")
            if f == b"f" and ts >= 150 and b"k1" <= r < b"k8"]
    assert _cells(root, "dst") == want
    assert _split_keys(root, "dst") == [b"k3", b"k6"]
    other = str(tmp_path / "peer")
    assert copy_table.main(["--root", root, f"--peer.adr={other}", "--create", "src"]) == 0
    latest = {}
    for r, f, q, ts, v in sorted(_cells(root, "src"), key=lambda c: c[3]):
        latest[(r, f, q)] = (ts, v)
    assert _cells(other, "src") == sorted((r, f, q, ts, v) for (r, f, q), (ts, v) in latest.items())
    assert copy_table.main(["--root", root, "--new.name=dst", "src"]) == 2
    assert "lacks families" in capsys.readouterr().err


# -- copy_table --all.cells: markers and deleted cells, so the target resolves as the source ----
def _raw(table, **kw) -> list[dict]:
    return [c for b in table.scan_batches(output="cells", raw=True, **kw) for c in b.to_pylist()]


def _keeping_source(root: str) -> None:
    """Family k keeps deleted cells, v does not; versions, every marker type, markers
    and puts at one timestamp, flushed files and unflushed (WAL) cells, three regions."""
    conn = storage.connect(root)
    t = conn.create_table("hist", {"k": {"max_versions": 3, "keep_deleted_cells": "TRUE"}, "v": {"max_versions": 2}},
                          split_keys=[b"r3", b"r6"], settings={"wal_sync": "none"})
    for i in range(9):
        row = b"r%d" % i
        for ts in (10, 20, 30, 40):
            t.put(row, {b"k:a": b"a%d" % ts, b"k:": b"e%d" % ts, b"v:b": b"b%d" % ts}, timestamp=ts)
    t.delete_version(b"r0", b"k:a", 30)  # Delete, at the put's own timestamp
    t.delete(b"r1", [b"k:a"], timestamp=20)  # DeleteColumn
    t.delete(b"r2", [b"k"], timestamp=30)  # DeleteFamily, sharing k:'s timestamp 30
    t.delete(b"r4", timestamp=25)  # every family
    t.flush()
    t.delete_version(b"r5", b"v:b", 40)  # unflushed markers and puts
    t.delete(b"r7", [b"v:b"], timestamp=35)
    t.put(b"r8", {b"k:a": b"late"}, timestamp=50)
    t.delete(b"r8", [b"k"], timestamp=45)
    conn.close()


SCANS_AFTER_COPY = [
    {}, {"max_versions": 3}, {"time_range": (0, 31)}, {"time_range": (15, 35), "max_versions": 3},
    {"timestamp": 26, "max_versions": 2}, {"columns": [b"k:a"], "max_versions": 3, "include_timestamp": True},
]


def test_copy_table_all_cells_copies_markers_and_deleted_cells(spark, tmp_path, capsys):
    root = str(tmp_path / "hist")
    _keeping_source(root)
    assert copy_table.main(["--root", root, "--new.name=copy", "--all.cells", "--create", "hist"]) == 0
    assert "cells and delete markers" in capsys.readouterr().out
    assert copy_table.main(["--root", root, "--new.name=plain", "--create", "hist"]) == 0
    assert copy_table.main(["--root", root, "--new.name=one", "--all.cells", "--versions=1", "--create", "hist"]) == 0
    conn = storage.connect(root, read_only=True)
    src, dst, plain, one = (conn.table(n) for n in ("hist", "copy", "plain", "one"))
    source_raw = _raw(src)
    assert {c["type"] for c in source_raw} == {4, 8, 12, 14}
    assert _raw(dst) == source_raw  # every marker with its type and timestamp, every deleted cell
    assert _raw(one) == _raw(src, max_versions=1)  # --versions: HBase's raw VERSIONS
    assert {c["type"] for c in _raw(plain)} == {4}  # without --all.cells: resolved cells only
    for options in SCANS_AFTER_COPY:
        want = list(src.scan(**options))
        assert want and list(dst.scan(**options)) == want, options
    # reads of the past in the family keeping deleted cells see past the copied markers
    assert dst.row(b"r0", timestamp=31, include_timestamp=True) == src.row(b"r0", timestamp=31, include_timestamp=True)
    # r1's DeleteColumn@20 hid k:a at 10 and 20: a read before 20 sees a10 again, in the
    # source and its --all.cells copy; the plain copy never received the deleted cell
    assert src.row(b"r1", timestamp=20)[b"k:a"] == dst.row(b"r1", timestamp=20)[b"k:a"] == b"a10"
    assert b"k:a" not in plain.row(b"r1", timestamp=20)
    assert dst.row(b"r2", timestamp=31) == src.row(b"r2", timestamp=31)
    assert dst.cells(b"r1", b"k:a", versions=3) == src.cells(b"r1", b"k:a", versions=3) == [b"a40", b"a30"]
    conn.close()
    # a major compaction of the copy drops what the source's would
    for name in ("hist", "copy"):
        c = storage.connect(root)
        c.table(name).compact()
        c.close()
    conn = storage.connect(root, read_only=True)
    assert _raw(conn.table("copy")) == _raw(conn.table("hist"))
    conn.close()


def test_copy_table_all_cells_from_a_region_server(spark, tmp_path, capsys):
    """A ``grpc://`` source: the tasks' raw scans go through the server (wire protocol
    version 2); the copy, in another root, holds the source's raw cells."""
    from storage.server.process import ServerProcess

    root, peer = str(tmp_path / "src"), str(tmp_path / "peer")
    _keeping_source(root)
    with ServerProcess(root) as server:
        assert copy_table.main(["--root", server.location, f"--peer.adr={peer}", "--all.cells", "--create",
                                "hist"]) == 0
    assert "cells and delete markers" in capsys.readouterr().out
    src, dst = storage.connect(root, read_only=True), storage.connect(peer, read_only=True)
    assert dst.table("hist").families() == src.table("hist").families()
    assert _raw(dst.table("hist")) == _raw(src.table("hist"))
    assert list(dst.table("hist").scan(time_range=(0, 31), max_versions=3)) == \
        list(src.table("hist").scan(time_range=(0, 31), max_versions=3))
    src.close()
    dst.close()
