"""Row batches straight from dense store file blocks: slices, no gather, no pivot.

A dense block (``storage.storefile._dense.DenseBlock``) already holds one
value column per qualifier, aligned with its row keys, which is the shape a
scan into Arrow rows returns.  The streaming scan path hands such blocks to
:func:`dense_rows`, which picks the requested columns, applies a value filter
on one column as one vectorized comparison (:func:`dense_filter_mask`) and
drops rows without any requested column, all over whole arrays.  Keys-only
scans that keep only the first cell of each row take :func:`first_cells`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .cells import CELL_SCHEMA, CellType
from .columns import parse_column
from .storefile._dense import DenseBlock, constant_binary
from .storefile._kernels import row_starts

__all__ = [
    "dense_columns", "dense_rows", "dense_filter", "filter_masks", "first_cells", "first_cell_only", "first_cells_of_parts",
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
    mask=None,
    value_masks: dict | None = None,
) -> pa.RecordBatch | None:
    """The row batch of ``dense`` (as :func:`storage.kernels.cells_to_rows`
    would build it from the block's cells) for the columns named ``columns``
    (field names, as ``parse_column(spec).name``) with the qualifiers
    ``qualifiers``; ``mask`` (boolean per row) keeps only some rows and
    ``value_masks`` (qualifier index -> boolean per row) only some cells."""
    n = dense.num_rows
    where = {q: j for j, q in enumerate(dense.qualifiers)}
    fields = [pa.field("key", pa.binary(), nullable=False)]
    arrays = [dense.rows]
    present = None  # rows holding at least one requested column; None: all
    any_full = False
    for name, qualifier in zip(columns, qualifiers):
        j = where.get(qualifier)
        if j is None:
            value, ts = pa.nulls(n, pa.binary()), pa.nulls(n, pa.int64())
        else:
            value = dense.values[j]
            ts = dense.plain_timestamps()[j] if include_timestamp else None
            has = dense.presence(j)
            if value_masks and j in value_masks:
                keep_cells = value_masks[j]
                if has is not None:
                    keep_cells = keep_cells & has.to_numpy(zero_copy_only=False)
                has = pa.array(keep_cells)
                value = pc.if_else(has, value, pa.scalar(None, pa.binary()))
                if ts is not None:
                    ts = pc.if_else(has, ts, pa.scalar(None, pa.int64()))
            if has is None:
                any_full = True
            elif not any_full:
                present = has if present is None else pc.or_(present, has)
        fields.append(pa.field(name, pa.binary()))
        arrays.append(value)
        if include_timestamp:
            fields.append(pa.field(f"{name}@ts", pa.int64()))
            arrays.append(ts)
    batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    keep = None if any_full else (present if present is not None else pa.array(np.zeros(n, dtype=bool)))
    if mask is not None:
        mask = pa.array(mask) if isinstance(mask, np.ndarray) else mask
        keep = mask if keep is None else pc.and_(keep, mask)
    if keep is not None:
        batch = batch.filter(keep)
    return batch if batch.num_rows else None


def first_cell_only(flt) -> bool:
    """True when a filter keeps exactly the first cell of each row with an empty
    value: ``FirstKeyOnlyFilter`` ANDed with plain ``KeyOnlyFilter`` (the
    row-counting filter)."""
    from .filters import FilterList, FirstKeyOnlyFilter, KeyOnlyFilter

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
        return CELL_SCHEMA.empty_table()
    table = pa.Table.from_batches(pieces, schema=CELL_SCHEMA)
    starts = row_starts(table.column(0))
    return table if len(starts) == table.num_rows else table.take(pa.array(starts))


def dense_filter(flt, family: bytes):
    """How a filter applies to dense rows, or None when it needs the cell path.

    Returns ``("row", family, qualifier, op, comparator, filter_if_missing)``
    for a ``SingleColumnValueFilter`` on ``family`` (one version per column in
    a dense block, so ``latest_version_only`` changes nothing), ``("cell", op,
    comparator)`` for a ``ValueFilter``, or ``("none",)`` without a filter.
    """
    from .filters import SingleColumnValueFilter, ValueFilter

    if flt is None:
        return ("none",)
    if type(flt) is SingleColumnValueFilter and flt.family == family:
        return ("row", flt.qualifier, flt.op, flt.comparator, flt.filter_if_missing)
    if type(flt) is ValueFilter:
        return ("cell", flt.op, flt.comparator)
    return None


def filter_masks(plan: tuple, dense: DenseBlock, qualifiers: list[bytes]):
    """``(row mask or None, {qualifier index: value mask})`` of a dense block
    under a :func:`dense_filter` plan: one vectorized comparison per column."""
    kind = plan[0]
    if kind == "none":
        return None, {}
    if kind == "row":
        _, qualifier, op, comparator, if_missing = plan
        try:
            j = dense.qualifiers.index(qualifier)
        except ValueError:
            return (None if not if_missing else np.zeros(dense.num_rows, dtype=bool)), {}
        values = dense.values[j]
        matched = comparator.mask(values.fill_null(b"") if values.null_count else values, op)
        has = dense.presence(j)
        if has is None:
            return matched, {}
        return np.where(has.to_numpy(zero_copy_only=False), matched, not if_missing), {}
    _, op, comparator = plan
    masks = {}
    for j, q in enumerate(dense.qualifiers):
        if q in qualifiers:
            values = dense.values[j]
            masks[j] = comparator.mask(values.fill_null(b"") if values.null_count else values, op)
    return None, masks
