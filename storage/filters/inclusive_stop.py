"""InclusiveStopFilter: rows up to and including a stop row (HBase ``InclusiveStopFilter``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._rows import RowBatch
from ._text import quote, to_bytes
from ..keys import KeyRange, key_after
from .row_filters import RowKeyFilter

__all__ = ["InclusiveStopFilter"]


class InclusiveStopFilter(RowKeyFilter):
    """Rows up to and including ``stop_row`` in the scan's direction.

    A forward scan keeps rows at or below ``stop_row``, a reverse scan rows at
    or above it (HBase's filter once the scan reverses it); either way the
    scan ends after the stop row, through :meth:`row_ranges`.  The scan's
    direction reaches the filter through :meth:`oriented`; the direction is
    not part of the filter's settings, so both orientations compare equal and
    print the same.

    As HBase's filter, it remembers the first row past the stop row it is
    shown (by :meth:`filter_row_key` or a batch): from then on
    :meth:`filter_all_remaining` is True and every later row is rejected.  In
    a scan, whose rows come in order, every later row is past the stop row
    anyway, so that record changes no answer; it only lets the scan end.
    The record is per-scan state (:meth:`reset` clears it, copies are
    independent), yet the filter is not ``stateful`` in FilterList's sense:
    its siblings' answers never change it.
    """

    def __init__(self, stop_row: bytes | str):
        self.stop_row = to_bytes(stop_row, "InclusiveStopFilter stop_row")
        self.reverse = False
        self.done = False

    def __deepcopy__(self, memo: dict) -> "InclusiveStopFilter":
        # shared when stateless (Filter.__deepcopy__), but ``done`` is per scan
        twin = InclusiveStopFilter(self.stop_row)
        twin.reverse, twin.done = self.reverse, self.done
        memo[id(self)] = twin
        return twin

    def reset(self) -> None:
        self.done = False

    def oriented(self, reverse: bool) -> "InclusiveStopFilter":
        if bool(reverse) == self.reverse:
            return self
        twin = InclusiveStopFilter(self.stop_row)
        twin.reverse, twin.done = bool(reverse), self.done
        return twin

    def filter_all_remaining(self) -> bool:
        return self.done

    def filter_row_key(self, row: bytes) -> bool:
        if not self.done and not self._passes(row):
            self.done = True  # HBase's filterRowKey: the first row past the stop ends the scan
        return self.done

    def _skip_rows(self, batch: RowBatch) -> np.ndarray | None:
        if self.done:
            return np.ones(batch.num_rows, dtype=bool)
        skip = ~self._passes_keys(batch.keys)
        if skip.any():
            # every row from the first one past the stop row on, as filter_row_key row by row
            skip[int(np.argmax(skip)):] = True
            self.done = True
        return skip

    def _passes(self, row: bytes) -> bool:
        return row >= self.stop_row if self.reverse else row <= self.stop_row

    def _passes_keys(self, keys: pa.Array) -> np.ndarray:
        test = pc.greater_equal if self.reverse else pc.less_equal
        return test(keys, pa.scalar(self.stop_row, pa.binary())).to_numpy(zero_copy_only=False)

    def row_ranges(self) -> list[KeyRange] | None:
        if self.reverse:
            return None if not self.stop_row else [(self.stop_row, None)]
        return [(b"", key_after(self.stop_row))]

    def _settings(self) -> tuple:
        return (self.stop_row,)

    def __repr__(self) -> str:
        return f"InclusiveStopFilter ({quote(self.stop_row)})"
