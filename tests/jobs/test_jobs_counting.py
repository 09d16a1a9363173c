"""row_counter and cell_counter on small tables, run in-process on the suite's Spark session,
checked against counts computed from the data written."""

from __future__ import annotations

import os

import pytest

import storage

from jobs import cell_counter, row_counter
from jobs._splits import SplitRequest, scan_split, scan_split_raw, table_splits
from storage import ScanRequest
from storage.server.process import ServerProcess

pytestmark = pytest.mark.spark

# row -> {(family, qualifier): [timestamps]}
_DATA = {
    b"a1": {(b"f", b"x"): [10, 20, 30], (b"g", b"y"): [10]},
    b"a2": {(b"f", b"x"): [10]},
    b"b\x00\xff": {(b"g", b"y"): [40], (b"g", b"z"): [10]},
    b"m1": {(b"f", b"x"): [20], (b"f", b"w"): [50, 60]},
    b"m2": {(b"g", b"z"): [30]},
    b"z9": {(b"f", b"x"): [60]},
}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("counting") / "tables")
    conn = storage.connect(path)
    table = conn.create_table("t", {"f": {"max_versions": 5}, "g": {"max_versions": 5}}, split_keys=[b"b", b"m"])
    for row, cells in _DATA.items():
        for (fam, qual), stamps in cells.items():
            for ts in stamps:
                table.put(row, {fam + b":" + qual: b"v%d" % ts}, timestamp=ts)
    table.flush()
    table.put(b"m3", {b"f:x": b"memstore only"}, timestamp=70)  # unflushed: read from the WAL
    conn.close()
    return path


def _model(start=b"", stop=None, time_range=(0, 1 << 62), prefix=b""):
    data = dict(_DATA)
    data[b"m3"] = {(b"f", b"x"): [70]}
    out = {}
    for row, cells in sorted(data.items()):
        if row < start or (stop is not None and row >= stop) or not row.startswith(prefix):
            continue
        kept = {k: [t for t in v if time_range[0] <= t < time_range[1]] for k, v in cells.items()}
        kept = {k: v for k, v in kept.items() if v}
        if kept:
            out[row] = kept
    return out


def test_row_counter_counts_ranges_times_and_columns(spark, root, capsys):
    assert row_counter.main(["--root", root, "t"]) == 0
    assert "ROWS=7" in capsys.readouterr().out
    ranges = ["--range", "a2,b\\x01", "--range", "m2,"]  # a2 and b\x00\xff; m2, m3 and z9
    assert row_counter.main(["--root", root, "t", *ranges, "--expected-count", "5"]) == 0
    out = capsys.readouterr().out
    assert "ROWS=5" in out and "row_counter t: 5 rows" in out
    expected = len(_model(time_range=(25, 55)))
    assert row_counter.main(["--root", root, "t", "--starttime", "25", "--endtime", "55",
                             "--expectedCount", str(expected)]) == 0
    assert row_counter.main(["--root", root, "t", "g:z", "f:w", "--expected-count", "3"]) == 0
    assert row_counter.main(["--root", root, "t", "--expected-count", "6"]) == 1
    captured = capsys.readouterr()
    assert "expected 6 rows but counted 7" in captured.err


def test_count_rows_uses_key_only_first_key_only_scans(spark, root):
    request = SplitRequest(root, "t", ScanRequest(filter=row_counter.ROW_COUNT_FILTER))
    with table_splits(request) as splits:
        assert len(splits) == 3  # one per region
        for split in splits:
            for batch in scan_split(split, "cells"):
                rows = batch.column("row").to_pylist()
                assert len(rows) == len(set(rows))  # one cell per row
                assert set(batch.column("value").to_pylist()) <= {b""}  # no value left the store
    assert row_counter.count_rows(spark, SplitRequest(root, "t", key_ranges=((b"", b"b"),))) == 2


