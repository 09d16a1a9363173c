"""The row-run merge: its kernel against a sort of Python bytes, and rows scans
that take it (memstore rows merged into dense store file rows) against the
cell-at-a-time scan of the same table, embedded and through the connector."""

from __future__ import annotations

import itertools
import random
import struct
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage import ScanMetrics
from connector.input_format import TableInputFormat
from connector.options import to_string_binary
from storage.read import batch_scan
from storage.columns import parse_column
from storage.errors import InvalidArgument
from storage.kernels.row_merge import keys_disjoint, merge_row_runs, order_keys, row_order
from storage.read import family_join
from storage.read.family_join import FamilyJoin
from storage.read.row_scan import CELLS, RowMerge


# -- the kernel ------------------------------------------------------------------------
def _rows(keys, tag=b""):
    keys = list(keys)
    return pa.table({
        "key": pa.array(keys, pa.binary()),
        "f:q": pa.array([tag + k for k in keys], pa.binary()),
        "f:q@ts": pa.array(list(range(len(keys))), pa.int64()),
    })


def _split(keys, n, rng):
    """Sorted distinct ``keys`` dealt at random into ``n`` sorted runs."""
    runs = [[] for _ in range(n)]
    for k in sorted(set(keys)):
        runs[rng.randrange(n)].append(k)
    return runs


KEY_STYLES = {
    # one width that NumPy reads as integers, other fixed widths, and mixed widths
    "u4": st.binary(min_size=4, max_size=4),
    "u1": st.binary(min_size=1, max_size=1),
    "w3": st.binary(min_size=3, max_size=3),
    "w12": st.binary(min_size=12, max_size=12),
    # prefixes of each other and trailing 0x00 bytes: b"a" < b"a\x00" < b"a\x00\x01"
    "prefixes": st.lists(st.sampled_from([b"\x00", b"\x01", b"a", b"\xff"]), min_size=0, max_size=5).map(b"".join),
    "short": st.binary(min_size=0, max_size=7),
    "long": st.binary(min_size=0, max_size=300),
}


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(data=st.data(), style=st.sampled_from(sorted(KEY_STYLES)))
def test_order_keys_sort_like_the_bytes(data, style):
    keys = data.draw(st.lists(KEY_STYLES[style], min_size=1, max_size=40))
    cut = data.draw(st.integers(0, len(keys)))
    encoded = order_keys([pa.array(keys[:cut], pa.binary()), pa.array(keys[cut:], pa.binary())])
    joined = np.concatenate(encoded)
    order = np.argsort(joined, kind="stable")
    assert [keys[i] for i in order] == sorted(keys)
    for i in range(len(keys) - 1):  # equal exactly when the bytes are equal
        assert (joined[i] == joined[i + 1]) == (keys[i] == keys[i + 1])


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(data=st.data(), style=st.sampled_from(sorted(KEY_STYLES)), n=st.integers(1, 4), descending=st.booleans())
def test_merge_row_runs_interleaves_distinct_keys_and_refuses_shared_ones(data, style, n, descending):
    keys = data.draw(st.lists(KEY_STYLES[style], min_size=0, max_size=60))
    rng = random.Random(data.draw(st.integers(0, 1000)))
    runs = _split(keys, n, rng)
    tables = [_rows(run, b"%d:" % i) for i, run in enumerate(runs)]
    merged = merge_row_runs(tables, descending=descending)
    source = {k: i for i, run in enumerate(runs) for k in run}
    want = sorted(source, reverse=descending)
    assert merged.column("key").to_pylist() == want
    assert merged.column("f:q").to_pylist() == [b"%d:" % source[k] + k for k in want]
    assert merged.schema == tables[0].schema
    assert keys_disjoint([t.column("key") for t in tables])
    shared = [run for run in runs if run]
    if len(shared) >= 2:
        # a key of one run also in another: its cells must be merged, not its rows
        k = rng.choice(shared[0])
        other = sorted(set(shared[1]) | {k})
        clash = [_rows(shared[0]), _rows(other)]
        assert merge_row_runs(clash) is None
        assert not keys_disjoint([t.column("key") for t in clash])


