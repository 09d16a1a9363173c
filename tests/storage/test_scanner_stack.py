"""The cell-at-a-time scanner stack against Python models.

Heaps over memstore and store file scanners against a sorted list (forward
and reverse); the store scanner's resolution against a model of versions,
deletes, TTL and time ranges (and against the batch kernels); region and
table scanners for limits, batches, bounds, filters and metrics.
"""

from __future__ import annotations

import random
from bisect import bisect_left

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import kernels
from storage.cells import LATEST_TIMESTAMP, Cell, batch_to_cells, cells_to_batch, sort_key
from storage.errors import InvalidArgument, ScannerError
from storage.filters import (
    BinaryComparator,
    CompareOperator,
    MultiRowRangeFilter,
    PageFilter,
    PrefixFilter,
    RowFilter,
    SingleColumnValueFilter,
    SubstringComparator,
    WhileMatchFilter,
)
from storage.vfs.fs import FileSystem
from storage.memstore.write_buffer import MemStore
from storage.scanner import (
    KeyValueHeap,
    RegionScanner,
    ReversedKeyValueHeap,
    ScanMetrics,
    CellScanSpec,
    StoreScanner,
    result_size,
)
from storage.read.region_runner import TableScanner
from storage.storefile import StoreFileReader, StoreFileWriter

PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY = 4, 8, 12, 14


# -- models -----------------------------------------------------------------


def newest_wins(sources: list[list]) -> list:
    """Merge sources (newest first): one cell per key, the newest source's."""
    merged: dict = {}
    for source in reversed(sources):
        for c in source:
            merged[sort_key(c)] = c
    return [merged[k] for k in sorted(merged)]


def rows_reversed(cells: list) -> list:
    """Cells in reverse-scan order: rows descending, cells of a row ascending."""
    by_row: dict = {}
    for c in cells:
        by_row.setdefault(c.row, []).append(c)
    return [c for r in sorted(by_row, reverse=True) for c in by_row[r]]


def resolve_model(cells, family, *, max_versions, min_ts=0, max_ts=LATEST_TIMESTAMP, lower=0, wanted=None):
    """row -> visible cells of ``family`` (rows without any left out)."""
    by_row: dict = {}
    for c in cells:
        if c.family == family:
            by_row.setdefault(c.row, []).append(c)
    out = {}
    for row in sorted(by_row):
        row_cells = by_row[row]
        family_deleted = max((c.timestamp for c in row_cells if c.type == DELETE_FAMILY), default=-1)
        by_qualifier: dict = {}
        for c in row_cells:
            by_qualifier.setdefault(c.qualifier, []).append(c)
        visible = []
        for q in sorted(by_qualifier):
            if wanted is not None and q not in wanted:
                continue
            col = by_qualifier[q]
            column_deleted = max((c.timestamp for c in col if c.type == DELETE_COLUMN), default=-1)
            deleted = {c.timestamp for c in col if c.type == DELETE}
            kept = 0
            for p in sorted((c for c in col if c.type == PUT), key=lambda c: -c.timestamp):
                ts = p.timestamp
                if ts >= max_ts or ts < min_ts or ts < lower:
                    continue
                if ts <= family_deleted or ts <= column_deleted or ts in deleted:
                    continue
                if kept < max_versions:
                    visible.append(p)
                    kept += 1
        if visible:
            out[row] = visible
    return out


def memstore_of(cells) -> MemStore:
    m = MemStore()
    if cells:
        m.add_many(cells)
    return m


def drain(source) -> list:
    out = []
    while (c := source.next()) is not None:
        out.append(c)
    return out


def reverse_position(expected_rev: list, key: tuple):
    """First cell at or after ``key`` in reverse-scan order."""
    for c in expected_rev:
        if c.row < key[0] or (c.row == key[0] and sort_key(c) >= key):
            return c
    return None


def first_of_previous_row(expected: list, row: bytes):
    before = [c for c in expected if c.row < row]
    if not before:
        return None
    last = before[-1].row
    return next(c for c in before if c.row == last)


# -- strategies ---------------------------------------------------------------

ROWS = [b"r0", b"r1", b"r1\x00", b"r2", b"r3"]


