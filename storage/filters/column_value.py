"""SingleColumnValueFilter: keep whole rows by the value of one column."""

from __future__ import annotations

import numpy as np

from ..cells import Cell
from ..errors import InvalidArgument
from . import _values
from ._column_comparison import ColumnComparison
from ._rows import RowBatch
from .base import Keep, Mode
from .comparators import Comparator, NotUtf8, not_utf8
from .compare import CompareOperator

__all__ = ["SingleColumnValueFilter"]


class SingleColumnValueFilter(ColumnComparison):
    """Rows whose ``family:qualifier`` value satisfies ``value <op> comparator``.

    As HBase's ``SingleColumnValueFilter``: with ``latest_version_only`` only
    the newest visible version is tested, otherwise the row passes when any
    version does; a row without the column passes unless
    ``filter_if_missing``.  The whole row is kept or dropped.
    """

    def __init__(
        self,
        family: bytes | str,
        qualifier: bytes | str,
        op: CompareOperator | str,
        comparator: Comparator,
        filter_if_missing: bool = False,
        latest_version_only: bool = True,
    ):
        super().__init__(family, qualifier, op, comparator)
        for name, flag in (("filter_if_missing", filter_if_missing), ("latest_version_only", latest_version_only)):
            if not isinstance(flag, bool):
                raise InvalidArgument(f"{type(self).__name__} {name} must be a bool, got {flag!r}")
        self.filter_if_missing = filter_if_missing
        self.latest_version_only = latest_version_only

    def columns_needed(self) -> set[bytes] | None:
        return {self.family + b":" + self.qualifier}

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        column = self._column
        found = False
        for c in cells:
            here = (c[1], c[2])
            if here == column:
                try:
                    passed = self._test(c[5])
                except NotUtf8 as exc:
                    raise not_utf8(exc, c[1] + b":" + c[2], c[0]) from None
                if passed:
                    return True, _values.KEEP
                found = True
                if self.latest_version_only:
                    break  # versions come newest first
            elif here > column:
                break  # cells are in column order: the column is behind us
        passes = False if found else not self.filter_if_missing
        return passes, _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        in_column = self._column_cells(batch)
        if self.latest_version_only:
            # the newest version is the column's first cell within its row
            after_same = np.zeros_like(in_column)
            after_same[1:] = in_column[:-1]
            after_same[batch.starts] = False
            in_column &= ~after_same
        tested = np.flatnonzero(in_column)
        matched = self._matching(batch, tested)
        found_rows = np.zeros(batch.num_rows, dtype=bool)
        tested_rows = batch.row_of(tested)
        found_rows[tested_rows] = True
        matched_rows = np.zeros(batch.num_rows, dtype=bool)
        matched_rows[tested_rows[matched]] = True
        passes = np.where(found_rows, matched_rows, not self.filter_if_missing)
        return batch.broadcast(passes), _values.KEEP

    def _settings(self) -> tuple:
        return super()._settings() + (self.filter_if_missing, self.latest_version_only)

    def __repr__(self) -> str:
        text = self._call_text()
        if self.filter_if_missing or not self.latest_version_only:
            text += f", {str(self.filter_if_missing).lower()}, {str(self.latest_version_only).lower()}"
        return text + ")"
