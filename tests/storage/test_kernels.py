"""The batch kernels against straightforward Python models over cell tuples."""

from __future__ import annotations

import random
from collections import Counter
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.cells import (
    CELL_SCHEMA,
    LATEST_TIMESTAMP,
    Cell,
    CellType,
    batch_to_cells,
    cells_to_batch,
    sort_key,
)
from storage.columns import parse_column
from storage.errors import InvalidArgument
from storage.kernels import (
    FAMILY_MAP_TYPE,
    cells_to_rows,
    is_sorted,
    merge_sources,
    raw_versions,
    resolve,
    reverse_rows,
    row_boundaries,
)

PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY = (int(t) for t in CellType)



def put(row: bytes, qualifier: bytes, ts: int, value: bytes, family: bytes = b"f") -> Cell:
    return Cell(row, family, qualifier, ts, PUT, value)


def marker(row: bytes, qualifier: bytes, ts: int, kind: int, family: bytes = b"f") -> Cell:
    return Cell(row, family, qualifier, ts, kind, b"")


def batch(*cells: Cell) -> pa.RecordBatch:
    return cells_to_batch(cells)


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------
# Python models


def model_merge(sources: list[list[Cell]]) -> list[Cell]:
    """Union of the sources (newest first), newest winning identical keys, sorted."""
    kept: dict[tuple, Cell] = {}
    for source in sources:
        for cell in source:
            kept.setdefault(cell[:5], cell)
    return sorted(kept.values(), key=sort_key)


def model_resolve(
    cells: list[Cell],
    max_versions: int = 1,
    min_timestamp: int = 0,
    max_timestamp: int = LATEST_TIMESTAMP,
    ttl_cutoff: int | None = None,
    keep_deletes: bool = False,
    timestamps=None,
) -> list[Cell]:
    def passes(ts: int) -> bool:
        return (
            min_timestamp <= ts < max_timestamp
            and (ttl_cutoff is None or ts >= ttl_cutoff)
            and (timestamps is None or ts in set(timestamps))
        )

    if keep_deletes:
        return [c for c in cells if passes(c.timestamp)]
    family_deleted: dict[tuple, int] = {}
    column_deleted: dict[tuple, int] = {}
    version_deleted: set[tuple] = set()
    for c in cells:
        if c.type == DELETE_FAMILY:
            key = (c.row, c.family)
            family_deleted[key] = max(family_deleted.get(key, c.timestamp), c.timestamp)
        elif c.type == DELETE_COLUMN:
            key = (c.row, c.family, c.qualifier)
            column_deleted[key] = max(column_deleted.get(key, c.timestamp), c.timestamp)
        elif c.type == DELETE:
            version_deleted.add((c.row, c.family, c.qualifier, c.timestamp))
    out = []
    versions: Counter = Counter()
    for c in cells:
        if c.type != PUT:
            continue
        if c.timestamp <= family_deleted.get((c.row, c.family), -1):
            continue
        if c.timestamp <= column_deleted.get((c.row, c.family, c.qualifier), -1):
            continue
        if (c.row, c.family, c.qualifier, c.timestamp) in version_deleted:
            continue
        if not passes(c.timestamp):
            continue
        versions[c[:3]] += 1
        if versions[c[:3]] <= max_versions:
            out.append(c)
    return out


def model_rows(cells: list[Cell], columns: list[bytes], include_timestamp: bool) -> list[dict]:
    rows: dict[bytes, list[Cell]] = {}
    for c in cells:
        if c.type == PUT:
            rows.setdefault(c.row, []).append(c)
    out = []
    for row_key, row_cells in rows.items():
        record = {"key": row_key}
        found = False
        for spec in columns:
            family, sep, qualifier = spec.partition(b":")
            name = family.decode("utf-8", "backslashreplace")
            if sep:  # b"f:q", or b"f:" for the empty qualifier
                name += ":" + qualifier.decode("utf-8", "backslashreplace")
                match = [c for c in row_cells if c.family == family and c.qualifier == qualifier]
                record[name] = match[0].value if match else None
                if include_timestamp:
                    record[name + "@ts"] = match[0].timestamp if match else None
                found |= bool(match)
            else:
                entries: dict[bytes, bytes] = {}
                for c in row_cells:
                    if c.family == family:
                        entries.setdefault(c.qualifier, c.value)
                record[name] = list(entries.items()) if entries else None
                found |= bool(entries)
        if found:
            out.append(record)
    return out


# ---------------------------------------------------------------------------
# Strategies

