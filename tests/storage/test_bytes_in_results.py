"""``BYTES_IN_RESULTS``: one definition on every scan path (storage/read/scan_counting.py).

A scan's figure is the size of the cells it returned, as the cell path sizes
a row's cells (``result_size``), whatever the batches' layout: built or kept,
sliced, with or without validity buffers, rows or cells.  Kept batches used
to replay the figure of the build that kept them, and a build's figure was
its buffers' size, so two scans returning the same cells could disagree.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage.read.scan_counting import result_bytes
from storage.scanner import ScanMetrics
from storage.scanner.region_scanner import result_size

import pyarrow as pa


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _expected(batches: list, output: str) -> int:
    """``result_size`` of the cells the batches hold, grouped by row."""
    rows: dict[bytes, list] = {}
    for batch in batches:
        for entry in batch.to_pylist():
            if output == "cells":
                cell = (entry["row"], entry["family"], entry["qualifier"], entry["timestamp"], entry["type"], entry["value"])
                rows.setdefault(entry["row"], []).append(cell)
                continue
            key = entry.pop("key")
            for name, value in entry.items():
                if name.endswith("@ts") or value is None:
                    continue
                if ":" not in name:  # a family's map: (qualifier, value) pairs
                    for qualifier, item in value:
                        rows.setdefault(key, []).append((key, name.encode(), qualifier, 0, 4, item))
                    continue
                family, qualifier = name.encode().split(b":", 1)
                rows.setdefault(key, []).append((key, family, qualifier, 0, 4, value))
    return sum(result_size(cells) for cells in rows.values())


_op = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 39), st.sampled_from([b"cf:a", b"cf:bb", b"cf:c"]), st.binary(max_size=6)),
    st.tuples(st.just("delete"), st.integers(0, 39)),
    st.tuples(st.just("flush")),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, max_size=40), output=st.sampled_from(["rows", "cells"]),
       columns=st.sampled_from([None, [b"cf"], [b"cf:a", b"cf:c"]]), include_timestamp=st.booleans(),
       batch_size=st.sampled_from([3, 64]))
def test_the_figure_is_the_cells_returned_on_every_scan_of_a_table(tmp_path_factory, ops, output, columns,
                                                                    include_timestamp, batch_size):
    conn = storage.connect(str(tmp_path_factory.mktemp("bytes")), block_cache_size=8 << 20)
    try:
        table = conn.create_table("t", {"cf": {"block_size": 256, "max_versions": 3}},
                                  settings={"wal_sync": "none"}, split_keys=[_key(20)])
        with table.batch(timestamp=1000) as b:
            for i in range(40):
                b.put(_key(i), {b"cf:a": b"%d" % i, b"cf:bb": b"x" * (i % 5)})
        table.flush()
        table.compact(major=True)
        for op in ops:
            if op[0] == "put":
                table.put(_key(op[1]), {op[2]: op[3]})
            elif op[0] == "delete":
                table.delete(_key(op[1]))
            else:
                table.flush()
        kwargs = {"output": output, "columns": columns, "batch_size": batch_size}
        if output == "rows":
            kwargs["include_timestamp"] = include_timestamp
        figures = []
        for _ in range(3):  # built, kept, served
            metrics = ScanMetrics()
            batches = list(table.scan_batches(metrics=metrics, **kwargs))
            assert metrics.bytes_in_results == _expected(batches, output)
            figures.append(metrics.bytes_in_results)
        assert len(set(figures)) == 1
    finally:
        conn.close()


def test_scans_of_one_family_and_of_every_column_count_the_same_cells_alike(tmp_path):
    """The case the kept-batches property test found: ``columns=[cf]`` and no
    columns return the same cells, one scan built with validity buffers and
    one without; both kept and served in turn."""
    conn = storage.connect(str(tmp_path / "root"), block_cache_size=16 << 20)
    table = conn.create_table("p", {"cf": {"block_size": 256, "max_versions": 3}}, settings={"wal_sync": "none"},
                              split_keys=[_key(40)])
    with table.batch(timestamp=1000) as b:
        for i in range(80):
            b.put(_key(i), {b"cf:n": b"%d" % i, b"cf:s": b"s"})
    table.flush()
    table.compact()
    figures = set()
    for _ in range(3):
        for kwargs in ({"columns": [b"cf"]}, {"max_versions": 1}):
            metrics = ScanMetrics()
            list(table.scan_batches(output="cells", batch_size=5, metrics=metrics, **kwargs))
            figures.add(metrics.bytes_in_results)
    assert figures == {80 * (4 + 2 + 1 + 13) + sum(len(b"%d" % i) for i in range(80)) + 80 * (4 + 2 + 1 + 13 + 1)}
    conn.close()


@pytest.mark.parametrize("with_nulls", [False, True])
def test_a_sliced_row_batch_counts_its_slice_only(with_nulls):
    values = pa.array([b"aa", None if with_nulls else b"b", b"ccc", b"d"], pa.binary())
    batch = pa.RecordBatch.from_arrays([pa.array([b"k1", b"k22", b"k3", b"k4"]), values,
                                        pa.array([1, 2, 3, 4], pa.int64())], names=["key", "cf:q", "cf:q@ts"])
    part = batch.slice(1, 2)
    present = [(k, v) for k, v in zip([b"k22", b"k3"], [None if with_nulls else b"b", b"ccc"]) if v is not None]
    assert result_bytes(part) == sum(len(k) + 13 + 3 + len(v) for k, v in present)


@pytest.mark.parametrize("widths", ["one", "mixed"])
@pytest.mark.parametrize("with_nulls", [False, True])
def test_a_dictionary_column_counts_as_its_expanded_values(widths, with_nulls):
    # entries of one width take a shortcut (width x present values): it must count what the
    # expanded column counts, sliced, with nulls, and with entries no row uses
    entries = [b"%04d" % i for i in range(6)] if widths == "one" else [b"", b"a", b"bb", b"ccc", b"dddd", b"e"]
    codes = pa.array([0, 3, None if with_nulls else 1, 5, 3, 2, None if with_nulls else 4, 0], pa.int32())
    coded = pa.DictionaryArray.from_arrays(codes, pa.array(entries, pa.binary()))
    keys = pa.array([b"k%d" % i for i in range(8)])
    for lo, n in ((0, 8), (1, 5), (2, 0), (6, 2)):
        as_codes = pa.RecordBatch.from_arrays([keys, coded], names=["key", "cf:q"]).slice(lo, n)
        plain = pa.RecordBatch.from_arrays([keys, coded.cast(pa.binary())], names=["key", "cf:q"]).slice(lo, n)
        assert result_bytes(as_codes) == result_bytes(plain)
        assert result_bytes(plain) == sum(len(k) + 13 + 3 + len(v) for k, v in
                                          zip(plain.column(0).to_pylist(), plain.column(1).to_pylist()) if v is not None)
