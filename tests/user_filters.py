"""A user filter for the filter-language registry tests, importable by server processes.

``KeyLengthFilter (n)`` keeps the rows whose key is exactly ``n`` bytes long.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from storage.errors import InvalidArgument
from storage.filters import Filter


class KeyLengthFilter(Filter):
    """Rows whose key has exactly ``length`` bytes."""

    def __init__(self, length: int):
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise InvalidArgument(f"KeyLengthFilter length must be a non-negative int, got {length!r}")
        self.length = length

    @classmethod
    def from_arguments(cls, arguments: list) -> "KeyLengthFilter":
        if len(arguments) != 1:
            raise InvalidArgument(f"KeyLengthFilter takes 1 argument, got {len(arguments)}")
        return cls(arguments[0])

    def filter_row_key(self, row: bytes) -> bool:
        return len(row) != self.length

    def _skip_rows(self, batch) -> np.ndarray:
        return pc.not_equal(pc.binary_length(batch.keys), self.length).to_numpy(zero_copy_only=False)

    def _eval_row(self, cells):
        return True, 0

    def _eval_batch(self, batch):
        return np.ones(batch.num_cells, dtype=bool), 0

    def _settings(self) -> tuple:
        return (self.length,)

    def __repr__(self) -> str:
        return f"KeyLengthFilter ({self.length})"
