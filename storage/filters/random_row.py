"""RandomRowFilter: each row kept by chance."""

from __future__ import annotations

import math

import numpy as np

from ..cells import Cell
from ..errors import InvalidArgument
from . import _values
from ._rows import RowBatch
from .base import Filter, Keep, Mode

__all__ = ["RandomRowFilter"]


class RandomRowFilter(Filter):
    """Keeps each row with probability ``chance`` (HBase ``RandomRowFilter``).

    As in HBase a chance below 0 keeps no row and one above 1 every row
    (neither draws); otherwise a row is kept when a uniform draw in [0, 1)
    is below the chance.  Draws come from a NumPy generator seeded at each
    :meth:`reset` (each scan): with ``seed`` None from fresh entropy, so
    scans differ, with an integer the same rows come out of every scan of
    the same data.  Each row that reaches the filter takes one draw, in scan
    order, on both paths (the batch path takes a batch's draws at once), so
    the two give the same rows for a seed.  The draws are per-scan state:
    the filter is stateful, and sees the rows its MUST_PASS_ALL siblings keep.
    """

    stateful = True

    def __init__(self, chance: float, seed: int | None = None):
        if isinstance(chance, bool) or not isinstance(chance, (int, float, np.floating, np.integer)):
            raise InvalidArgument(f"RandomRowFilter chance must be a number, got {chance!r}")
        if not math.isfinite(chance):
            raise InvalidArgument(f"RandomRowFilter chance must be a finite number, got {chance!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise InvalidArgument(f"RandomRowFilter seed must be a non-negative integer or None, got {seed!r}")
        self.chance = float(chance)
        self.seed = None if seed is None else int(seed)
        self.reset()

    def reset(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        if self.chance < 0:
            return False, _values.KEEP
        if self.chance > 1:
            return True, _values.KEEP
        return bool(self._rng.random() < self.chance), _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, int]:
        if self.chance < 0 or self.chance > 1:
            return np.full(batch.num_cells, self.chance > 1, dtype=bool), _values.KEEP
        return batch.broadcast(self._rng.random(batch.num_rows) < self.chance), _values.KEEP

    def _settings(self) -> tuple:
        return (self.chance, self.seed)

    def __repr__(self) -> str:
        chance = repr(self.chance)
        return f"RandomRowFilter ({chance})" if self.seed is None else f"RandomRowFilter ({chance}, {self.seed})"