def test_merge_row_runs_edge_cases():
    a, b = _rows([b"a", b"c"]), _rows([b"b"])
    assert merge_row_runs([a]) is a
    assert merge_row_runs([a, _rows([])]) is a
    assert merge_row_runs([_rows([]), _rows([])]).num_rows == 0
    assert merge_row_runs([a], descending=True).column("key").to_pylist() == [b"c", b"a"]
    assert merge_row_runs([b, a]).column("key").to_pylist() == [b"a", b"b", b"c"]
    # runs of their own key ranges come back as slices, in key order
    tail = merge_row_runs([_rows([b"x", b"y"]), a])
    assert tail.column("key").to_pylist() == [b"a", b"c", b"x", b"y"]
    # every key empty but one: the empty key sorts first
    assert merge_row_runs([_rows([b""]), _rows([b"\x00"])]).column("key").to_pylist() == [b"", b"\x00"]
    assert merge_row_runs([_rows([b""]), _rows([b""])]) is None
    # keys wider than the encoded limit are placed by an Arrow sort
    wide = [bytes([i]) * 2000 for i in (3, 1, 2)]
    got = merge_row_runs([_rows([wide[0]]), _rows(sorted(wide[1:]))])
    assert got.column("key").to_pylist() == sorted(wide)
    assert merge_row_runs([_rows([wide[0]]), _rows([wide[0]])]) is None
    assert order_keys([pa.array(wide, pa.binary())]) is None
    # record batches are accepted as runs
    assert merge_row_runs([b.to_batches()[0], a]).num_rows == 3
    # the order alone, over arrays laid end to end (empty ones included), then applied
    keys = [pa.array([], pa.binary()), pa.array([b"b", b"d"]), pa.array([b"a", b"c"])]
    assert row_order(keys).tolist() == [2, 0, 3, 1]
    assert row_order(keys[:2]).tolist() == [0, 1]
    assert row_order([pa.array([b"a"]), pa.array([b"a"])]) is None
    runs = [_rows([b"b", b"d"]), _rows([b"a", b"c"])]
    assert merge_row_runs(runs, order=row_order(keys[1:])).column("key").to_pylist() == [b"a", b"b", b"c", b"d"]


def test_merge_row_runs_rejects_bad_runs():
    with pytest.raises(InvalidArgument, match="runs\\[1\\] must be a pyarrow"):
        merge_row_runs([_rows([b"a"]), [b"b"]])
    with pytest.raises(InvalidArgument, match="must start with a binary column 'key'"):
        merge_row_runs([pa.table({"k": pa.array([b"a"])})])
    with pytest.raises(InvalidArgument, match="runs\\[1\\] has the columns"):
        merge_row_runs([_rows([b"a"]), _rows([b"b"]).drop_columns(["f:q@ts"])])


# -- rows scans through the row merge, against the cell path ------------------------------
FAMILY = {"block_size": 1024, "max_versions": 3}
QUALIFIERS = [b"", b"q1", b"q2", b"q3"]
VALUES = [b"v0", b"v1", b"x1", b"v22"]


def _key_pool(style: str) -> list[bytes]:
    if style == "fixed":
        return [struct.pack(">I", i * 7919) for i in range(60)]
    if style == "three":
        return [struct.pack(">I", i * 7919)[1:] for i in range(60)]
    # variable width: prefixes of each other, trailing 0x00, a few wide keys
    pool = {b"k", b"k\x00", b"k\x00\x00", b"k\x00\x01", b"k\x01", b"ka", b"kab", b"l" * 20, b"l" * 21}
    pool |= {b"k%d" % i for i in range(40)} | {b"k%d\x00" % i for i in range(0, 40, 3)}
    return sorted(pool)


@st.composite
def _puts(draw, pool, min_rows=8):
    rows = draw(st.lists(st.sampled_from(pool), min_size=min_rows, max_size=40, unique=True))
    quals = draw(st.lists(st.sampled_from(QUALIFIERS), min_size=1, max_size=3, unique=True))
    return ("puts", rows, quals, draw(st.integers(0, 3)))


@st.composite
def _table_ops(draw):
    """Store files (puts, now and then a second version or a delete marker, then a
    flush; sometimes a compaction or a split), then what stays in the memstore."""
    style = draw(st.sampled_from(["fixed", "three", "var"]))
    pool = _key_pool(style)
    ops = []
    for _ in range(draw(st.integers(0, 3))):
        ops.append(draw(_puts(pool)))
        ops += draw(st.lists(st.tuples(st.sampled_from(["delete", "version"]), st.sampled_from(pool)), max_size=1))
        ops.append(("flush",))
        ops += draw(st.sampled_from([[], [], [("major",)], [("split", draw(st.sampled_from(pool)))]]))
    memstore = draw(st.sampled_from(["new", "new", "overlap", "overlap", "marker", "none"]))
    if memstore != "none":
        op = draw(_puts(pool, min_rows=1))
        ops.append((*op, "new" if memstore == "new" else "any"))
        if memstore == "marker":
            kinds = st.sampled_from(["delete", "delete_row", "delete_family", "delete_version", "version"])
            ops += draw(st.lists(st.tuples(kinds, st.sampled_from(pool)), min_size=1, max_size=4))
    if draw(st.booleans()):
        ops.append(("flush",))  # the memstore's rows and markers in a second (or later) file
    return style, ops


