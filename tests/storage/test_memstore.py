"""MemStore and MemStoreScanner checked against a dict model."""

from __future__ import annotations

import threading
from bisect import bisect_left

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.cells import CELL_SCHEMA, Cell, CellType, batch_to_cells, sort_key
from storage.errors import InvalidArgument, ScannerError, StorageError
from storage.memstore.write_buffer import CELL_OVERHEAD, MemStore
from storage.scanner.metrics import ScanMetrics

PUT = int(CellType.PUT)

rows = st.sampled_from([b"a", b"b", b"bb", b"c", b"d", b"e\x00", b"f"])
families = st.sampled_from([b"f1", b"f2"])
qualifiers = st.sampled_from([b"", b"q", b"qq", b"r"])
timestamps = st.integers(min_value=0, max_value=5)
types = st.sampled_from([4, 8, 12])
values = st.binary(max_size=4)
cells = st.builds(Cell, rows, families, qualifiers, timestamps, types, values)

ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(cells, min_size=1, max_size=6)),
        st.tuples(st.just("snapshot"), st.none()),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("restore"), st.none()),
    ),
    max_size=25,
)


class Model:
    """The memstore as a plain dict (active over snapshot)."""

    def __init__(self) -> None:
        self.active: dict = {}
        self.snapshot: dict | None = None

    def apply(self, op, arg, store: MemStore) -> None:
        if op == "add":
            store.add_many(arg)
            for c in arg:
                self.active[sort_key(c)] = c
        elif op == "snapshot":
            store.snapshot()
            if self.snapshot is None:
                self.snapshot, self.active = self.active, {}
        elif op == "clear":
            store.clear_snapshot()
            self.snapshot = None
        else:
            store.restore_snapshot()
            if self.snapshot is not None:
                merged = dict(self.snapshot)
                merged.update(self.active)
                self.active, self.snapshot = merged, None

    def visible(self) -> list:
        merged = dict(self.snapshot or {})
        merged.update(self.active)
        return [merged[k] for k in sorted(merged)]


def drain(scanner) -> list:
    out = []
    while (c := scanner.next()) is not None:
        out.append(c)
    return out


def reverse_walk(scanner) -> list:
    """Rows from last to first via seek_to_previous_row, each row forward."""
    out = []
    c = scanner.seek_to_last_row()
    while c is not None:
        row = c.row
        while c is not None and c.row == row:
            out.append(scanner.next())
            c = scanner.peek()
        c = scanner.seek_to_previous_row(row)
    return out


def reverse_model(cells: list) -> list:
    by_row: dict = {}
    for c in cells:
        by_row.setdefault(c.row, []).append(c)
    return [c for r in sorted(by_row, reverse=True) for c in by_row[r]]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.lists(st.tuples(rows, families, qualifiers), max_size=6))
def test_matches_dict_model(operations, probes):
    store, model = MemStore(), Model()
    for op, arg in operations:
        model.apply(op, arg, store)
    expected = model.visible()

    scanner = store.scanner()
    assert scanner.seek((b"",)) == (expected[0] if expected else None)
    assert drain(scanner) == expected
    assert reverse_walk(scanner) == reverse_model(expected)
    keys = [sort_key(c) for c in expected]
    for probe in probes:
        i = bisect_left(keys, probe)
        assert scanner.seek(probe) == (expected[i] if i < len(expected) else None)
        before = [c for c in expected if c.row < probe[0]]
        first_of_last = None
        if before:
            last_row = before[-1].row
            first_of_last = next(c for c in before if c.row == last_row)
        assert scanner.seek_to_previous_row(probe[0]) == first_of_last
        # from a window that starts inside the probe's row: the previous row
        # of the next row is the probe's row, which starts before the window
        scanner.seek(probe)
        upto = [c for c in expected if c.row <= probe[0]]
        first_of_row = next((c for c in upto if c.row == upto[-1].row), None) if upto else None
        assert scanner.seek_to_previous_row(probe[0] + b"\x00") == first_of_row
    scanner.close()

    assert batch_to_cells(store.to_batch()) == expected
    active = len(model.active)
    snap = 0 if model.snapshot is None else len(model.snapshot)
    assert store.cell_count == active + snap
    assert batch_to_cells(store.snapshot_batch()) == [model.snapshot[k] for k in sorted(model.snapshot or {})]


