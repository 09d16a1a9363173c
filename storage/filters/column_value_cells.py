"""ColumnValueFilter: only the matching cells of one column."""

from __future__ import annotations

import numpy as np

from ..cells import Cell
from . import _values
from ._column_comparison import ColumnComparison
from ._rows import RowBatch
from .base import Keep, Mode

__all__ = ["ColumnValueFilter"]


class ColumnValueFilter(ColumnComparison):
    """The cells of ``family:qualifier`` whose value satisfies ``value <op> comparator``.

    As HBase 2's ``ColumnValueFilter``: unlike :class:`SingleColumnValueFilter`,
    which keeps or drops whole rows, it keeps only the tested column's
    matching cells; every other cell is dropped, so a row without a match is
    dropped.  Each cell of the column that the scan returns is tested on its
    own: with one version (the default) that is the newest visible one, with
    ``max_versions`` above one every visible version is tested and only the
    matching versions are kept.  The column is not read for the filter's sake
    when the scan's column list leaves it out (then nothing passes), as in HBase.
    """

    def families_kept(self) -> set[bytes] | None:
        return {self.family}  # only the tested column's cells pass, and they depend on nothing else

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        column, test = self._column, self._test
        return [(c[1], c[2]) == column and test(c[5]) for c in cells], _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        tested = np.flatnonzero(self._column_cells(batch))
        mask = np.zeros(batch.num_cells, dtype=bool)
        mask[tested] = self._matching(batch, tested)
        return mask, _values.KEEP

    def __repr__(self) -> str:
        return self._call_text() + ")"
