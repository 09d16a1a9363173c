"""SkipFilter and WhileMatchFilter: the SKIP and WHILE keywords."""

from __future__ import annotations

import numpy as np

from ..cells import Cell
from ..errors import InvalidArgument, clip
from . import _values
from ._rows import RowBatch
from .base import Filter, Keep, Mode, check_depth, eval_rows
from ..keys import KeyRange

__all__ = ["SkipFilter", "WhileMatchFilter"]


def _operand(f: Filter) -> str:
    """The wrapped filter's text, parenthesized when it is a list of several."""
    from .filter_list import FilterList

    text = repr(f)
    return f"({text})" if isinstance(f, FilterList) and len(f.filters) > 1 else text


def _fully_kept(keep: Keep) -> bool:
    return keep is True or (keep is not False and all(keep))


class _Wrapper(Filter):
    def __init__(self, filter: Filter):
        if not isinstance(filter, Filter):
            raise InvalidArgument(f"{type(self).__name__} wraps a Filter, got {clip(repr(filter), 80)}")
        check_depth(filter, extra=1)
        self.filter = filter

    def _children(self) -> tuple[Filter, ...]:
        return (self.filter,)

    def reset(self) -> None:
        self.filter.reset()

    def oriented(self, reverse: bool) -> Filter:
        inner = self.filter.oriented(reverse)
        if inner is self.filter:
            return self
        twin = type(self)(inner)
        twin.__dict__.update({k: v for k, v in self.__dict__.items() if k != "filter"})
        return twin

    def columns_needed(self) -> set[bytes] | None:
        return self.filter.columns_needed()

    def _settings(self) -> tuple:
        return (self.filter,)


class SkipFilter(_Wrapper):
    """Keeps a row only when the wrapped filter keeps every one of its cells
    (HBase ``SkipFilter``, the ``SKIP`` keyword); otherwise drops the whole row."""

    def __init__(self, filter: Filter):
        super().__init__(filter)
        self.stateful = filter.stateful

    def row_ranges(self) -> list[KeyRange] | None:
        return self.filter.row_ranges()

    def filter_all_remaining(self) -> bool:
        return self.filter.filter_all_remaining()

    def filter_row_key(self, row: bytes) -> bool:
        return self.filter.filter_row_key(row)

    def _skip_rows(self, batch: RowBatch) -> np.ndarray | None:
        return self.filter._skip_rows(batch)

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        keep, mode = self.filter._eval_row(cells)
        return (True, mode) if _fully_kept(keep) else (False, _values.KEEP)

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, object]:
        mask, mode = self.filter._eval_batch(batch)
        return batch.broadcast(batch.row_all(mask)), mode

    def __repr__(self) -> str:
        return f"SKIP {_operand(self.filter)}"


class WhileMatchFilter(_Wrapper):
    """Passes rows while the wrapped filter keeps every cell of them; at the
    first row it does not, the scan is over (HBase ``WhileMatchFilter``, the
    ``WHILE`` keyword).  It gives no row ranges: seeking past a failing row
    would change the answer."""

    stateful = True

    def __init__(self, filter: Filter):
        super().__init__(filter)
        self.done = False

    def reset(self) -> None:
        self.done = False
        self.filter.reset()

    def filter_all_remaining(self) -> bool:
        return self.done or self.filter.filter_all_remaining()

    def filter_row_key(self, row: bytes) -> bool:
        # Only the finished state: a key the wrapped filter rejects must still
        # reach _eval_row, which ends the scan.
        return self.done

    def _skip_rows(self, batch: RowBatch) -> np.ndarray | None:
        return np.ones(batch.num_rows, dtype=bool) if self.done else None

    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        if not self.filter.filter_row_key(cells[0][0]):
            keep, mode = self.filter._eval_row(cells)
            if _fully_kept(keep):
                return True, mode
        self.done = True
        return False, _values.KEEP

    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, object]:
        # Rows after the first failure also reach the wrapped filter here; its
        # state no longer matters then, as this filter is done.
        skip = self.filter._skip_rows(batch)
        passing = None if skip is None else ~skip
        mask, mode = eval_rows(self.filter, batch, passing)
        fully = batch.row_all(mask)  # False for skipped rows: none of their cells is kept
        if fully.all():
            return np.ones(batch.num_cells, dtype=bool), mode
        self.done = True
        first_failure = int(np.argmin(fully))
        return batch.first_rows(first_failure), mode

    def __repr__(self) -> str:
        return f"WHILE {_operand(self.filter)}"