@st.composite
def any_cell(draw, families=(b"f", b"f", b"e", b"g")):
    cell_type = draw(st.sampled_from([PUT, PUT, PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY]))
    qualifier = b"" if cell_type == DELETE_FAMILY else draw(st.sampled_from([b"", b"a", b"b", b"c"]))
    return Cell(
        draw(st.sampled_from(ROWS)),
        draw(st.sampled_from(families)),
        qualifier,
        draw(st.integers(0, 8)),
        cell_type,
        draw(st.binary(max_size=3)),
    )


sources_strategy = st.lists(st.lists(any_cell(), max_size=25), min_size=1, max_size=4)
key_strategy = st.tuples(st.sampled_from(ROWS + [b"", b"r", b"z"]), st.sampled_from([b"e", b"f", b"g"]),
                         st.sampled_from([b"", b"a", b"b", b"c"]))


# -- heaps --------------------------------------------------------------------


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sources_strategy, st.lists(key_strategy, max_size=5))
def test_heaps_over_memstores_match_sorted_model(sources, probes):
    expected = newest_wins(sources)
    stores = [memstore_of(s) for s in sources]

    heap = KeyValueHeap([m.scanner() for m in stores])
    heap.seek((b"",))
    assert drain(heap) == expected
    keys = [sort_key(c) for c in expected]
    for probe in probes:
        i = bisect_left(keys, probe)
        assert heap.seek(probe) == (expected[i] if i < len(expected) else None)
        assert heap.seek_to_previous_row(probe[0]) == first_of_previous_row(expected, probe[0])
    heap.seek((b"",))
    for probe in sorted(probes):  # reseeks only move forward
        i = bisect_left(keys, probe)
        assert heap.reseek(probe) == (expected[i] if i < len(expected) else None)
    heap.close()

    expected_rev = rows_reversed(expected)
    rheap = ReversedKeyValueHeap([m.scanner() for m in stores])
    rheap.seek_to_last_row()
    assert drain(rheap) == expected_rev
    for probe in probes:
        assert rheap.seek(probe) == reverse_position(expected_rev, probe)
        rest = expected_rev[expected_rev.index(rheap.peek()):] if rheap.peek() is not None else []
        assert drain(rheap) == rest
        assert rheap.seek_to_previous_row(probe[0]) == first_of_previous_row(expected, probe[0])
    rheap.close()


def test_reverse_heap_reseek_within_row_and_to_earlier_row():
    a = [Cell(r, b"f", q, 1, PUT, b"A") for r in (b"r1", b"r2", b"r3") for q in (b"a", b"c", b"e")]
    b = [Cell(r, b"f", q, 1, PUT, b"B") for r in (b"r2", b"r4") for q in (b"b", b"c", b"d")]
    expected_rev = rows_reversed(newest_wins([a, b]))
    heap = ReversedKeyValueHeap([memstore_of(a).scanner(), memstore_of(b).scanner()])
    assert heap.seek_to_last_row().row == b"r4"
    assert heap.reseek((b"r4", b"f", b"c")) == Cell(b"r4", b"f", b"c", 1, PUT, b"B")
    assert heap.reseek((b"r4", b"f", b"z")).row == b"r3"  # past the row's end: the row before
    for key in [(b"r3", b"f", b"d"), (b"r2", b"f", b"c"), (b"r2", b"f", b"d"), (b"r1",), (b"r0",)]:
        assert heap.reseek(key) == reverse_position(expected_rev, key)
    assert heap.peek() is None and heap.next() is None and heap.advance() is None


