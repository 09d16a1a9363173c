"""KEEP_DELETED_CELLS and raw scans: HBase's TestKeepDeletes cases, written for this engine.

Each case follows one of HBase's (named in its docstring) where the engine's
semantics are HBase's; where the engine differs on purpose (flushes keep every
version; a marker older than every put of its row goes in a major compaction)
the step is left out or stated as the engine's.  Every read is made on every
path (point gets, batch scan, row batches, the cell-at-a-time scanner), which
must agree.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import storage
from storage import kernels
from storage.cells import LATEST_TIMESTAMP, CellType
from storage.errors import InvalidArgument
from storage.kernels.resolve_rows import Markers, RowPiece, resolve_rows

TS = 1000
PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY = (int(t) for t in CellType)


def _table(conn, name, families=("c0", "c1", "c2"), **settings):
    return conn.create_table(name, {f: dict(settings) for f in families}, settings={"wal_sync": "none"})


def versions(table, row: bytes, column: bytes, end: int = LATEST_TIMESTAMP) -> list[bytes]:
    """The values of ``column`` a read of ``[0, end)`` with every version sees,
    the same on every read path."""
    stamp = None if end == LATEST_TIMESTAMP else end
    got = [v for v, _ in table.cells(row, column, versions=100, timestamp=stamp, include_timestamp=True)]
    kw = {"row_start": row, "row_stop": row + b"\x00", "columns": [column], "time_range": (0, end), "max_versions": 100}
    batch = [c["value"] for b in table.scan_batches(**kw, output="cells") for c in b.to_pylist()]
    cell_path = [c[5] for cells in table.scanner(**kw) for c in cells]
    newest = [d[column] for _, d in table.scan(**kw, path="batch")] + [d[column] for _, d in table.scan(**kw, path="cell")]
    rows = [r[column.decode()] for b in table.scan_batches(**{**kw, "max_versions": 1}, output="rows")
            for r in b.to_pylist()]
    assert batch == got and cell_path == got, (got, batch, cell_path)
    assert newest == got[:1] * 2 and rows == got[:1], (got, newest, rows)
    return got


def markers(table) -> int:
    """Delete markers a raw scan sees (HBase's countDeleteMarkers)."""
    return sum(sum(1 for t in b.column("type").to_pylist() if t != PUT) for b in table.scan_batches(output="cells", raw=True))


def test_basic_scenario(conn):
    """testBasicScenario: reads of the past see deleted puts; a major compaction
    keeps them, and the marker, while a put it covers remains."""
    t = _table(conn, "basic", max_versions=3, keep_deleted_cells=True)
    for i, value in ((0, b"T1"), (1, b"T2"), (2, b"T3"), (4, b"T4")):
        t.put(b"T1", {b"c0:c0": value}, timestamp=TS + i)
    t.delete(b"T1", timestamp=TS + 2)  # a DeleteFamily in each family
    assert markers(t) == 3
    assert versions(t, b"T1", b"c0:c0", TS + 2) == [b"T2", b"T1"]
    assert versions(t, b"T1", b"c0:c0") == [b"T4"]
    t.flush()
    t.compact(major=True)
    t.compact(major=True)
    # HBase's flush already dropped T1 (the fourth version); here the major compaction does
    assert versions(t, b"T1", b"c0:c0", TS + 2) == [b"T2"]
    assert markers(t) == 1  # the markers of c1 and c2 hid no put
    assert versions(t, b"T1", b"c0:c0", TS + 4) == []  # the range holds the marker
    t.put(b"T1", {b"c0:c0": b"T5"}, timestamp=TS + 5)
    t.put(b"T1", {b"c0:c0": b"T6"}, timestamp=TS + 6)
    t.put(b"T1", {b"c0:c0": b"T1"}, timestamp=TS)
    assert versions(t, b"T1", b"c0:c0", TS + 4) == []
    t.compact(major=True)
    t.compact(major=True)
    # T6, T5, T4 are the three versions kept; the marker is older than every put left
    assert markers(t) == 0
    t.put(b"T1", {b"c0:c0": b"T1"}, timestamp=TS)
    assert versions(t, b"T1", b"c0:c0", TS + 4) == [b"T1"]


def test_raw_scan(conn):
    """testRawScan: markers and deleted puts in cell order, the time range applied to both."""
    t = _table(conn, "raw", max_versions=3, keep_deleted_cells=True)
    t.put(b"T1", {b"c0:c0": b"T1"}, timestamp=TS)
    t.put(b"T1", {b"c0:c0": b"T2"}, timestamp=TS + 2)
    t.put(b"T1", {b"c0:c0": b"T3"}, timestamp=TS + 4)
    t.delete(b"T1", timestamp=TS + 1)
    t.delete_version(b"T1", b"c0:c0", TS + 2)
    t.delete(b"T1", columns=[b"c0:c0"], timestamp=TS + 3)

    def raw(time_range=None):
        return [(c["family"], c["timestamp"], c["type"], c["value"])
                for b in t.scan_batches(output="cells", raw=True, time_range=time_range) for c in b.to_pylist()]

    assert raw() == [(b"c0", TS + 1, DELETE_FAMILY, b""), (b"c0", TS + 4, PUT, b"T3"),
                     (b"c0", TS + 3, DELETE_COLUMN, b""), (b"c0", TS + 2, DELETE, b""), (b"c0", TS + 2, PUT, b"T2"),
                     (b"c0", TS, PUT, b"T1"), (b"c1", TS + 1, DELETE_FAMILY, b""), (b"c2", TS + 1, DELETE_FAMILY, b"")]
    assert raw((0, 1)) == []
    assert [c[:3] for c in raw((0, TS + 2))] == [(b"c0", TS + 1, DELETE_FAMILY), (b"c0", TS, PUT),
                                                (b"c1", TS + 1, DELETE_FAMILY), (b"c2", TS + 1, DELETE_FAMILY)]
    assert [c[:3] for c in raw((TS + 3, TS + 5))] == [(b"c0", TS + 4, PUT), (b"c0", TS + 3, DELETE_COLUMN)]
    # the dict form: each column's cells with their type names
    ((row, cells),) = list(t.scan(raw=True, columns=[b"c0"]))
    assert row == b"T1" and cells == {
        b"c0:": [(b"", TS + 1, "DeleteFamily")],
        b"c0:c0": [(b"T3", TS + 4, "Put"), (b"", TS + 3, "DeleteColumn"), (b"", TS + 2, "Delete"),
                   (b"T2", TS + 2, "Put"), (b"T1", TS, "Put")]}
    # reversed and limited raw scans go by rows
    t.put(b"T0", {b"c1:x": b"v"}, timestamp=TS)
    assert [r for r, _ in t.scan(raw=True, reverse=True, limit=1)] == [b"T1"]
    assert [r for r, _ in t.scan(raw=True, limit=1)] == [b"T0"]


def test_raw_scan_without_keeping_deletes(conn):
    """testRawScanWithoutKeepingDeletes and testWithoutKeepingDeletes: a raw scan shows
    markers in any family; a read of the past does not see past them; flushes and
    minor compactions keep them, a major compaction drops them with what they hide."""
    t = _table(conn, "nokeep", families=("c0",), max_versions=3)
    t.put(b"T1", {b"c0:c0": b"T1"}, timestamp=TS)
    assert versions(t, b"T1", b"c0:c0", TS + 1) == [b"T1"]
    t.delete_version(b"T1", b"c0:c0", TS)
    assert sum(b.num_rows for b in t.scan_batches(output="cells", raw=True)) == 2
    assert versions(t, b"T1", b"c0:c0", TS + 1) == []
    t.flush()
    t.compact(major=False)
    assert markers(t) == 1
    t.compact(major=True)
    assert list(t.scan(raw=True)) == []


def test_delete_marker_expiration(conn):
    """testDeleteMarkerExpirationEmptyStore and testDeleteMarkerExpiration: markers
    hiding no put go in a major compaction, not before; a column's markers stay
    while an older put of it is kept."""
    t = _table(conn, "empty", families=("c0",), max_versions=1, keep_deleted_cells=True)
    t.delete(b"T1", columns=[b"c0:c0"], timestamp=TS)
    t.delete(b"T1", columns=[b"c0"], timestamp=TS)
    t.delete_version(b"T1", b"c0:c0", TS + 1)
    t.delete_version(b"T1", b"c0:c0", TS + 2)
    assert markers(t) == 4
    t.flush()
    t.compact(major=False)
    assert markers(t) == 4
    t.compact(major=True)
    assert markers(t) == 0

    t = _table(conn, "expire", families=("c0", "c1"), max_versions=1, keep_deleted_cells=True)
    t.put(b"T1", {b"c0:c0": b"T1"}, timestamp=TS)
    t.put(b"T1", {b"c1:c0": b"T1"}, timestamp=TS - 10)  # another family: no effect
    t.delete(b"T1", columns=[b"c0:c0"], timestamp=TS)
    t.delete(b"T1", columns=[b"c0"], timestamp=TS)
    t.delete_version(b"T1", b"c0:c0", TS + 1)
    t.delete_version(b"T1", b"c0:c0", TS + 2)
    assert markers(t) == 4
    t.flush()
    t.compact(major=False)
    assert markers(t) == 4
    t.put(b"T1", {b"c0:c0": b"T1"}, timestamp=TS + 3)  # pushes the put at TS out
    t.compact(major=True)
    assert markers(t) == 4  # the put at TS was still there to hide
    assert versions(t, b"T1", b"c0:c0", TS + 3) == []  # only one version is kept: the one at TS + 3
    t.compact(major=True)
    assert markers(t) == 0


def test_ranges(conn):
    """testRanges: which puts a read of the past sees around markers of every kind."""
    t = _table(conn, "ranges", families=("c0", "c1"), max_versions=3, keep_deleted_cells=True)
    for row in (b"T1", b"T2"):
        for i, value in ((0, b"T1"), (1, b"T2")):
            t.put(row, {b"c0:c0": value, b"c0:c1": value, b"c1:c0": value, b"c1:c1": value}, timestamp=TS + i)
    t.delete(b"T1", columns=[b"c0:c0"], timestamp=TS + 2)
    t.delete(b"T1", columns=[b"c1"], timestamp=TS + 2)
    t.delete(b"T2", columns=[b"c0"], timestamp=TS + 2)
    t.delete(b"T1", columns=[b"c1"], timestamp=TS - 10)  # an older marker changes nothing
    both = [b"T2", b"T1"]
    columns = (b"c0:c0", b"c0:c1", b"c1:c0", b"c1:c1")
    for flush in (False, True):
        for row in (b"T1", b"T2"):
            for column in columns:
                assert versions(t, row, column, TS + 2) == both  # the range ends before the markers
        seen = {(b"T1", b"c0:c1"), (b"T2", b"c1:c0"), (b"T2", b"c1:c1")}
        for row in (b"T1", b"T2"):
            for column in columns:
                assert versions(t, row, column, TS + 3) == (both if (row, column) in seen else [])
        t.flush()


def test_mixed_families(conn):
    """testWithMixedCFs: a scan of the past sees every family's puts before a row delete."""
    t = _table(conn, "mixed", families=("c0", "c1"), max_versions=1, keep_deleted_cells=True)
    t.put(b"T1", {b"c0:c0": b"T1", b"c0:c1": b"T1", b"c1:c0": b"T1", b"c1:c1": b"T1"}, timestamp=TS)
    t.put(b"T2", {b"c0:c0": b"T2", b"c0:c1": b"T2", b"c1:c0": b"T2", b"c1:c1": b"T2"}, timestamp=TS + 1)
    t.delete(b"T1", timestamp=TS + 1)
    t.delete(b"T2", timestamp=TS + 2)
    for path in ("batch", "cell"):
        assert len(dict(t.scan(row_start=b"T1", row_stop=b"T2", time_range=(0, TS + 1), path=path))[b"T1"]) == 4
        assert len(dict(t.scan(row_start=b"T2", time_range=(0, TS + 2), path=path))[b"T2"]) == 4
    assert list(t.scan()) == []


def test_with_min_versions(conn):
    """testWithMinVersions: TRUE with a TTL and MIN_VERSIONS keeps expired deleted puts
    and their markers; a marker goes once it is older than every put kept."""
    t = _table(conn, "minv", max_versions=1000, min_versions=3, ttl=1, keep_deleted_cells=True)
    ts = int(time.time() * 1000) - 2000  # two seconds ago: past the TTL
    for i, value in ((0, b"T3"), (-1, b"T2"), (-3, b"T1"), (-4, b"T0")):
        t.put(b"T1", {b"c0:c0": value}, timestamp=ts + i)
    t.delete(b"T1", timestamp=ts - 1)
    t.delete(b"T1", columns=[b"c0:c0"], timestamp=ts - 1)
    assert versions(t, b"T1", b"c0:c0", ts - 2) == [b"T1", b"T0"]  # min_versions keeps expired puts
    assert markers(t) == 4  # three families, one column marker
    t.flush()
    assert markers(t) == 4
    t.put(b"T1", {b"c0:c0": b"T4"}, timestamp=ts + 1)
    t.put(b"T1", {b"c0:c0": b"T5"}, timestamp=ts + 2)
    t.compact(major=True)
    assert markers(t) == 2  # the family markers of c1 and c2 hid no put
    assert versions(t, b"T1", b"c0:c0") == [b"T5", b"T4", b"T3"]  # the markers at ts - 1 hide older ones
    t.compact(major=True)  # T5, T4, T3 kept (min_versions): the markers are older than each
    assert markers(t) == 0


def test_with_ttl_mode(conn):
    """testWithTTL: KEEP_DELETED_CELLS=TTL keeps deleted puts for reads of the past until
    the marker expires; a major compaction then lets the expired marker hide them and go."""
    t = _table(conn, "ttl", max_versions=1000, min_versions=1, ttl=1, keep_deleted_cells="TTL")
    ts = int(time.time() * 1000) - 2000
    t.put(b"T1", {b"c0:c0": b"T3"}, timestamp=ts)
    t.put(b"T2", {b"c0:c0": b"T1"}, timestamp=ts - 10)
    assert versions(t, b"T1", b"c0:c0", ts + 1) == [b"T3"]
    t.delete(b"T1", timestamp=ts + 2)
    assert versions(t, b"T1", b"c0:c0", ts + 1) == [b"T3"]
    assert markers(t) == 3
    t.flush()
    assert markers(t) == 3
    t.compact(major=True)
    assert markers(t) == 0
    assert versions(t, b"T1", b"c0:c0", ts + 1) == []
    assert versions(t, b"T2", b"c0:c0") == [b"T1"]  # min_versions keeps the expired put


def test_unexpired_markers_of_ttl_mode_are_kept(conn):
    """KEEP_DELETED_CELLS=TTL, markers within the TTL: kept by a major compaction, with the
    puts they delete (a read of the past still sees them)."""
    t = _table(conn, "ttlkeep", families=("c0",), max_versions=3, ttl=3600, keep_deleted_cells="TTL")
    ts = int(time.time() * 1000) - 1000
    t.put(b"r", {b"c0:q": b"old"}, timestamp=ts)
    t.delete(b"r", columns=[b"c0:q"], timestamp=ts + 1)
    t.compact(major=True)
    assert markers(t) == 1
    assert versions(t, b"r", b"c0:q", ts + 1) == [b"old"]
    assert versions(t, b"r", b"c0:q") == []


def test_settings_are_checked_and_stored(conn, tmp_path):
    for i, (good, stored) in enumerate(((True, "TRUE"), (False, "FALSE"), ("ttl", "TTL"), ("TRUE", "TRUE"))):
        conn.create_table(f"ok{i}", {"f": {"keep_deleted_cells": good}})
        assert conn.table(f"ok{i}").families()[b"f"]["keep_deleted_cells"] == stored
    with pytest.raises(InvalidArgument, match="keep_deleted_cells for family 'f' must be FALSE, TRUE or TTL"):
        conn.create_table("bad", {"f": {"keep_deleted_cells": "sometimes"}})
    assert not conn.is_table_available("bad")
    conn.create_table("kept", {"f": {"keep_deleted_cells": "ttl", "ttl": 60}, "g": {}})
    conn.close()
    again = storage.connect(str(tmp_path / "root"))
    try:
        families = again.table("kept").families()
        assert families[b"f"]["keep_deleted_cells"] == "TTL" and families[b"g"]["keep_deleted_cells"] == "FALSE"
    finally:
        again.close()


def test_raw_scan_arguments_are_refused_in_one_line(conn):
    t = _table(conn, "args", families=("c0",))
    with pytest.raises(InvalidArgument, match="a raw scan returns cells"):
        t.scan_batches(raw=True, output="rows")
    # filters and qualifier columns are served (tests/storage/test_raw_scans.py)
    assert list(t.scan(raw=True, filter="KeyOnlyFilter()", columns=[b"c0:q"])) == []


def test_the_kernels_agree_on_reads_of_the_past():
    """The cell kernel and the row kernel, one family keeping deleted cells: the same
    newest visible cell per column for every time range end around the markers."""
    rows = [b"a", b"a", b"a", b"b", b"b"]  # a: DeleteFamily 5, DeleteColumn 7, put 3; b: Delete 4, put 4
    cells = pa.table({
        "row": pa.array(rows, pa.binary()), "family": pa.array([b"f"] * 5, pa.binary()),
        "qualifier": pa.array([b"", b"q", b"q", b"q", b"q"], pa.binary()),
        "timestamp": pa.array([5, 7, 3, 4, 4], pa.int64()),
        "type": pa.array([DELETE_FAMILY, DELETE_COLUMN, PUT, DELETE, PUT], pa.uint8()),
        "value": pa.array([b"", b"", b"a3", b"", b"b4"], pa.binary()),
    })
    piece = RowPiece(pa.array([b"a", b"b"], pa.binary()), [pa.array([3, 4], pa.int64()).to_numpy()],
                     [pa.array([b"a3", b"b4"], pa.binary())])
    marks = Markers(pa.array([b"a", b"a", b"b"], pa.binary()), pa.array([b"", b"q", b"q"], pa.binary()),
                    pa.array([5, 7, 4], pa.int64()).to_numpy(), pa.array([DELETE_FAMILY, DELETE_COLUMN, DELETE],
                                                                         pa.uint8()).to_numpy())
    for mode in ("FALSE", "TRUE", "TTL"):
        for end in (4, 5, 6, 7, 8, LATEST_TIMESTAMP):
            by_cells = kernels.resolve(cells, max_timestamp=end, keep_deleted_cells=mode)
            by_rows = resolve_rows([piece], 1, marks, max_timestamp=end, qualifiers=[b"q"], keep_deleted_cells=mode)
            assert list(zip(by_cells.column("row").to_pylist(), by_cells.column("value").to_pylist())) == \
                list(zip(by_rows.keys.to_pylist(), by_rows.values[0].to_pylist())), (mode, end)
    # FALSE: every marker acts, whatever the range; TRUE: those before the range's end
    assert kernels.resolve(cells, max_timestamp=5, keep_deleted_cells="FALSE").num_rows == 0
    assert kernels.resolve(cells, max_timestamp=5, keep_deleted_cells="TRUE").column("value").to_pylist() == [b"a3"]
    assert kernels.resolve(cells, max_timestamp=6, keep_deleted_cells="TRUE").num_rows == 0


def test_remote_raw_scans_and_reads_of_the_past_work(tmp_path):
    """Through the region server: a raw scan returns what the embedded one does; a
    family's keep_deleted_cells reaches the server, whose reads of the past see past markers."""
    from storage.server.process import ServerProcess

    root = str(tmp_path / "root")
    conn = storage.connect(root)
    t = _table(conn, "remote", families=("c0",), max_versions=3, keep_deleted_cells=True)
    t.put(b"r", {b"c0:q": b"old"}, timestamp=TS)
    t.delete(b"r", timestamp=TS + 1)
    embedded_rows = list(t.scan(raw=True))
    embedded_cells = [c for b in t.scan_batches(raw=True, output="cells") for c in b.to_pylist()]
    assert [c["type"] for c in embedded_cells] == [DELETE_FAMILY, PUT]
    conn.close()
    with ServerProcess(root) as proc, storage.connect(proc.location) as remote:
        table = remote.table("remote")
        assert table.families()[b"c0"]["keep_deleted_cells"] == "TRUE"
        assert list(table.scan(raw=True)) == embedded_rows
        for mode in ("stream", "rpc"):
            assert [c for b in table.scan_batches(raw=True, output="cells", mode=mode)
                    for c in b.to_pylist()] == embedded_cells
        assert table.row(b"r", timestamp=TS + 1) == {b"c0:q": b"old"}
        assert table.row(b"r") == {}
        assert [r for r, _ in table.scan(time_range=(0, TS + 1))] == [b"r"]
