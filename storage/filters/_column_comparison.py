"""The part SingleColumnValueFilter and ColumnValueFilter share: one column, one comparison.

Both name a ``family:qualifier`` column, a compare operator and a
comparator; they differ in what they keep (the whole row, or only the
column's matching cells).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import InvalidArgument
from ._rows import RowBatch
from ._text import quote, quote_text, to_bytes
from .base import Filter
from .comparators import Comparator, NotUtf8, not_utf8
from .compare import CompareOperator, to_operator

__all__ = ["ColumnComparison"]


class ColumnComparison(Filter):
    """A filter testing the values of one ``family:qualifier`` column with ``op`` and ``comparator``."""

    def __init__(
        self,
        family: bytes | str,
        qualifier: bytes | str,
        op: CompareOperator | str,
        comparator: Comparator,
    ):
        name = type(self).__name__
        if not isinstance(comparator, Comparator):
            raise InvalidArgument(f"{name} comparator must be a Comparator, got {comparator!r}")
        self.family = to_bytes(family, f"{name} family")
        self.qualifier = to_bytes(qualifier, f"{name} qualifier")
        self.op = to_operator(op)
        self.comparator = comparator
        self._test = comparator.predicate(self.op)
        self._column = (self.family, self.qualifier)

    def _column_cells(self, batch: RowBatch) -> np.ndarray:
        """Mask of the cells of ``batch`` in the tested column."""
        return batch.column_cells(self.family, self.qualifier)

    def _matching(self, batch: RowBatch, positions: np.ndarray) -> np.ndarray:
        """Per cell at ``positions``: does its value satisfy the comparison (one kernel over those values)."""
        taken = pa.array(positions, pa.int64())
        try:
            return self.comparator.mask(batch.column("value").take(taken), self.op)
        except NotUtf8 as exc:  # name the row and column of the value (utf8: comparators)
            row = batch.column("row").take(taken)[exc.position].as_py()
            raise not_utf8(exc, self.family + b":" + self.qualifier, row) from None

    def _settings(self) -> tuple:
        return (self.family, self.qualifier, self.op, self.comparator)

    def _call_text(self) -> str:
        """``Name ('family', 'qualifier', op, 'comparator'`` without the closing parenthesis."""
        return (
            f"{type(self).__name__} ({quote(self.family)}, {quote(self.qualifier)}, "
            f"{self.op.symbol}, {quote_text(self.comparator.to_string())}"
        )
