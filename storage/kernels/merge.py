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

from .cell_columns import CellColumns, as_cell_table, empty_cells, one_array, value_offsets
from .. import native as native_module
from .gather import take_cells
from .key_codes import lex_order, padded_values, row_sort_keys

__all__ = ["merge_sources", "merge_runs", "merge_disjoint", "merge_order", "cell_keys", "sort_sources", "sort_log", "bisect_rows", "CELL_SORT_KEYS"]

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
    ranges are merged, and within a group only the part of the largest
    source that the others' row range covers.  Overlapping sources are
    merged as the sorted runs they are (a binary search of each newer run's
    cells in the older one, :func:`merge_runs`), not sorted again.
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
    start = bisect_rows(rows, low, right=False)
    stop = bisect_rows(rows, high, right=True)
    middle = list(newest_first)
    middle[largest] = big.slice(start, stop - start)
    merged = merge_runs(middle)
    if start == 0 and stop == big.num_rows:
        return merged
    return pa.concat_tables([big.slice(0, start), merged, big.slice(stop)])


def row_span(rows: pa.Array | pa.ChunkedArray, start_row: bytes, stop_row: bytes | None) -> tuple[int, int]:
    """Where the entries of rows ``[start_row, stop_row)`` of a sorted row column begin and
    end (``(lo, hi)``, ``hi <= lo`` when there are none)."""
    lo = bisect_rows(rows, start_row, right=False) if start_row else 0
    hi = len(rows) if stop_row is None else bisect_rows(rows, stop_row, right=False)
    return lo, hi


def rows_in(cells: pa.Table, start_row: bytes, stop_row: bytes | None) -> pa.Table:
    """The cells (a table in cell order) of rows ``[start_row, stop_row)``: a zero-copy slice."""
    lo, hi = row_span(cells.column("row"), start_row, stop_row)
    return cells.slice(lo, max(hi - lo, 0))


def bisect_rows(rows: pa.ChunkedArray, key: bytes, right: bool) -> int:
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


def sort_sources(newest_first: list[pa.Table]) -> pa.Table:
    """Sort the concatenation of sources and drop exact duplicates."""
    combined = pa.concat_tables(newest_first)
    keys = combined.select([name for name, _ in CELL_SORT_KEYS]).combine_chunks()
    order = _kept_order(keys)
    if np.array_equal(order, np.arange(combined.num_rows)):
        return combined
    return take_cells(combined, order)


def sort_log(cells: pa.Table) -> pa.Table:
    """Cells in write order (the oldest first) in cell order, keeping the last write of each
    key: what :func:`sort_sources` gives for the cells reversed (newest first), without
    reversing them (the sort is stable: of equal keys, the last in a run is the newest)."""
    n = cells.num_rows
    keys = cells.select([name for name, _ in CELL_SORT_KEYS]).combine_chunks()
    order = _kept_order(keys, newest_last=True)
    if np.array_equal(order, np.arange(n)):
        return cells
    return take_cells(cells, order)


def _kept_order(keys: pa.Table, newest_last: bool = False) -> np.ndarray:
    """The positions of ``keys`` (the :data:`CELL_SORT_KEYS` columns, one chunk each) in cell
    order, the first of each run of equal keys only (``newest_last``: the last)."""
    coded = _coded_order(keys)
    if coded is not None:
        order, differs = coded
    else:
        # sort_indices is documented stable: equal keys keep their order in the
        # concatenation, which lists the newest source first.
        order = pc.sort_indices(keys, sort_keys=CELL_SORT_KEYS).to_numpy()
        ordered = CellColumns(keys.take(order))
        differs = ordered.adjacent_ne("timestamp") | ordered.adjacent_ne("type")
        for name in ("qualifier", "family", "row"):
            if differs.all():
                break
            differs |= ordered.adjacent_ne(name)
    if differs.all():
        return order
    if newest_last:  # where the next entry differs (the last always does)
        return order[np.append(differs[1:], True)]
    return order[differs]


