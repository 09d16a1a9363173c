"""Store files whose row ranges do not overlap read as one sorted run, with no merge.

A region's files that hold rows of their own (bulk loads of disjoint key ranges,
flushes of writes to one key range at a time) are streamed one after another in
key order, each file's dense blocks going straight to rows as one compacted file's
do (``storage/read/batch_stream.py``).  Hypothesis writes the same operations
(puts, updates of a column in later writes, every kind of delete) as three
layouts of one family: files of disjoint key ranges (the run), files flushed in
time order (overlapping, merged) and one major-compacted file, and every scan
must answer the same in all three.  The scan metrics say which files a scan read
as a run (``files_unmerged``) and which it merged (``files_merged``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage import ScanMetrics
from storage.engine import BulkLoadTask, commit_load, table_regions
from storage.vfs.fs import FileSystem

ROWS = [b"r%02d" % i for i in range(24)]
RANGES = [ROWS[0:8], ROWS[8:16], ROWS[16:24]]
QUALIFIERS = [b"q1", b"q2", b"q3"]
VALUES = [b"v0", b"v1", b"v22", b""]
# small blocks: every file holds several, and rows of several columns cross block ends
FAMILY = {"cf": {"max_versions": 3, "block_size": 256}}
TABLE_SETTINGS = {"wal_sync": "none", "compaction_threshold": 100}

FILTERS = [
    None,
    "SingleColumnValueFilter ('cf', 'q1', =, 'binary:v1')",
    "KeyOnlyFilter ()",
    "PrefixFilter ('r1')",
    "ValueFilter (=, 'binary:v22')",
]
_names = itertools.count()


@st.composite
def operation(draw):
    row = draw(st.sampled_from(ROWS))
    kind = draw(st.sampled_from(["put", "put", "put", "row", "column", "version"]))
    if kind == "put":
        qualifiers = draw(st.lists(st.sampled_from(QUALIFIERS), min_size=1, max_size=3, unique=True))
        return ("put", row, {b"cf:" + q: draw(st.sampled_from(VALUES)) for q in qualifiers})
    if kind == "row":
        return ("delete", row, None)
    column = b"cf:" + draw(st.sampled_from(QUALIFIERS))
    if kind == "column":
        return ("delete", row, [column])
    return ("version", row, column, draw(st.integers(1, 40)))  # a put's timestamp, or none's


def _apply(table, op, ts: int) -> None:
    if op[0] == "put":
        table.put(op[1], op[2], timestamp=ts)
    elif op[0] == "delete":
        table.delete(op[1], columns=op[2], timestamp=ts)
    else:
        table.delete_version(op[1], op[2], op[3])


def _build(conn, ops, layout: str, order: list[int], every: int, later: int | None = None):
    """A table of ``ops`` (op i written at timestamp i + 1) as ``layout``: ``runs`` (one
    flush per key range, in ``order``; key range ``later`` flushed twice, its later
    updates and deletes in a second file over the first), ``time`` (a flush every
    ``every`` ops) or ``compacted`` (the runs, major-compacted)."""
    table = conn.create_table(f"t{next(_names)}", FAMILY, settings=TABLE_SETTINGS)
    stamped = list(enumerate(ops, start=1))
    if layout == "time":
        for n, (ts, op) in enumerate(stamped, start=1):
            _apply(table, op, ts)
            if n % every == 0:
                table.flush()
        table.flush()
        return table
    for r in order:
        mine = [(ts, op) for ts, op in stamped if op[1] in RANGES[r]]
        for n, (ts, op) in enumerate(mine):
            if r == later and n == len(mine) // 2:
                table.flush()
            _apply(table, op, ts)
        table.flush()
    if layout == "compacted":
        table.compact(major=True)
    return table


@st.composite
def scan_options(draw):
    return {
        "bounds": draw(st.sampled_from([(None, None), (b"r05", b"r19"), (b"r10", None), (None, b"r08")])),
        "columns": draw(st.sampled_from([None, [b"cf:q1"], [b"cf:q1", b"cf:q3"], [b"cf"]])),
        "output": draw(st.sampled_from(["rows", "cells"])),
        "max_versions": draw(st.sampled_from([1, 3])),
        "filter": draw(st.sampled_from(FILTERS)),
        "limit": draw(st.sampled_from([None, None, 4])),
        "batch_size": draw(st.sampled_from([3, 65536])),
        "reverse": draw(st.booleans()),
    }


def _answers(table, opts) -> tuple:
    lo, hi = opts["bounds"]
    common = {"row_start": lo, "row_stop": hi, "columns": opts["columns"], "filter": opts["filter"],
              "limit": opts["limit"]}
    # a rows scan keeps one version per column; cells carry every version asked for
    versions = 1 if opts["output"] == "rows" else opts["max_versions"]
    batches = table.scan_batches(output=opts["output"], max_versions=versions, batch_size=opts["batch_size"],
                                 **common)
    got = [row for b in batches for row in b.to_pylist()]
    if opts["reverse"]:  # scan() reads from the last row backwards: start above stop
        common["row_start"], common["row_stop"] = hi, lo
    dicts = list(table.scan(reverse=opts["reverse"], **common))
    return got, dicts


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(operation(), min_size=3, max_size=40), order=st.permutations([0, 1, 2]),
       every=st.integers(2, 7), later=st.sampled_from([None, None, 0, 1, 2]),
       scans=st.lists(scan_options(), min_size=3, max_size=3))
def test_disjoint_files_answer_as_overlapping_and_compacted_ones(tmp_path_factory, ops, order, every, later, scans):
    root = str(tmp_path_factory.mktemp("runs") / "root")
    with storage.connect(root) as conn:
        runs = _build(conn, ops, "runs", order, every, later)
        time_order = _build(conn, ops, "time", order, every)
        compacted = _build(conn, ops, "compacted", order, every)
        files = sum(1 for r in RANGES if any(op[1] in r for op in ops))  # one flush per key range written
        for opts in scans:
            want = _answers(compacted, opts)
            assert _answers(runs, opts) == want, opts
            assert _answers(time_order, opts) == want, opts
        metrics = ScanMetrics()
        list(runs.scan_batches(metrics=metrics))
        if later is not None:
            # the range flushed twice is merged if its two files overlap (and streams if they do
            # not); every other range streams
            assert metrics.files_merged in (0, 2)
        elif files > 1:
            assert (metrics.files_unmerged, metrics.files_merged) == (files, 0)
        else:
            assert (metrics.files_unmerged, metrics.files_merged) == (0, 0)  # one file: neither
        metrics = ScanMetrics()
        list(time_order.scan_batches(metrics=metrics))
        assert not (metrics.files_unmerged and metrics.files_merged)  # one span: a run or a merge


def _keys(a: int, b: int) -> pa.Array:
    digits = pc.utf8_lpad(pc.cast(pa.array(np.arange(a, b)), pa.string()), 6, "0")
    return pc.cast(pc.binary_join_element_wise(pa.array(["k"] * (b - a)), digits, ""), pa.binary())


def _bulk(root: str, name: str, job: str, a: int, b: int, tag: str) -> None:
    fs = FileSystem(root).sub(name)
    regions, families = table_regions(fs)
    task = BulkLoadTask(fs, job, "p0", regions, families, timestamp=int(job[1:]) + 1)
    n = b - a
    values = {f"cf:c{j}": pc.cast(pc.binary_join_element_wise(
        pa.array([f"{tag}{j}-"] * n), pc.cast(pa.array(np.arange(a, b)), pa.string()), ""), pa.binary())
        for j in range(3)}
    task.add(pa.RecordBatch.from_pydict({"key": _keys(a, b), **values}))
    commit_load(fs, job, task.finish())


def test_bulk_loads_of_disjoint_ranges_stream_as_one_file(tmp_path):
    """Three bulk loads of disjoint key ranges into one region read as the same rows in
    one file would, with no merge; a fourth load over two of them is merged with them (its
    newer values win) while the third streams alone, and a major compaction leaves one
    file, counted as neither."""
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {"block_size": 4096}})
    for job, (a, b) in enumerate([(3000, 6000), (0, 3000), (6000, 9000)]):
        _bulk(root, "t", f"j{job}", a, b, "a")
    with storage.connect(root) as conn:
        table = conn.table("t")
        metrics = ScanMetrics()
        rows = pa.Table.from_batches(list(table.scan_batches(columns=[b"cf:c0", b"cf:c2"], metrics=metrics)))
        assert (metrics.files_unmerged, metrics.files_merged) == (3, 0)
        assert rows.column("key").to_pylist() == _keys(0, 9000).to_pylist()
        assert rows.column("cf:c2").to_pylist()[2999:3001] == [b"a2-2999", b"a2-3000"]
        # a span inside one file reads that file alone
        metrics = ScanMetrics()
        inside = list(table.scan_batches(row_start=b"k003100", row_stop=b"k003200", metrics=metrics))
        assert sum(b.num_rows for b in inside) == 100 and (metrics.files_unmerged, metrics.files_merged) == (0, 0)
    _bulk(root, "t", "j3", 2500, 3500, "b")  # overlaps two of the files
    with storage.connect(root) as conn:
        table = conn.table("t")
        metrics = ScanMetrics()
        merged = pa.Table.from_batches(list(table.scan_batches(columns=[b"cf:c0", b"cf:c2"], metrics=metrics)))
        # the three overlapping files are merged, up to k006000; the last file streams alone after them
        assert (metrics.files_unmerged, metrics.files_merged) == (0, 3)
        assert merged.num_rows == 9000
        assert merged.column("cf:c0").to_pylist()[2499:2501] == [b"a0-2499", b"b0-2500"]
        assert merged.column("cf:c0").to_pylist()[3499:3501] == [b"b0-3499", b"a0-3500"]
        table.compact(major=True)
        metrics = ScanMetrics()
        compacted = pa.Table.from_batches(list(table.scan_batches(columns=[b"cf:c0", b"cf:c2"], metrics=metrics)))
        assert compacted.equals(merged) and (metrics.files_unmerged, metrics.files_merged) == (0, 0)
