"""SingleColumnValueFilter: keep whole rows by the value of one column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell
from ..errors import InvalidArgument
from . import _values
from ._rows import RowBatch
from ._text import quote, quote_text, to_bytes
from .base import Filter, Keep, Mode
from .comparators import Comparator
from .compare import CompareOperator, to_operator

__all__ = ["SingleColumnValueFilter"]


class SingleColumnValueFilter(Filter):
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
        if not isinstance(comparator, Comparator):
            raise InvalidArgument(f"SingleColumnValueFilter comparator must be a Comparator, got {comparator!r}")
        for name, flag in (("filter_if_missing", filter_if_missing), ("latest_version_only", latest_version_only)):
            if not isinstance(flag, bool):
                raise InvalidArgument(f"SingleColumnValueFilter {name} must be a bool, got {flag!r}")
        self.family = to_bytes(family, "SingleColumnValueFilter family")
        self.qualifier = to_bytes(qualifier, "SingleColumnValueFilter qualifier")
        self.op = to_operator(op)
        self.comparator = comparator
        self.filter_if_missing = filter_if_missing
        self.latest_version_only = latest_version_only
        self._test = comparator.predicate(self.op)
        self._column = (self.family, self.qualifier)

    def columns_needed(self) -> set[bytes] | None:
        return {self.family + b":" + self.qualifier}

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        column = self._column
        found = False
        for c in cells:
            here = (c[1], c[2])
            if here == column:
                if self._test(c[5]):
                    return True, _values.KEEP
                found = True
                if self.latest_version_only:
                    break  # versions come newest first
            elif here > column:
                break  # cells are in column order: the column is behind us
        passes = False if found else not self.filter_if_missing
        return passes, _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        family, qualifier = batch.column("family"), batch.column("qualifier")
        in_column = pc.and_(
            pc.equal(family, pa.scalar(self.family, pa.binary())),
            pc.equal(qualifier, pa.scalar(self.qualifier, pa.binary())),
        ).to_numpy(zero_copy_only=False)
        if self.latest_version_only:
            # the newest version is the column's first cell within its row
            after_same = np.zeros_like(in_column)
            after_same[1:] = in_column[:-1]
            after_same[batch.starts] = False
            in_column &= ~after_same
        tested = np.flatnonzero(in_column)
        matched = self.comparator.mask(batch.column("value").take(pa.array(tested, pa.int64())), self.op)
        found_rows = np.zeros(batch.num_rows, dtype=bool)
        tested_rows = batch.row_of(tested)
        found_rows[tested_rows] = True
        matched_rows = np.zeros(batch.num_rows, dtype=bool)
        matched_rows[tested_rows[matched]] = True
        passes = np.where(found_rows, matched_rows, not self.filter_if_missing)
        return batch.broadcast(passes), _values.KEEP

    def _settings(self) -> tuple:
        return (self.family, self.qualifier, self.op, self.comparator, self.filter_if_missing, self.latest_version_only)

    def __repr__(self) -> str:
        text = (
            f"SingleColumnValueFilter ({quote(self.family)}, {quote(self.qualifier)}, "
            f"{self.op.symbol}, {quote_text(self.comparator.to_string())}"
        )
        if self.filter_if_missing or not self.latest_version_only:
            text += f", {str(self.filter_if_missing).lower()}, {str(self.latest_version_only).lower()}"
        return text + ")"