def test_windows_forward_reverse_and_reseek_on_a_large_store():
    store = MemStore()
    expected = []
    for r in range(400):
        row = b"row%05d" % r
        for q in range(r % 7 + 1):
            for ts in (3, 1):
                expected.append(Cell(row, b"f", b"q%d" % q, ts, PUT, b"v%d-%d-%d" % (r, q, ts)))
    store.add_many(reversed(expected))  # insertion order does not matter
    store.snapshot()
    extra = [Cell(b"row%05d" % r, b"f", b"q0", 9, PUT, b"new") for r in range(0, 400, 3)]
    store.add_many(extra)
    expected = sorted(expected + extra, key=sort_key)

    metrics = ScanMetrics()
    scanner = store.scanner(metrics)
    scanner.seek((b"",))
    assert drain(scanner) == expected
    assert metrics.bytes_read_from_memstore >= sum(len(c.row) + len(c.value) for c in expected)
    assert reverse_walk(scanner) == reverse_model(expected)

    # reseek jumps forward inside and beyond the window
    keys = [sort_key(c) for c in expected]
    scanner.seek((b"row00010",))
    for target in [(b"row00010", b"f", b"q1"), (b"row00011",), (b"row00200", b"f", b"q3"), (b"row00399", b"f", b"z")]:
        i = bisect_left(keys, target)
        assert scanner.reseek(target) == (expected[i] if i < len(expected) else None)
    assert scanner.reseek((b"zzz",)) is None
    assert scanner.next() is None and scanner.peek() is None
    scanner.close()


def test_scanner_is_a_point_in_time_view():
    store = MemStore()
    store.add_many([Cell(b"r1", b"f", b"a", 1, PUT, b"old"), Cell(b"r3", b"f", b"a", 1, PUT, b"x")])
    before = store.scanner()
    store.add(Cell(b"r1", b"f", b"a", 1, PUT, b"new"))  # overwrite while a scanner is open
    store.add_many([Cell(b"r2", b"f", b"a", 1, PUT, b"y"), Cell(b"r2", b"f", b"b", 1, PUT, b"z")])
    store.snapshot()
    store.add(Cell(b"r0", b"f", b"a", 1, PUT, b"w"))
    store.clear_snapshot()

    before.seek((b"",))
    assert [(c.row, c.value) for c in drain(before)] == [(b"r1", b"old"), (b"r3", b"x")]
    assert before.seek_to_last_row().row == b"r3"
    assert before.seek_to_previous_row(b"r3").row == b"r1"
    before.close()

    after = store.scanner()
    after.seek((b"",))
    assert [(c.row, c.value) for c in drain(after)] == [(b"r0", b"w")]  # the snapshot was flushed away
    after.close()


def test_overwrite_while_open_then_close_keeps_last_write():
    store = MemStore()
    store.add(Cell(b"r", b"f", b"q", 5, PUT, b"v1"))
    s1 = store.scanner()
    store.add(Cell(b"r", b"f", b"q", 5, PUT, b"v2"))
    s2 = store.scanner()
    store.add(Cell(b"r", b"f", b"q", 5, PUT, b"v3"))
    assert s1.seek((b"r",)).value == b"v1"
    assert s2.seek((b"r",)).value == b"v2"
    s1.close()
    s2.close()
    s3 = store.scanner()
    assert s3.seek((b"r",)).value == b"v3"
    assert store.cell_count == 1
    s3.close()


