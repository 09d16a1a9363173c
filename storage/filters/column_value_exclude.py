"""SingleColumnValueExcludeFilter: SingleColumnValueFilter that leaves the tested column out."""

from __future__ import annotations

import numpy as np

from ..cells import Cell
from . import _values
from ._rows import RowBatch
from .base import Keep, Mode
from .column_value import SingleColumnValueFilter

__all__ = ["SingleColumnValueExcludeFilter"]


class SingleColumnValueExcludeFilter(SingleColumnValueFilter):
    """Rows chosen as :class:`SingleColumnValueFilter` chooses them, without the tested column's cells.

    As HBase's filter of this name; a row whose only cells were the tested
    column is then empty, and dropped.
    """

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        keep, mode = super()._eval_row(cells)
        if keep is False:
            return False, mode
        column = self._column
        return [(c[1], c[2]) != column for c in cells], mode

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        mask, mode = super()._eval_batch(batch)
        return mask & ~self._column_cells(batch), _values.KEEP
