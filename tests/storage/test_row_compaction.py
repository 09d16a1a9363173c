"""Compaction from rows: dense files with nothing to resolve are merged as rows
and written as dense blocks; everything else is compacted from cells.  Either
way the compacted files hold exactly the cells compaction from cells gives."""

from __future__ import annotations

import itertools
import random
import struct
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage.region import compaction as region_compaction
from storage.region import compaction_rows
from storage.storefile.format import BlockLayout

FAMILY = {"block_size": 4096, "max_versions": 2}


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _files(table):
    """Every store file of the table: (region start, its cells in file order, its info)."""
    out = []
    for region in table._regions:
        for f in region.stores["f"].files:
            batches = list(f.reader.scan_batches())
            cells = pa.Table.from_batches(batches).to_pylist() if batches else []
            out.append((region.info.start, [tuple(c.values()) for c in cells], f.reader.info))
    return out


def _info(info):
    return (info.cell_count, info.row_count, info.delete_count, info.repeated_columns,
            info.min_timestamp, info.max_timestamp, info.first_cell, info.last_cell)


def _layouts(table):
    return Counter(
        BlockLayout(layout).name
        for region in table._regions for f in region.stores["f"].files for layout in f.reader._index.layouts
    )


def _apply(table, ops):
    rng = random.Random(len(ops))
    for op in ops:
        kind = op[0]
        if kind == "puts":
            _, keys, quals, ts = op
            with table.batch(timestamp=ts) as b:
                for k in keys:
                    b.put(_key(k), {b"f:" + q: b"v%d" % rng.randrange(9) * rng.randrange(1, 4) for q in quals})
        elif kind == "delete":
            table.delete(_key(op[1]), columns=[b"f:q1"], timestamp=op[2])
        elif kind == "flush":
            table.flush()
        elif kind == "split":
            if _key(op[1]) not in [r.start for r in table.region_infos()]:
                table.split(_key(op[1]))
        else:
            table.compact(major=kind == "major")


def _twins(root, ops, name):
    """The same ops on two tables; in the second, compaction always goes through cells."""
    conn = storage.connect(root)
    tables = []
    for suffix in ("rows", "cells"):
        table = conn.create_table(f"{name}_{suffix}", {"f": dict(FAMILY)},
                                  settings={"wal_sync": "none", "compaction_threshold": 2})
        tables.append(table)
    _apply(tables[0], ops)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(region_compaction, "chunk_rows", lambda *a: None)
        _apply(tables[1], ops)
    return conn, tables


def _counting(used: Counter):
    """``compaction_rows.chunk_rows`` counting in ``used`` the chunks compacted as rows and from cells."""
    chunk_rows = compaction_rows.chunk_rows

    def counted(*args):
        out = chunk_rows(*args)
        used["rows" if out is not None else "cells"] += 1
        return out

    return counted


def test_appended_dense_files_are_compacted_as_rows_into_the_same_cells(tmp_path):
    used = Counter()
    counted = _counting(used)

    ops = []
    for part in range(4):  # four flushes of rows of their own, interleaved by key
        ops += [("puts", list(range(part, 4000, 4)), [b"q1", b"q2"], 10 + part), ("flush",)]
    ops += [("major",)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(region_compaction, "chunk_rows", counted)
        conn, (rows, cells) = _twins(str(tmp_path / "root"), ops, "t")
    try:
        assert used["rows"] > 0 and used["cells"] == 0
        got, want = _files(rows), _files(cells)
        assert [(s, c) for s, c, _ in got] == [(s, c) for s, c, _ in want]
        assert [_info(i) for _, _, i in got] == [_info(i) for _, _, i in want]
        assert len(got) == 1 and len(got[0][1]) == 8000
        assert set(_layouts(rows)) == {"DENSE"}
        assert not got[0][2].needs_resolution
        # and it reads back as rows
        assert list(rows.scan(columns=[b"f:q2"]))[:2] == list(cells.scan(columns=[b"f:q2"]))[:2]
    finally:
        conn.close()


@st.composite
def _ops(draw):
    """Flushes of puts (new rows or rows already written, so versions), delete
    markers now and then, minor and major compactions, a split."""
    ops = []
    for _ in range(draw(st.integers(2, 5))):
        start = draw(st.integers(0, 300))
        step = draw(st.sampled_from([1, 3, 7]))
        count = draw(st.integers(8, 60))
        quals = draw(st.lists(st.sampled_from([b"", b"q1", b"q2", b"q3"]), min_size=1, max_size=3, unique=True))
        ops.append(("puts", list(range(start, start + step * count, step)), quals, draw(st.integers(1, 5))))
        if draw(st.integers(0, 4)) == 0:
            ops.append(("delete", draw(st.integers(0, 400)), draw(st.integers(1, 5))))
        ops.append(("flush",))
        ops += draw(st.sampled_from([[], [], [("minor",)], [("major",)], [("split", draw(st.integers(1, 400)))]]))
    ops.append(draw(st.sampled_from([("major",), ("minor",)])))
    return ops


_names = itertools.count()


def test_compaction_from_rows_gives_the_cells_of_compaction_from_cells(tmp_path):
    root = str(tmp_path / "root")
    used = Counter()
    counted = _counting(used)

    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(ops=_ops())
    def check(ops):
        conn, (rows, cells) = _twins(root, ops, f"t{next(_names)}")
        try:
            got, want = _files(rows), _files(cells)
            assert [(s, c) for s, c, _ in got] == [(s, c) for s, c, _ in want]
            assert [_info(i) for _, _, i in got] == [_info(i) for _, _, i in want]
        finally:
            conn.close()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(region_compaction, "chunk_rows", counted)
        check()
    # overlapping rows, versions and markers go through cells; appended rows do not
    assert used["rows"] > 10 and used["cells"] > 10, used


# -- major compaction to one version: shared rows and markers resolved as rows --------
FAMILY_ONE = {"block_size": 4096, "max_versions": 1}


@st.composite
def _update_ops(draw):
    """Flushes of puts over overlapping key ranges (updates) and markers of every
    kind (row, family, column, version), ending with a major compaction."""
    ops = []
    for _ in range(draw(st.integers(2, 5))):
        start = draw(st.integers(0, 100))
        step = draw(st.sampled_from([1, 2, 5]))
        count = draw(st.integers(8, 80))
        quals = draw(st.lists(st.sampled_from([b"", b"q1", b"q2", b"q3"]), min_size=1, max_size=3, unique=True))
        ops.append(("puts", list(range(start, start + step * count, step)), quals, draw(st.integers(1, 6))))
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["delete", "row", "family", "version"]))
            ops.append((f"mark_{kind}", draw(st.integers(0, 200)), draw(st.integers(1, 6))))
        ops.append(("flush",))
        ops += draw(st.sampled_from([[], [], [("minor",)], [("split", draw(st.integers(1, 200)))]]))
    ops.append(("major",))
    return ops


