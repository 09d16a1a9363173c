"""Filters that pick columns of a row: FamilyFilter, MultipleColumnPrefixFilter,
ColumnRangeFilter (HBase's filters of these names).

They look at each cell on its own; a row left with no cells is dropped.
ColumnPaginationFilter, which counts the columns of each row, lives in
:mod:`storage.filters.column_count` and is re-exported here.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell
from ..errors import InvalidArgument
from . import _values
from ._rows import RowBatch
from ._text import quote, to_bytes
from .base import Filter, Keep, Mode
from .cell_filters import CellCompareFilter
from .column_count import ColumnPaginationFilter

__all__ = ["FamilyFilter", "MultipleColumnPrefixFilter", "ColumnRangeFilter", "ColumnPaginationFilter"]

_FAMILY = 1
_QUALIFIER = 2


class FamilyFilter(CellCompareFilter):
    """Cells whose family satisfies the comparison (HBase ``FamilyFilter``)."""

    _field = _FAMILY
    _column = "family"

    def passes_column(self, family: bytes, qualifier: bytes) -> bool:
        """Does the filter keep the cells of ``family:qualifier``? (It decides by the column alone.)"""
        return bool(self._test(family))


class MultipleColumnPrefixFilter(Filter):
    """Cells whose qualifier starts with any of ``prefixes``, in any family."""

    def __init__(self, prefixes: Iterable[bytes | str]):
        if isinstance(prefixes, (bytes, str)):
            raise InvalidArgument("MultipleColumnPrefixFilter takes a list of prefixes, not one")
        self.prefixes = tuple(sorted({to_bytes(p, "MultipleColumnPrefixFilter prefix") for p in prefixes}))
        if not self.prefixes:
            raise InvalidArgument("MultipleColumnPrefixFilter needs at least one prefix")

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        prefixes = self.prefixes
        return [c[_QUALIFIER].startswith(prefixes) for c in cells], _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        qualifiers = batch.column("qualifier")
        mask = np.zeros(batch.num_cells, dtype=bool)
        for prefix in self.prefixes:
            mask |= pc.starts_with(qualifiers, prefix).to_numpy(zero_copy_only=False)
        return mask, _values.KEEP

    def passes_column(self, family: bytes, qualifier: bytes) -> bool:
        """Does the filter keep the cells of ``family:qualifier``? (It decides by the column alone.)"""
        return qualifier.startswith(self.prefixes)

    def _settings(self) -> tuple:
        return self.prefixes

    def __repr__(self) -> str:
        return f"MultipleColumnPrefixFilter ({', '.join(quote(p) for p in self.prefixes)})"


class ColumnRangeFilter(Filter):
    """Cells whose qualifier lies between ``min_column`` and ``max_column``, in any family.

    Each bound is inclusive or not; an empty bound is open (HBase's null).
    """

    def __init__(self, min_column: bytes | str, min_inclusive: bool, max_column: bytes | str, max_inclusive: bool):
        for name, flag in (("min_inclusive", min_inclusive), ("max_inclusive", max_inclusive)):
            if not isinstance(flag, bool):
                raise InvalidArgument(f"ColumnRangeFilter {name} must be a bool, got {flag!r}")
        self.min_column = to_bytes(min_column, "ColumnRangeFilter min_column")
        self.max_column = to_bytes(max_column, "ColumnRangeFilter max_column")
        self.min_inclusive = min_inclusive
        self.max_inclusive = max_inclusive

    def _inside(self, q: bytes) -> bool:
        lo, hi = self.min_column, self.max_column
        if lo and (q < lo or (q == lo and not self.min_inclusive)):
            return False
        if hi and (q > hi or (q == hi and not self.max_inclusive)):
            return False
        return True

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        return [self._inside(c[_QUALIFIER]) for c in cells], _values.KEEP

    def passes_column(self, family: bytes, qualifier: bytes) -> bool:
        """Does the filter keep the cells of ``family:qualifier``? (It decides by the column alone.)"""
        return self._inside(qualifier)

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        q = batch.column("qualifier")
        mask = pa.array(np.ones(len(q), dtype=bool))
        if self.min_column:
            lo = pa.scalar(self.min_column, pa.binary())
            mask = pc.and_(mask, pc.greater_equal(q, lo) if self.min_inclusive else pc.greater(q, lo))
        if self.max_column:
            hi = pa.scalar(self.max_column, pa.binary())
            mask = pc.and_(mask, pc.less_equal(q, hi) if self.max_inclusive else pc.less(q, hi))
        return mask.to_numpy(zero_copy_only=False), _values.KEEP

    def _settings(self) -> tuple:
        return (self.min_column, self.min_inclusive, self.max_column, self.max_inclusive)

    def __repr__(self) -> str:
        return (f"ColumnRangeFilter ({quote(self.min_column)}, {str(self.min_inclusive).lower()}, "
                f"{quote(self.max_column)}, {str(self.max_inclusive).lower()})")