SCAN_COLUMNS = [[b"f:q1"], [b"f:q1", b"f:q2"], [b"f:", b"f:q3"], [b"f:q2", b"f:q1", b"f:"], [b"f"], [b"f:q1", b"g:z"]]
SCAN_FILTERS = [
    None, None,
    "SingleColumnValueFilter ('f', 'q1', =, 'binary:v1')",
    "SingleColumnValueFilter ('f', 'q2', =, 'binary:v1', true, true)",
    "ValueFilter (=, 'substring:1')",
    "PrefixFilter ('k')",
    "ColumnValueFilter ('f', 'q1', =, 'binary:v1')",
    "SingleColumnValueExcludeFilter ('f', 'q2', =, 'substring:1')",
    "RowFilter (<, 'binary:k2') OR ValueFilter (=, 'binary:v0')",
    "InclusiveStopFilter ('k3') AND SingleColumnValueFilter ('f', 'q1', !=, 'binary:x1')",
    "ColumnPrefixFilter ('q1')",
    "QualifierFilter (>=, 'binary:q2') AND SingleColumnValueFilter ('f', 'q1', =, 'binary:v1')",
    "ColumnRangeFilter ('q1', true, 'q2', false) OR PrefixFilter ('k1')",
    "MultipleColumnPrefixFilter ('q2', 'q3') AND ValueFilter (!=, 'binary:v22')",
    "FamilyFilter (=, 'binary:f')",
    "ColumnPrefixFilter ('q3') OR QualifierFilter (=, 'binary:')",
]


@st.composite
def _scan_options(draw, pool, columns=SCAN_COLUMNS, filters=SCAN_FILTERS):
    bounds = sorted(draw(st.lists(st.sampled_from(pool), min_size=2, max_size=2)))
    start = bounds[0] if draw(st.booleans()) else None
    stop = bounds[1] if draw(st.booleans()) and bounds[1] != bounds[0] else None
    reverse = draw(st.booleans())
    if reverse:
        start, stop = (stop, start) if stop is not None and start is not None else (None, None)
    return {
        "row_start": start,
        "row_stop": stop,
        "columns": draw(st.sampled_from(columns)),
        "filter": draw(st.sampled_from(filters)),
        "reverse": reverse,
        "limit": draw(st.sampled_from([None, None, 1, 7])),
        "include_timestamp": draw(st.booleans()),
        "max_versions": draw(st.sampled_from([1, 1, 3])),
    }


def _apply(table, ops, rng, second: bytes | None = None) -> None:
    """Apply generated ops; ``second``: a second family, given the same columns of about
    two rows in three of each put (so that rows have one family, the other or both)."""
    for op in ops:
        kind = op[0]
        if kind == "puts":
            _, rows, quals, ts_pick, *tail = op
            if tail and tail[0] == "new":
                # rows the table does not hold yet (else the scan falls back, which is checked too)
                held = {k for k, _ in table.scan(columns=[b"f"])}
                rows = [r for r in rows if r not in held]
            with table.batch(timestamp=None if ts_pick == 0 else 100 + ts_pick) as b:
                for row in rows:
                    data = {b"f:" + q: rng.choice(VALUES) for q in quals}
                    if second is not None and rng.random() < 0.67:
                        data.update({second + b":" + q: rng.choice(VALUES) for q in quals})
                        if rng.random() < 0.3:  # the row in the second family alone
                            data = {c: v for c, v in data.items() if not c.startswith(b"f:")}
                    b.put(row, data)
        elif kind == "flush":
            table.flush()
        elif kind == "delete":
            table.delete(op[1], columns=[b"f:q1"])
        elif kind == "delete_row":
            table.delete(op[1])
        elif kind == "delete_family":
            table.delete(op[1], columns=[b"f"], timestamp=102)  # versions at or before 102
        elif kind == "delete_version":
            table.delete_version(op[1], b"f:q2", 101)
        elif kind == "version":
            table.put(op[1], {b"f:q1": b"v1"}, timestamp=50)  # an older version of the column
            table.put(op[1], {b"f:q1": b"x1"}, timestamp=60)
        elif kind == "split":
            if op[1] not in [r.start for r in table.region_infos()] and op[1]:
                table.split(op[1])
        else:
            table.compact(major=True)