def _summary(model):
    families, columns = {}, {}
    for cells in model.values():
        for fam in {f for f, _ in cells}:
            families[fam] = families.get(fam, 0) + 1
        for key in cells:
            columns[key] = columns.get(key, 0) + 1
    lines = {
        "Total Families Across all Rows": len(families),
        "Total Qualifiers across all Rows": sum(columns.values()),
        "Total ROWS": len(model),
    }
    lines.update({f.decode(): n for f, n in families.items()})
    lines.update({f"{f.decode()}:{q.decode()}": n for (f, q), n in columns.items()})
    return lines


def _text(b: bytes) -> str:
    from connector.options import to_string_binary

    return to_string_binary(b)


def test_cell_counter_report_matches_the_data(spark, root, tmp_path, capsys):
    out = str(tmp_path / "report")
    assert cell_counter.main(["--root", root, "t", out, "|"]) == 0
    printed = capsys.readouterr().out
    model = _model()
    expected = {k.replace(":", "|", 1) if k.count(":") == 1 else k: v for k, v in _summary(model).items()}
    with open(os.path.join(out, "part-r-00000")) as f:
        lines = [line.rstrip("\n").split("\t") for line in f]
    assert [k for k, _ in lines] == sorted(k for k, _ in lines)  # sorted by key, as the reducer writes
    assert {k: int(v) for k, v in lines} == expected
    assert "Total ROWS\t7" in printed
    parts = sorted(n for n in os.listdir(out) if n.startswith("part-m-"))
    assert len(parts) == 3 and "_SUCCESS" in os.listdir(out)
    per_row = "".join(open(os.path.join(out, p)).read() for p in parts).splitlines()
    want = [f"{_text(row)}|{f.decode()}|{q.decode()}_Versions\t{len(stamps)}"
            for row, cells in model.items() for (f, q), stamps in sorted(cells.items())]
    assert per_row == want


def test_cell_counter_prefix_regex_and_time_range(spark, root, capsys):
    assert cell_counter.main(["--root", root, "t", "--starttime", "15", "--endtime", "65"]) == 0
    got = dict(line.split("\t") for line in capsys.readouterr().out.splitlines() if "\t" in line)
    assert {k: int(v) for k, v in got.items()} == _summary(_model(time_range=(15, 65)))
    with pytest.raises(SystemExit):  # a row filter needs the output and separator positions before it
        cell_counter.main(["--root", root, "t", "out", ":", "m", "extra"])
    capsys.readouterr()
    for flt, prefix in (("m", b"m"), ("^a.*", b"a")):
        out = os.path.join(root, "..", f"report-{prefix.decode()}")
        assert cell_counter.main(["--root", root, "t", out, ":", flt]) == 0
        got = dict(line.split("\t") for line in capsys.readouterr().out.splitlines() if "\t" in line)
        assert {k: int(v) for k, v in got.items()} == _summary(_model(prefix=prefix))


# -- raw counts: row_counter --all.cells / --countDeleteMarkers, cell_counter --countDeleteMarkers --------
@pytest.fixture(scope="module")
def deleted_root(tmp_path_factory):
    """A table with deleted cells and markers: family f keeps deleted cells, g does not.

    r1: f:x at 10 and 20, the 20 one deleted (a Delete marker); r2: g:y at 10, the
    row deleted at 15 (a DeleteFamily in f and in g); r3: only a DeleteColumn of
    f:z; r4: f:x at 10.  A scan sees r1 and r4; a raw scan all four rows."""
    path = str(tmp_path_factory.mktemp("deleted") / "tables")
    conn = storage.connect(path)
    table = conn.create_table("d", {"f": {"max_versions": 3, "keep_deleted_cells": True}, "g": {}},
                              split_keys=[b"r3"])
    table.put(b"r1", {b"f:x": b"old"}, timestamp=10)
    table.put(b"r1", {b"f:x": b"new"}, timestamp=20)
    table.delete_version(b"r1", b"f:x", 20)
    table.put(b"r2", {b"g:y": b"gone"}, timestamp=10)
    table.delete(b"r2", timestamp=15)
    table.flush()
    table.delete(b"r3", columns=[b"f:z"], timestamp=5)  # unflushed: read from the WAL
    table.put(b"r4", {b"f:x": b"kept"}, timestamp=10)
    assert [row for row, _ in table.scan()] == [b"r1", b"r4"]
    conn.close()
    return path