def _coded_order(keys: pa.Table) -> tuple[np.ndarray, np.ndarray] | None:
    """The stable cell-order permutation of ``keys`` (the :data:`CELL_SORT_KEYS` columns,
    one chunk each) and, in that order, where a key differs from the one before; None
    when the row keys take no integer form (:func:`row_sort_keys`), when Arrow sorts instead.
    One NumPy sort of integers (:func:`lex_order`): the rows' codes or padded words, the
    families' and qualifiers' ranks among their distinct values, the timestamps and types
    (both descending)."""
    row_keys = row_sort_keys(native_module.NATIVE, one_array(keys.column("row")))
    if row_keys is None:
        return None
    stamps = np.invert(one_array(keys.column("timestamp")).to_numpy())  # descending: ~t is -t - 1
    kinds = np.invert(one_array(keys.column("type")).to_numpy())
    # a key of one value throughout (one family, the markers' empty qualifier, all puts)
    # orders nothing: left out of the sort and of the duplicate check (and not ranked)
    columns = CellColumns(keys)
    sort_keys = [k for k in (kinds, stamps) if len(k) and not (k == k[0]).all()]
    sort_keys += [_ranks(columns.array(name)) for name in ("qualifier", "family")
                  if columns.n and not columns.equals(name, columns.array(name)[0].as_py()).all()]
    # stable, so that equal keys keep the newest source first
    return lex_order(sort_keys + row_keys)


def _ranks(column: pa.Array) -> np.ndarray:
    """Each value's rank among the column's distinct values (binary order)."""
    encoded = column.dictionary_encode()
    dictionary = encoded.dictionary
    rank = np.empty(len(dictionary), dtype=np.int64)
    rank[pc.sort_indices(dictionary).to_numpy()] = np.arange(len(dictionary))
    return rank[encoded.indices.to_numpy()]


_MAX_KEY_BYTES = 1024  # wider cell keys are merged by a sort instead


def merge_runs(newest_first: list[pa.Table]) -> pa.Table:
    """Merge sorted runs (newest first) into cell order, dropping exact
    duplicates in favour of the newest run, without sorting.

    Each cell's (row, family, qualifier, timestamp, type) is encoded as one
    fixed-width byte string whose byte order is cell order; each newer run's
    cells are then placed in the older run by binary search (NumPy
    ``searchsorted``), which yields the merged permutation in one gather.
    Runs whose keys would be wider than ``_MAX_KEY_BYTES`` are sorted.
    """
    runs = [t for t in newest_first if t.num_rows]
    if not runs:
        return empty_cells()
    if len(runs) == 1:
        return runs[0]
    if len(runs) == 2:
        merged = _merge_disjoint_rows(runs[0], runs[1])
        if merged is not None:
            return merged
    keys = cell_keys(runs)
    if keys is None:
        return sort_sources(runs)
    merged, merged_keys = runs[0], keys[0]
    for run, run_keys in zip(runs[1:], keys[1:]):
        merged, merged_keys = _merge_two(merged, merged_keys, run, run_keys)
    return merged


def merge_disjoint(sources: Sequence[pa.Table]) -> pa.Table | None:
    """Two sorted sources merged when no row is in both and their row keys
    share one width of at most 8 bytes; None otherwise.  Resolution then
    commutes with the merge: each row's cells come from one source."""
    live = [t for t in sources if t.num_rows]
    if len(live) < 2:
        return live[0] if live else empty_cells()
    if len(live) != 2:
        return None
    return _merge_disjoint_rows(live[0], live[1])