# Key pools of different shapes: variable widths go through Arrow's string
# kernels, one common width of 1/2/4/8 bytes through integer views (with
# high bytes to check unsigned big-endian order), other widths through Arrow.
ROW_POOLS = [
    [b"", b"\x00", b"a", b"a\x00", b"ab", b"b", b"\xff"],
    [i.to_bytes(4, "big") for i in (1, 256, 2**31 - 1, 2**31, 2**32 - 2)],
    [b"row-1", b"row-2", b"rox-0"],
]
FAMILY_POOLS = [[b"f", b"g"], [b"f", b"gg"], [b"f"]]
QUALIFIER_POOLS = [[b"", b"a", b"b", b"b\x00"], [b"aa", b"ab", b"\xffz"], [b"q"]]


class Universe(NamedTuple):
    """The keys one example draws its cells from."""

    rows: list[bytes]
    families: list[bytes]
    qualifiers: list[bytes]


universes = st.builds(
    Universe,
    st.sampled_from(ROW_POOLS),
    st.sampled_from(FAMILY_POOLS),
    st.sampled_from(QUALIFIER_POOLS),
)

ALL_TYPES = (PUT, PUT, PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY)


@st.composite
def cell_st(draw, universe: Universe, types=ALL_TYPES, max_ts=8):
    kind = draw(st.sampled_from(types))
    qualifier = b"" if kind == DELETE_FAMILY else draw(st.sampled_from(universe.qualifiers))
    value = draw(st.binary(max_size=3)) if kind == PUT else b""
    return Cell(
        draw(st.sampled_from(universe.rows)),
        draw(st.sampled_from(universe.families)),
        qualifier,
        draw(st.integers(0, max_ts)),
        kind,
        value,
    )


def unique_sorted(cells) -> list[Cell]:
    """One cell per key (the first drawn), in cell order: what a sorted source holds."""
    kept: dict[tuple, Cell] = {}
    for c in cells:
        kept.setdefault(c[:5], c)
    return sorted(kept.values(), key=sort_key)


@st.composite
def chunked_table(draw, cells: list[Cell]):
    """``cells`` as a RecordBatch, a Table, or a Table split into random chunks."""
    batch = cells_to_batch(cells)
    shape = draw(st.sampled_from(["batch", "table", "chunks"]))
    if shape == "batch":
        return batch
    if shape == "table" or len(cells) < 2:
        return pa.Table.from_batches([batch])
    cuts = sorted(draw(st.lists(st.integers(1, len(cells) - 1), max_size=3)))
    bounds = [0] + cuts + [len(cells)]
    return pa.Table.from_batches(
        [batch.slice(a, b - a) for a, b in zip(bounds, bounds[1:])], schema=CELL_SCHEMA
    )


@st.composite
def sources_st(draw, universe: Universe, types=ALL_TYPES):
    """1-4 sorted sources drawn from a shared pool so that keys collide across sources."""
    pool = draw(st.lists(cell_st(universe, types), max_size=30))
    count = draw(st.integers(1, 4))
    sources = []
    for _ in range(count):
        picked = draw(st.lists(st.sampled_from(pool), max_size=20)) if pool else []
        extra = draw(st.lists(cell_st(universe, types), max_size=5))
        # Same key, different value per source: the newest value must win.
        tag = bytes([len(sources)])
        picked = [c._replace(value=c.value + tag) if c.type == PUT else c for c in picked]
        sources.append(unique_sorted(picked + extra))
    return sources


def to_cells(table) -> list[Cell]:
    return batch_to_cells(table)


# ---------------------------------------------------------------------------
# merge_sources


@SETTINGS
@given(universes.flatmap(sources_st), st.data())
def test_merge_matches_model(sources, data):
    tables = [data.draw(chunked_table(s)) for s in sources]
    merged = merge_sources(tables)
    assert isinstance(merged, pa.Table)
    assert merged.schema.equals(CELL_SCHEMA)
    assert to_cells(merged) == model_merge(sources)
    assert is_sorted(merged, strict=True)


def test_merge_single_source_is_returned_as_is():
    table = pa.Table.from_batches([batch(put(b"r", b"q", 1, b"v"))])
    assert merge_sources([table]) is table
    one = batch(put(b"r", b"q", 1, b"v"))
    assert to_cells(merge_sources([one])) == to_cells(one)


def test_merge_disjoint_sources_are_concatenated_in_row_order():
    newer = batch(put(b"m", b"q", 5, b"2"), put(b"z", b"q", 5, b"3"))
    older = batch(put(b"a", b"q", 1, b"1"), put(b"c", b"q", 1, b"1"))
    merged = merge_sources([newer, older])
    assert [c.row for c in to_cells(merged)] == [b"a", b"c", b"m", b"z"]


def test_merge_newest_source_wins_exact_duplicate():
    newest = batch(put(b"r", b"q", 7, b"new"))
    oldest = batch(put(b"r", b"q", 7, b"old"), put(b"r", b"q", 6, b"older"))
    assert [c.value for c in to_cells(merge_sources([newest, oldest]))] == [b"new", b"older"]
    assert [c.value for c in to_cells(merge_sources([oldest, newest]))] == [b"old", b"older"]


