"""Row resolution (kernels.resolve_rows over row_pieces) against the cell kernels.

Generated sources (newest first) of puts at colliding timestamps, several
versions per column, and every kind of delete marker, with key widths the
key encoding treats differently, are resolved both ways: as cells
(``merge_sources`` + ``resolve`` + the newest cell of each column) and as
rows (each source a :class:`CellSource`, or a dense block where it is one,
laid out as row pieces and resolved by ``resolve_rows``).  Both must give the
same rows, columns, values and timestamps, under time ranges, a TTL cutoff and
timestamp lists.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import kernels
from storage.cells import CellType, cells_to_batch
from storage.errors import InvalidArgument
from storage.kernels.resolve_rows import ABSENT, Markers, RowPiece, resolve_rows
from storage.native import NATIVE
from storage.region.row_pieces import MAX_RANKS, CellSource, dense_piece, join_markers
from storage.storefile.dense import dense_from_cells

PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY = (int(t) for t in (CellType.PUT, CellType.DELETE,
                                                               CellType.DELETE_COLUMN, CellType.DELETE_FAMILY))
FAMILY = b"f"
QUALIFIERS = [b"", b"a", b"b", b"c\x00"]
ROW_POOLS = {
    "u4": [bytes([0, 0, 0, i]) for i in range(8)],
    "mixed": [b"", b"a", b"a\x00", b"a\x00\x01", b"ab", b"b" * 9, b"\xff"],
    "w3": [bytes([1, i, 2]) for i in range(6)],
}


def _table(cells) -> pa.Table:
    """``cells`` as a source holds them: sorted, and a marker before a put of its timestamp."""
    return pa.Table.from_batches([cells_to_batch(sorted(cells, key=lambda c: (c[0], c[1], c[2], -c[3], -c[4])))])


@st.composite
def sources(draw):
    pool = ROW_POOLS[draw(st.sampled_from(sorted(ROW_POOLS)))]
    out = []
    for _ in range(draw(st.integers(1, 4))):
        cells = {}
        for _ in range(draw(st.integers(0, 14))):
            row = draw(st.sampled_from(pool))
            ts = draw(st.integers(1, 9))
            kind = draw(st.sampled_from([PUT] * 6 + [DELETE, DELETE_COLUMN, DELETE_FAMILY]))
            qualifier = b"" if kind == DELETE_FAMILY else draw(st.sampled_from(QUALIFIERS))
            value = b"" if kind != PUT else draw(st.sampled_from([b"x", b"y", b"zz", b""]))
            cells[(row, FAMILY, qualifier, ts, kind)] = value  # one cell per key in a source
        out.append(_table([k + (v,) for k, v in cells.items()]))
    return out


def _expected(tables, qualifiers, **bounds):
    """Per row: {qualifier: (value, ts)} of the newest visible put, by the cell kernels."""
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return {}
    cells = kernels.resolve(kernels.merge_sources(tables), max_versions=1, **bounds)
    out: dict = {}
    for c in cells.to_pylist():
        if c["qualifier"] in qualifiers:
            out.setdefault(c["row"], {})[c["qualifier"]] = (c["value"], c["timestamp"])
    return out


def _got(resolved, qualifiers):
    out = {}
    keys = resolved.keys.to_pylist()
    for j, q in enumerate(qualifiers):
        values = resolved.values[j].to_pylist()
        for i, key in enumerate(keys):
            if resolved.ts[j][i] != ABSENT:
                assert values[i] is not None
                out.setdefault(key, {})[q] = (values[i], int(resolved.ts[j][i]))
            else:
                assert values[i] is None
    assert all(out.get(k) for k in keys), "a row without any visible cell was kept"
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    return out


def _pieces(tables, qualifiers, all_ranks, dense_where_possible):
    pieces, markers = [], []
    for t in tables:
        if dense_where_possible and t.num_rows:
            dense = dense_from_cells(t.combine_chunks().to_batches()[0], min_rows=1)
            if dense is not None:
                pieces.append(dense_piece(dense, qualifiers))
                continue
        source = CellSource(t)
        laid = source.pieces(qualifiers, all_ranks)
        assert laid is not None
        pieces.extend(laid)
        markers.append(source.markers)
    return pieces, join_markers(markers)


BOUNDS = st.sampled_from([
    {},
    {"min_timestamp": 3},
    {"max_timestamp": 6},
    {"min_timestamp": 2, "max_timestamp": 8},
    {"ttl_cutoff": 4},
    {"timestamps": [2, 5, 7]},
])


@settings(max_examples=250, deadline=None, derandomize=True, database=None)
@given(tables=sources(), bounds=BOUNDS, dense=st.booleans(),
       qualifiers=st.lists(st.sampled_from(QUALIFIERS), min_size=1, max_size=4, unique=True).map(sorted))
def test_rows_resolve_like_cells(tables, bounds, dense, qualifiers):
    pieces, markers = _pieces(tables, qualifiers, True, dense)
    resolved = resolve_rows(pieces, len(qualifiers), markers, qualifiers=qualifiers, **bounds)
    expected = _expected(tables, set(qualifiers), **bounds)
    assert _got(resolved, qualifiers) == expected
    # the scan's cells_scanned: the visible cells, whatever rows lack a column
    assert resolved.cell_count() == sum(len(columns) for columns in expected.values())


def test_selected_rows_are_the_rows_kept():
    """``select`` keeps the rows a mask picks, whether a column was gathered before it (its
    values gathered again) or is still left to gather (the compiled merge's columns: its
    winners picked): the same keys, values, timestamps and cell count as the whole
    resolution's rows filtered."""
    lazy = []

    @settings(max_examples=150, deadline=None, derandomize=True, database=None)
    @given(tables=sources(), dense=st.booleans(), merged=st.booleans(), data=st.data())
    def check(tables, dense, merged, data):
        if merged:  # puts and DeleteFamily markers: what the compiled merge takes
            kept = (PUT, DELETE_FAMILY)
            tables = [t.filter(pa.compute.is_in(t.column("type"), pa.array(kept, t.schema.field("type").type)))
                      if t.num_rows else t for t in tables]
        pieces, markers = _pieces(tables, QUALIFIERS, True, dense)
        resolved = resolve_rows(pieces, len(QUALIFIERS), markers, qualifiers=QUALIFIERS)
        lazy.append(any(isinstance(v, tuple) for v in resolved._values))
        n = resolved.num_rows
        keep = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
        for j in data.draw(st.sets(st.integers(0, len(QUALIFIERS) - 1))):
            resolved.value(j)  # gathered before the selection
        picked = resolved.select(keep)
        whole = resolve_rows(pieces, len(QUALIFIERS), markers, qualifiers=QUALIFIERS)
        # counted before any value is gathered: a column left to gather counts its winners
        assert picked.cell_count() == sum(int(np.count_nonzero(t[keep] != ABSENT)) for t in whole.ts)
        mask = pa.array(keep)
        assert picked.keys.equals(whole.keys.filter(mask))
        for j in range(len(QUALIFIERS)):
            assert picked.values[j].equals(whole.values[j].filter(mask)), j
            assert np.array_equal(picked.ts[j], whole.ts[j][keep]), j

    check()
    if NATIVE is not None:
        assert sum(lazy) > 30, sum(lazy)  # the compiled merge's columns left to gather


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(tables=sources(), qualifiers=st.just(QUALIFIERS))
def test_the_newest_rank_is_enough_when_nothing_hides_a_put(tables, qualifiers):
    """Without markers and time bounds, the newest version rank of each source gives the answer."""
    puts = [t.filter(pa.compute.equal(t.column("type"), PUT)) if t.num_rows else t for t in tables]
    pieces, markers = _pieces(puts, qualifiers, False, False)
    assert markers is None
    resolved = resolve_rows(pieces, len(qualifiers))
    assert _got(resolved, qualifiers) == _expected(puts, set(qualifiers))


