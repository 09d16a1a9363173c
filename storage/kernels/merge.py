"""Merge sorted cell sources into one sorted table, newest source winning ties.

This is the batch counterpart of the merging heap: it does no version or
delete resolution (that is :mod:`.resolve`), only ordering and the removal
of exact duplicates, where the same (row, family, qualifier, timestamp,
type) sits in several sources and the newest source's cell is kept.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._arrays import CellColumns, as_cell_table, empty_cells, take_cells

__all__ = ["merge_sources", "CELL_SORT_KEYS"]

CELL_SORT_KEYS = [
    ("row", "ascending"),
    ("family", "ascending"),
    ("qualifier", "ascending"),
    ("timestamp", "descending"),
    ("type", "descending"),
]
"""Arrow sort keys of cell order (for ``pc.sort_indices`` / ``Table.sort_by``)."""


def merge_sources(sources: Sequence[pa.Table | pa.RecordBatch]) -> pa.Table:
    """Merge sorted cell sources into one table in cell order.

    ``sources`` are ranked newest first: index 0 is the newest (typically the
    memstore), then store files from newest to oldest.  Each source must
    already be in cell order.  Where several sources hold a cell with the
    same (row, family, qualifier, timestamp, type), only the newest source's
    cell is kept; no other cell is dropped.

    One source is returned as is (a RecordBatch is wrapped in a Table without
    copying).  Sources whose row ranges do not overlap are concatenated in
    row order without sorting; only groups of sources with overlapping row
    ranges are sorted, with a stable sort of their concatenation (newest
    first, so that ties keep the newest source's cell first), and within a
    group only the part of the largest source that the others' row range
    covers.
    """
    tables = [as_cell_table(source, f"sources[{i}]") for i, source in enumerate(sources)]
    if len(tables) == 1:
        return tables[0]
    live = [table for table in tables if table.num_rows]
    if not live:
        return empty_cells()
    if len(live) == 1:
        return live[0]

    # Sweep the sources by first row, joining those whose [first, last] row
    # ranges overlap into one group; rank (newest first) breaks ties so that
    # every group lists its members newest first.
    spans = []
    for rank, table in enumerate(live):
        rows = table.column("row")
        spans.append((rows[0].as_py(), rank, rows[-1].as_py(), table))
    spans.sort(key=lambda span: (span[0], span[1]))
    groups: list[list[tuple[int, pa.Table]]] = []
    group_last = None
    for first, rank, last, table in spans:
        if groups and first <= group_last:
            groups[-1].append((rank, table))
            group_last = max(group_last, last)
        else:
            groups.append([(rank, table)])
            group_last = last

    parts = []
    for members in groups:
        if len(members) == 1:
            parts.append(members[0][1])
        else:
            members.sort(key=lambda member: member[0])
            parts.append(_sort_merge([table for _, table in members]))
    return pa.concat_tables(parts)


def _sort_merge(newest_first: list[pa.Table]) -> pa.Table:
    """Merge overlapping sources: sort only where the largest meets the others.

    The largest source's cells with rows before or after every other
    source's row range pass through as zero-copy slices (a memstore holding
    a narrow key range, such as recent time-series rows, then costs a sort
    of that range only).
    """
    largest = max(range(len(newest_first)), key=lambda i: newest_first[i].num_rows)
    big = newest_first[largest]
    others = [t for i, t in enumerate(newest_first) if i != largest]
    low = min(t.column("row")[0].as_py() for t in others)
    high = max(t.column("row")[-1].as_py() for t in others)
    rows = big.column("row")
    start = _bisect(rows, low, right=False)
    stop = _bisect(rows, high, right=True)
    middle = list(newest_first)
    middle[largest] = big.slice(start, stop - start)
    merged = _sort_all(middle)
    if start == 0 and stop == big.num_rows:
        return merged
    return pa.concat_tables([big.slice(0, start), merged, big.slice(stop)])


def _bisect(rows: pa.ChunkedArray, key: bytes, right: bool) -> int:
    """Index of the first row > key (right) or >= key (left) in a sorted column."""
    # A binary search of about log2(n) probes, once per merge, not per cell.
    lo, hi = 0, len(rows)
    while lo < hi:
        mid = (lo + hi) // 2
        value = rows[mid].as_py()
        if value < key or (right and value == key):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _sort_all(newest_first: list[pa.Table]) -> pa.Table:
    """Sort the concatenation of sources and drop exact duplicates."""
    combined = pa.concat_tables(newest_first)
    keys = combined.select([name for name, _ in CELL_SORT_KEYS]).combine_chunks()
    # sort_indices is documented stable: equal keys keep their order in the
    # concatenation, which lists the newest source first.
    order = pc.sort_indices(keys, sort_keys=CELL_SORT_KEYS).to_numpy()
    ordered = CellColumns(keys.take(order))
    differs = ordered.adjacent_ne("timestamp") | ordered.adjacent_ne("type")
    for name in ("qualifier", "family", "row"):
        if differs.all():
            break
        differs |= ordered.adjacent_ne(name)
    if not differs.all():
        order = order[differs]
    if np.array_equal(order, np.arange(combined.num_rows)):
        return combined
    return take_cells(combined, order)