def test_concurrent_writes_never_show_half_a_row():
    store = MemStore()
    stop = threading.Event()
    errors: list = []

    def writer():
        i = 0
        while not stop.is_set() and i < 3000:
            row = b"r%06d" % (i * 7919 % 3000)
            store.add_many([Cell(row, b"f", q, i, PUT, b"%d" % i) for q in (b"a", b"b", b"c")])
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(30):
            scanner = store.scanner()
            seen = drain_from_start(scanner)
            scanner.close()
            by_version: dict = {}
            for c in seen:
                by_version.setdefault((c.row, c.timestamp), []).append(c.qualifier)
            bad = [k for k, qs in by_version.items() if qs != [b"a", b"b", b"c"]]
            if bad:
                errors.append(bad)
    finally:
        stop.set()
        t.join()
    assert not errors


def drain_from_start(scanner) -> list:
    first = scanner.seek((b"",))
    return [] if first is None else drain(scanner)


def test_snapshot_lifecycle_and_sizes():
    store = MemStore()
    assert store.is_empty() and store.heap_size == 0
    store.add(Cell(b"row", b"fam", b"qual", 1, PUT, b"value"))
    assert store.heap_size == len(b"row" + b"fam" + b"qual" + b"value") + CELL_OVERHEAD
    snap = store.snapshot()
    assert snap.cell_count == 1 and store.heap_size == 0 and store.snapshot_heap_size > 0
    assert store.snapshot() is not None and store.snapshot().cell_count == 1  # not cleared: same snapshot
    store.add(Cell(b"row2", b"fam", b"qual", 1, PUT, b"v"))
    assert store.snapshot().cell_count == 1  # the active map is left alone
    assert [c.row for c in snap.cells()] == [b"row"]
    assert snap.to_batch().schema == CELL_SCHEMA
    assert [c.row for c in batch_to_cells(store.to_batch())] == [b"row", b"row2"]
    other = MemStore().snapshot()
    with pytest.raises(StorageError):
        store.clear_snapshot(other)
    store.clear_snapshot(snap)
    assert store.snapshot_heap_size == 0 and store.cell_count == 1
    assert store.snapshot_batch().num_rows == 0


def test_restore_snapshot_puts_cells_back_under_newer_writes():
    store = MemStore()
    store.add_many([Cell(b"a", b"f", b"q", 1, PUT, b"old"), Cell(b"b", b"f", b"q", 1, PUT, b"keep")])
    store.snapshot()
    store.add(Cell(b"a", b"f", b"q", 1, PUT, b"newer"))
    store.restore_snapshot()
    assert store.snapshot_heap_size == 0
    assert [(c.row, c.value) for c in batch_to_cells(store.to_batch())] == [(b"a", b"newer"), (b"b", b"keep")]
    assert store.cell_count == 2


def test_to_batch_range_and_families():
    store = MemStore()
    store.add_many(
        [Cell(r, f, b"q", 1, PUT, r + f) for r in (b"a", b"b", b"c", b"d") for f in (b"x", b"y")]
    )
    got = batch_to_cells(store.to_batch(b"b", b"d", families=[b"y"]))
    assert [(c.row, c.family) for c in got] == [(b"b", b"y"), (b"c", b"y")]
    assert store.to_batch(b"e").num_rows == 0
    assert MemStore().to_batch().schema == CELL_SCHEMA


@pytest.mark.parametrize(
    "bad, word",
    [
        ((b"", b"f", b"q", 1, PUT, b""), "row"),
        (("r", b"f", b"q", 1, PUT, b""), "row"),
        ((b"r", b"", b"q", 1, PUT, b""), "family"),
        ((b"r", b"f", None, 1, PUT, b""), "qualifier"),
        ((b"r", b"f", b"q", -1, PUT, b""), "timestamp"),
        ((b"r", b"f", b"q", 1, 5, b""), "type"),
        ((b"r", b"f", b"q", 1, PUT, "v"), "value"),
        ((b"r", b"f", b"q", 1, int(CellType.DELETE_FAMILY), b""), "qualifier"),
        ((b"r", b"f", b"q"), "expected"),
    ],
)
def test_invalid_cells_are_rejected_and_nothing_is_applied(bad, word):
    store = MemStore()
    with pytest.raises(InvalidArgument, match=word):
        store.add_many([Cell(b"ok", b"f", b"q", 1, PUT, b"v"), bad])
    assert store.cell_count == 0