@pytest.mark.parametrize("seed", [1, 2])
def test_heaps_over_store_files_and_memstore(tmp_path, seed):
    rng = random.Random(seed)
    fs = FileSystem(str(tmp_path))
    fs.makedirs("f")
    all_sources = []
    for i in range(4):
        cells = {}
        for _ in range(rng.randint(50, 300)):
            c = Cell(b"row%03d" % rng.randrange(120), b"f", b"q%d" % rng.randrange(6), rng.randrange(4),
                     rng.choice([PUT, PUT, DELETE_COLUMN]), b"src%d" % i)
            cells[sort_key(c)] = c
        all_sources.append([cells[k] for k in sorted(cells)])
    memstore = memstore_of(all_sources[0])
    readers = []
    for i, cells in enumerate(all_sources[1:]):
        writer = StoreFileWriter(fs, f"f/file{i}", family=b"f", block_size=200)
        writer.append_batch(cells_to_batch(cells))
        writer.finish()
        readers.append(StoreFileReader(fs, f"f/file{i}"))

    def sources():
        return [memstore.scanner()] + [r.scanner() for r in readers]

    expected = newest_wins(all_sources)
    heap = KeyValueHeap(sources())
    heap.seek((b"",))
    assert drain(heap) == expected
    heap.close()
    rheap = ReversedKeyValueHeap(sources())
    rheap.seek_to_last_row()
    assert drain(rheap) == rows_reversed(expected)
    keys = [sort_key(c) for c in expected]
    probe = (b"row050", b"f", b"q3")
    assert rheap.seek(probe) == reverse_position(rows_reversed(expected), probe)
    rheap.close()

    # resolution over files with markers in the memstore
    model = resolve_model(expected, b"f", max_versions=2)
    for reverse in (False, True):
        scanner = StoreScanner(sources(), b"f", CellScanSpec(max_versions=3, reverse=reverse), max_versions=2)
        got = []
        while (row := scanner.next_row()) is not None:
            got.append(row)
        scanner.close()
        assert got == (list(model.values())[::-1] if reverse else list(model.values()))
    assert keys  # the data is not empty
    for r in readers:
        r.close()


# -- store scanner ------------------------------------------------------------

spec_params = st.fixed_dictionaries(
    {
        "scan_versions": st.integers(1, 3),
        "family_versions": st.integers(1, 3),
        "min_ts": st.integers(0, 4),
        "span": st.one_of(st.none(), st.integers(1, 6)),
        "ttl_ms": st.one_of(st.none(), st.integers(1, 8)),
        "columns": st.one_of(
            st.none(),
            st.just([b"f"]),
            st.lists(st.sampled_from([b"", b"a", b"b", b"c"]), min_size=1, max_size=3),
        ),
    }
)


def store_setup(params):
    now = 8
    ttl = None if params["ttl_ms"] is None else params["ttl_ms"] / 1000
    lower = 0 if ttl is None else now - int(ttl * 1000)
    max_ts = LATEST_TIMESTAMP if params["span"] is None else params["min_ts"] + params["span"]
    columns = params["columns"]
    wanted = None
    if columns == [b"f"]:
        spec_columns = [b"f"]
    elif columns is not None:
        spec_columns = [(b"f", q) for q in columns]
        wanted = set(columns)
    else:
        spec_columns = None
    return now, ttl, lower, max_ts, spec_columns, wanted


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sources_strategy, spec_params)
def test_store_scanner_resolution_matches_model_and_batch_kernels(sources, params):
    now, ttl, lower, max_ts, spec_columns, wanted = store_setup(params)
    stores = [memstore_of(s) for s in sources]
    versions = min(params["scan_versions"], params["family_versions"])
    merged = newest_wins(sources)
    model = resolve_model(merged, b"f", max_versions=versions, min_ts=params["min_ts"], max_ts=max_ts,
                          lower=lower, wanted=wanted)

    for reverse in (False, True):
        spec = CellScanSpec(reverse=reverse, columns=spec_columns, min_timestamp=params["min_ts"],
                        max_timestamp=max_ts, max_versions=params["scan_versions"])
        scanner = StoreScanner([m.scanner() for m in stores], b"f", spec,
                               max_versions=params["family_versions"], ttl=ttl, now_ms=now)
        got = []
        while (row := scanner.next_row()) is not None:
            got.append(row)
        scanner.close()
        expected = list(model.values())
        assert got == (expected[::-1] if reverse else expected)

    # the batch path gives the same cells
    tables = [m.to_batch(families=[b"f"]) for m in stores]
    resolved = kernels.resolve(
        kernels.merge_sources([t for t in tables if t.num_rows] or tables[:1]),
        max_versions=versions, min_timestamp=params["min_ts"], max_timestamp=max_ts,
        ttl_cutoff=None if ttl is None else lower,
    )
    batch_cells = [c for c in batch_to_cells(resolved) if wanted is None or c.qualifier in wanted]
    assert batch_cells == [c for row in model.values() for c in row]


