"""The memstore's batch writes put their keys into the sorted key list only when a
reader needs order (``Segment.ordered``): every read, snapshot and restore sees the
same cells, in the same order, as a plain model of the writes; and a WAL roll
(at every flush) still leaves a write made after it durable through a power cut."""

from __future__ import annotations

import shutil

from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage.cells import Cell, CellType
from storage.memstore.write_buffer import _BULK_CELLS, MemStore
from storage.vfs.faultfs import FaultFileSystem

PUT = int(CellType.PUT)

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("bulk"), st.lists(st.integers(0, 400), min_size=_BULK_CELLS, max_size=120)),
        st.tuples(st.just("few"), st.lists(st.integers(0, 400), min_size=1, max_size=4)),
        st.tuples(st.just("range"), st.tuples(st.integers(0, 400), st.integers(0, 400))),
        st.tuples(st.just("scan"), st.integers(0, 400)),
        st.tuples(st.just("back"), st.integers(0, 400)),
        st.tuples(st.just("view"), st.just(0)),
        st.tuples(st.just("snapshot"), st.just(0)),
        st.tuples(st.just("clear"), st.just(0)),
        st.tuples(st.just("restore"), st.just(0)),
    ),
    min_size=1,
    max_size=25,
)


def _row(i: int) -> bytes:
    return b"r%04d" % i


def _expected(model: dict, start: bytes = b"", stop: bytes | None = None) -> list:
    return [model[k] for k in sorted(model) if k[0] >= start and (stop is None or k[0] < stop)]


def _check_segments(store: MemStore) -> None:
    """Once ordered, each map's sorted key list holds exactly its dict's keys, in order."""
    with store._lock:
        for seg in (store._active, store._snapshot):
            if seg is None:
                continue
            cells = seg.ordered()
            assert not seg.unsorted
            assert list(cells._list) == sorted(dict.keys(cells))
            cells._list._check()


@settings(max_examples=80, deadline=None)
@given(_ops)
def test_reads_between_batch_writes_see_the_model(ops):
    store = MemStore()
    model: dict = {}  # sort key -> cell: what every read must show
    n = 0
    for op, arg in ops:
        if op in ("bulk", "few"):
            cells = []
            for r in arg:
                n += 1
                cells.append(Cell(_row(r), b"f", b"q%d" % (r % 3), 10, PUT, b"v%d" % n))
            store.add_many(cells, trusted=True)
            for c in cells:
                model[(c[0], c[1], c[2], -c[3], -c[4])] = c
        elif op == "range":
            lo, hi = sorted(arg)
            assert store.range_cells(_row(lo), _row(hi)) == _expected(model, _row(lo), _row(hi))
        elif op == "scan":  # the cell scanner forward from a row, in growing windows
            scanner = store.scanner()
            got, cell = [], scanner.seek((_row(arg),))
            while cell is not None:
                got.append(cell)
                scanner.next()
                cell = scanner.peek()
            scanner.close()
            assert got == _expected(model, _row(arg))
        elif op == "back":  # the last row before a row: the reverse windows
            scanner = store.scanner()
            cell = scanner.seek_to_previous_row(_row(arg))
            scanner.close()
            before = _expected(model, b"", _row(arg))
            want = [c for c in before if c[0] == before[-1][0]][0] if before else None
            assert cell == want
        elif op == "view":  # the Arrow run of each map, built or merged
            view = store.view()
            rows = view.to_batch().num_rows
            view.release()
            assert rows == len(model)
        elif op == "snapshot":
            snap = store.snapshot()
            assert snap.cell_count == len(list(snap.cells()))
            assert [c for c in snap.cells()] == sorted(snap.cells(), key=lambda c: (c[0], c[1], c[2], -c[3], -c[4]))
        elif op == "clear" and store._snapshot is not None:
            # a flush committed the snapshot: its cells leave the memstore (and the model)
            for c in store._snapshot.cells.values():
                key = (c[0], c[1], c[2], -c[3], -c[4])
                if store._active.cells.get(key) is None:
                    model.pop(key, None)
            store.clear_snapshot()
        elif op == "restore":
            store.restore_snapshot()
    assert store.range_cells() == _expected(model)
    _check_segments(store)


def test_a_flush_sorts_what_batch_writes_left_unsorted():
    """Many batch writes with no read between them: the snapshot is in cell order."""
    store = MemStore()
    keys = [(i * 7919) % 5000 for i in range(5000)]
    for start in range(0, len(keys), 100):
        store.add_many([Cell(_row(r), b"f", b"q", 1, PUT, b"x") for r in keys[start : start + 100]], trusted=True)
    assert len(store._active.unsorted) == 50  # nothing read: every batch's keys wait
    store.snapshot()
    assert not store._snapshot.unsorted
    rows = [c[0] for c in store._snapshot_cells()]
    assert rows == [_row(i) for i in range(5000)]


def test_a_write_after_a_wal_roll_survives_a_power_cut(tmp_path):
    """A flush rolls the WAL to a file made by its first record; a write acknowledged after it
    (synced on return) survives a power cut: the new file's directory entry is synced when it
    is made, not when the WAL rolls."""
    root = str(tmp_path / "t")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {}}, settings={"wal_sync": "each"})
    fs = FaultFileSystem(root)
    conn = storage.Connection(root, filesystem=fs)
    table = conn.table("t")
    table.put(b"a", {b"cf:q": b"1"})
    table.flush()  # rolls the WAL
    table.put(b"b", {b"cf:q": b"2"})
    fs.injector.power_cut()
    # what the disk holds now, opened by another process would: a copy (this connection keeps
    # its table lock, and its own close would write again)
    shutil.copytree(root, str(tmp_path / "after"))
    conn.close()
    with storage.connect(str(tmp_path / "after")) as plain:
        assert dict(plain.table("t").scan()) == {b"a": {b"cf:q": b"1"}, b"b": {b"cf:q": b"2"}}
