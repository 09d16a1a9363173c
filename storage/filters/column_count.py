"""Filters that count the columns of each row: ColumnPaginationFilter and
ColumnCountGetFilter (HBase's filters of these names).

A column's versions are adjacent in a row, newest first; both filters keep
the newest version of the columns they pick only, as HBase's
``INCLUDE_AND_NEXT_COL`` does.  Both paths number the columns of a row the
same way: the cell path in a loop over the row, the batch path with one
adjacent-inequality kernel and a cumulative sum over the whole batch.
A row left with no cells is dropped.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell
from ..errors import InvalidArgument
from . import _values
from ._rows import RowBatch
from ._text import quote, to_bytes
from .base import Filter, Keep, Mode

__all__ = ["ColumnPaginationFilter", "ColumnCountGetFilter"]

_FAMILY = 1
_QUALIFIER = 2


def _count(value: object, what: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 0 <= value < 2**31:
        raise InvalidArgument(f"{what} must be a non-negative 32-bit integer, got {value!r}")
    return int(value)


def _new_columns(cells: list[Cell]) -> list[bool]:
    """Per cell: is it the first (newest) cell of its column in the row."""
    out = []
    previous = None
    for c in cells:
        column = (c[_FAMILY], c[_QUALIFIER])
        out.append(column != previous)
        previous = column
    return out


def _batch_columns(batch: RowBatch) -> tuple[np.ndarray, np.ndarray]:
    """``(new_column, index)``: per cell, is it its column's first cell, and
    the 0-based position of its column within its row."""
    n = batch.num_cells
    family, qualifier = batch.column("family"), batch.column("qualifier")
    new_column = np.ones(n, dtype=bool)
    if n > 1:
        same = pc.and_(pc.equal(family.slice(1), family.slice(0, n - 1)),
                       pc.equal(qualifier.slice(1), qualifier.slice(0, n - 1)))
        new_column[1:] = ~same.to_numpy(zero_copy_only=False)
    new_column[batch.starts] = True
    running = np.cumsum(new_column)  # columns seen so far, counting from the batch start
    index = running - batch.broadcast(running[batch.starts])
    return new_column, index


class ColumnPaginationFilter(Filter):
    """Per row, the newest version of ``limit`` columns, in column order.

    ``ColumnPaginationFilter(limit, offset)`` with an integer ``offset`` skips
    the row's first ``offset`` columns; with bytes or text it is HBase's
    column offset: the page starts at the first column whose qualifier is at
    least ``offset`` (compared in any family, until the page has started) and
    runs on over the next columns whatever their qualifiers, across families.
    """

    def __init__(self, limit: int, offset: int | bytes | str):
        self.limit = _count(limit, "ColumnPaginationFilter limit")
        if isinstance(offset, (bytes, bytearray, memoryview, str)):
            self.offset: int | None = None
            self.column_offset: bytes | None = to_bytes(offset, "ColumnPaginationFilter column offset")
        else:
            self.offset = _count(offset, "ColumnPaginationFilter offset")
            self.column_offset = None

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        keep = []
        index = -1  # the page's count of columns so far (int offset: the row's)
        start = self.column_offset
        for c, first_version in zip(cells, _new_columns(cells)):
            if first_version and (start is None or index >= 0 or c[_QUALIFIER] >= start):
                index += 1
            if start is None:
                keep.append(first_version and self.offset <= index < self.offset + self.limit)
            else:
                keep.append(first_version and 0 <= index < self.limit)
        return keep, _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        new_column, index = _batch_columns(batch)
        if self.column_offset is None:
            return new_column & (index >= self.offset) & (index < self.offset + self.limit), _values.KEEP
        at_or_after = pc.greater_equal(batch.column("qualifier"), pa.scalar(self.column_offset, pa.binary()))
        eligible = new_column & at_or_after.to_numpy(zero_copy_only=False)
        # the page starts at each row's first eligible column
        position = np.where(eligible, np.arange(batch.num_cells), batch.num_cells)
        first = np.minimum.reduceat(position, batch.starts)
        has_start = first < batch.num_cells
        first_index = np.zeros(batch.num_rows, dtype=np.int64)
        first_index[has_start] = index[first[has_start]]
        page_index = index - batch.broadcast(first_index)
        started = np.arange(batch.num_cells) >= batch.broadcast(first)
        return new_column & started & (page_index < self.limit), _values.KEEP

    def _settings(self) -> tuple:
        return (self.limit, self.offset, self.column_offset)

    def __repr__(self) -> str:
        second = quote(self.column_offset) if self.column_offset is not None else str(self.offset)
        return f"ColumnPaginationFilter ({self.limit}, {second})"


class ColumnCountGetFilter(Filter):
    """Per row, the newest version of its first ``limit`` columns; a row with
    more columns than that ends the scan (HBase ``ColumnCountGetFilter``).

    HBase counts a row's columns and, past ``limit``, reports
    ``filterAllRemaining``; its scanners then stop, keeping what that row
    gave.  The same happens here: the row is returned with its first
    ``limit`` columns, and no row after it.  That makes it a filter for
    single-row reads (gets), as HBase says of it.
    """

    stateful = True

    def __init__(self, limit: int):
        self.limit = _count(limit, "ColumnCountGetFilter limit")
        self.done = False

    def reset(self) -> None:
        self.done = False

    def filter_all_remaining(self) -> bool:
        return self.done

    def filter_row_key(self, row: bytes) -> bool:
        return self.done

    def _skip_rows(self, batch: RowBatch) -> np.ndarray | None:
        return np.ones(batch.num_rows, dtype=bool) if self.done else None

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        keep = []
        index = -1
        for first_version in _new_columns(cells):
            index += first_version
            keep.append(first_version and index < self.limit)
        if index >= self.limit:
            self.done = True
        return keep, _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        new_column, index = _batch_columns(batch)
        mask = new_column & (index < self.limit)
        columns = np.add.reduceat(new_column.astype(np.int64), batch.starts)
        over = np.flatnonzero(columns > self.limit)
        if len(over):
            self.done = True
            last = int(over[0]) + 1  # the row that fills the quota is the last one
            if last < batch.num_rows:
                mask[int(batch.starts[last]):] = False
        return mask, _values.KEEP

    def _settings(self) -> tuple:
        return (self.limit,)

    def __repr__(self) -> str:
        return f"ColumnCountGetFilter ({self.limit})"