def test_store_scanner_delete_rules_by_example():
    cells = [
        Cell(b"r", b"f", b"", 6, DELETE_FAMILY, b""),
        Cell(b"r", b"f", b"", 9, PUT, b"empty-new"),
        Cell(b"r", b"f", b"", 2, PUT, b"empty-old"),
        Cell(b"r", b"f", b"a", 9, PUT, b"a9"),
        Cell(b"r", b"f", b"a", 7, DELETE, b""),
        Cell(b"r", b"f", b"a", 7, PUT, b"a7"),
        Cell(b"r", b"f", b"a", 6, PUT, b"a6"),
        Cell(b"r", b"f", b"b", 8, DELETE_COLUMN, b""),
        Cell(b"r", b"f", b"b", 8, PUT, b"b8"),
        Cell(b"r", b"f", b"b", 3, PUT, b"b3"),
        Cell(b"r", b"f", b"c", 10, PUT, b"c10"),
        Cell(b"r", b"f", b"c", 7, PUT, b"c7"),
    ]
    spec = CellScanSpec(max_versions=5)
    scanner = StoreScanner([memstore_of(cells).scanner()], b"f", spec, max_versions=5)
    assert [c.value for c in scanner.next_row()] == [b"empty-new", b"a9", b"c10", b"c7"]
    assert scanner.next_row() is None

    # markers outside the time range still hide; the range picks older versions
    spec = CellScanSpec(max_timestamp=9, max_versions=1)
    scanner = StoreScanner([memstore_of(cells).scanner()], b"f", spec, max_versions=5)
    assert [c.value for c in scanner.next_row()] == [b"c7"]

    # TTL: with now=12 and ttl=4 s... in ms: cells older than 8 are expired
    spec = CellScanSpec(max_versions=5)
    scanner = StoreScanner([memstore_of(cells).scanner()], b"f", spec, max_versions=5, ttl=0.004, now_ms=12)
    assert [c.value for c in scanner.next_row()] == [b"empty-new", b"a9", b"c10"]


def test_store_scanner_skips_unselected_columns_with_few_seeks():
    cells = [Cell(b"r%d" % r, b"f", b"q%03d" % q, 1, PUT, b"v") for r in range(3) for q in range(300)]
    metrics = ScanMetrics()
    spec = CellScanSpec(columns=[(b"f", b"q010"), (b"f", b"q250")])
    scanner = StoreScanner([memstore_of(cells).scanner()], b"f", spec, metrics=metrics)
    rows = []
    while (row := scanner.next_row()) is not None:
        rows.append([(c.row, c.qualifier) for c in row])
    assert rows == [[(b"r%d" % r, b"q010"), (b"r%d" % r, b"q250")] for r in range(3)]
    # one reseek to each wanted column and one past each row, not a step per cell
    assert 0 < metrics.seeks <= 12


def test_store_scanner_validates_settings_and_close():
    spec = CellScanSpec(columns=[b"g"])
    with pytest.raises(InvalidArgument, match="family"):
        StoreScanner([MemStore().scanner()], b"f", spec)
    with pytest.raises(InvalidArgument, match="max_versions"):
        StoreScanner([MemStore().scanner()], b"f", CellScanSpec(), max_versions=0)
    with pytest.raises(InvalidArgument, match="ttl"):
        StoreScanner([MemStore().scanner()], b"f", CellScanSpec(), ttl=-1)
    scanner = StoreScanner([MemStore().scanner()], b"f", CellScanSpec())
    assert scanner.next_row() is None
    scanner.close()
    with pytest.raises(ScannerError):
        scanner.peek_row()


# -- region and table scanners -------------------------------------------------