def test_merge_empty_inputs():
    assert merge_sources([]).num_rows == 0
    assert merge_sources([]).schema.equals(CELL_SCHEMA)
    empty = CELL_SCHEMA.empty_table()
    one = batch(put(b"r", b"q", 1, b"v"))
    assert merge_sources([empty, empty]).num_rows == 0
    assert to_cells(merge_sources([empty, one, empty])) == to_cells(one)


def test_merge_rejects_wrong_schema():
    with pytest.raises(InvalidArgument, match=r"sources\[1\]"):
        merge_sources([CELL_SCHEMA.empty_table(), pa.table({"row": [b"a"]})])
    with pytest.raises(InvalidArgument, match="sources"):
        merge_sources([[("r", "f", "q", 1, 4, "v")]])


# ---------------------------------------------------------------------------
# resolve


@st.composite
def resolve_args(draw):
    args = {}
    if draw(st.booleans()):
        args["max_versions"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        low = draw(st.integers(0, 8))
        args["min_timestamp"] = low
        args["max_timestamp"] = draw(st.integers(low, 10))
    if draw(st.booleans()):
        args["ttl_cutoff"] = draw(st.integers(0, 8))
    if draw(st.integers(0, 4)) == 0:
        args["keep_deletes"] = True
    if draw(st.integers(0, 3)) == 0:
        args["timestamps"] = draw(st.lists(st.integers(0, 8), max_size=4))
    return args


@SETTINGS
@given(universes.flatmap(sources_st), resolve_args(), st.data())
def test_resolve_matches_model(sources, args, data):
    merged = model_merge(sources)
    table = data.draw(chunked_table(merged))
    got = resolve(table, **args)
    assert isinstance(got, pa.Table)
    assert to_cells(got) == model_resolve(merged, **args)


@SETTINGS
@given(
    universes.flatmap(lambda u: st.lists(cell_st(u, types=(PUT,), max_ts=3), max_size=40)),
    st.integers(1, 3),
    st.data(),
)
def test_resolve_puts_only_matches_model(cells, max_versions, data):
    cells = unique_sorted(cells)
    table = data.draw(chunked_table(cells))
    assert to_cells(resolve(table, max_versions=max_versions)) == model_resolve(cells, max_versions)


def model_raw_versions(cells: list[Cell], max_versions: int) -> list[Cell]:
    """HBase's raw scan with VERSIONS => n, cell by cell: markers do not count,
    a column (row, family, qualifier) stops at its n+1-th put."""
    out, puts, column = [], 0, None
    for c in cells:
        if c[:3] != column:
            column, puts = c[:3], 0
        puts += c.type == PUT
        if puts <= max_versions:
            out.append(c)
    return out


@SETTINGS
@given(universes.flatmap(sources_st), st.integers(1, 4), st.data())
def test_raw_versions_matches_model(sources, max_versions, data):
    merged = model_merge(sources)
    table = data.draw(chunked_table(merged))
    got = raw_versions(table, max_versions)
    assert isinstance(got, pa.Table)
    assert to_cells(got) == model_raw_versions(merged, max_versions)


def test_resolve_returns_input_when_nothing_is_dropped():
    table = pa.Table.from_batches(
        [batch(put(b"a", b"x", 3, b"1"), put(b"a", b"y", 3, b"2"), put(b"b", b"x", 2, b"3"))]
    )
    assert resolve(table) is table
    assert resolve(table, keep_deletes=True) is table
    assert resolve(table, max_versions=5, min_timestamp=2, max_timestamp=4) is table


def test_resolve_markers_outside_time_range_still_hide():
    cells = [
        Cell(b"r", b"f", b"", 9, DELETE_FAMILY, b""),
        Cell(b"r", b"f", b"q", 5, PUT, b"hidden"),
        Cell(b"s", b"f", b"q", 9, DELETE_COLUMN, b""),
        Cell(b"s", b"f", b"q", 5, PUT, b"hidden"),
        Cell(b"t", b"f", b"q", 9, DELETE, b""),
        Cell(b"t", b"f", b"q", 9, PUT, b"hidden"),
        Cell(b"t", b"f", b"q", 5, PUT, b"shown"),
    ]
    got = resolve(cells_to_batch(cells), max_versions=3, min_timestamp=0, max_timestamp=6)
    assert [c.value for c in to_cells(got)] == [b"shown"]


def test_resolve_family_delete_spans_columns_but_not_families_or_newer():
    cells = unique_sorted(
        [
            Cell(b"r", b"f", b"", 5, DELETE_FAMILY, b""),
            Cell(b"r", b"f", b"", 5, PUT, b"empty-qualifier-hidden"),
            Cell(b"r", b"f", b"a", 6, PUT, b"newer"),
            Cell(b"r", b"f", b"a", 4, PUT, b"hidden"),
            Cell(b"r", b"f", b"z", 1, PUT, b"hidden"),
            Cell(b"r", b"g", b"a", 1, PUT, b"other-family"),
            Cell(b"s", b"f", b"a", 1, PUT, b"other-row"),
        ]
    )
    got = resolve(cells_to_batch(cells), max_versions=10)
    assert [c.value for c in to_cells(got)] == [b"newer", b"other-family", b"other-row"]


def test_resolve_edge_cases():
    empty = CELL_SCHEMA.empty_table()
    assert resolve(empty).num_rows == 0
    markers_only = batch(
        marker(b"r", b"", 3, DELETE_FAMILY),
        marker(b"r", b"q", 3, DELETE_COLUMN),
        marker(b"r", b"q", 2, DELETE),
    )
    assert resolve(markers_only).num_rows == 0
    assert resolve(markers_only, keep_deletes=True).num_rows == 3
    single = cells_to_batch([Cell(b"r", b"f", b"q", 3, PUT, b"v")])
    assert to_cells(resolve(single)) == to_cells(single)
    assert resolve(single, ttl_cutoff=4).num_rows == 0
    assert resolve(single, timestamps=[]).num_rows == 0
    assert resolve(single, timestamps=[3]).num_rows == 1
    assert resolve(single, min_timestamp=3, max_timestamp=3).num_rows == 0


def test_resolve_rejects_bad_arguments():
    single = cells_to_batch([Cell(b"r", b"f", b"q", 3, PUT, b"v")])
    with pytest.raises(InvalidArgument, match="max_versions"):
        resolve(single, max_versions=0)
    with pytest.raises(InvalidArgument, match="min_timestamp"):
        resolve(single, min_timestamp=5, max_timestamp=4)
    bad = cells_to_batch([Cell(b"r", b"f", b"q", 3, 7, b"v")])
    with pytest.raises(InvalidArgument, match="unknown cell type"):
        resolve(bad)
    with pytest.raises(InvalidArgument, match="cells"):
        resolve(pa.table({"row": pa.array([b"a"])}))


# ---------------------------------------------------------------------------
# cells_to_rows

@st.composite
def column_lists(draw, universe: Universe):
    """Column specs over the universe's families and qualifiers, plus absent ones."""
    families = universe.families + [b"h"]
    qualified = [f + b":" + q for f in families for q in universe.qualifiers + [b"zz"]]
    whole = list(families)
    chosen = draw(st.lists(st.sampled_from(qualified + whole), min_size=1, max_size=4))
    unique, names = [], set()
    for spec in chosen:
        name = parse_column(spec).name
        if name not in names:
            names.add(name)
            unique.append(spec)
    return unique


def assert_rows(batch: pa.RecordBatch, expected: list[dict], columns, include_timestamp):
    names = ["key"]
    for spec in columns:
        parsed = parse_column(spec)
        names.append(parsed.name)
        if parsed.qualifier is None:
            assert batch.schema.field(parsed.name).type == FAMILY_MAP_TYPE
        elif include_timestamp:
            names.append(parsed.name + "@ts")
            assert batch.schema.field(parsed.name + "@ts").type == pa.int64()
    assert batch.schema.names == names
    assert batch.schema.field("key").type == pa.binary()
    assert not batch.schema.field("key").nullable
    assert batch.to_pylist() == expected


@st.composite
def pivot_case(draw):
    universe = draw(universes)
    return draw(sources_st(universe)), draw(column_lists(universe))


@SETTINGS
@given(pivot_case(), st.booleans(), st.booleans(), st.data())
def test_cells_to_rows_matches_model(case, include_timestamp, resolved, data):
    sources, columns = case
    cells = model_merge(sources)
    if resolved:
        cells = model_resolve(cells, max_versions=data.draw(st.integers(1, 3)))
    table = data.draw(chunked_table(cells))
    batch = cells_to_rows(table, columns, include_timestamp=include_timestamp)
    assert isinstance(batch, pa.RecordBatch)
    assert_rows(batch, model_rows(cells, columns, include_timestamp), columns, include_timestamp)


def test_cells_to_rows_single_family_map_and_columns():
    cells = [
        Cell(b"r1", b"f", b"a", 2, PUT, b"1"),
        Cell(b"r1", b"f", b"b", 2, PUT, b"2"),
        Cell(b"r2", b"f", b"b", 3, PUT, b"3"),
    ]
    table = pa.Table.from_batches([cells_to_batch(cells)])
    rows = cells_to_rows(table, [b"f", b"f:a"], include_timestamp=True)
    assert rows.to_pylist() == [
        {"key": b"r1", "f": [(b"a", b"1"), (b"b", b"2")], "f:a": b"1", "f:a@ts": 2},
        {"key": b"r2", "f": [(b"b", b"3")], "f:a": None, "f:a@ts": None},
    ]


def test_cells_to_rows_names_are_utf8_with_escapes_for_other_bytes():
    cells = batch(put(b"r", b"q\xfe", 1, b"v", b"f\xff"), put(b"r", b"q", 1, b"w", "é".encode()))
    table = pa.Table.from_batches([cells]).sort_by("family")
    rows = cells_to_rows(table, [b"f\xff:q\xfe", "f\udcff", "é:q".encode()])
    assert rows.schema.names == ["key", "f\\xff:q\\xfe", "f\\xff", "é:q"]
    assert rows.column(1).to_pylist() == [b"v"]
    assert rows.column(3).to_pylist() == [b"w"]


def test_cells_to_rows_edge_cases():
    empty = cells_to_rows(CELL_SCHEMA.empty_table(), [b"f:a", b"g"], include_timestamp=True)
    assert empty.num_rows == 0
    assert empty.schema.names == ["key", "f:a", "f:a@ts", "g"]
    only_other = cells_to_rows(cells_to_batch([Cell(b"r", b"x", b"a", 1, PUT, b"v")]), [b"f:a"])
    assert only_other.num_rows == 0
    markers = batch(marker(b"r", b"", 1, DELETE_FAMILY), marker(b"r", b"a", 1, DELETE_COLUMN))
    assert cells_to_rows(markers, [b"f", b"f:a"]).num_rows == 0


def test_cells_to_rows_rejects_bad_columns():
    one = cells_to_batch([Cell(b"r", b"f", b"a", 1, PUT, b"v")])
    with pytest.raises(InvalidArgument, match="at least one"):
        cells_to_rows(one, [])
    with pytest.raises(InvalidArgument, match="more than once"):
        cells_to_rows(one, [b"f:a", "f:a"])
    with pytest.raises(InvalidArgument, match="empty family"):
        cells_to_rows(one, [b":a"])
    with pytest.raises(InvalidArgument, match="column spec"):
        cells_to_rows(one, [3])


# ---------------------------------------------------------------------------
# row_boundaries, reverse_rows, is_sorted


@SETTINGS
@given(universes.flatmap(sources_st), st.data())
def test_row_structure_matches_model(sources, data):
    cells = model_merge(sources)
    table = data.draw(chunked_table(cells))
    starts = row_boundaries(table)
    expected_starts = [i for i, c in enumerate(cells) if i == 0 or c.row != cells[i - 1].row]
    assert starts.tolist() == expected_starts
    assert starts.dtype == np.int64 or len(starts) == 0
    groups: dict[bytes, list[Cell]] = {}
    for c in cells:
        groups.setdefault(c.row, []).append(c)
    expected_reverse = [c for row in reversed(list(groups)) for c in groups[row]]
    assert to_cells(reverse_rows(table)) == expected_reverse


@SETTINGS
@given(universes.flatmap(lambda u: st.lists(cell_st(u), min_size=2, max_size=25)), st.data())
def test_is_sorted_matches_model(cells, data):
    order = data.draw(st.permutations(cells))
    keys = [sort_key(c) for c in order]
    table = data.draw(chunked_table(list(order)))
    assert is_sorted(table) == all(a <= b for a, b in zip(keys, keys[1:]))
    assert is_sorted(table, strict=True) == all(a < b for a, b in zip(keys, keys[1:]))


def test_is_sorted_cell_order_details():
    forward = [Cell(b"a", b"f", b"q", 5, DELETE_COLUMN, b""), Cell(b"a", b"f", b"q", 5, PUT, b"")]
    assert is_sorted(cells_to_batch(forward))
    assert not is_sorted(cells_to_batch(forward[::-1]))
    newer_first = [Cell(b"a", b"f", b"q", 6, PUT, b""), Cell(b"a", b"f", b"q", 5, PUT, b"")]
    assert is_sorted(cells_to_batch(newer_first))
    assert not is_sorted(cells_to_batch(newer_first[::-1]))
    prefix = [Cell(b"a", b"f", b"q", 1, PUT, b""), Cell(b"a\x00", b"f", b"q", 9, PUT, b"")]
    assert is_sorted(cells_to_batch(prefix))
    assert is_sorted(CELL_SCHEMA.empty_table())
    duplicate = [forward[1], forward[1]]
    assert is_sorted(cells_to_batch(duplicate))
    assert not is_sorted(cells_to_batch(duplicate), strict=True)


def test_row_structure_edge_cases():
    empty = CELL_SCHEMA.empty_table()
    assert row_boundaries(empty).tolist() == []
    assert reverse_rows(empty).num_rows == 0
    one_row = batch(put(b"r", b"a", 1, b"1"), put(b"r", b"b", 1, b"2"))
    assert row_boundaries(one_row).tolist() == [0]
    assert to_cells(reverse_rows(one_row)) == to_cells(one_row)


# ---------------------------------------------------------------------------
# Larger tables and input checks


def test_scan_pipeline_on_larger_tables_matches_model():
    """Thousands of cells over fixed-width keys: merge, resolve, pivot, reverse."""
    rng = random.Random(7)
    rows = [i.to_bytes(4, "big") for i in rng.sample(range(2**32), 300)]
    kinds = [PUT] * 12 + [DELETE, DELETE_COLUMN, DELETE_FAMILY]
    sources = []
    for age in range(3):
        cells = []
        for _ in range(1500):
            kind = rng.choice(kinds)
            qualifier = b"" if kind == DELETE_FAMILY else rng.choice([b"a", b"b", b"c"])
            value = bytes([age]) * rng.randint(0, 5) if kind == PUT else b""
            row, family = rng.choice(rows), rng.choice([b"f", b"g"])
            cells.append(Cell(row, family, qualifier, rng.randint(0, 20), kind, value))
        sources.append(unique_sorted(cells))
    merged_model = model_merge(sources)
    merged = merge_sources([pa.Table.from_batches([cells_to_batch(s)]) for s in sources])
    assert to_cells(merged) == merged_model
    cases = ({}, {"max_versions": 3, "ttl_cutoff": 4}, {"min_timestamp": 5, "max_timestamp": 15})
    for args in cases:
        resolved = resolve(merged, **args)
        assert to_cells(resolved) == model_resolve(merged_model, **args)
        columns = [b"f:a", b"g", b"f:c"]
        expected = model_rows(to_cells(resolved), columns, True)
        got = cells_to_rows(resolved, columns, include_timestamp=True)
        assert_rows(got, expected, columns, True)
    expected_reverse = sorted(merged_model, key=lambda c: (_desc(c.row), sort_key(c)))
    assert to_cells(reverse_rows(merged)) == expected_reverse
    assert is_sorted(merged, strict=True)


def _desc(key: bytes) -> tuple:
    """A key that sorts byte strings in descending order."""
    return tuple(255 - b for b in key) + (256,)


def test_nullable_schema_is_accepted_and_nulls_are_rejected():
    nullable = pa.schema([pa.field(f.name, f.type) for f in CELL_SCHEMA])
    record = dict(zip(CELL_SCHEMA.names, put(b"r", b"q", 1, b"v")))
    table = pa.Table.from_pylist([record], schema=nullable)
    assert to_cells(resolve(table)) == [put(b"r", b"q", 1, b"v")]
    assert resolve(table).schema.equals(CELL_SCHEMA)
    with_null = pa.Table.from_pylist([{**record, "value": None}], schema=nullable)
    with pytest.raises(InvalidArgument, match="value"):
        resolve(with_null)


def test_resolve_time_bounds_beyond_int64():
    cells = batch(put(b"r", b"q", LATEST_TIMESTAMP, b"v"), put(b"r", b"q", 1, b"w"))
    assert resolve(cells, max_versions=2, max_timestamp=2**64).num_rows == 2
    assert resolve(cells, max_versions=2).num_rows == 1
    assert resolve(cells, max_versions=2, min_timestamp=-(2**64), max_timestamp=2**64).num_rows == 2
    assert resolve(cells, max_versions=2, min_timestamp=2**64, max_timestamp=2**65).num_rows == 0


def test_merge_narrow_newer_source_into_large_one():
    """A memstore over a narrow key range inside a large file, sharing edge rows."""
    file_cells = [put(i.to_bytes(4, "big"), q, 5, b"file") for i in range(1000) for q in (b"a", b"b")]
    memstore = [
        put((400).to_bytes(4, "big"), b"a", 5, b"mem"),  # same key: replaces the file's cell
        put((400).to_bytes(4, "big"), b"a", 6, b"mem"),
        put((400).to_bytes(4, "big"), b"c", 1, b"mem"),
        marker((450).to_bytes(4, "big"), b"b", 9, DELETE_COLUMN),
        put((600).to_bytes(4, "big"), b"0", 1, b"mem"),
    ]
    sources = [unique_sorted(memstore), file_cells]
    merged = merge_sources([cells_to_batch(s) for s in sources])
    assert to_cells(merged) == model_merge(sources)
    older_first = merge_sources([cells_to_batch(s) for s in sources[::-1]])
    assert to_cells(older_first) == model_merge(sources[::-1])


# -- merging sorted runs --------------------------------------------------------------
def _model_merge(runs_newest_first: list[list[Cell]]) -> list[Cell]:
    """Cell order, the newest run's cell kept where several hold the same key."""
    merged: dict = {}
    for run in reversed(runs_newest_first):
        for c in run:
            merged[sort_key(c)] = c
    return [merged[k] for k in sorted(merged)]


@pytest.mark.parametrize("seed", range(6))
def test_merge_runs_equals_a_sort_of_the_runs(seed):
    from storage.kernels.merge import merge_runs

    rng = random.Random(seed)
    rows = [b"", b"\x00", b"a", b"a\x00", b"a\x00\x00", b"ab", b"b", b"\xff", b"\xff\x00"]
    runs = []
    for r in range(rng.randint(2, 4)):
        cells = {}
        for _ in range(rng.randint(0, 60)):
            c = Cell(
                rng.choice(rows[1:]) + bytes([rng.randint(0, 2)]) * rng.randint(0, 2),
                rng.choice([b"f", b"g"]),
                rng.choice([b"", b"q", b"q\x00", b"qq"]),
                rng.choice([-(1 << 63), -1, 0, 1, 5, LATEST_TIMESTAMP]),
                rng.choice([PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY]),
                b"run%d" % r,
            )
            cells[sort_key(c)] = c
        runs.append([cells[k] for k in sorted(cells)])
    tables = [pa.Table.from_batches([cells_to_batch(run)]) if run else CELL_SCHEMA.empty_table() for run in runs]
    assert batch_to_cells(merge_runs(tables)) == _model_merge(runs)
    assert batch_to_cells(merge_sources(tables)) == _model_merge(runs)


def test_one_array_keeps_a_single_chunk_without_a_copy():
    from storage.kernels.cell_columns import one_array

    a = pa.array([b"x" * 10, None, b"yz"], pa.binary())
    single = one_array(pa.chunked_array([a]))
    assert single.buffers()[2].address == a.buffers()[2].address  # combine_chunks would copy it
    assert one_array(a) is a
    assert one_array(pa.chunked_array([a, a])).to_pylist() == a.to_pylist() * 2
    empty = one_array(pa.chunked_array([], pa.binary()))
    assert isinstance(empty, pa.Array) and len(empty) == 0 and empty.type == pa.binary()


# ---------------------------------------------------------------------------
# sort_sources: cells in no order (a log of hashed keys) sorted into cell order

_ROW_SHAPES = {
    # keys of one width the merge reads as integers (one word, one word under a lead, two
    # words), and keys of several widths (their padded words: word_keys)
    "4": lambda i: (i * 2654435761 % 2**32).to_bytes(4, "big"),
    "lead": lambda i: b"user%012d" % (i * 7 % 50),
    "12": lambda i: (i * 2654435761 % 2**32).to_bytes(4, "big") + (i % 7).to_bytes(8, "big"),
    "mixed": lambda i: b"r" * (i % 3) + bytes([i % 11]),
    "ycsb": lambda i: b"user%d" % (i * 2654435761 % 10**(4 + i % 6)),
}


_LOG_CELLS = st.lists(st.tuples(st.integers(0, 40), st.sampled_from([b"f", b"g"]),
                                 st.sampled_from([b"", b"a", b"b\x00", b"b"]), st.integers(-3, 3),
                                 st.sampled_from([PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY]), st.binary(max_size=4)),
                       max_size=80)
"""A log's cells: (row number, family, qualifier, timestamp, type, value), rows shaped by _ROW_SHAPES."""


@SETTINGS
@given(
    shape=st.sampled_from(sorted(_ROW_SHAPES)),
    cells=_LOG_CELLS,
    cuts=st.lists(st.integers(0, 80), max_size=2),
)
def test_sort_sources_orders_cells_in_no_order_as_the_model(shape, cells, cuts):
    from storage.kernels.merge import sort_sources

    log = [Cell(_ROW_SHAPES[shape](r), f, q, t, k, v) for r, f, q, t, k, v in cells]
    bounds = sorted({0, len(log), *[c % (len(log) + 1) for c in cuts]})
    sources = [log[a:b] for a, b in zip(bounds, bounds[1:])] or [[]]
    got = sort_sources([pa.Table.from_batches([cells_to_batch(s)], schema=CELL_SCHEMA) for s in sources])
    sorted_cells = [tuple(c) for c in batch_to_cells(got.combine_chunks().to_batches()[0])] if got.num_rows else []
    assert sorted_cells == [tuple(c) for c in model_merge(sources)]


@SETTINGS
@given(
    shape=st.sampled_from(sorted(_ROW_SHAPES)),
    cells=_LOG_CELLS,
)
def test_sort_log_keeps_the_last_write_as_sort_sources_of_the_log_reversed(shape, cells):
    """A log's cells (oldest first) sorted without reversing them: the same cells as
    ``sort_sources`` of the log reversed, and as the model (the last write of a key wins)."""
    from storage.kernels.gather import reversed_rows
    from storage.kernels.merge import sort_log, sort_sources

    log = [Cell(_ROW_SHAPES[shape](r), f, q, t, k, v) for r, f, q, t, k, v in cells]
    if not log:
        return
    table = pa.Table.from_batches([cells_to_batch(log)], schema=CELL_SCHEMA)
    got = sort_log(table)
    assert got.to_pylist() == sort_sources([reversed_rows(table)]).to_pylist()
    assert [tuple(c) for c in batch_to_cells(got.combine_chunks().to_batches()[0])] == \
        [tuple(c) for c in model_merge([log[::-1]])]


def test_is_sorted_tells_a_log_in_no_order_early_and_late():
    from storage.kernels.order import is_sorted

    rows = [b"r%03d" % i for i in range(40)]
    def table(keys):
        return pa.Table.from_batches([cells_to_batch([Cell(k, b"f", b"q", 1, PUT, b"") for k in keys])],
                                     schema=CELL_SCHEMA)
    assert is_sorted(table(rows), strict=True)
    assert not is_sorted(table([rows[1], rows[0]] + rows[2:]))  # among the first cells looked at
    assert not is_sorted(table(rows[:30] + [rows[35]] + rows[30:35] + rows[36:]))  # past them
    assert not is_sorted(table(rows[:5] + [rows[4]] + rows[5:]), strict=True)  # a repeat
    assert is_sorted(table(rows[:5] + [rows[4]] + rows[5:]))



# ---------------------------------------------------------------------------
# columns_to_family_map: a row batch's columns of one family as its map column
# ---------------------------------------------------------------------------


@st.composite
def family_row_batches(draw):
    """A row batch of a whole family's columns (some rows lacking some, now and then a row
    lacking all), its qualifiers, whether each column has its ``@ts`` column, and the
    expected map entries per row (None: no cell)."""
    k = draw(st.integers(1, 6))
    qualifiers = sorted(draw(st.lists(st.binary(max_size=4), min_size=k, max_size=k, unique=True)))
    n = draw(st.integers(0, 30))
    # columns every row holds (the grid of entries) or not (only the present ones)
    full = draw(st.booleans())
    cell = st.binary(max_size=12) if full else st.one_of(st.none(), st.binary(max_size=12))
    values = [draw(st.lists(cell, min_size=n, max_size=n)) for _ in range(k)]
    include_ts = draw(st.booleans())
    names = [(b"f:" + q).decode("latin-1") for q in qualifiers]
    fields = [pa.field("key", pa.binary(), nullable=False)]
    arrays = [pa.array([b"r%03d" % i for i in range(n)], pa.binary())]
    for name, column in zip(names, values):
        fields.append(pa.field(name, pa.binary()))
        arrays.append(pa.array(column, pa.binary()))
        if include_ts:
            fields.append(pa.field(name + "@ts", pa.int64()))
            arrays.append(pa.array([None if v is None else 7 for v in column], pa.int64()))
    batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    want = []
    for i in range(n):
        entries = [(q, column[i]) for q, column in zip(qualifiers, values) if column[i] is not None]
        want.append(entries or None)
    return batch, qualifiers, include_ts, want


@SETTINGS
@given(case=family_row_batches())
def test_columns_to_family_map_matches_the_rows_both_ways(case):
    from storage import native
    from storage.kernels import columns_to_family_map, gather

    batch, qualifiers, include_ts, want = case
    for kernel in {None, native.NATIVE}:  # the compiled gather when built, and the reference
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(gather, "NATIVE", kernel)
            out = columns_to_family_map(batch, "f", qualifiers, include_ts)
        out.validate(full=True)
        assert out.schema == pa.schema([pa.field("key", pa.binary(), nullable=False), pa.field("f", FAMILY_MAP_TYPE)])
        assert out.column(0).equals(batch.column(0))
        assert out.column(1).to_pylist() == want


def test_columns_to_family_map_refuses_a_batch_of_other_columns():
    from storage.kernels import columns_to_family_map

    batch = pa.RecordBatch.from_pydict({"key": [b"a"], "f:q": [b"v"]})
    with pytest.raises(InvalidArgument, match="expected a key and 2 columns"):
        columns_to_family_map(batch, "f", [b"q", b"r"])
    with pytest.raises(InvalidArgument, match="expected binary columns"):
        columns_to_family_map(pa.RecordBatch.from_pydict({"key": [b"a"], "f:q": [1]}), "f", [b"q"])
