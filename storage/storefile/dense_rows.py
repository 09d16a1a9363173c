"""Row batches straight from dense store file blocks: slices, no gather, no pivot.

A dense block (``storage.storefile.dense.DenseBlock``) already holds one
value column per qualifier, aligned with its row keys, which is the shape a
scan into Arrow rows returns.  The streaming scan path hands such blocks to
:func:`dense_rows`, which picks the requested columns, applies value filters
(SingleColumnValueFilter, ColumnValueFilter, ValueFilter, row-key filters, column
filters and lists of them) as one vectorized comparison per tested column, a
column filter as one answer per column (:func:`dense_filter`,
:func:`filter_masks`), and drops rows without any requested column, all over
whole arrays.  Keys-only
scans that keep only the first cell of each row take :func:`first_cells`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CELL_SCHEMA, EMPTY_CELLS, CellType
from ..columns import parse_column
from .dense import DenseBlock, constant_binary
from ..kernels.order import row_starts

__all__ = [
    "dense_columns", "dense_rows", "row_schema", "dense_filter", "filter_masks", "plan_qualifiers", "read_qualifiers",
    "first_cells", "first_cell_only", "first_cells_of_parts", "tests_every_column", "ColumnsWhere", "plan_columns",
    "held_qualifiers",
]


def dense_columns(family: bytes, columns: list[bytes]) -> tuple[list[str], list[bytes]] | None:
    """The field names and qualifiers of the row columns when each is one
    ``family:qualifier`` of ``family``; None when a spec names a whole family
    or another family (those rows take the cell path)."""
    names, qualifiers = [], []
    for spec in columns:
        parsed = parse_column(spec)
        if parsed.family != family or parsed.qualifier is None:
            return None
        names.append(parsed.name)
        qualifiers.append(parsed.qualifier)
    return names, qualifiers


def dense_rows(
    dense: DenseBlock,
    columns: list[bytes],
    qualifiers: list[bytes],
    include_timestamp: bool,
    mask: np.ndarray | None = None,
    value_masks: dict | None = None,
    also_present: Sequence[bytes] = (),
    dictionaries: bool = False,
) -> pa.RecordBatch | None:
    """The row batch of ``dense`` (as :func:`storage.kernels.cells_to_rows`
    would build it from the block's cells) for the columns named ``columns``
    (field names, as ``parse_column(spec).name``) with the qualifiers
    ``qualifiers``; ``mask`` (boolean per row) keeps only some rows and
    ``value_masks`` (qualifier index -> boolean per row) only some cells.

    Rows without any kept cell are dropped first, so the value columns are
    filtered once and only the surviving rows' cells are masked.  A cell of
    ``also_present`` (qualifiers not output: hidden columns) keeps its row too.
    With ``dictionaries``, a column the block holds as dictionary codes comes as a
    ``pa.DictionaryArray`` (binary entries) at the kept rows, not expanded, unless a
    value mask nulls some of its cells.
    """
    memo_key = None
    if mask is None and not value_masks:
        memo_key = (tuple(columns), tuple(qualifiers), include_timestamp, tuple(also_present), dictionaries)
        memo = dense.row_batches
        if memo is not None and memo_key in memo:
            return memo[memo_key]
    out = _dense_rows(dense, columns, qualifiers, include_timestamp, mask, value_masks, also_present, dictionaries)
    if memo_key is not None and (out is None or out.num_rows == dense.num_rows):
        # only a batch of the block's own arrays (no row dropped, so nothing copied) is kept
        memo = dense.row_batches
        if memo is None:
            memo = dense.row_batches = {}
        if len(memo) < _ROW_BATCHES_KEPT:
            memo[memo_key] = out
    return out


#: how many column choices a dense block keeps its row batch for
_ROW_BATCHES_KEPT = 4


def _dense_rows(dense: DenseBlock, columns: list[bytes], qualifiers: list[bytes], include_timestamp: bool,
                mask: np.ndarray | None, value_masks: dict | None,
                also_present: Sequence[bytes] = (), dictionaries: bool = False) -> pa.RecordBatch | None:
    n = dense.num_rows
    where = {q: j for j, q in enumerate(dense.qualifiers)}
    value_masks = value_masks or {}
    picked = []  # (field name, qualifier index or None, rows holding a kept cell or None for all, masked)
    present = np.zeros(n, dtype=bool)  # rows holding at least one kept cell
    any_full = False
    for name, qualifier in zip(columns, qualifiers):
        j = where.get(qualifier)
        if j is None:
            picked.append((name, None, None, False))
            continue
        has = dense.presence(j)
        cells = None if has is None else has.to_numpy(zero_copy_only=False)
        masked = j in value_masks
        if masked:
            cells = value_masks[j] if cells is None else cells & value_masks[j]
        picked.append((name, j, cells, masked))
        if cells is None:
            any_full = True
        elif not any_full:
            present |= cells
    for qualifier in also_present:
        j = where.get(qualifier)
        if j is None or any_full:
            continue
        has = dense.presence(j)
        cells = None if has is None else has.to_numpy(zero_copy_only=False)
        if j in value_masks:
            cells = value_masks[j] if cells is None else cells & value_masks[j]
        if cells is None:
            any_full = True
        else:
            present |= cells
    keep = None if any_full else present
    if mask is not None:
        keep = mask if keep is None else keep & mask
    if keep is not None and keep.all():
        keep = None
    if keep is not None and not keep.any():
        return None
    chosen = None if keep is None else pa.array(keep)
    rows = dense.rows if chosen is None else dense.rows.filter(chosen)
    m = len(rows)
    if m == 0:
        return None
    arrays = [rows]
    coded_any = False
    plain = dense.plain_timestamps() if include_timestamp else None
    for name, j, cells, masked in picked:
        if j is None:
            value, ts = pa.nulls(m, pa.binary()), pa.nulls(m, pa.int64())
        else:
            ts = plain[j] if include_timestamp else None
            coded = dense.column(j) if dictionaries and not masked else None
            if coded is not None and isinstance(coded, pa.DictionaryArray):
                value = coded if chosen is None else coded.filter(chosen)  # the kept rows' codes
                coded_any = True
            elif chosen is not None:
                value = dense.values_at(j, chosen)  # a dictionary-coded column expands the kept rows only
            else:
                value = dense.value(j)
            if chosen is not None:
                ts = ts.filter(chosen) if ts is not None else None
            if masked:  # absent cells are null already; masked-out present ones become null here
                kept = cells if keep is None else cells[keep]
                if not kept.any():
                    value, ts = pa.nulls(m, pa.binary()), pa.nulls(m, pa.int64()) if ts is not None else None
                elif not kept.all():
                    kept = pa.array(kept)
                    value = pc.if_else(kept, value, pa.scalar(None, pa.binary()))
                    ts = pc.if_else(kept, ts, pa.scalar(None, pa.int64())) if ts is not None else None
        arrays.append(value)
        if include_timestamp:
            arrays.append(ts)
    schema = row_schema([p[0] for p in picked], include_timestamp)
    if coded_any:
        schema = pa.schema([f if a.type == f.type else f.with_type(a.type) for f, a in zip(schema, arrays)])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def has_dictionaries(batch: pa.RecordBatch) -> bool:
    """Whether a row batch of :func:`dense_rows` holds a column of dictionary codes."""
    return any(pa.types.is_dictionary(f.type) for f in batch.schema)


def row_schema(names: list[str], include_timestamp: bool) -> pa.Schema:
    """The schema of a scan's row batches: ``key``, then per column its
    binary value (and its ``@ts`` timestamp when ``include_timestamp``)."""
    return _row_schema(tuple(names), include_timestamp)


@lru_cache(maxsize=256)
def _row_schema(names: tuple, include_timestamp: bool) -> pa.Schema:
    # built once per column choice: a schema costs more than a row group's other bookkeeping
    fields = [pa.field("key", pa.binary(), nullable=False)]
    for name in names:
        fields.append(pa.field(name, pa.binary()))
        if include_timestamp:
            fields.append(pa.field(f"{name}@ts", pa.int64()))
    return pa.schema(fields)


def first_cell_only(flt) -> bool:
    """True when a filter keeps exactly the first cell of each row with an empty
    value: ``FirstKeyOnlyFilter`` ANDed with plain ``KeyOnlyFilter`` (the
    row-counting filter)."""
    from ..filters import FilterList, FirstKeyOnlyFilter, KeyOnlyFilter

    if not isinstance(flt, FilterList) or flt.operator.name != "MUST_PASS_ALL" or not flt.filters:
        return False
    kinds = {type(f) for f in flt.filters}
    return (
        kinds == {FirstKeyOnlyFilter, KeyOnlyFilter}
        and all(not f.len_as_value for f in flt.filters if isinstance(f, KeyOnlyFilter))
    )


def _first_timestamps(parts: list[DenseBlock]) -> np.ndarray | None:
    """The first qualifier's timestamps of every part, when each part stores them
    run-length encoded with every row present (a bulk-loaded or compacted
    table): the runs of all parts expanded by one ``np.repeat``; else None."""
    values, ends, bases, runs = [], [], [], []
    base = 0
    for d in parts:
        ts = d.timestamps[0]
        if not pa.types.is_run_end_encoded(ts.type) or ts.values.null_count:
            return None
        values.append(ts.values)
        ends.append(ts.run_ends)
        bases.append(base)
        runs.append(len(ts.values))
        base += len(d.rows)
    stops = pa.concat_arrays(ends).to_numpy().astype(np.int64) + np.repeat(np.array(bases, dtype=np.int64), runs)
    lengths = np.empty(len(stops), dtype=np.int64)
    lengths[0] = stops[0]
    np.subtract(stops[1:], stops[:-1], out=lengths[1:])
    return np.repeat(pa.concat_arrays(values).to_numpy(), lengths)


def first_cells(parts: list[DenseBlock], family: bytes) -> pa.RecordBatch:
    """The first cell of every row of the dense parts (empty values), in order:
    what ``FirstKeyOnlyFilter() AND KeyOnlyFilter()`` leaves of them.

    One take builds the qualifier column of all parts: each row's first
    present qualifier is an index into the parts' qualifiers laid end to end.
    """
    rows, stamps, chosen = [], [], []
    names: list[bytes] = []
    bulk_ts = _first_timestamps(parts)
    if bulk_ts is not None:
        # every row's first cell is its block's first qualifier
        bases, counts = [], []
        for d in parts:
            bases.append(len(names))
            names.extend(d.qualifiers)
            counts.append(len(d.rows))
            rows.append(d.rows)
        chosen.append(np.repeat(np.array(bases, dtype=np.int64), counts))
    for d in parts if bulk_ts is None else ():
        n = len(d.rows)
        base = len(names)
        names.extend(d.qualifiers)
        rows.append(d.rows)
        plain = d.plain_timestamps()
        pick = np.full(n, -1, dtype=np.int64)
        ts = np.zeros(n, dtype=np.int64)
        for j in range(len(d.qualifiers)):
            has = pc.is_valid(plain[j]).to_numpy(zero_copy_only=False) & (pick < 0)
            pick[has] = base + j
            ts[has] = plain[j].fill_null(0).to_numpy(zero_copy_only=False)[has]
        chosen.append(pick)
        stamps.append(ts)
    total = sum(len(r) for r in rows)
    quals = pa.array(names, pa.binary()).take(pa.array(np.concatenate(chosen)))
    return pa.RecordBatch.from_arrays(
        [
            pa.concat_arrays(rows) if len(rows) > 1 else rows[0],
            constant_binary(family, total),
            quals,
            pa.array(bulk_ts if bulk_ts is not None else np.concatenate(stamps), pa.int64()),
            pa.array(np.full(total, int(CellType.PUT), dtype=np.uint8)),
            constant_binary(b"", total),
        ],
        schema=CELL_SCHEMA,
    )


def first_cells_of_parts(parts, family: bytes) -> pa.Table:
    """The first cell of every row of a file's keys-only :class:`BlockPart`
    pieces (in order), as one ``CELL_SCHEMA`` table: dense pieces through
    :func:`first_cells`, cell pieces by taking each row's first cell; a row
    that spans pieces keeps the cell of the piece it began in."""
    pieces = []
    for part in parts:
        if part.dense is not None:
            pieces.append(first_cells([part.dense], family))
        else:
            starts = row_starts(part.cells.column(0))
            pieces.append(part.cells.take(pa.array(starts)) if len(starts) != part.cells.num_rows else part.cells)
    if not pieces:
        return EMPTY_CELLS
    table = pa.Table.from_batches(pieces, schema=CELL_SCHEMA)
    starts = row_starts(table.column(0))
    return table if len(starts) == table.num_rows else table.take(pa.array(starts))


def dense_filter(flt, family: bytes):
    """How a filter applies to dense rows of ``family``, or None when it needs the cell path.

    A plan is a tuple:

    * ``("none",)`` without a filter (or with an empty FilterList);
    * ``("row", qualifier, op, comparator, filter_if_missing, exclude)`` for a
      ``SingleColumnValueFilter`` (``exclude``: a ``SingleColumnValueExcludeFilter``);
      a dense block holds one version per column, so ``latest_version_only``
      changes nothing, and a column of another family is missing (``qualifier``
      None: a scan streams one family only when the table has no other
      family the filter could name);
    * ``("column", qualifier, op, comparator)`` for a ``ColumnValueFilter``
      (``qualifier`` None for another family: nothing passes);
    * ``("cell", op, comparator)`` for a ``ValueFilter``;
    * ``("key", filter)`` for a filter deciding on the row key alone
      (``PrefixFilter``, ``RowFilter``, ``MultiRowRangeFilter``,
      ``InclusiveStopFilter``), tested on the block's row keys;
    * ``("qualifier", filter, family)`` for a filter keeping or dropping each cell by its
      column alone (``ColumnPrefixFilter``, ``MultipleColumnPrefixFilter``,
      ``ColumnRangeFilter``, ``QualifierFilter``, ``FamilyFilter``: their
      ``passes_column``), asked once per column of a block;
    * ``("all" | "one", [plans])`` for a stateless ``FilterList`` of such filters.

    ``family`` None: the plan of rows of several families (:mod:`storage.read.family_join`),
    whose columns are named ``family:qualifier`` in full: a plan's qualifier is that full
    name, and a column filter splits it at its first ``:`` (a family name holds none).
    """
    from ..filters import (
        ColumnPrefixFilter,
        ColumnRangeFilter,
        ColumnValueFilter,
        FamilyFilter,
        FilterList,
        InclusiveStopFilter,
        MultipleColumnPrefixFilter,
        MultiRowRangeFilter,
        PrefixFilter,
        QualifierFilter,
        RowFilter,
        SingleColumnValueExcludeFilter,
        SingleColumnValueFilter,
        ValueFilter,
    )

    if flt is None:
        return ("none",)
    kind = type(flt)
    if kind in (PrefixFilter, RowFilter, MultiRowRangeFilter, InclusiveStopFilter):
        return ("key", flt)
    if kind in (SingleColumnValueFilter, SingleColumnValueExcludeFilter):
        qualifier = _plan_column(flt, family)
        return ("row", qualifier, flt.op, flt.comparator, flt.filter_if_missing, kind is SingleColumnValueExcludeFilter)
    if kind is ColumnValueFilter:
        return ("column", _plan_column(flt, family), flt.op, flt.comparator)
    if kind is ValueFilter:
        return ("cell", flt.op, flt.comparator)
    if kind in (ColumnPrefixFilter, MultipleColumnPrefixFilter, ColumnRangeFilter, QualifierFilter, FamilyFilter):
        return ("qualifier", flt, family)
    if kind is FilterList and not flt.stateful:
        if not flt.filters:
            return ("none",)  # an empty list keeps everything
        plans = [dense_filter(f, family) for f in flt.filters]
        if any(p is None for p in plans):
            return None
        return ("all" if flt.operator.name == "MUST_PASS_ALL" else "one", plans)
    return None


def _plan_column(flt, family: bytes | None) -> bytes | None:
    """The column a single-column filter tests as a plan names it: its qualifier in
    ``family``'s rows (None: another family's column), its full ``family:qualifier`` in rows
    of several families (``family`` None)."""
    if family is None:
        return flt.family + b":" + flt.qualifier
    return flt.qualifier if flt.family == family else None


def plan_qualifiers(plan: tuple) -> list:
    """The qualifiers whose values a :func:`dense_filter` plan tests."""
    kind = plan[0]
    if kind in ("row", "column"):
        return [plan[1]] if plan[1] is not None else []
    if kind in ("all", "one"):
        return [q for p in plan[1] for q in plan_qualifiers(p)]
    return []


def tests_every_column(plan: tuple) -> bool:
    """True when a :func:`dense_filter` plan tests the values of every column it is given
    (a ValueFilter's ``cell`` test), so a column read only for its presence needs its values too."""
    kind = plan[0]
    if kind == "cell":
        return True
    return kind in ("all", "one") and any(tests_every_column(p) for p in plan[1])


def read_qualifiers(qualifiers: Sequence[bytes], plan: tuple) -> list:
    """The qualifiers a dense scan reads values of: the requested ones (in order), then
    those the filter plan also tests.  A version 3 file reads only their chunks."""
    out = list(qualifiers)
    for q in plan_qualifiers(plan):
        if q not in out:
            out.append(q)
    return out


class ColumnsWhere:
    """The columns a scan of every column of a family reads when its filter drops some by
    their qualifier alone (:func:`plan_columns`): a container whose ``in`` asks the test, so
    a version 3 file's block reads only the value chunks of the columns that pass it
    (``StoreFileReader.scan_parts(columns=...)``)."""

    __slots__ = ("test",)

    def __init__(self, test):
        self.test = test

    def __contains__(self, qualifier: bytes) -> bool:
        return bool(self.test(qualifier))


def plan_columns(plan: tuple) -> ColumnsWhere | None:
    """The columns a :func:`dense_filter` plan can keep or test, when a column filter in it
    rules some out by their qualifier alone; None when any column may be kept.  A whole-family
    scan reads only these: a cell of another column could never come out, and none is tested."""
    test = _kept_columns(plan)
    if test is None:
        return None
    tested = frozenset(plan_qualifiers(plan))
    return ColumnsWhere(lambda q: q in tested or test(q))


def _kept_columns(plan: tuple):
    """A test of the qualifiers whose cells ``plan`` can keep; None for every qualifier."""
    kind = plan[0]
    if kind == "qualifier":
        return _column_test(plan)
    if kind not in ("all", "one"):
        return None  # row, value and key tests keep any column's cells
    tests = [_kept_columns(p) for p in plan[1]]
    if kind == "all":
        tests = [t for t in tests if t is not None]  # a cell must pass every child
        return (lambda q: all(t(q) for t in tests)) if tests else None
    if any(t is None for t in tests):
        return None  # a cell kept by any child: one keeping every column keeps them all
    return lambda q: any(t(q) for t in tests)


def _column_test(plan: tuple):
    """A ``"qualifier"`` plan's test of a column as its rows name it: a qualifier of the
    plan's family, or a full ``family:qualifier`` name when the plan has no family."""
    _, flt, family = plan
    if family is None:
        return lambda name: flt.passes_column(*name.split(b":", 1))
    return lambda q: flt.passes_column(family, q)


def held_qualifiers(dense: DenseBlock) -> list[bytes]:
    """The qualifiers of ``dense`` whose values were read (all of them unless a version 3
    block was read for some columns only)."""
    values = dense.read_values
    if values is None:
        return []
    return [q for q, v in zip(dense.qualifiers, values) if v is not None]


def filter_masks(plan: tuple, dense: DenseBlock, qualifiers: list[bytes]):
    """``(row mask or None, {qualifier index: value mask})`` of a dense block
    under a :func:`dense_filter` plan, for the requested ``qualifiers``.

    Each value test is one comparator kernel over one whole value column;
    lists combine the answers with NumPy ``&`` / ``|``, cell by cell as
    FilterList does.  A value mask may hold anything for rows that lack the
    qualifier (:func:`dense_rows` drops those cells anyway).
    """
    wanted = set(qualifiers)
    columns = [j for j, q in enumerate(dense.qualifiers) if q in wanted]
    row, cells = _masks(plan, dense, columns)
    return row, cells or {}


def _value_mask(dense: DenseBlock, j: int, op, comparator) -> np.ndarray:
    """One comparison over qualifier ``j``'s whole value column (absent values compare as anything).

    A column held as dictionary codes is compared on its dictionary's entries (a few dozen
    values where the column has thousands of rows) and the answers are mapped through the
    codes; a null row (an absent value) takes its code's answer, which the callers ignore."""
    from ..filters.comparators import NotUtf8

    column = dense.column(j)
    if isinstance(column, pa.DictionaryArray):
        found = dictionary_mask(column, op, comparator)
        if found is not None:
            return found
    try:
        return comparator.mask(dense.value(j), op)
    except NotUtf8 as exc:  # name the row and column of the value (utf8: comparators)
        where = f"qualifier {dense.qualifiers[j].decode('utf-8', 'replace')!r} of row {dense.rows[exc.position].as_py()!r}"
        raise NotUtf8(exc.value, exc.position, where) from None


def dictionary_mask(column: pa.DictionaryArray, op, comparator) -> np.ndarray | None:
    """``comparator.mask`` of a dictionary-coded binary ``column`` under ``op``, as the
    answers for its dictionary's entries taken by its codes (a null row: its code's
    answer); None when comparing the dictionary would not pay (as many entries as rows)
    or would fail where the rows would not (an entry no row uses that is not valid UTF-8
    for a ``utf8:`` comparator): the caller then compares the expanded values."""
    from ..filters.comparators import NotUtf8

    n = len(column)
    dictionary = column.dictionary
    if len(dictionary) >= n:
        return None
    try:
        answers = np.asarray(comparator.mask(dictionary, op), dtype=bool)
    except NotUtf8:
        return None  # the plain values' own test names the row, or finds the entry unused
    indices = column.indices
    width = indices.type.bit_width // 8
    codes = np.frombuffer(indices.buffers()[1], dtype=_CODE_DTYPES[width], count=n, offset=indices.offset * width)
    return answers.take(codes)


_CODE_DTYPES = {1: np.uint8, 2: np.uint16}


def _masks(plan: tuple, dense: DenseBlock, columns: list[int]) -> tuple:
    """``(row mask, {j: cell mask} for every j of columns)`` of one plan; None for "keeps all"."""
    kind = plan[0]
    n = dense.num_rows
    if kind == "none":
        return None, None
    if kind == "row":
        _, qualifier, op, comparator, if_missing, exclude = plan
        j = dense.qualifiers.index(qualifier) if qualifier in dense.qualifiers else None
        if j is None:
            row = np.zeros(n, dtype=bool) if if_missing else None
        else:
            row = _value_mask(dense, j, op, comparator)
            has = dense.presence(j)
            if has is not None:
                row = np.where(has.to_numpy(zero_copy_only=False), row, not if_missing)
        if not exclude or j not in columns:
            return row, None
        everything = np.ones(n, dtype=bool)
        return row, {k: everything if k != j else np.zeros(n, dtype=bool) for k in columns}
    if kind == "column":
        _, qualifier, op, comparator = plan
        j = dense.qualifiers.index(qualifier) if qualifier in dense.qualifiers else None
        if j not in columns:
            return np.zeros(n, dtype=bool), None  # the column is not read: nothing passes
        nothing = np.zeros(n, dtype=bool)
        return None, {k: nothing if k != j else _value_mask(dense, j, op, comparator) for k in columns}
    if kind == "cell":
        _, op, comparator = plan
        return None, {k: _value_mask(dense, k, op, comparator) for k in columns}
    if kind == "key":
        return plan[1]._passes_keys(dense.rows), None  # the row-key filters' vectorized key test
    if kind == "qualifier":
        kept, dropped = np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
        passes = _column_test(plan)
        return None, {k: kept if passes(dense.qualifiers[k]) else dropped for k in columns}
    parts = [_masks(p, dense, columns) for p in plan[1]]
    if kind == "all":
        rows = [r for r, _ in parts if r is not None]
        row = np.logical_and.reduce(rows) if rows else None
        maps = [c for _, c in parts if c is not None]
        cells = {k: np.logical_and.reduce([c[k] for c in maps]) for k in columns} if maps else None
        return row, cells
    # "one": a cell passes when any child keeps it (its row, and the cell itself)
    if any(r is None and c is None for r, c in parts):
        return None, None
    if all(c is None for _, c in parts):
        return np.logical_or.reduce([r for r, _ in parts]), None
    cells = {}
    for k in columns:
        kept = [c[k] if r is None else (r if c is None else r & c[k]) for r, c in parts]
        cells[k] = np.logical_or.reduce(kept)
    return None, cells