def two_family_data():
    """Rows r00..r29: family a has 1-3 columns, family b every third row."""
    a = [Cell(b"r%02d" % r, b"a", b"q%d" % q, 1, PUT, b"a%d%d" % (r, q)) for r in range(30) for q in range(r % 3 + 1)]
    b = [Cell(b"r%02d" % r, b"b", b"x", 1, PUT, b"b%d" % r) for r in range(0, 30, 3)]
    b += [Cell(b"r%02d" % r, b"b", b"x", 1, DELETE_COLUMN, b"") for r in (3, 6)]
    return a, b


def region_rows(a, b, start=b"", stop=None):
    """Model: row -> visible cells of both families, within [start, stop)."""
    ra = resolve_model(newest_wins([a]), b"a", max_versions=1)
    rb = resolve_model(newest_wins([b]), b"b", max_versions=1)
    rows = {}
    for row in sorted(set(ra) | set(rb)):
        if row >= start and (stop is None or row < stop):
            rows[row] = ra.get(row, []) + rb.get(row, [])
    return rows


def open_region(a, b, spec, start=b"", end=None, metrics=None):
    stores = []
    for family, cells in ((b"b", b), (b"a", a)):
        if spec.wants_family(family):
            stores.append(StoreScanner([memstore_of(cells).scanner()], family, spec))
    return RegionScanner(stores, spec, start_row=start, end_row=end, metrics=metrics)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(
    "kw, region",
    [
        ({}, (b"", None)),
        ({"limit": 4}, (b"", None)),
        ({"batch": 2}, (b"", None)),
        ({"batch": 1, "limit": 3}, (b"", None)),
        ({}, (b"r05", b"r17")),
        ({"columns": [b"b"]}, (b"", None)),
        ({"columns": [b"a:q2", b"b:x"]}, (b"", None)),
    ],
)
def test_region_scanner_rows_limits_batches(kw, region, reverse):
    a, b = two_family_data()
    spec = CellScanSpec(reverse=reverse, **kw)
    model = region_rows(a, b, *region)
    if "columns" in kw:
        keep = {(b"b", b"x")} if kw["columns"] == [b"b"] else {(b"a", b"q2"), (b"b", b"x")}
        model = {r: [c for c in cells if (c.family, c.qualifier) in keep] for r, cells in model.items()}
        model = {r: cells for r, cells in model.items() if cells}
    rows = list(model.values())
    if reverse:
        rows.reverse()
    if spec.limit:
        rows = rows[: spec.limit]
    expected = []
    for cells in rows:
        step = spec.batch or len(cells)
        expected += [cells[i : i + step] for i in range(0, len(cells), step)]

    scanner = open_region(a, b, spec, *region)
    got = []
    while batch := scanner.next_rows(3):
        assert len(batch) <= 3
        got += batch
    assert got == expected
    assert scanner.exhausted and scanner.rows_returned == len(rows)
    scanner.close()
    with pytest.raises(ScannerError):
        scanner.next_rows()


@pytest.mark.parametrize("reverse", [False, True])
def test_region_scanner_start_and_stop_rows(reverse):
    a, b = two_family_data()
    if reverse:
        spec = CellScanSpec(row_start=b"r20", row_stop=b"r07", reverse=True)
        expected = [r for r in region_rows(a, b) if b"r07" < r <= b"r20"][::-1]
    else:
        spec = CellScanSpec(row_start=b"r07", row_stop=b"r20")
        expected = [r for r in region_rows(a, b) if b"r07" <= r < b"r20"]
    # the region [r10, r25) cuts the range further
    scanner = open_region(a, b, spec, b"r10", b"r25")
    assert [row[0].row for row in scanner] == [r for r in expected if b"r10" <= r < b"r25"]


