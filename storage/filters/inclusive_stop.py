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
    """Rows whose key is at most ``stop_row``; scanners seek no further (the range ends after it)."""

    def __init__(self, stop_row: bytes | str):
        self.stop_row = to_bytes(stop_row, "InclusiveStopFilter stop_row")

    def _passes(self, row: bytes) -> bool:
        return row <= self.stop_row

    def _passes_keys(self, keys: pa.Array) -> np.ndarray:
        return pc.less_equal(keys, pa.scalar(self.stop_row, pa.binary())).to_numpy(zero_copy_only=False)

    def row_ranges(self) -> list[KeyRange] | None:
        return [(b"", key_after(self.stop_row))]

    def _settings(self) -> tuple:
        return (self.stop_row,)

    def __repr__(self) -> str:
        return f"InclusiveStopFilter ({quote(self.stop_row)})"
