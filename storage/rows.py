"""happybase-style rows from cell batches: ``(row_key, {b"family:qualifier": value})``.

One Python step per row, not per cell: row boundaries, keys and column
names come from Arrow/NumPy kernels over the whole batch.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import kernels

__all__ = ["cells_to_dicts"]


def cells_to_dicts(
    batch: pa.RecordBatch, include_timestamp: bool = False, sorted_columns: bool = False,
    scan_batching: int | None = None, all_versions: bool = False,
    cell: Callable[[bytes, int], Any] | None = None,
) -> Iterator[tuple[bytes, dict]]:
    """Turn a cell batch into happybase row pairs; one Python step per row, not per cell.

    ``cell(value, timestamp)``, when given, builds each dict value in place
    of the ``(value, timestamp)`` pair ``include_timestamp`` gives (the
    Thrift gateway builds its ``TCell`` structs this way, in one pass).
    """
    if batch.num_rows == 0:
        return
    rows = batch.column(0)
    starts = kernels.row_boundaries(pa.Table.from_batches([batch]))
    ends = np.append(starts[1:], batch.num_rows)
    keys = rows.take(pa.array(starts)).to_pylist()
    names = pc.binary_join_element_wise(batch.column(1), batch.column(2), b":").to_pylist()
    values = batch.column(5).to_pylist()
    if cell is not None:
        values = list(map(cell, values, batch.column(3).to_pylist()))
    elif include_timestamp:
        values = list(zip(values, batch.column(3).to_pylist()))
    make = OrderedDict if sorted_columns else dict
    for key, s, e in zip(keys, starts.tolist(), ends.tolist()):
        if scan_batching is None:
            if all_versions:
                # dict() keeps the last duplicate; the first (newest) version must win
                yield key, make(reversed(list(zip(names[s:e], values[s:e]))))
            else:
                yield key, make(zip(names[s:e], values[s:e]))
        else:
            for c in range(s, e, scan_batching):
                hi = min(c + scan_batching, e)
                yield key, make(zip(names[c:hi], values[c:hi]))