def test_region_scanner_max_result_size_and_metrics():
    a, b = two_family_data()
    metrics = ScanMetrics()
    spec = CellScanSpec(max_result_size=60, filter=PrefixFilter(b"r1"))
    scanner = open_region(a, b, spec, metrics=metrics)
    calls = []
    while batch := scanner.next_rows(100):
        calls.append(batch)
        if not scanner.exhausted:
            assert sum(map(result_size, batch)) >= 60
            assert sum(map(result_size, batch[:-1])) < 60
    got = [row for batch in calls for row in batch]
    model = region_rows(a, b)
    assert got == [cells for r, cells in model.items() if r.startswith(b"r1")]
    assert len(calls) > 1
    assert metrics.regions_scanned == 1
    assert metrics.rows_scanned == 10  # the prefix's range is sought, other rows are never visited
    assert metrics.rows_filtered == 0
    assert metrics.cells_scanned == sum(len(r) for r in got)
    assert metrics.bytes_in_results == sum(result_size(r) for r in got)
    assert metrics.to_dict()["ROWS_SCANNED"] == 10 and metrics.to_dict()["REGIONS_SCANNED"] == 1
    assert metrics.to_dict(hbase_names=False)["cells_scanned"] == metrics.cells_scanned


@pytest.mark.parametrize("reverse", [False, True])
def test_region_scanner_filters(reverse):
    a, b = two_family_data()
    model = region_rows(a, b)
    ordered = list(model)[::-1] if reverse else list(model)

    def run(flt, metrics=None):
        scanner = open_region(a, b, CellScanSpec(reverse=reverse, filter=flt), metrics=metrics)
        return [row[0].row for row in scanner], scanner

    ranges = MultiRowRangeFilter([(b"r03", True, b"r05", False), (b"r21", True, b"r22", True)])
    assert run(ranges)[0] == [r for r in ordered if b"r03" <= r < b"r05" or b"r21" <= r <= b"r22"]

    page = PageFilter(4)
    got, scanner = run(page)
    assert got == ordered[:4] and scanner.filter_done
    assert page.rows_accepted == 0  # the region works on a copy

    metrics = ScanMetrics()
    while_match = WhileMatchFilter(RowFilter(CompareOperator.NOT_EQUAL, BinaryComparator(b"r10")))
    got, scanner = run(while_match, metrics)
    assert got == ordered[: ordered.index(b"r10")] and scanner.filter_done
    assert metrics.rows_filtered == 1 and metrics.rows_scanned == len(got) + 1

    # a filter without ranges visits and filters the row...
    metrics = ScanMetrics()
    got, _ = run(RowFilter(CompareOperator.NOT_EQUAL, SubstringComparator("10")), metrics)
    assert got == [r for r in ordered if r != b"r10"]
    assert metrics.rows_filtered == 1 and metrics.rows_scanned == 30

    # ...one with ranges seeks over it
    metrics = ScanMetrics()
    got, _ = run(RowFilter(CompareOperator.NOT_EQUAL, BinaryComparator(b"r10")), metrics)
    assert got == [r for r in ordered if r != b"r10"]
    assert metrics.rows_filtered == 0 and metrics.rows_scanned == 29


def test_filter_sees_columns_the_scan_leaves_out():
    a, b = two_family_data()
    # rows whose a:q0 value is a10..a19 ("a1" prefix, then a digit), returning only b:x
    flt = SingleColumnValueFilter(b"a", b"q0", CompareOperator.GREATER_OR_EQUAL, BinaryComparator(b"a12"),
                                  filter_if_missing=True)
    spec = CellScanSpec(columns=[b"b:x"], filter=flt)
    read_spec = spec.with_filter_columns()
    assert read_spec.qualifiers(b"a") == {b"q0"} and spec.filter_only_columns() == [(b"a", b"q0")]
    assert CellScanSpec(columns=[b"a", b"b:x"], filter=flt).with_filter_columns().filter_only_columns() == []
    stores = [StoreScanner([memstore_of(cells).scanner()], fam, read_spec) for fam, cells in ((b"a", a), (b"b", b))]
    got = list(RegionScanner(stores, spec))
    model = region_rows(a, b)
    expected = []
    for row, cells in model.items():
        q0 = [c.value for c in cells if c.family == b"a" and c.qualifier == b"q0"]
        kept = [c for c in cells if c.family == b"b"]
        if q0 and q0[0] >= b"a12" and kept:
            expected.append(kept)
    assert got == expected and len(expected) > 2
    assert spec.selects(b"b", b"x") and not spec.selects(b"a", b"q0") and CellScanSpec().selects(b"z", b"q")


