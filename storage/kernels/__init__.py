"""Batch kernels of the vectorized scan path.

Whole Arrow tables of cells (:data:`storage.cells.CELL_SCHEMA`) go in and
out; the work is done by Arrow compute and NumPy over whole columns, never
by a Python loop per cell or per row.

* :func:`merge_sources` merges sorted sources (newest first) into one sorted
  table, the newest source winning exact duplicates;
* :func:`resolve` applies delete markers, TTL, time range and max versions;
  :func:`raw_versions` cuts a raw scan's cells to n puts per column;
* :func:`cells_to_rows` pivots cells into a row batch (``key`` + columns), and
  :func:`columns_to_family_map` a row batch's columns of one family into its map column;
* :func:`merge_row_runs` interleaves sorted row batches that share no key
  (a rows scan of clean sources, a compaction of dense files);
* :func:`row_starts`, :func:`row_boundaries`, :func:`column_boundaries`,
  :func:`reverse_rows`, :func:`reverse_rows_order`, :func:`is_sorted`,
  :func:`first_unsorted` give the row and column structure, the reverse-scan
  order and sortedness (the store files use the same ones).

A scan runs ``cells_to_rows(resolve(merge_sources(sources), ...), columns)``;
a major compaction writes ``resolve(merge_sources(files), max_versions=...,
ttl_cutoff=...)``; a minor compaction writes ``merge_sources(files)``.
"""

from .merge import CELL_SORT_KEYS, merge_disjoint, merge_sources
from .order import (
    column_boundaries,
    first_unsorted,
    is_clean,
    is_sorted,
    reverse_rows,
    reverse_rows_order,
    row_boundaries,
    row_starts,
)
from .pivot import FAMILY_MAP_TYPE, cells_to_rows, columns_to_family_map
from .resolve import raw_versions, resolve
from .row_merge import merge_row_runs

__all__ = [
    "merge_sources",
    "resolve",
    "raw_versions",
    "cells_to_rows",
    "columns_to_family_map",
    "row_boundaries",
    "row_starts",
    "column_boundaries",
    "reverse_rows",
    "reverse_rows_order",
    "is_sorted",
    "first_unsorted",
    "is_clean",
    "merge_disjoint",
    "merge_row_runs",
    "FAMILY_MAP_TYPE",
    "CELL_SORT_KEYS",
]