def _want(table, opts) -> list[tuple]:
    """The cell-at-a-time path's rows, shaped as rows output records."""
    pairs = table.scan(path="cell", **opts)
    specs = [parse_column(c) for c in opts["columns"]]
    out = []
    for row, data in pairs:
        record = {}
        for spec in specs:
            if spec.qualifier is None:
                items = {c[len(spec.family) + 1:]: v for c, v in data.items() if c.startswith(spec.family + b":")}
                if items:
                    record[spec.name] = sorted((q, v[0] if opts["include_timestamp"] else v) for q, v in items.items())
                continue
            value = data.get(spec.family + b":" + spec.qualifier)
            if value is None:
                continue
            if opts["include_timestamp"]:
                record[spec.name], record[spec.name + "@ts"] = value
            else:
                record[spec.name] = value
        if record:
            out.append((row, record))
    return out


def _got(batches) -> list[tuple]:
    out = []
    for batch in batches:
        for rec in batch.to_pylist():
            key = rec.pop("key")
            record = {k: (sorted(v) if isinstance(v, list) else v) for k, v in rec.items() if v is not None}
            out.append((key, record))
    return out


def _connector_rows(root, name, opts) -> list[tuple]:
    conf = {
        "regionscan.root": root,
        "hbase.mapreduce.inputtable": name,
        "hbase.mapreduce.scan.columns": " ".join(c.decode() for c in opts["columns"]),
        "regionscan.scan.include.timestamp": str(opts["include_timestamp"]).lower(),
        "regionscan.pin.register": "false",
        "hbase.mapreduce.scan.maxversions": str(opts.get("max_versions", 1)),
    }
    if opts["row_start"]:
        conf["hbase.mapreduce.scan.row.start"] = to_string_binary(opts["row_start"])
    if opts["row_stop"]:
        conf["hbase.mapreduce.scan.row.stop"] = to_string_binary(opts["row_stop"])
    if opts["filter"]:
        conf["regionscan.scan.filter"] = opts["filter"]
    fmt = TableInputFormat(conf)
    batches = []
    for split in fmt.get_splits():
        with fmt.create_batch_reader(split) as reader:
            batches.extend(reader)
    return _got(batches)


_names = itertools.count()

TABLE_CASES = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
"""The generated tables' hypothesis settings: few examples, each a whole table."""


def _drawn(table_ops, data, scan_options) -> tuple[list, list]:
    """A generated table's ops and three scans of its keys drawn by ``scan_options``."""
    style, ops = table_ops
    return ops, data.draw(st.lists(scan_options(_key_pool(style)), min_size=3, max_size=3))


def test_rows_scans_through_the_row_merge_match_the_cell_path(tmp_path):
    root = str(tmp_path / "root")
    taken = Counter()
    chunk = RowMerge.chunk
    resolved = RowMerge._resolved

    def counted(self, lo, hi, reverse):
        out = chunk(self, lo, hi, reverse)
        taken["cells" if out is CELLS else "rows"] += 1
        return out

    def counted_resolved(self, *args):
        out = resolved(self, *args)
        taken["cells" if out is CELLS else "resolved"] += 1
        return out

    @TABLE_CASES
    @given(table_ops=_table_ops(), data=st.data())
    def check(table_ops, data):
        ops, scans = _drawn(table_ops, data, _scan_options)
        name = f"m{next(_names)}"
        conn = storage.connect(root)
        try:
            table = conn.create_table(name, {"f": dict(FAMILY), "g": {}}, settings={"wal_sync": "none"})
            _apply(table, ops, random.Random(len(ops)))
            for opts in scans:
                want = _want(table, opts)
                for batch_size in (3, 1000):
                    got = _got(table.scan_batches(output="rows", batch_size=batch_size, **opts))
                    assert got == want, f"scan_batches rows, batch_size {batch_size}"
        finally:
            conn.close()
        # the connector's partition read: the pinned files and the WAL decoded into Arrow
        conn = storage.connect(root)
        try:
            table = conn.table(name)
            for opts in scans:
                forward = {**opts, "reverse": False, "limit": None}
                if opts["reverse"]:
                    forward["row_start"], forward["row_stop"] = opts["row_stop"], opts["row_start"]
                want = _want(table, forward)
                conn_rows = _connector_rows(root, name, forward)
                assert conn_rows == want, "connector batch reader"
        finally:
            conn.close()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RowMerge, "chunk", counted)
        mp.setattr(RowMerge, "_resolved", counted_resolved)
        mp.setattr(batch_scan, "_ROW_MERGE_BLOCKS", 2)  # several chunks per region
        check()
    # the generated tables take every way: rows merged, rows resolved (shared
    # rows, markers, versions, cell blocks), and chunks sent to the cell path
    # (a value filter asking for several versions)
    assert taken["rows"] > 50 and taken["resolved"] > 20 and taken["cells"] > 2, taken