def test_region_scanner_rejects_mismatched_stores():
    spec = CellScanSpec(reverse=True)
    with pytest.raises(InvalidArgument, match="direction"):
        RegionScanner([StoreScanner([MemStore().scanner()], b"a", CellScanSpec())], spec)
    with pytest.raises(InvalidArgument, match="stores"):
        RegionScanner([], spec)


def table_of(a, b, splits):
    """Region scanner factories over [b"", s1), [s1, s2) ... in key order."""
    bounds = [b""] + splits + [None]
    factories = []
    for lo, hi in zip(bounds, bounds[1:]):
        ra = [c for c in a if c.row >= lo and (hi is None or c.row < hi)]
        rb = [c for c in b if c.row >= lo and (hi is None or c.row < hi)]

        def factory(spec, metrics, ra=ra, rb=rb, lo=lo, hi=hi):
            return open_region(ra, rb, spec, lo, hi, metrics)

        factories.append(factory)
    return factories


@pytest.mark.parametrize("reverse", [False, True])
def test_table_scanner_walks_regions_lazily_with_limits(reverse):
    a, b = two_family_data()
    model = region_rows(a, b)
    rows = list(model.values())
    if reverse:
        rows.reverse()
    factories = table_of(a, b, [b"r08", b"r15", b"r23"])

    metrics = ScanMetrics()
    scanner = TableScanner(factories, CellScanSpec(reverse=reverse), metrics)
    first = scanner.next_rows(5)
    assert first == rows[:5] and metrics.regions_scanned == 1  # later regions not opened yet
    assert first + list(scanner) == rows
    assert metrics.regions_scanned == 4 and metrics.rows_scanned == 30

    scanner = TableScanner(factories, CellScanSpec(reverse=reverse, limit=11))
    assert scanner.next_rows(100) == rows[:11]
    assert scanner.next_rows(100) == []

    # a filter that ends the scan stops the table scan, not only the region
    stop_at = rows[3][0].row
    flt = WhileMatchFilter(RowFilter(CompareOperator.NOT_EQUAL, BinaryComparator(stop_at)))
    metrics = ScanMetrics()
    scanner = TableScanner(factories, CellScanSpec(reverse=reverse, filter=flt), metrics)
    assert list(scanner) == rows[:3]
    assert metrics.regions_scanned == 1
    scanner.close()
    with pytest.raises(ScannerError):
        scanner.next_rows()


# -- scan spec -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"row_start": "a"}, "row_start"),
        ({"row_stop": 5}, "row_stop"),
        ({"row_start": b"b", "row_stop": b"a"}, "row_start"),
        ({"row_start": b"a", "row_stop": b"b", "reverse": True}, "row_start"),
        ({"reverse": 1}, "reverse"),
        ({"max_versions": 0}, "max_versions"),
        ({"min_timestamp": -1}, "min_timestamp"),
        ({"min_timestamp": 5, "max_timestamp": 5}, "max_timestamp"),
        ({"limit": 0}, "limit"),
        ({"batch": True}, "batch"),
        ({"max_result_size": 0}, "max_result_size"),
        ({"caching": 0}, "caching"),
        ({"columns": b"f:q"}, "columns"),
        ({"columns": [b":q"]}, "columns"),
        ({"columns": [(b"f", 3)]}, "columns"),
        ({"filter": object()}, "filter"),
    ],
)
def test_scan_spec_validation_names_the_field(kw, field):
    with pytest.raises(InvalidArgument, match=field):
        CellScanSpec(**kw)


def test_scan_spec_columns():
    spec = CellScanSpec(columns=[b"f:a", "f:b", (b"g", None), (b"g", b"x"), b"h:"])
    assert spec.families() == [b"f", b"g", b"h"]
    assert spec.qualifiers(b"f") == {b"a", b"b"}
    assert spec.qualifiers(b"g") is None  # the whole family wins
    assert spec.qualifiers(b"h") == {b""}
    assert not spec.wants_family(b"z") and CellScanSpec().wants_family(b"z")
    assert CellScanSpec(row_stop=b"").row_stop is None
    assert CellScanSpec(row_start=b"a", row_stop=b"a").row_stop == b"a"