def _printed(out: str) -> dict:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line and "\t" not in line)


def test_row_counter_counts_raw_rows_and_delete_markers(spark, deleted_root, capsys):
    assert row_counter.main(["--root", deleted_root, "d", "--expected-count", "2"]) == 0
    capsys.readouterr()
    # --all.cells: the rows a raw scan sees, rows of markers and deleted cells only included
    assert row_counter.main(["--root", deleted_root, "d", "--all.cells", "--expected-count", "4"]) == 0
    printed = _printed(capsys.readouterr().out)
    assert printed["ROWS"] == "4" and "DELETE" not in printed
    assert row_counter.main(["--root", deleted_root, "d", "--countDeleteMarkers"]) == 0
    printed = _printed(capsys.readouterr().out)
    assert (printed["ROWS"], printed["DELETE"], printed["DELETE_COLUMN"], printed["DELETE_FAMILY"],
            printed["ROWS_WITH_DELETE_MARKER"]) == ("4", "1", "1", "2", "3")  # r1, r2, r3
    # a family's raw rows: g holds r2's put and marker only
    assert row_counter.main(["--root", deleted_root, "d", "g", "--countDeleteMarkers"]) == 0
    printed = _printed(capsys.readouterr().out)
    assert (printed["ROWS"], printed["DELETE_FAMILY"], printed["DELETE"]) == ("1", "1", "0")
    # the time range applies to markers too: [6, 12) holds the puts at 10 and no marker (r3's is at 5)
    assert row_counter.main(["--root", deleted_root, "d", "--countDeleteMarkers", "--starttime", "6",
                             "--endtime", "12"]) == 0
    printed = _printed(capsys.readouterr().out)
    assert (printed["ROWS"], printed["DELETE"], printed["DELETE_COLUMN"], printed["DELETE_FAMILY"]) == \
        ("3", "0", "0", "0")


def test_row_counter_raw_counts_qualifier_columns(spark, deleted_root, capsys):
    """A column's raw rows: its puts and its Delete / DeleteColumn markers; a DeleteFamily
    marker is a cell of the empty qualifier's column, so f:x does not see r2's."""
    assert row_counter.main(["--root", deleted_root, "d", "f:x", "--countDeleteMarkers"]) == 0
    printed = _printed(capsys.readouterr().out)
    assert (printed["ROWS"], printed["DELETE"], printed["DELETE_FAMILY"]) == ("2", "1", "0")  # r1, r4
    assert row_counter.main(["--root", deleted_root, "d", "f:z", "f:", "--countDeleteMarkers"]) == 0
    printed = _printed(capsys.readouterr().out)
    assert (printed["ROWS"], printed["DELETE_COLUMN"], printed["DELETE_FAMILY"]) == ("2", "1", "1")  # r2, r3