DICT_COLUMNS = [None, None, [b"f"], [b"f:q1", b"f:q2"], [b"f:", b"f:q3"]]
DICT_FILTERS = SCAN_FILTERS + ["PageFilter (2)", "TimestampsFilter (101, 102)"]  # the last two: cells only


@st.composite
def _dict_scan_options(draw, pool):
    """A rows scan's options over ``scan()``'s columns and filters, with its dict options."""
    return {
        **draw(_scan_options(pool, DICT_COLUMNS, DICT_FILTERS)),
        "sorted_columns": draw(st.booleans()),
        "batch_size": draw(st.sampled_from([None, 3])),
    }


def test_dict_scans_through_the_row_merge_match_the_cell_path(tmp_path):
    """``scan()``'s dicts of a live table (the whole family, the family named, or some
    columns; with a filter or none, forward or reverse) go through the row merge, whose
    whole-family chunks take their columns from their sources; every answer is the
    cell-at-a-time path's."""
    root = str(tmp_path / "root")
    taken = Counter()
    chunk = RowMerge.chunk

    def counted(self, lo, hi, reverse):
        out = chunk(self, lo, hi, reverse)
        kind = "family" if self.whole_family else "columns"
        taken[f"{kind} cells" if out is CELLS else kind] += 1
        if out is not CELLS:
            taken["filtered"] += self.plan[0] != "none"
            taken["reverse"] += reverse
        return out

    @TABLE_CASES
    @given(table_ops=_table_ops(), data=st.data())
    def check(table_ops, data):
        ops, scans = _drawn(table_ops, data, _dict_scan_options)
        name = f"d{next(_names)}"
        with storage.connect(root) as conn:
            table = conn.create_table(name, {"f": dict(FAMILY)}, settings={"wal_sync": "none"})
            _apply(table, ops, random.Random(len(ops)))
            for opts in scans:
                want = list(table.scan(path="cell", **opts))
                got = list(table.scan(**opts))
                assert got == want, opts
                if opts["sorted_columns"]:
                    assert [list(d) for _, d in got] == [list(d) for _, d in want], "column order"

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RowMerge, "chunk", counted)
        mp.setattr(batch_scan, "_ROW_MERGE_BLOCKS", 2)  # several chunks per region
        check()
    # whole-family chunks merged or resolved as rows, and chunks of named columns too; filtered
    # and reverse scans among them
    assert taken["family"] > 30 and taken["columns"] > 10, taken
    assert taken["filtered"] > 10 and taken["reverse"] > 10, taken


TWO_FAMILY_COLUMNS = [[b"f:q1", b"g:q2"], [b"g:q1", b"f:q1", b"f:"], [b"f", b"g"], [b"g", b"f:q3"], [b"g:", b"f:q2"]]
TWO_FAMILY_DICT_COLUMNS = [None, None, [b"f", b"g"], [b"g", b"f:q1"], [b"f:q1", b"g:q2", b"g:q1"]]
TWO_FAMILY_FILTERS = [
    None, None, None,
    "SingleColumnValueFilter ('g', 'q1', =, 'binary:v1')",
    "SingleColumnValueFilter ('f', 'q2', =, 'binary:v1', true, true)",
    "ValueFilter (=, 'substring:1')",
    "PrefixFilter ('k1')",
    "ColumnValueFilter ('g', 'q2', =, 'binary:v1')",
    "SingleColumnValueExcludeFilter ('g', 'q2', =, 'substring:1')",
    "FamilyFilter (=, 'binary:g') OR SingleColumnValueFilter ('f', 'q1', =, 'binary:v1')",
    "ColumnPrefixFilter ('q1') AND SingleColumnValueFilter ('g', 'q1', !=, 'binary:x1', true, false)",
    "SingleColumnValueFilter ('f', 'q1', =, 'binary:v1') OR SingleColumnValueFilter ('g', 'q3', =, 'binary:v0')",
    "TimestampsFilter (101, 102)",  # no dense plan: the cell path
]


