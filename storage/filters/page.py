"""PageFilter: at most N rows per scan."""

from __future__ import annotations

import numpy as np

from ..cells import Cell
from ..errors import InvalidArgument
from . import _values
from ._rows import RowBatch
from .base import Filter, Keep, Mode

__all__ = ["PageFilter"]


class PageFilter(Filter):
    """Passes the first ``page_size`` rows that reach it, then nothing.

    The count is per-scan state: :meth:`reset` clears it, and a scanner
    works on a :meth:`copy`.  Unlike HBase, which counts every row that
    reaches ``filterRow`` and so may count rows that end up empty, a row is
    counted only when it passes; inside MUST_PASS_ALL it sees only the rows
    its stateless siblings keep (see :class:`FilterList`).
    """

    stateful = True

    def __init__(self, page_size: int):
        if not isinstance(page_size, (int, np.integer)) or isinstance(page_size, bool) or page_size < 0:
            raise InvalidArgument(f"PageFilter page_size must be a non-negative integer, got {page_size!r}")
        self.page_size = int(page_size)
        self.rows_accepted = 0

    def reset(self) -> None:
        self.rows_accepted = 0

    def filter_all_remaining(self) -> bool:
        return self.rows_accepted >= self.page_size

    def filter_row_key(self, row: bytes) -> bool:
        return self.rows_accepted >= self.page_size

    def _skip_rows(self, batch: RowBatch) -> np.ndarray | None:
        if self.rows_accepted >= self.page_size:
            return np.ones(batch.num_rows, dtype=bool)
        return None

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        self.rows_accepted += 1  # filter_row_key was False: there is room
        return True, _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        room = self.page_size - self.rows_accepted
        if batch.num_rows <= room:
            self.rows_accepted += batch.num_rows
            return np.ones(batch.num_cells, dtype=bool), _values.KEEP
        self.rows_accepted = self.page_size
        return batch.first_rows(room), _values.KEEP

    def _settings(self) -> tuple:
        return (self.page_size,)

    def __repr__(self) -> str:
        return f"PageFilter ({self.page_size})"
