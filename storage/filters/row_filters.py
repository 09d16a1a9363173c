"""Filters that decide on the row key alone: PrefixFilter, RowFilter,
MultiRowRangeFilter.

They reject rows in ``filter_row_key`` (so the cell path never reads the
cells of a rejected row) and keep every cell of the rows they accept.
Their :meth:`row_ranges` let scanners seek instead of filtering.
"""

from __future__ import annotations

from abc import abstractmethod

from bisect import bisect_right
from typing import Iterable, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell
from ..errors import InvalidArgument
from . import _values
from ._rows import RowBatch
from ._text import quote, quote_text, to_bytes
from .base import Filter, Keep, Mode
from .comparators import BinaryComparator, BinaryPrefixComparator, Comparator
from .compare import CompareOperator, to_operator
from ..keys import KeyRange, key_after, normalize, prefix_stop

__all__ = ["PrefixFilter", "RowFilter", "MultiRowRangeFilter", "RowRange"]

_FEW_RANGES = 8  # up to this many ranges, MultiRowRangeFilter tests each range in turn


def restricting(ranges: list[KeyRange]) -> list[KeyRange] | None:
    """Normalized ranges, or None when they cover every key."""
    ranges = normalize(ranges)
    return None if ranges == [(b"", None)] else ranges


class RowKeyFilter(Filter):
    """Base of filters deciding per row key; subclasses give the two tests."""

    @abstractmethod
    def _passes(self, row: bytes) -> bool:
        ...

    @abstractmethod
    def _passes_keys(self, keys: pa.Array) -> np.ndarray:
        ...

    def filter_row_key(self, row: bytes) -> bool:
        return not self._passes(row)

    def _skip_rows(self, batch: RowBatch) -> np.ndarray | None:
        return ~self._passes_keys(batch.keys)

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        return True, _values.KEEP  # the key test already passed

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        return np.ones(batch.num_cells, dtype=bool), _values.KEEP


class PrefixFilter(RowKeyFilter):
    """Rows whose key starts with ``prefix`` (HBase ``PrefixFilter``)."""

    def __init__(self, prefix: bytes | str):
        self.prefix = to_bytes(prefix, "PrefixFilter prefix")

    def _passes(self, row: bytes) -> bool:
        return row.startswith(self.prefix)

    def _passes_keys(self, keys: pa.Array) -> np.ndarray:
        return pc.starts_with(keys, self.prefix).to_numpy(zero_copy_only=False)

    def row_ranges(self) -> list[KeyRange] | None:
        return restricting([(self.prefix, prefix_stop(self.prefix))])

    def _settings(self) -> tuple:
        return (self.prefix,)

    def __repr__(self) -> str:
        return f"PrefixFilter ({quote(self.prefix)})"


class RowFilter(RowKeyFilter):
    """Rows whose key satisfies ``key <op> comparator`` (HBase ``RowFilter``)."""

    def __init__(self, op: CompareOperator | str, comparator: Comparator):
        if not isinstance(comparator, Comparator):
            raise InvalidArgument(f"RowFilter comparator must be a Comparator, got {comparator!r}")
        self.op = to_operator(op)
        self.comparator = comparator
        self._test = comparator.predicate(self.op)

    def _passes(self, row: bytes) -> bool:
        return self._test(row)

    def _passes_keys(self, keys: pa.Array) -> np.ndarray:
        return self.comparator.mask(keys, self.op)

    def row_ranges(self) -> list[KeyRange] | None:
        op, cmp = self.op, self.comparator
        if op is CompareOperator.NO_OP:
            return []
        v = cmp.value
        if type(cmp) is BinaryComparator:
            after = key_after(v)
            less, equal, greater = [(b"", v)], [(v, after)], [(after, None)]
        elif type(cmp) is BinaryPrefixComparator:
            # key[:n] < v  <=>  key < v;   key[:n] > v  <=>  key >= prefix_stop(v)
            stop = prefix_stop(v)
            less, equal = [(b"", v)], [(v, stop)]
            greater = [(stop, None)] if stop is not None else []
        else:
            return None
        choice = {
            CompareOperator.LESS: less,
            CompareOperator.LESS_OR_EQUAL: less + equal,
            CompareOperator.EQUAL: equal,
            CompareOperator.NOT_EQUAL: less + greater,
            CompareOperator.GREATER_OR_EQUAL: equal + greater,
            CompareOperator.GREATER: greater,
        }[op]
        return restricting(choice)

    def _settings(self) -> tuple:
        return (self.op, self.comparator)

    def __repr__(self) -> str:
        return f"RowFilter ({self.op.symbol}, {quote_text(self.comparator.to_string())})"


