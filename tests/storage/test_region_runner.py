"""The region runner is the one loop over regions: the table's scans and the
connector's pinned split reads both run it, with the same spans, limit, metrics
and multi-get; the cell path (``Table.scanner``: the region server's and the
Thrift gateway's scanners, ``scan(path="cell")``) pulls the same walk over region
scanners; and nothing outside storage/read loops over regions or region scanners."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pyarrow as pa
import pytest

import storage
from storage import ScanMetrics, ScanRequest
from storage.errors import InvalidArgument, ScannerError
from storage.filters import BinaryComparator, CompareOperator, RowFilter, WhileMatchFilter
from storage.engine import FileSystem, pin_table, pinned_batches, pinned_edge_key, pinned_row_count, table_dir
from suite_paths import REPO

SPLITS = [b"r10", b"r20"]  # three regions: r00-r09, r10-r19, r20-r29


@pytest.fixture()
def root(tmp_path):
    path = str(tmp_path / "data")
    with storage.connect(path) as conn:
        table = conn.create_table("t", {"cf": {}}, split_keys=SPLITS)
        with table.batch() as batch:
            for i in range(30):
                batch.put(b"r%02d" % i, {b"cf:a": b"a%d" % i, b"cf:b": b"b%d" % i})
        table.flush()
        table.put(b"r05", {b"cf:a": b"new"})  # in the WAL only: a pinned read replays it
    return path


def _pinned(root: str, request: ScanRequest, spans, metrics=None, **kw) -> pa.Table:
    table_fs = FileSystem(root).sub(table_dir("t"))
    snapshot = pin_table(table_fs)
    batches = pinned_batches(table_fs, "t", snapshot.regions, snapshot.family_settings(), request, spans, metrics, **kw)
    return pa.Table.from_batches(list(batches), schema=None) if spans else pa.table({})


def test_table_and_pinned_reads_run_the_same_loop_with_the_same_metrics(root):
    request = ScanRequest(columns=[b"cf:a"], output="rows")
    live_metrics, pinned_metrics = ScanMetrics(), ScanMetrics()
    with storage.connect(root) as conn:
        live = pa.Table.from_batches(list(conn.table("t").run_scan(request, live_metrics)))
    pinned = _pinned(root, request, [(b"", None)], pinned_metrics)
    assert pinned.to_pylist() == live.to_pylist()
    assert live.column("cf:a")[5].as_py() == b"new" and live.num_rows == 30
    for m in (live_metrics, pinned_metrics):
        assert (m.regions_scanned, m.rows_scanned) == (3, 30)
        assert m.bytes_in_results == live_metrics.bytes_in_results > 0 and m.time_ms > 0


def test_the_limit_counts_across_regions_and_later_regions_are_never_opened(root):
    request = ScanRequest(limit=12, output="rows")
    live_metrics, pinned_metrics = ScanMetrics(), ScanMetrics()
    with storage.connect(root) as conn:
        live = pa.Table.from_batches(list(conn.table("t").run_scan(request, live_metrics)))
    pinned = _pinned(root, request, [(b"", None)], pinned_metrics)
    assert live.column("key").to_pylist() == [b"r%02d" % i for i in range(12)]
    assert pinned.column("key").to_pylist() == live.column("key").to_pylist()
    assert live_metrics.regions_scanned == pinned_metrics.regions_scanned == 2  # r20.. stays closed


def test_a_limit_of_0_returns_no_row_on_every_path(root):
    # the cell path once read it as "no limit" and returned every row
    with storage.connect(root) as conn:
        table = conn.table("t")
        for path in ("batch", "cell"):
            assert list(table.scan(limit=0, path=path)) == []
            assert list(table.scan(limit=0, path=path, reverse=True)) == []
        assert list(table.scan(limit=1, path="cell")) == list(table.scan(limit=1))
        assert sum(b.num_rows for b in table.scan_batches(limit=0)) == 0
        assert table.cell_scanner(ScanRequest(limit=0)).next_rows(10) == []


def test_point_spans_are_one_multi_get_per_region_and_hidden_columns_stay_hidden(root):
    keys = [b"r03", b"r05", b"r07", b"r12", b"r12x"]  # r12x: no such row
    spans = [(k, k + b"\x00") for k in keys]
    request = ScanRequest(columns=[b"cf:a", b"cf:b"], output="rows")
    metrics = ScanMetrics()
    got = _pinned(root, request, spans, metrics, hidden_columns=[b"cf:b"])
    assert got.column_names == ["key", "cf:a"]  # a row exists through cf:b, which is not handed out
    assert got.column("key").to_pylist() == keys[:4]
    assert got.column("cf:a").to_pylist() == [b"a3", b"new", b"a7", b"a12"]
    assert (metrics.regions_scanned, metrics.rows_scanned) == (2, 4)  # r20.. holds no span: never opened
    with storage.connect(root) as conn:
        assert [conn.table("t").row(k).get(b"cf:a") for k in keys[:4]] == got.column("cf:a").to_pylist()


def test_pinned_counts_and_edge_keys_read_the_pinned_regions(root):
    table_fs = FileSystem(root).sub(table_dir("t"))
    snapshot = pin_table(table_fs)
    families = snapshot.family_settings()
    metrics = ScanMetrics()
    spans = [(b"r08", b"r25")]
    assert pinned_row_count(table_fs, "t", snapshot.regions, families, spans, metrics) == 17
    assert metrics.regions_scanned == 3
    request = ScanRequest(output="rows")
    assert pinned_edge_key(table_fs, "t", snapshot.regions, families, request, spans) == b"r08"
    assert pinned_edge_key(table_fs, "t", snapshot.regions, families, request, spans, last=True) == b"r24"
    with storage.connect(root) as conn:
        conn.table("t").delete(b"r24")
    assert pinned_edge_key(table_fs, "t", snapshot.regions, families, request, spans, last=True) == b"r24"  # pinned
    again = pin_table(table_fs)
    assert pinned_edge_key(table_fs, "t", again.regions, again.family_settings(), request, spans, last=True) == b"r23"


def test_a_table_count_gives_back_the_leases_of_the_views_it_read(root):
    with storage.connect(root) as conn:
        table = conn.table("t")
        files = [f for region in table._regions for f in region.stores["cf"].files]
        gc.disable()  # a view dropped unreleased would give its leases back only when collected
        try:
            assert table.count() == 30 and table.count(row_start=b"r08", row_stop=b"r25") == 17
            assert [table.leases.leased(f) for f in files] == [0] * len(files)
        finally:
            gc.enable()


@pytest.mark.parametrize("reverse", [False, True])
def test_the_cell_path_walks_the_regions_as_the_batch_path_does(root, reverse):
    with storage.connect(root) as conn:
        table = conn.table("t")
        files = [f for region in table._regions for f in region.stores["cf"].files]
        want = [key for key, _ in table.scan(reverse=reverse)]
        assert len(want) == 30 and (want[0] == b"r29") == reverse
        # rows across regions, the region order of the direction, leases given back at the end
        metrics = ScanMetrics()
        scanner = table.scanner(reverse=reverse, metrics=metrics)
        first = scanner.next_rows(12)
        assert [cells[0].row for cells in first] == want[:12]
        assert metrics.regions_scanned == 2  # the third region opens when the scan reaches it
        rest = list(scanner)
        assert [cells[0].row for cells in first + rest] == want
        assert metrics.regions_scanned == 3 and metrics.rows_scanned == 30
        assert [table.leases.leased(f) for f in files] == [0] * len(files)
        # the limit counts across regions: a region after the last row wanted is never opened
        metrics = ScanMetrics()
        with table.scanner(reverse=reverse, limit=12, metrics=metrics) as scanner:
            assert [cells[0].row for cells in scanner.next_rows(100)] == want[:12]
            assert scanner.next_rows(100) == []
        assert metrics.regions_scanned == 2
        # a filter done with the table ends the walk, not only the region
        metrics = ScanMetrics()
        flt = WhileMatchFilter(RowFilter(CompareOperator.NOT_EQUAL, BinaryComparator(want[4])))
        scanner = table.scanner(reverse=reverse, metrics=metrics, filter=flt)
        assert [cells[0].row for cells in scanner] == want[:4]
        assert metrics.regions_scanned == 1
        # a scanner closed half way gives its leases back, and refuses more reads
        scanner = table.scanner(reverse=reverse, caching=3)
        assert len(scanner.next_rows()) == 3
        assert max(table.leases.leased(f) for f in files) > 0
        scanner.close()
        assert [table.leases.leased(f) for f in files] == [0] * len(files)
        with pytest.raises(ScannerError, match="after close"):
            scanner.next_rows()
        with pytest.raises(InvalidArgument, match="n=0"):
            table.scanner().next_rows(0)


# -- the floor plan: one loop -----------------------------------------------------------
# reading one region's batches, or opening a pinned region, is the runner's work
_REGION_READERS = {"scan_region_batches", "counted_region_batches", "PinnedRegion"}
# walking cell-at-a-time region scanners (opening one per region, moving on when it
# is exhausted or its filter is done): the runner's pull form, region_runner.TableScanner
_REGION_SCANNER_WALK = {"cell_scanner_of", "filter_done", "RegionScannerFactory"}
_WHERE_DEFINED = {
    "storage/region/reads.py": {"cell_scanner_of"},
    "storage/region/region.py": {"cell_scanner_of"},  # Region's name for the same function
    "storage/scanner/region_scanner.py": {"filter_done"},
}
# the engine's internal plan of a read: built and cut by the engine only
_ENGINE_PLAN = {"RegionReadPlan", "plan_batch_scan", "run_regions", "pinned_reads", "RegionRead"}


def _names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def _modules(*packages: str):
    for package in packages:
        for path in sorted((REPO / package).rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), path


def test_nothing_outside_storage_read_reads_regions_one_by_one():
    offenders = {}
    for rel, path in _modules("storage", "connector", "jobs", "serde"):
        if rel.startswith("storage/read/"):
            continue
        used = _names_used(path) & _REGION_READERS
        if rel == "storage/region/region_snapshots.py":
            used -= {"PinnedRegion"}  # where it is defined
        if rel == "storage/engine.py":
            used -= {"PinnedRegion"}  # re-exported, not used to read
        if used:
            offenders[rel] = sorted(used)
    assert offenders == {}, f"read regions through storage.read.region_runner: {offenders}"


def test_the_connector_and_the_jobs_never_build_the_engines_plan():
    offenders = {rel: sorted(_names_used(path) & (_ENGINE_PLAN | _REGION_READERS))
                 for rel, path in _modules("connector", "jobs", "serde")}
    offenders = {rel: names for rel, names in offenders.items() if names}
    assert offenders == {}, f"pass a ScanRequest and spans to storage.engine's pinned reads: {offenders}"


def test_nothing_outside_storage_read_walks_region_scanners():
    offenders = {}
    for rel, path in _modules("storage", "connector", "jobs", "serde"):
        if rel.startswith("storage/read/"):
            continue
        used = (_names_used(path) & _REGION_SCANNER_WALK) - _WHERE_DEFINED.get(rel, set())
        if used:
            offenders[rel] = sorted(used)
    assert offenders == {}, f"walk region scanners through storage.read.region_runner.TableScanner: {offenders}"
    assert not (REPO / "storage/scanner/table_scanner.py").exists()  # storage/scanner: one region at a time