def test_scans_of_two_families_join_their_row_merges(tmp_path):
    """Rows scans and ``scan()``'s dicts of a table with two families (rows in one family,
    the other or both; re-puts, markers, versions and flushes in each) join the families'
    row merges on the key (storage/read/family_join.py) and apply a filter to the joined
    rows (row tests over either family's columns, value, column and key tests, lists of
    them); every answer is the cell path's, embedded and through the connector."""
    root = str(tmp_path / "root")
    taken = Counter()
    chunk, placement = FamilyJoin.chunk, family_join.join_keys

    def counted(self, lo, hi, reverse):
        out = chunk(self, lo, hi, reverse)
        taken["cells" if out is CELLS else "joined"] += 1
        taken["filtered"] += out is not CELLS and self.plan is not None
        taken["maps"] += out is not CELLS and self.maps
        return out

    def counted_placement(keys):
        taken["placed"] += 1
        return placement(keys)

    @TABLE_CASES
    @given(table_ops=_table_ops(), data=st.data())
    def check(table_ops, data):
        style, ops = table_ops
        pool = _key_pool(style)
        scans = data.draw(st.lists(_scan_options(pool, TWO_FAMILY_COLUMNS, TWO_FAMILY_FILTERS), min_size=2, max_size=2))
        dict_scans = data.draw(st.lists(_scan_options(pool, TWO_FAMILY_DICT_COLUMNS, TWO_FAMILY_FILTERS),
                                        min_size=2, max_size=2))
        name = f"j{next(_names)}"
        with storage.connect(root) as conn:
            table = conn.create_table(name, {"f": dict(FAMILY), "g": dict(FAMILY)}, settings={"wal_sync": "none"})
            _apply(table, ops, random.Random(len(ops)), second=b"g")
            for opts in scans:
                want = _want(table, opts)
                for batch_size in (3, 1000):
                    got = _got(table.scan_batches(output="rows", batch_size=batch_size, **opts))
                    assert got == want, f"scan_batches rows, batch_size {batch_size}"
            for opts in dict_scans:
                sorted_columns = data.draw(st.booleans())
                want = list(table.scan(path="cell", sorted_columns=sorted_columns, **opts))
                got = list(table.scan(sorted_columns=sorted_columns, **opts))
                assert got == want, opts
                if sorted_columns:
                    assert [list(d) for _, d in got] == [list(d) for _, d in want], "column order"
        with storage.connect(root) as conn:
            table = conn.table(name)
            for opts in scans:
                forward = {**opts, "reverse": False, "limit": None}
                if opts["reverse"]:
                    forward["row_start"], forward["row_stop"] = opts["row_stop"], opts["row_start"]
                assert _connector_rows(root, name, forward) == _want(table, forward), "connector batch reader"

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FamilyJoin, "chunk", counted)
        mp.setattr(family_join, "join_keys", counted_placement)
        mp.setattr(batch_scan, "_ROW_MERGE_BLOCKS", 2)  # several chunks per region
        check()
    # chunks joined: families of the same keys side by side, and of different keys placed;
    # filtered ones among them, whole families' map columns built after the filter too
    assert taken["joined"] - taken["placed"] > 10 and taken["placed"] > 20, taken
    assert taken["filtered"] > 20 and taken["maps"] > 5, taken