def test_cell_counter_count_delete_markers(spark, deleted_root, capsys, tmp_path):
    assert cell_counter.main(["--root", deleted_root, "d"]) == 0
    plain = dict(line.split("\t") for line in capsys.readouterr().out.splitlines() if "\t" in line)
    assert plain[cell_counter.TOTAL_ROWS] == "2" and "Total DELETE" not in plain
    assert cell_counter.main(["--root", deleted_root, "d", "--countDeleteMarkers"]) == 0
    raw = dict(line.split("\t") for line in capsys.readouterr().out.splitlines() if "\t" in line)
    assert raw[cell_counter.TOTAL_ROWS] == "4"
    assert (raw["Total DELETE"], raw["Total DELETE_COLUMN"], raw["Total DELETE_FAMILY"]) == ("1", "1", "2")
    # rows holding each family / column, markers included: f in r1, r2 (its DeleteFamily), r3, r4
    assert (raw["f"], raw["g"], raw["f:x"], raw["f:"], raw["f:z"], raw["g:"], raw["g:y"]) == \
        ("4", "1", "2", "1", "1", "1", "1")
    # a row prefix keeps whole raw rows: r2 holds g:y's put and the DeleteFamily markers of f and g
    out = str(tmp_path / "out")
    assert cell_counter.main(["--root", deleted_root, "d", out, ":", "r2", "--countDeleteMarkers"]) == 0
    with open(os.path.join(out, "part-r-00000")) as f:
        raw = dict(line.rstrip("\n").split("\t") for line in f if "\t" in line)
    assert raw[cell_counter.TOTAL_ROWS] == "1"
    assert (raw["Total DELETE"], raw["Total DELETE_COLUMN"], raw["Total DELETE_FAMILY"]) == ("0", "0", "2")


def _raw_cells(root: str, max_versions=None) -> list[dict]:
    with table_splits(SplitRequest(root=root, table="d")) as splits:
        return [c for split in splits for b in scan_split_raw(split, max_versions=max_versions) for c in b.to_pylist()]


def test_raw_counts_through_a_region_server_equal_the_directory_ones(spark, deleted_root, capsys):
    """``grpc://`` roots: the jobs' raw scans go through the server's raw scan and count the same."""
    local = _raw_cells(deleted_root)
    assert len(local) == 8 and _raw_cells(deleted_root, max_versions=1) != local  # r1's f:x has two puts
    assert row_counter.main(["--root", deleted_root, "d", "--countDeleteMarkers"]) == 0
    want_rows = _printed(capsys.readouterr().out)
    assert cell_counter.main(["--root", deleted_root, "d", "--countDeleteMarkers"]) == 0
    want_cells = _tabbed(capsys.readouterr().out)
    assert want_cells["Total DELETE_FAMILY"] == "2"
    with ServerProcess(deleted_root) as server:
        root = server.location
        assert _raw_cells(root) == local
        assert _raw_cells(root, max_versions=1) == _raw_cells_kept_one(local)
        assert row_counter.main(["--root", root, "d", "--all.cells", "--expected-count", "4"]) == 0
        assert _printed(capsys.readouterr().out)["ROWS"] == "4"
        assert row_counter.main(["--root", root, "d", "--countDeleteMarkers"]) == 0
        assert _printed(capsys.readouterr().out) == want_rows
        assert row_counter.main(["--root", root, "d", "g", "--countDeleteMarkers", "--starttime", "6"]) == 0
        printed = _printed(capsys.readouterr().out)
        assert (printed["ROWS"], printed["DELETE_FAMILY"]) == ("1", "1")
        assert cell_counter.main(["--root", root, "d", "--countDeleteMarkers"]) == 0
        assert _tabbed(capsys.readouterr().out) == want_cells
        assert row_counter.main(["--root", root, "d", "f:x", "--countDeleteMarkers"]) == 0
        printed = _printed(capsys.readouterr().out)
        assert (printed["ROWS"], printed["DELETE"], printed["DELETE_FAMILY"]) == ("2", "1", "0")


def _tabbed(out: str) -> dict:
    return dict(line.split("\t") for line in out.splitlines() if "\t" in line)


def _raw_cells_kept_one(cells: list[dict]) -> list[dict]:
    """HBase's raw VERSIONS => 1 by hand: a column stops at its second put."""
    out, puts = [], {}
    for c in cells:
        key = (c["row"], c["family"], c["qualifier"])
        puts[key] = puts.get(key, 0) + (c["type"] == 4)
        if puts[key] <= 1:
            out.append(c)
    return out
