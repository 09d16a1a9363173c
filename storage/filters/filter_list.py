"""FilterList: filters combined with MUST_PASS_ALL (AND) or MUST_PASS_ONE (OR).

Every child looks at the whole row on its own, then the answers combine
per cell:

* MUST_PASS_ALL keeps a cell when every child keeps it, so any child
  dropping the row drops it;
* MUST_PASS_ONE keeps a cell when any child keeps it, so the row survives
  when any child keeps it.

HBase instead feeds a cell to a child only if the children before it
included it, so there the order of children changes the answer (a
FirstKeyOnlyFilter after a ColumnPrefixFilter sees only matching cells).

Stateful children (PageFilter, WhileMatchFilter, lists holding them) in
MUST_PASS_ALL are evaluated after the stateless ones and only for rows that
still have cells, in their order, so ``SingleColumnValueFilter(...) AND
PageFilter(10)`` gives ten matching rows.  In MUST_PASS_ONE every child
sees every row.  Value rewriting (KeyOnlyFilter) applies to the cells that
the rewriting child keeps.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable

import numpy as np

from ..cells import Cell
from ..errors import InvalidArgument, clip
from . import _values
from ._rows import RowBatch
from .base import Filter, Keep, Mode, check_depth, eval_rows, register_join
from ..keys import KeyRange, intersect, union

__all__ = ["FilterList", "FilterListOperator"]


class FilterListOperator(Enum):
    """How a FilterList combines its children; the value is the keyword."""

    MUST_PASS_ALL = "AND"
    MUST_PASS_ONE = "OR"


def _to_list_operator(op: FilterListOperator | str) -> FilterListOperator:
    if isinstance(op, FilterListOperator):
        return op
    if isinstance(op, str):
        for member in FilterListOperator:
            if op.upper() in (member.name, member.value):
                return member
    raise InvalidArgument(f"FilterList operator must be MUST_PASS_ALL (AND) or MUST_PASS_ONE (OR), got {op!r}")


def _and_keep(a: Keep, b: Keep) -> Keep:
    if a is True:
        return b
    if b is True:
        return a
    if a is False or b is False:
        return False
    return [x and y for x, y in zip(a, b)]


def _or_keep(a: Keep, b: Keep) -> Keep:
    if a is False:
        return b
    if b is False:
        return a
    if a is True or b is True:
        return True
    return [x or y for x, y in zip(a, b)]


def _max_mode(a: Mode, b: Mode, n: int) -> Mode:
    if not isinstance(a, list) and not isinstance(b, list):
        return max(a, b)
    a = a if isinstance(a, list) else [a] * n
    b = b if isinstance(b, list) else [b] * n
    return [max(x, y) for x, y in zip(a, b)]


def _mode_where(keep: Keep, mode: Mode, n: int) -> Mode:
    """``mode`` for the cells ``keep`` selects, KEEP elsewhere."""
    if keep is True or not mode:
        return mode
    modes = mode if isinstance(mode, list) else [mode] * n
    return [m if k else _values.KEEP for k, m in zip(keep, modes)]


def _has_cells(keep: Keep) -> bool:
    return keep is True or (keep is not False and any(keep))


def _mode_array(mode: object, n: int) -> np.ndarray:
    if isinstance(mode, np.ndarray):
        return mode.astype(np.int8, copy=False)
    return np.full(n, mode, dtype=np.int8)


class FilterList(Filter):
    """Children combined by ``operator`` (HBase ``FilterList``).

    ``FilterList(FilterList.MUST_PASS_ALL, [a, b])``; the operator may also be
    given as ``"MUST_PASS_ALL"``/``"AND"`` or ``"MUST_PASS_ONE"``/``"OR"``.
    An empty list passes every row.
    """

    MUST_PASS_ALL = FilterListOperator.MUST_PASS_ALL
    MUST_PASS_ONE = FilterListOperator.MUST_PASS_ONE

    def __init__(self, operator: FilterListOperator | str = FilterListOperator.MUST_PASS_ALL, filters: Iterable[Filter] = ()):
        self.operator = _to_list_operator(operator)
        self.filters: list[Filter] = []
        for f in filters:
            self.add_filter(f)

    @classmethod
    def join(cls, operator: FilterListOperator | str, *filters: Filter) -> "FilterList":
        """A new list of ``filters``, taking the children of operands that are
        lists with the same operator (the result means the same)."""
        operator = _to_list_operator(operator)
        children: list[Filter] = []
        for f in filters:
            if isinstance(f, FilterList) and f.operator is operator:
                children.extend(f.filters)
            else:
                children.append(f)
        return cls(operator, children)

    def add_filter(self, filter: Filter) -> None:
        """Append a child."""
        if not isinstance(filter, Filter):
            raise InvalidArgument(f"FilterList children must be Filters, got {clip(repr(filter), 80)}")
        check_depth(filter, extra=1)
        self.filters.append(filter)

    def _children(self) -> tuple[Filter, ...]:
        return tuple(self.filters)

    @property
    def stateful(self) -> bool:  # type: ignore[override]
        return any(f.stateful for f in self.filters)

    @property
    def _all(self) -> bool:
        return self.operator is FilterListOperator.MUST_PASS_ALL

    def reset(self) -> None:
        for f in self.filters:
            f.reset()

    def oriented(self, reverse: bool) -> "FilterList":
        children = [f.oriented(reverse) for f in self.filters]
        if all(a is b for a, b in zip(children, self.filters)):
            return self
        return FilterList(self.operator, children)

    def __deepcopy__(self, memo: dict) -> "FilterList":
        import copy

        # the children were checked when they were added, and copies nest as deep as they do:
        # checking each again (add_filter) would cost a depth walk a child on every scan's copy
        clone = FilterList.__new__(FilterList)
        clone.operator = self.operator
        clone.filters = [copy.deepcopy(f, memo) for f in self.filters]
        return clone

    # --- scanner hints ----------------------------------------------------
    def row_ranges(self) -> list[KeyRange] | None:
        ranges = [f.row_ranges() for f in self.filters]
        if self._all:
            result = None
            for r in ranges:
                if r is not None:
                    result = r if result is None else intersect(result, r)
            return result
        if not ranges or any(r is None for r in ranges):
            return None
        result = []
        for r in ranges:
            result = union(result, r)
        return result

    def filter_all_remaining(self) -> bool:
        if self._all:
            return any(f.filter_all_remaining() for f in self.filters)
        return bool(self.filters) and all(f.filter_all_remaining() for f in self.filters)

    def selected_timestamps(self) -> frozenset[int] | None:
        # a cell outside any child's timestamps fails MUST_PASS_ALL; MUST_PASS_ONE selects none
        if not self._all:
            return None
        selected = None
        for f in self.filters:
            stamps = f.selected_timestamps()
            if stamps is not None:
                selected = stamps if selected is None else selected & stamps
        return selected

    def columns_needed(self) -> set[bytes] | None:
        needed: set[bytes] | None = None
        for f in self.filters:
            more = f.columns_needed()
            if more:
                needed = (needed or set()) | set(more)
        return needed

    # --- row keys ---------------------------------------------------------
    def filter_row_key(self, row: bytes) -> bool:
        # every child sees the key, as in HBase (no short cut): InclusiveStopFilter
        # records there that the scan is past its stop row, as it does in a batch
        answers = [f.filter_row_key(row) for f in self.filters]
        if self._all:
            return any(answers)
        return bool(answers) and all(answers)

    def _skip_rows(self, batch: RowBatch) -> np.ndarray | None:
        skips = [f._skip_rows(batch) for f in self.filters]
        if self._all:
            found = [s for s in skips if s is not None]
            return np.logical_or.reduce(found) if found else None
        if not skips or any(s is None for s in skips):
            return None
        return np.logical_and.reduce(skips)

    # --- the cell-at-a-time path -----------------------------------------
    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        if not self.filters:
            return True, _values.KEEP
        return self._eval_all(cells) if self._all else self._eval_one(cells)

    def _eval_all(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        n = len(cells)
        keep: Keep = True
        mode: Mode = _values.KEEP
        stateful = []
        for f in self.filters:
            if f.stateful:
                stateful.append(f)
                continue
            k, m = f._eval_row(cells)
            keep = _and_keep(keep, k)
            if keep is False:
                return False, _values.KEEP
            if m:
                mode = _max_mode(mode, m, n)
        for f in stateful:
            if not _has_cells(keep):
                return False, _values.KEEP
            k, m = f._eval_row(cells)
            keep = _and_keep(keep, k)
            if m:
                mode = _max_mode(mode, m, n)
        return (keep, mode) if _has_cells(keep) else (False, _values.KEEP)

    def _eval_one(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        n = len(cells)
        keep: Keep = False
        mode: Mode = _values.KEEP
        row = cells[0][0]
        for f in self.filters:
            if f.filter_row_key(row):
                continue
            k, m = f._eval_row(cells)
            if k is False:
                continue
            keep = _or_keep(keep, k)
            if m:
                mode = _max_mode(mode, _mode_where(k, m, n), n)
        return keep, mode

    # --- the batch path ---------------------------------------------------
    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, object]:
        if not self.filters:
            return np.ones(batch.num_cells, dtype=bool), _values.KEEP
        return self._batch_all(batch) if self._all else self._batch_one(batch)

    def _batch_all(self, batch: RowBatch) -> tuple[np.ndarray, object]:
        n = batch.num_cells
        mask = np.ones(n, dtype=bool)
        mode: object = _values.KEEP
        stateful = []
        for f in self.filters:
            if f.stateful:
                stateful.append(f)
                continue
            m, md = f._eval_batch(batch)
            mask &= m
            mode = self._combine_modes(mode, md, n)
        for f in stateful:
            alive = batch.row_any(mask)
            if not alive.any():
                break
            m, md = eval_rows(f, batch, alive)
            mask &= m
            mode = self._combine_modes(mode, md, n)
        return mask, mode

    def _batch_one(self, batch: RowBatch) -> tuple[np.ndarray, object]:
        n = batch.num_cells
        mask = np.zeros(n, dtype=bool)
        mode: object = _values.KEEP
        for f in self.filters:
            skip = f._skip_rows(batch)
            if skip is not None and skip.all():
                continue
            m, md = eval_rows(f, batch, None if skip is None else ~skip)
            mask |= m
            if isinstance(md, np.ndarray) or md:
                mode = np.maximum(_mode_array(mode, n), np.where(m, _mode_array(md, n), _values.KEEP).astype(np.int8))
        return mask, mode

    @staticmethod
    def _combine_modes(a: object, b: object, n: int) -> object:
        if not isinstance(b, np.ndarray) and not b:
            return a
        if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
            return max(a, b)
        return np.maximum(_mode_array(a, n), _mode_array(b, n))

    # --- identity ---------------------------------------------------------
    def _settings(self) -> tuple:
        return (self.operator, tuple(self.filters))

    def __repr__(self) -> str:
        if not self.filters:
            return f"FilterList ({self.operator.name})"
        parts = []
        for f in self.filters:
            text = repr(f)
            if isinstance(f, FilterList) and len(f.filters) > 1:
                text = f"({text})"
            parts.append(text)
        return f" {self.operator.value} ".join(parts)


register_join(FilterList.join)