def _apply_updates(table, ops):
    for op in ops:
        kind = op[0]
        if kind == "mark_delete":
            table.delete(_key(op[1]), columns=[b"f:q1"], timestamp=op[2])
        elif kind == "mark_row":
            table.delete(_key(op[1]), timestamp=op[2])
        elif kind == "mark_family":
            table.delete(_key(op[1]), columns=[b"f"], timestamp=op[2])
        elif kind == "mark_version":
            table.delete_version(_key(op[1]), b"f:q2", op[2])
        else:
            _apply(table, [op])


def test_major_compaction_to_one_version_resolves_rows_into_the_cells_of_compaction_from_cells(tmp_path):
    root = str(tmp_path / "root")
    used = Counter()
    resolve = region_compaction.compaction_rows

    def counted(*args):
        out = resolve(*args)
        used["resolved" if out is not None else "cells"] += 1
        return out

    @settings(max_examples=25, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(ops=_update_ops())
    def check(ops):
        conn = storage.connect(root)
        name = f"u{next(_names)}"
        try:
            rows = conn.create_table(f"{name}_rows", {"f": dict(FAMILY_ONE)},
                                     settings={"wal_sync": "none", "compaction_threshold": 2})
            cells = conn.create_table(f"{name}_cells", {"f": dict(FAMILY_ONE)},
                                      settings={"wal_sync": "none", "compaction_threshold": 2})
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(region_compaction, "compaction_rows", counted)
                _apply_updates(rows, ops)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(region_compaction, "chunk_rows", lambda *a: None)
                mp.setattr(region_compaction, "compaction_rows", lambda *a: None)
                _apply_updates(cells, ops)
            got, want = _files(rows), _files(cells)
            assert [(s, c) for s, c, _ in got] == [(s, c) for s, c, _ in want]
            assert [_info(i) for _, _, i in got] == [_info(i) for _, _, i in want]
            assert list(rows.scan()) == list(cells.scan())
        finally:
            conn.close()

    check()
    assert used["resolved"] > 10, used


def test_a_quarter_rewritten_and_a_quarter_deleted_compact_as_rows_into_dense_blocks(tmp_path):
    with storage.connect(str(tmp_path / "root")) as conn:
        table = conn.create_table("t", {"f": dict(FAMILY_ONE)}, settings={"wal_sync": "none"})
        _apply(table, [("puts", list(range(2000)), [b"q1", b"q2"], 1), ("flush",),
                       ("puts", list(range(0, 2000, 4)), [b"q1"], 2)])
        for i in range(1, 2000, 4):
            table.delete(_key(i), timestamp=3)
        table.flush()
        before = list(table.scan(include_timestamp=True))
        table.compact(major=True)
        assert list(table.scan(include_timestamp=True)) == before
        assert len(before) == 1500
        assert set(_layouts(table)) == {"DENSE"}
        (f,) = table._regions[0].stores["f"].files
        assert not f.reader.info.needs_resolution and f.reader.info.delete_count == 0
