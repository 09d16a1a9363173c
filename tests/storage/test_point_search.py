"""The point-read kernels (storage.storefile.point) against Python's bisect and the cell form."""

from __future__ import annotations

import bisect

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.cells import CellType, cells_to_batch
from storage.storefile.dense import dense_from_cells
from storage.storefile.point import DensePoint, SortedKeys

# small alphabets so that keys share prefixes, end in zero bytes and repeat
_byte = st.sampled_from([0, 1, 0x7F, 0x80, 0xFF])
_key = st.binary(min_size=1, max_size=4) | st.lists(_byte, min_size=1, max_size=4).map(bytes)


def _expected(keys: list[bytes], key: bytes) -> tuple[int, int]:
    return bisect.bisect_left(keys, key), bisect.bisect_right(keys, key)


@settings(max_examples=300, deadline=None)
@given(st.lists(_key, min_size=1, max_size=40), st.lists(_key, min_size=1, max_size=12), st.booleans(), st.booleans())
def test_sorted_keys_agree_with_bisect(keys, asked, repeats, sliced):
    keys = sorted(keys if repeats else set(keys))
    arr = pa.array([b"zz"] + keys, pa.binary()).slice(1) if sliced else pa.array(keys, pa.binary())
    search = SortedKeys(arr, distinct=not repeats)
    asked = asked + keys[:3]
    for key in asked:
        assert search.find(key) == _expected(keys, key), key
    lo, hi = search.find_many(asked)
    assert list(zip(lo.tolist(), hi.tolist())) == [_expected(keys, k) for k in asked]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6).flatmap(lambda w: st.lists(st.binary(min_size=w, max_size=w), min_size=1, max_size=60)),
       st.lists(_key, max_size=8))
def test_fixed_width_keys_are_searched_in_place(keys, asked):
    keys = sorted(set(keys))
    search = SortedKeys(pa.array(keys, pa.binary()))
    assert search.nbytes < 1024  # a view of the Arrow buffer, not a copy
    for key in asked + keys:
        assert search.find(key) == _expected(keys, key)


def test_keys_that_tie_as_strings_are_bisected():
    keys = [b"a", b"a\x00", b"a\x00\x00", b"b"]
    for distinct in (False, True):
        search = SortedKeys(pa.array(keys, pa.binary()), distinct=distinct)
        for key in keys + [b"", b"a\x00\x00\x00", b"\x00", b"c"]:
            assert search.find(key) == _expected(keys, key)
    search = SortedKeys(pa.array(keys, pa.binary()))
    assert list(search.find_many([b"a\x00", b"c"])[0]) == [1, 4]


_qual = st.sampled_from([b"a", b"b", b"c"])


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.binary(min_size=1, max_size=3),
                    st.dictionaries(_qual, st.tuples(st.integers(0, 3), st.binary(max_size=5)), min_size=1),
                    min_size=8, max_size=40),
    st.booleans(),
)
def test_dense_point_reads_match_the_cells(rows, same_ts):
    cells = []
    for row in sorted(rows):
        for q, (ts, value) in sorted(rows[row].items()):
            cells.append((row, b"f", q, 7 if same_ts else ts, int(CellType.PUT), value))
    batch = cells_to_batch(cells)
    dense = dense_from_cells(batch)
    if dense is None:
        return  # too sparse for the dense layout
    point = DensePoint(dense, b"f")
    keys = sorted(rows)
    want = {r: [c for c in cells if c[0] == r] for r in keys}
    for i, row in enumerate(keys):
        assert point.keys.find(row) == (i, i + 1)
        assert [tuple(c) for c in point.row_cells(row, i)] == want[row]
    pick = np.array(range(len(keys) - 1, -1, -2), dtype=np.int64)
    got = point.rows_cells([keys[i] for i in pick], pick)
    assert [[tuple(c) for c in g] for g in got] == [want[keys[i]] for i in pick]