class RowRange(NamedTuple):
    """One range of MultiRowRangeFilter; an empty ``stop`` is unbounded."""

    start: bytes
    start_inclusive: bool
    stop: bytes
    stop_inclusive: bool

    def key_range(self) -> KeyRange:
        """The range as ``[start, stop)``."""
        start = self.start if self.start_inclusive else key_after(self.start)
        if not self.stop:
            return (start, None)
        return (start, key_after(self.stop) if self.stop_inclusive else self.stop)


class MultiRowRangeFilter(RowKeyFilter):
    """Rows inside any of several key ranges (HBase ``MultiRowRangeFilter``).

    ``ranges`` holds :class:`RowRange` values or 4-tuples
    ``(start, start_inclusive, stop, stop_inclusive)``.
    """

    def __init__(self, ranges: Iterable[RowRange | tuple]):
        parsed = []
        for r in ranges:
            if len(r) != 4:
                raise InvalidArgument(f"a row range needs (start, start_inclusive, stop, stop_inclusive), got {r!r}")
            start = to_bytes(r[0], "row range start")
            stop = to_bytes(r[2], "row range stop")
            if stop and start > stop:
                raise InvalidArgument(f"row range start {start!r} is after its stop {stop!r}")
            parsed.append(RowRange(start, bool(r[1]), stop, bool(r[3])))
        self.ranges = tuple(parsed)
        self._merged = normalize(r.key_range() for r in parsed)
        self._starts = [s for s, _ in self._merged]
        self._stops = [e for _, e in self._merged]

    def _passes(self, row: bytes) -> bool:
        i = bisect_right(self._starts, row) - 1
        if i < 0:
            return False
        stop = self._stops[i]
        return stop is None or row < stop

    def _passes_keys(self, keys: pa.Array) -> np.ndarray:
        n_keys, n_ranges = len(keys), len(self._merged)
        if n_ranges <= _FEW_RANGES:
            # two comparison kernels per range beat sorting the keys
            inside = np.zeros(n_keys, dtype=bool)
            for start, stop in self._merged:
                m = pc.greater_equal(keys, pa.scalar(start, pa.binary()))
                if stop is not None:
                    m = pc.and_(m, pc.less(keys, pa.scalar(stop, pa.binary())))
                inside |= m.to_numpy(zero_copy_only=False)
            return inside
        # Rank keys among range starts with one stable sort: the starts come
        # first in the concatenation, so a start sorts before an equal key.
        both = pa.concat_arrays([pa.array(self._starts, pa.binary()), keys])
        order = pc.sort_indices(both).to_numpy(zero_copy_only=False)
        is_start = order < n_ranges
        starts_before = np.cumsum(is_start)
        range_of_key = np.empty(n_keys, dtype=np.int64)
        range_of_key[order[~is_start] - n_ranges] = starts_before[~is_start] - 1
        inside = range_of_key >= 0
        stops = pa.array(self._stops, pa.binary()).take(pa.array(np.maximum(range_of_key, 0)))
        below = pc.fill_null(pc.less(keys, stops), True).to_numpy(zero_copy_only=False)
        return inside & below

    def row_ranges(self) -> list[KeyRange] | None:
        return restricting(self._merged)

    def _settings(self) -> tuple:
        return self.ranges

    def __repr__(self) -> str:
        args = ", ".join(
            f"{quote(r.start)}, {str(r.start_inclusive).lower()}, {quote(r.stop)}, {str(r.stop_inclusive).lower()}"
            for r in self.ranges
        )
        return f"MultiRowRangeFilter ({args})"