def test_closed_scanner_raises_and_unpositioned_scanner_is_empty():
    store = MemStore()
    store.add(Cell(b"r", b"f", b"q", 1, PUT, b"v"))
    scanner = store.scanner()
    assert scanner.peek() is None and scanner.next() is None
    assert scanner.reseek((b"r",)) == Cell(b"r", b"f", b"q", 1, PUT, b"v")
    scanner.close()
    for call in (lambda: scanner.seek((b"",)), scanner.seek_to_last_row, lambda: scanner.reseek((b"",))):
        with pytest.raises(ScannerError):
            call()
    assert scanner.peek() is None


# -- read views ---------------------------------------------------------------------------
def test_a_view_sees_exactly_the_writes_at_or_below_its_read_point():
    store = MemStore()
    store.add_many([Cell(b"r1", b"f", b"a", 1, PUT, b"one"), Cell(b"r2", b"f", b"a", 1, PUT, b"two")], seq=5)
    view = store.view(5)
    assert view.read_point == 5 and not view.is_empty()
    # after the view: a new row, an overwrite of the same key, and a flush snapshot
    store.add_many([Cell(b"r0", b"f", b"a", 1, PUT, b"new")], seq=6)
    store.add_many([Cell(b"r2", b"f", b"a", 1, PUT, b"TWO")], seq=7)
    store.snapshot()
    store.add_many([Cell(b"r3", b"f", b"a", 1, PUT, b"late")], seq=8)
    expected = [Cell(b"r1", b"f", b"a", 1, PUT, b"one"), Cell(b"r2", b"f", b"a", 1, PUT, b"two")]
    assert batch_to_cells(view.to_batch()) == expected
    assert batch_to_cells(view.to_batch(b"r2", None)) == expected[1:]
    assert view.row_cells(b"r2") == expected[1:] and view.row_cells(b"r0") == []
    scanner = view.scanner()
    assert [scanner.seek((b"",)), scanner.next() and scanner.next()] == [expected[0], expected[1]]
    scanner.close()
    later = store.view(8)
    assert [c.value for c in batch_to_cells(later.to_batch())] == [b"new", b"one", b"TWO", b"late"]
    view.release()
    later.release()
    view.release()  # a second release does nothing


def test_the_arrow_run_is_kept_and_merged_with_later_writes_and_an_empty_view_costs_nothing():
    store = MemStore()
    empty = store.view()
    assert empty.is_empty() and empty.to_batch().num_rows == 0
    empty.release()
    store.add_many([Cell(b"r%d" % i, b"f", b"a", 1, PUT, b"v") for i in range(50)])
    view = store.view()
    first = view.to_batch(b"r1", b"r2")
    run = store._active.arrow
    assert run is not None and view.to_batch().num_rows == 50 and store._active.arrow is run
    store.add(Cell(b"r99", b"f", b"a", 1, PUT, b"v"))
    # a write only queues its key; the view still reads its own point
    assert store._active.arrow is run and store._active.pending == [(b"r99", b"f", b"a", -1, -PUT)]
    assert view.to_batch().num_rows == 50 and first.num_rows == 11
    view.release()
    later = store.view()
    assert later.to_batch().num_rows == 51  # the run brought up to date by a merge
    assert store._active.arrow is not run and store._active.pending == []
    later.release()