def test_a_source_with_too_many_versions_is_left_to_cells():
    cells = [(b"r", FAMILY, b"a", ts, PUT, b"v") for ts in range(1, MAX_RANKS + 2)]
    source = CellSource(_table(cells))
    assert source.pieces([b"a"], all_ranks=True) is None
    (newest,) = source.pieces([b"a"], all_ranks=False)
    assert newest.ts[0].tolist() == [MAX_RANKS + 1]


def test_resolve_rows_edges():
    assert resolve_rows([], 2).num_rows == 0
    piece = RowPiece(pa.array([b"a", b"b"]), [np.array([1, ABSENT])], [pa.array([b"x", b"y"])])
    out = resolve_rows([piece], 1)
    assert out.keys.to_pylist() == [b"a"] and out.values[0].to_pylist() == [b"x"]
    with pytest.raises(InvalidArgument, match="pieces\\[0\\] has 1 timestamp"):
        resolve_rows([piece], 2)
    marks = Markers(pa.array([b"a"]), pa.array([b"q"]), np.array([5]), np.array([DELETE_COLUMN], np.uint8))
    with pytest.raises(InvalidArgument, match="qualifiers"):
        resolve_rows([piece], 1, marks)
    # a marker on a row no piece holds changes nothing
    far = Markers(pa.array([b"zz"]), pa.array([b""]), np.array([9]), np.array([DELETE_FAMILY], np.uint8))
    assert resolve_rows([piece], 1, far).keys.to_pylist() == [b"a"]
    # keys wider than the encoding takes: the caller resolves cells
    wide = RowPiece(pa.array([b"k" * 2000]), [np.array([1])], [pa.array([b"x"])])
    assert resolve_rows([wide, piece], 1) is None


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=st.data(), width=st.integers(1, 16), n=st.integers(0, 40))
def test_keys_from_codes_are_the_codes_big_endian_bytes(data, width, n):
    """keys_from_codes: each code's big-endian bytes -- an integer of ``width`` bytes, the lead
    and an 8-byte integer past 8 bytes, or the first ``width`` bytes of a 128-bit pair."""
    from storage.kernels.key_codes import keys_from_codes

    words = st.integers(0, 2**64 - 1)
    if width in (1, 2, 4, 8) and data.draw(st.booleans()):  # the widths integers come in
        ints = data.draw(st.lists(st.integers(0, 2 ** (8 * width) - 1), min_size=n, max_size=n))
        codes = np.array(ints, dtype=np.uint64).astype({1: np.uint8, 2: np.uint16, 4: np.uint32}.get(width, np.uint64))
        want = [i.to_bytes(width, "big") for i in ints]
        got = keys_from_codes(codes, width)
    elif width > 8 and data.draw(st.booleans()):
        lead = data.draw(st.binary(min_size=width - 8, max_size=width - 8))
        ints = data.draw(st.lists(words, min_size=n, max_size=n))
        want = [lead + i.to_bytes(8, "big") for i in ints]
        got = keys_from_codes(np.array(ints, dtype=np.uint64), width, lead)
    else:
        pairs = data.draw(st.lists(st.tuples(words, words), min_size=n, max_size=n))
        codes = np.array(pairs, dtype=np.uint64).reshape(n, 2)  # (low word, high word)
        want = [((high << 64) | low).to_bytes(16, "big")[:width] for low, high in pairs]
        got = keys_from_codes(codes, width)
    got.validate(full=True)
    assert got.to_pylist() == want
