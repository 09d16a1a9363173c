"""DependentColumnFilter: cells whose timestamp the row's dependent column also has."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..cells import Cell
from ..errors import InvalidArgument
from . import _values
from ._rows import RowBatch
from ._text import quote, quote_text, to_bytes
from .base import Filter, Keep, Mode
from .comparators import Comparator
from .compare import CompareOperator, to_operator

__all__ = ["DependentColumnFilter"]

_TIMESTAMP = 3
_VALUE = 5


class DependentColumnFilter(Filter):
    """Per row, the cells with a timestamp that a cell of ``family:qualifier``
    (the dependent column) also has (HBase ``DependentColumnFilter``).

    With a comparator, only the dependent column's cells whose value
    satisfies ``value <op> comparator`` count, and its other cells are
    dropped; ``NO_OP`` with a comparator counts none, as in HBase.  With
    ``drop_dependent_column`` the dependent column's own cells are left out.
    A row whose dependent column has no counting cell comes out empty, and
    is dropped.  Like HBase's, the filter sees only the columns the scan
    reads: scanning other columns only gives nothing.

    The decision is per row and stateless, so the batch path runs it on the
    whole batch: one comparator kernel over the dependent column's values
    and one membership test of (row, timestamp) pairs.
    """

    def __init__(
        self,
        family: bytes | str,
        qualifier: bytes | str,
        drop_dependent_column: bool = False,
        op: CompareOperator | str = CompareOperator.NO_OP,
        comparator: Comparator | None = None,
    ):
        if not isinstance(drop_dependent_column, bool):
            raise InvalidArgument(
                f"DependentColumnFilter drop_dependent_column must be a bool, got {drop_dependent_column!r}"
            )
        if comparator is not None and not isinstance(comparator, Comparator):
            raise InvalidArgument(f"DependentColumnFilter comparator must be a Comparator or None, got {comparator!r}")
        self.family = to_bytes(family, "DependentColumnFilter family")
        self.qualifier = to_bytes(qualifier, "DependentColumnFilter qualifier")
        self.drop_dependent_column = drop_dependent_column
        self.op = to_operator(op)
        if comparator is None and self.op is not CompareOperator.NO_OP:
            raise InvalidArgument(f"DependentColumnFilter operator {self.op.symbol} needs a comparator")
        self.comparator = comparator
        self._test = None if comparator is None else comparator.predicate(self.op)
        self._column = (self.family, self.qualifier)

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        column, test = self._column, self._test
        dependent = [(c[1], c[2]) == column for c in cells]
        counts = [d and (test is None or test(c[_VALUE])) for c, d in zip(cells, dependent)]
        stamps = {c[_TIMESTAMP] for c, k in zip(cells, counts) if k}
        if not stamps:
            return False, _values.KEEP
        drop = self.drop_dependent_column
        keep = [
            c[_TIMESTAMP] in stamps and not (d and (drop or not k))
            for c, d, k in zip(cells, dependent, counts)
        ]
        return keep, _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        dependent = batch.column_cells(self.family, self.qualifier)
        counts = dependent.copy()
        if self._test is not None:
            tested = np.flatnonzero(dependent)
            values = batch.column("value").take(pa.array(tested, pa.int64()))
            counts[tested] = self.comparator.mask(values, self.op)
        if not counts.any():
            return np.zeros(batch.num_cells, dtype=bool), _values.KEEP
        # (row, timestamp) as one integer: the row number times the number of
        # distinct timestamps in the batch, plus the timestamp's rank among them
        stamps = batch.column("timestamp").to_numpy(zero_copy_only=False)
        distinct, rank = np.unique(stamps, return_inverse=True)
        pair = batch.row_ids.astype(np.int64) * len(distinct) + rank.reshape(-1)
        shared = np.isin(pair, pair[counts])
        drop = dependent & (self.drop_dependent_column | ~counts)
        return shared & ~drop, _values.KEEP

    def _settings(self) -> tuple:
        return (self.family, self.qualifier, self.drop_dependent_column, self.op, self.comparator)

    def __repr__(self) -> str:
        head = f"DependentColumnFilter ({quote(self.family)}, {quote(self.qualifier)}"
        if self.comparator is not None:
            return (f"{head}, {str(self.drop_dependent_column).lower()}, {self.op.symbol}, "
                    f"{quote_text(self.comparator.to_string())})")
        if self.drop_dependent_column:
            return f"{head}, true)"
        return head + ")"