# -- the incremental Arrow run equals a full rebuild ------------------------------------------
row_bounds = st.sampled_from([b"", b"b", b"bb", b"c", b"e", b"e\x00", b"z"])
view_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(cells, min_size=1, max_size=4)),
        # writes then a read of every map: the kept runs are merged with just those writes
        st.tuples(st.just("add+update"), st.lists(cells, min_size=1, max_size=4)),
        st.tuples(st.just("snapshot"), st.none()),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("restore"), st.none()),
        st.tuples(st.just("view"), st.none()),
        st.tuples(st.just("read"), st.tuples(st.integers(0, 5), row_bounds, st.one_of(st.none(), row_bounds))),
        st.tuples(st.just("release"), st.integers(0, 5)),
    ),
    min_size=8,
    max_size=40,
)


def _scanned(view, start: bytes, stop: bytes | None) -> list:
    """The view's cells of ``[start, stop)`` read through its cell scanner (no Arrow run)."""
    scanner = view.scanner()
    out = []
    cell = scanner.seek((start,))
    while cell is not None and (stop is None or cell.row < stop):
        out.append(cell)
        scanner.next()
        cell = scanner.peek()
    scanner.close()
    return out


def _check_runs(store: MemStore) -> None:
    """Every segment's kept run (brought up to date) equals a full rebuild from its map."""
    from storage.memstore.runs import _arrow_run, _full_run

    for seg in (store._active, store._snapshot):
        if seg is None or not seg.cells:
            continue
        run, full = _arrow_run(seg, store._lock), _full_run(seg)
        assert run.table.equals(full.table)
        assert run.seqs.tolist() == full.seqs.tolist() and run.max_seq == full.max_seq


@pytest.mark.parametrize("share", [4, 0])  # 0: never rebuild, every update is a merge
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=view_ops)
def test_incrementally_updated_runs_and_views_read_what_a_full_rebuild_gives(monkeypatch, share, script):
    import storage.memstore.runs as memstore_module

    monkeypatch.setattr(memstore_module, "REBUILD_SHARE", share)
    store = MemStore()
    snap = None
    views = []
    for op, arg in script:
        if op == "add":
            store.add_many(arg)
        elif op == "add+update":
            store.add_many(arg)
            _check_runs(store)
        elif op == "snapshot":
            snap = store.snapshot()
        elif op == "clear" and snap is not None:
            store.clear_snapshot(snap)
            snap = None
        elif op == "restore":
            store.restore_snapshot()
            snap = None
        elif op == "view":
            views.append(store.view())
        elif op == "read" and views:
            i, start, stop = arg
            view = views[i % len(views)]
            got = batch_to_cells(view.to_batch(start, stop))
            assert got == _scanned(view, start, stop)
            _check_runs(store)
        elif op == "release" and views:
            views.pop(arg % len(views)).release()
    _check_runs(store)
    for view in views:
        assert batch_to_cells(view.to_batch()) == _scanned(view, b"", None)
        view.release()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 3)), min_size=1, max_size=200), min_size=1, max_size=12))
def test_bulk_writes_keep_the_map_sorted_and_sized(groups):
    """Writes of many cells (merged into the map at once) against the same writes one cell at a time."""
    from storage.memstore.write_buffer import _BULK_CELLS

    bulk, single = MemStore(), MemStore()
    for g, group in enumerate(groups):
        cells = [Cell(b"r%04d" % r, b"f", b"q%d" % q, 10, 4, b"v%d" % (g * 1000 + i)) for i, (r, q) in enumerate(group)]
        bulk.add_many(cells, trusted=True)
        for cell in cells:
            single.add_many([cell], trusted=True)
        assert len(cells) < _BULK_CELLS or bulk.heap_size == single.heap_size
    assert bulk.range_cells() == single.range_cells()
    seg = bulk._active.cells
    assert list(seg.keys()) == sorted(seg.keys()) and len(seg._list) == len(seg)
    seg._list._check()
    assert bulk.heap_size == single.heap_size
