"""InclusiveStopFilter: rows up to and including a stop row (HBase ``InclusiveStopFilter``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._text import quote, to_bytes
from ..keys import KeyRange, key_after
from .row_filters import _RowKeyFilter

__all__ = ["InclusiveStopFilter"]


class InclusiveStopFilter(_RowKeyFilter):
    """Rows up to and including ``stop_row`` in the scan's direction.

    A forward scan keeps rows at or below ``stop_row``, a reverse scan rows at
    or above it (HBase's filter once the scan reverses it); either way the
    scan ends after the stop row, through :meth:`row_ranges`.  The scan's
    direction reaches the filter through :meth:`oriented`; the direction is
    not part of the filter's settings, so both orientations compare equal and
    print the same.
    """

    def __init__(self, stop_row: bytes | str):
        self.stop_row = to_bytes(stop_row, "InclusiveStopFilter stop_row")
        self.reverse = False

    def oriented(self, reverse: bool) -> "InclusiveStopFilter":
        if bool(reverse) == self.reverse:
            return self
        twin = InclusiveStopFilter(self.stop_row)
        twin.reverse = bool(reverse)
        return twin

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