def test_a_filter_on_another_familys_column_reads_it_and_leaves_it_out(tmp_path):
    """A scan of ``a:x`` filtered on ``b:z`` (a column of another family, not asked for) reads
    ``b:z`` for the filter, keeps the rows it passes and gives ``a:x`` alone, through the join
    of the two families' rows, as the cell path does; with the tested column asked for too, it
    comes out."""
    taken = Counter()
    chunk = FamilyJoin.chunk

    def counted(self, lo, hi, reverse):
        out = chunk(self, lo, hi, reverse)
        taken["filtered"] += out is not CELLS and self.plan is not None
        return out

    with storage.connect(str(tmp_path / "root")) as conn, pytest.MonkeyPatch.context() as mp:
        mp.setattr(FamilyJoin, "chunk", counted)
        table = conn.create_table("t", {"a": {}, "b": {}}, settings={"wal_sync": "none"})
        with table.batch(timestamp=5) as b:
            for i in range(12):
                b.put(b"r%02d" % i, {b"a:x": b"x%d" % i, **({b"b:z": b"even" if i % 2 else b"odd"} if i % 3 else {})})
        table.flush()
        table.put(b"r02", {b"b:z": b"even"})  # the memstore: r02 fails now, r05 passes
        table.put(b"r05", {b"b:z": b"odd"})
        flt = "SingleColumnValueFilter ('b', 'z', =, 'binary:odd', true, true)"
        for columns in ([b"a:x"], [b"a:x", b"b:z"]):
            want = list(table.scan(path="cell", columns=columns, filter=flt))
            got = list(table.scan(columns=columns, filter=flt))
            assert got == want
            assert [k for k, _ in got] == [b"r04", b"r05", b"r08", b"r10"]
            assert all(set(d) == set(columns) for _, d in got), got
            rows = [batch.to_pydict() for batch in table.scan_batches(columns=columns, filter=flt)]
            assert [r for batch in rows for r in batch["key"]] == [b"r04", b"r05", b"r08", b"r10"]
            assert all(list(batch) == ["key", *[c.decode() for c in columns]] for batch in rows)
    assert taken["filtered"] == 4, taken


def test_a_two_family_scan_counts_each_familys_cells_once(tmp_path):
    """The joined scan's metrics count each family's cells once: what scans of each family
    alone count, added."""
    def cells(table, columns) -> int:
        metrics = ScanMetrics()
        assert sum(b.num_rows for b in table.scan_batches(columns=columns, output="rows", metrics=metrics)) > 0
        return metrics.cells_scanned

    with storage.connect(str(tmp_path / "root")) as conn:
        table = conn.create_table("t", {"a": {}, "b": {}}, settings={"wal_sync": "none"})
        with table.batch(timestamp=5) as b:
            for i in range(30):
                b.put(b"r%02d" % i, {b"a:x": b"1", **({b"b:y": b"2", b"b:z": b"3"} if i % 3 else {})})
        table.flush()
        table.put(b"r05", {b"a:x": b"new"})  # the memstore: a row to resolve in family a
        for both, (one, other) in (([b"a", b"b"], ([b"a"], [b"b"])), ([b"a:x", b"b:z"], ([b"a:x"], [b"b:z"]))):
            alone = cells(table, one) + cells(table, other)
            assert alone >= 50 and cells(table, both) == alone, both


def test_a_whole_family_wider_than_a_dense_row_takes_the_cell_path(tmp_path):
    """Sources whose columns together pass MAX_DENSE_QUALIFIERS (each narrower) leave a
    whole-family chunk to the cell path, with the same answer."""
    taken = Counter()
    chunk = RowMerge.chunk

    def counted(self, lo, hi, reverse):
        out = chunk(self, lo, hi, reverse)
        taken["cells" if out is CELLS else "rows"] += 1
        return out

    with storage.connect(str(tmp_path / "root")) as conn, pytest.MonkeyPatch.context() as mp:
        mp.setattr(RowMerge, "chunk", counted)
        table = conn.create_table("wide", {"f": {}}, settings={"wal_sync": "none"})
        with table.batch(timestamp=1) as b:
            for i in range(20):
                b.put(b"r%02d" % i, {b"f:a%03d" % j: b"%d" % j for j in range(200)})
        table.flush()
        with table.batch(timestamp=2) as b:  # the memstore: other columns of the same rows
            for i in range(0, 20, 3):
                b.put(b"r%02d" % i, {b"f:b%03d" % j: b"m" for j in range(100)})
        for columns in (None, [b"f"]):
            want = list(table.scan(path="cell", columns=columns))
            assert list(table.scan(columns=columns)) == want
            assert len(want) == 20 and len(want[0][1]) == 300
        assert taken["cells"] == 2 and taken["rows"] == 0, taken
        table.flush()  # the two files' rows: still 300 columns together
        assert list(table.scan()) == list(table.scan(path="cell"))
        assert taken["cells"] == 3, taken


def _live_table(conn, name="t"):
    """Rows k00..k39 flushed (q1 = v1 at ts 1), then in the memstore a newer q1 of
    row k05 (x1 at ts 2) and new rows k05a and k40..k44."""
    table = conn.create_table(name, {"f": dict(FAMILY)}, settings={"wal_sync": "none"})
    with table.batch(timestamp=1) as b:
        for i in range(40):
            b.put(b"k%02d" % i, {b"f:q1": b"v1", b"f:q2": b"a%d" % i})
    table.flush()
    with table.batch(timestamp=2) as b:
        for row in [b"k05a"] + [b"k%02d" % i for i in range(40, 45)]:
            b.put(row, {b"f:q1": b"v1", b"f:q2": b"m"})
    return table


