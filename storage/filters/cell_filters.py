"""Filters that keep or rewrite individual cells: FirstKeyOnlyFilter,
KeyOnlyFilter, ColumnPrefixFilter, QualifierFilter, ValueFilter,
TimestampsFilter.

They look at each cell on its own (FirstKeyOnlyFilter at its place in the
row); a row left with no cells is dropped.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell
from ..errors import InvalidArgument, clip
from . import _values
from ._rows import RowBatch
from ._text import quote, quote_text, to_bytes
from .base import Filter, Keep, Mode
from .comparators import Comparator
from .compare import CompareOperator, to_operator

__all__ = [
    "FirstKeyOnlyFilter",
    "KeyOnlyFilter",
    "ColumnPrefixFilter",
    "QualifierFilter",
    "ValueFilter",
    "TimestampsFilter",
]

_QUALIFIER = 2
_TIMESTAMP = 3
_VALUE = 5


class FirstKeyOnlyFilter(Filter):
    """Only the first cell of each row (HBase ``FirstKeyOnlyFilter``); handy for counting rows."""

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        if len(cells) == 1:
            return True, _values.KEEP
        return [True] + [False] * (len(cells) - 1), _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        return batch.first_cells(), _values.KEEP

    def __repr__(self) -> str:
        return "FirstKeyOnlyFilter ()"


class KeyOnlyFilter(Filter):
    """Every cell with its value emptied (HBase ``KeyOnlyFilter``).

    With ``len_as_value`` the value becomes its original length as a 4-byte
    big-endian integer instead.
    """

    def __init__(self, len_as_value: bool = False):
        if not isinstance(len_as_value, bool):
            raise InvalidArgument(f"KeyOnlyFilter len_as_value must be a bool, got {len_as_value!r}")
        self.len_as_value = len_as_value
        self._mode = _values.LENGTH if len_as_value else _values.EMPTY

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        return True, self._mode

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        return np.ones(batch.num_cells, dtype=bool), self._mode

    def _settings(self) -> tuple:
        return (self.len_as_value,)

    def __repr__(self) -> str:
        return "KeyOnlyFilter (true)" if self.len_as_value else "KeyOnlyFilter ()"


class ColumnPrefixFilter(Filter):
    """Cells whose qualifier starts with ``prefix``, in any family."""

    def __init__(self, prefix: bytes | str):
        self.prefix = to_bytes(prefix, "ColumnPrefixFilter prefix")

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        p = self.prefix
        return [c[_QUALIFIER].startswith(p) for c in cells], _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        found = pc.starts_with(batch.column("qualifier"), self.prefix)
        return found.to_numpy(zero_copy_only=False), _values.KEEP

    def passes_column(self, family: bytes, qualifier: bytes) -> bool:
        """Does the filter keep the cells of ``family:qualifier``? (It decides by the column alone.)"""
        return qualifier.startswith(self.prefix)

    def _settings(self) -> tuple:
        return (self.prefix,)

    def __repr__(self) -> str:
        return f"ColumnPrefixFilter ({quote(self.prefix)})"


class CellCompareFilter(Filter):
    """Keeps the cells whose field ``_field`` satisfies ``field <op> comparator``."""

    _field: int
    _column: str

    def __init__(self, op: CompareOperator | str, comparator: Comparator):
        if not isinstance(comparator, Comparator):
            raise InvalidArgument(f"{type(self).__name__} comparator must be a Comparator, got {comparator!r}")
        self.op = to_operator(op)
        self.comparator = comparator
        self._test = comparator.predicate(self.op)

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        test, i = self._test, self._field
        return [test(c[i]) for c in cells], _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        return self.comparator.mask(batch.column(self._column), self.op), _values.KEEP

    def _settings(self) -> tuple:
        return (self.op, self.comparator)

    def __repr__(self) -> str:
        return f"{type(self).__name__} ({self.op.symbol}, {quote_text(self.comparator.to_string())})"


class QualifierFilter(CellCompareFilter):
    """Cells whose qualifier satisfies the comparison (HBase ``QualifierFilter``)."""

    _field = _QUALIFIER
    _column = "qualifier"

    def passes_column(self, family: bytes, qualifier: bytes) -> bool:
        """Does the filter keep the cells of ``family:qualifier``? (It decides by the column alone.)"""
        return bool(self._test(qualifier))


class ValueFilter(CellCompareFilter):
    """Cells whose value satisfies the comparison (HBase ``ValueFilter``)."""

    _field = _VALUE
    _column = "value"


class TimestampsFilter(Filter):
    """Cells whose timestamp is one of ``timestamps`` (HBase ``TimestampsFilter``)."""

    def __init__(self, timestamps: Iterable[int]):
        stamps = list(timestamps)
        for t in stamps:
            if not isinstance(t, (int, np.integer)) or isinstance(t, bool) or not -(2**63) <= t < 2**63:
                raise InvalidArgument(
                    f"TimestampsFilter timestamps must be signed 64-bit integers, got {clip(repr(t), 40)}"
                )
            if t < 0:  # as HBase's TimestampsFilter: cells never carry one
                raise InvalidArgument(f"TimestampsFilter timestamps must not be negative, got {int(t)}")
        self.timestamps = tuple(sorted(set(int(t) for t in stamps)))
        self._set = frozenset(self.timestamps)
        self._array = pa.array(self.timestamps, pa.int64())

    def selected_timestamps(self) -> frozenset[int] | None:
        return self._set

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        stamps = self._set
        return [c[_TIMESTAMP] in stamps for c in cells], _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        found = pc.is_in(batch.column("timestamp"), value_set=self._array)
        return found.to_numpy(zero_copy_only=False), _values.KEEP

    def _settings(self) -> tuple:
        return self.timestamps

    def __repr__(self) -> str:
        return f"TimestampsFilter ({', '.join(str(t) for t in self.timestamps)})"