def _merge_disjoint_rows(newer: pa.Table, older: pa.Table) -> pa.Table | None:
    """Merge two runs that share no row, when their row keys have one width of
    at most 8 bytes (read as big-endian integers); None otherwise.

    Whole rows then interleave: each newer cell goes before the older cells
    of greater rows, so the row keys alone place it.
    """
    new_rows = CellColumns(newer).view("row", order=True)
    old_rows = CellColumns(older).view("row", order=True)
    if new_rows is None or old_rows is None or new_rows.dtype != old_rows.dtype:
        return None
    pos = np.searchsorted(old_rows, new_rows, side="left")
    inside = pos < len(old_rows)
    if (old_rows[pos[inside]] == new_rows[inside]).any():
        return None  # a row in both runs: cells must be ordered by their whole keys
    n_new, n_old = len(new_rows), len(old_rows)
    dest = pos + np.arange(n_new)
    order = np.empty(n_new + n_old, dtype=np.int64)
    from_new = np.zeros(n_new + n_old, dtype=bool)
    from_new[dest] = True
    order[dest] = np.arange(n_new)
    order[~from_new] = np.arange(n_new, n_new + n_old)
    return pa.concat_tables([newer, older]).take(pa.array(order))


def _merge_two(newer: pa.Table, new_keys: np.ndarray, older: pa.Table, old_keys: np.ndarray) -> tuple[pa.Table, np.ndarray]:
    """Merge two sorted runs by their encoded keys; an exact tie keeps the newer cell only."""
    order = merge_order(new_keys, old_keys)
    both = pa.concat_tables([newer, older])
    keys = np.concatenate([new_keys, old_keys])[order]
    # a gather straight from the chunks: cheaper (pyarrow 26) than concatenating them first
    return both.take(pa.array(order)), keys


def merge_order(new_keys: np.ndarray, old_keys: np.ndarray) -> np.ndarray:
    """The gather order that merges two sorted runs laid end to end (newer
    first) by their encoded keys (:func:`cell_keys`); an exact tie keeps the
    newer cell only.  Callers gather any column riding along with the cells
    (sequence ids, say) by the same order."""
    n_new, n_old = len(new_keys), len(old_keys)
    pos = np.searchsorted(old_keys, new_keys, side="left")
    dest = pos + np.arange(n_new)  # where each newer cell lands in the merged order
    order = np.empty(n_new + n_old, dtype=np.int64)
    from_new = np.zeros(n_new + n_old, dtype=bool)
    from_new[dest] = True
    order[dest] = np.arange(n_new)
    order[~from_new] = np.arange(n_new, n_new + n_old)
    hit = pos < n_old
    hit[hit] = old_keys[pos[hit]] == new_keys[hit]
    if hit.any():
        # the older duplicate sits right after the newer cell in the merged order
        keep = np.ones(n_new + n_old, dtype=bool)
        keep[dest[hit] + 1] = False
        order = order[keep]
    return order


def cell_keys(runs: list[pa.Table]) -> list[np.ndarray] | None:
    """Each run's cells as fixed-width byte strings in cell order (one
    ``S<width>`` array per run), or None when the keys would be too wide."""
    cols = [CellColumns(t) for t in runs]
    parts: list[list[np.ndarray]] = [[] for _ in runs]
    width = 0
    for name in ("row", "family", "qualifier"):
        widths = [c.width(name) for c in cols]
        fixed = widths[0] is not None and all(w == widths[0] for w in widths)
        longest = max(_max_length(c.array(name)) for c in cols)
        if fixed and longest == 0:
            continue  # every value empty: nothing to order by
        width += longest + (0 if fixed else 4)
        if width > _MAX_KEY_BYTES:
            return None
        for part, c in zip(parts, cols):
            part.append(padded_values(c.array(name), longest))
            if not fixed:
                # after zero padding, a value that is a prefix of another must sort first
                part.append(np.diff(value_offsets(c.array(name))).astype(">u4").view(np.uint8).reshape(-1, 4))
    for part, c in zip(parts, cols):
        # signed to order-preserving unsigned (flip the sign bit), then inverted: descending
        ts = c.numpy("timestamp").astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
        part.append((~ts).astype(">u8").view(np.uint8).reshape(-1, 8))
        part.append((255 - c.numpy("type").astype(np.uint8)).reshape(-1, 1))  # descending
    width += 9
    return [np.ascontiguousarray(np.concatenate(part, axis=1)).view(f"S{width}").ravel() for part in parts]


def _max_length(values: pa.Array) -> int:
    if not len(values):
        return 0
    return int(np.diff(value_offsets(values)).max())