@pytest.mark.parametrize("flt", [
    None,
    "SingleColumnValueFilter ('f', 'q1', =, 'binary:v1')",
    "ValueFilter (=, 'binary:v1')",
])
def test_a_row_in_the_memstore_and_a_file_is_resolved_from_its_cells(tmp_path, flt):
    with storage.connect(str(tmp_path / "root")) as conn:
        table = _live_table(conn)
        opts = {"columns": [b"f:q1", b"f:q2"], "filter": flt, "reverse": False, "limit": None,
                "include_timestamp": True, "row_start": None, "row_stop": None}
        clean = _got(table.scan_batches(output="rows", **opts))
        assert clean == _want(table, opts)
        assert [k for k, _ in clean][:8] == [b"k00", b"k01", b"k02", b"k03", b"k04", b"k05", b"k05a", b"k06"]
        # the memstore's newer q1 of k05 fails both filters: the row (or its q1) goes, as on the cell path
        table.put(b"k05", {b"f:q1": b"x1"}, timestamp=2)
        got = _got(table.scan_batches(output="rows", **opts))
        assert got == _want(table, opts)
        k05 = dict(got).get(b"k05")
        if flt is None:
            assert k05 == {"f:q1": b"x1", "f:q1@ts": 2, "f:q2": b"a5", "f:q2@ts": 1}
        else:
            assert k05 is None  # its q2 (a5) fails the value filter as well


@pytest.mark.parametrize("change", ["flush", "compact", "split"])
def test_whole_row_scans_opened_before_a_change_return_what_they_would_have(tmp_path, change):
    """``scan()`` and ``scan_batches()`` naming no column on a live table (rows re-put and
    deleted in the memstore over a flushed file, a column only the memstore has), and
    ``scan()`` with a filter and in reverse, opened before a flush, a major compaction or a
    split and a write: the rows of their read point, through the whole-family row merge."""
    taken = Counter()
    chunk = RowMerge.chunk

    def counted(self, lo, hi, reverse):
        out = chunk(self, lo, hi, reverse)
        taken["family" if self.whole_family and out is not CELLS else "other"] += 1
        return out

    with storage.connect(str(tmp_path / "root")) as conn, pytest.MonkeyPatch.context() as mp:
        mp.setattr(RowMerge, "chunk", counted)
        mp.setattr(batch_scan, "_ROW_MERGE_BLOCKS", 2)
        table = conn.create_table("t", {"f": {"block_size": 1024}}, settings={"wal_sync": "none"})
        with table.batch(timestamp=1) as b:
            for i in range(300):
                b.put(b"k%03d" % i, {b"f:a": b"a%d" % i, b"f:b": b"b%d" % i})
        table.flush()
        with table.batch(timestamp=2) as b:
            for i in range(0, 300, 7):
                b.put(b"k%03d" % i, {b"f:a": b"x%d" % i, b"f:c": b"c%d" % i})
            for i in range(3, 300, 11):
                b.delete(b"k%03d" % i)
        want = list(table.scan(path="cell"))
        want_map = [(k, sorted(d.items())) for k, d in want]
        flt = "SingleColumnValueFilter ('f', 'a', !=, 'binary:a5') AND ColumnPrefixFilter ('a')"
        want_filtered = list(table.scan(path="cell", filter=flt))
        want_reverse = list(table.scan(path="cell", reverse=True))
        dicts, batches = table.scan(batch_size=10), table.scan_batches(batch_size=10)
        filtered, reverse = table.scan(filter=flt, batch_size=10), table.scan(reverse=True, batch_size=10)
        got = [next(dicts)]
        first = next(batches)
        got_filtered, got_reverse = [next(filtered)], [next(reverse)]
        if change == "flush":
            table.flush()
        elif change == "compact":
            table.compact(major=True)
        else:
            table.split(b"k150")
        table.put(b"k010", {b"f:a": b"late"})
        table.delete(b"k020")
        got += list(dicts)
        got_filtered += list(filtered)
        got_reverse += list(reverse)
        assert got_filtered == want_filtered and got_reverse == want_reverse
        rows = [(r["key"], sorted((b"f:" + q, v) for q, v in r["f"])) for b in [first, *batches]
                for r in b.to_pylist()]
        assert got == want and rows == want_map
        assert taken["family"] > 2, taken
