"""Batch kernels of the vectorized scan path.

Whole Arrow tables of cells (:data:`storage.cells.CELL_SCHEMA`) go in and
out; the work is done by Arrow compute and NumPy over whole columns, never
by a Python loop per cell or per row.

* :func:`merge_sources` merges sorted sources (newest first) into one sorted
  table, the newest source winning exact duplicates;
* :func:`resolve` applies delete markers, TTL, time range and max versions;
* :func:`cells_to_rows` pivots cells into a row batch (``key`` + columns);
* :func:`merge_row_runs` interleaves sorted row batches that share no key
  (a rows scan of clean sources, a compaction of dense files);
* :func:`row_boundaries`, :func:`column_boundaries`, :func:`reverse_rows`,
  :func:`is_sorted` give the row and column structure, the reverse-scan
  order and a sortedness check.

A scan runs ``cells_to_rows(resolve(merge_sources(sources), ...), columns)``;
a major compaction writes ``resolve(merge_sources(files), max_versions=...,
ttl_cutoff=...)``; a minor compaction writes ``merge_sources(files)``.
"""

from .merge import CELL_SORT_KEYS, merge_disjoint, merge_sources
from .order import column_boundaries, is_clean, is_sorted, reverse_rows, row_boundaries
from .pivot import FAMILY_MAP_TYPE, cells_to_rows
from .resolve import resolve
from .row_merge import merge_row_runs

__all__ = [
    "merge_sources",
    "resolve",
    "cells_to_rows",
    "row_boundaries",
    "column_boundaries",
    "reverse_rows",
    "is_sorted",
    "is_clean",
    "merge_disjoint",
    "merge_row_runs",
    "FAMILY_MAP_TYPE",
    "CELL_SORT_KEYS",
]
