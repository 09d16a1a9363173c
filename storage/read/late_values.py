"""Late values: carry cell values as indices through merge, resolve and pivot.

Merging a memstore into a store file's cells reorders every cell, and the
pivot to rows reorders them again; each reordering copies the values, which
are most of the bytes.  Neither step reads a value, so a chunk's sources can
have their values swapped for 8-byte indices into one pool of the real
values (:func:`index_values`), go through the kernels as usual, and get the
real values back once, on the output (:func:`materialize`): one gather of
the values instead of two.  Only for scans whose filter does not read
values (the batch scan uses it when there is no filter).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..kernels.cell_columns import one_array

__all__ = ["index_values", "materialize"]

_INDEX = np.dtype("<i8")


def index_values(sources: list[pa.Table], pool: list[pa.Array]) -> list[pa.Table]:
    """``sources`` with each value replaced by its index in ``pool`` (extended
    with their value chunks, in order)."""
    out = []
    for table in sources:
        base = sum(len(chunk) for chunk in pool)
        pool.extend(table.column("value").chunks)
        n = table.num_rows
        indices = pa.Array.from_buffers(
            pa.binary(), n,
            [None, pa.py_buffer(np.arange(0, 8 * (n + 1), 8, dtype=np.int32)),
             pa.py_buffer(np.arange(base, base + n, dtype=_INDEX))],
        )
        out.append(table.set_column(table.schema.get_field_index("value"), "value", indices))
    return out


def _gather(indices: pa.Array, pool: pa.ChunkedArray) -> pa.Array:
    """The pool's values at a binary array of 8-byte indices (nulls stay null)."""
    indices = one_array(indices)
    n = len(indices)
    offsets = np.frombuffer(indices.buffers()[1], dtype=np.int32, count=n + 1, offset=indices.offset * 4)
    data = np.frombuffer(indices.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]].view(_INDEX)
    if indices.null_count == 0:
        return one_array(pool.take(pa.array(data)))
    valid = np.asarray(indices.is_valid())
    full = np.zeros(n, dtype=np.int64)
    full[valid] = data  # null slots hold no bytes, so the data are the valid indices in order
    return one_array(pool.take(pa.array(full, mask=~valid)))


def materialize(batch: pa.RecordBatch, pool: list[pa.Array], output: str) -> pa.RecordBatch:
    """Put the real values back into an output batch of cells or rows."""
    values = pa.chunked_array(pool, pa.binary())
    arrays = list(batch.columns)
    names = batch.schema.names
    for i, (name, column) in enumerate(zip(names, arrays)):
        if output == "cells":
            if name == "value":
                arrays[i] = _gather(column, values)
        elif i > 0 and pa.types.is_binary(column.type):
            arrays[i] = _gather(column, values)
        elif pa.types.is_map(column.type):
            items = _gather(column.items, values)
            arrays[i] = pa.MapArray.from_arrays(
                column.offsets, column.keys, items, type=column.type,
                mask=column.is_null() if column.null_count else None,
            )
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
