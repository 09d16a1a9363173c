"""The Filter interface shared by both scan paths.

A scanner uses a filter like this::

    f = filter.copy(); f.reset()           # per scan: the caller's object stays untouched
    f = f.oriented(reverse)                # the scan's direction (InclusiveStopFilter needs it)
    ranges = f.row_ranges()                # seek only into these key ranges (None: all)
    # cell-at-a-time path, per row:
    if f.filter_row_key(row): skip the row without reading its cells
    else: out = f.filter_row_cells(cells)  # None drops the row
    # batch path, per batch of whole rows:
    out = f.filter_batch(cells_table)
    # both paths:
    if f.filter_all_remaining(): stop the scan

``filter_row_key`` is only a shortcut: ``filter_row_cells`` returns None for
every row it would skip, so the two paths give the same rows whether or not
a scanner calls it.  It changes no state a later answer depends on; the one
record it keeps is InclusiveStopFilter's (a row past the stop row was seen,
so ``filter_all_remaining``), which the batch path keeps the same way.

Subclasses implement two internal hooks that combine under FilterList:

* ``_eval_row(cells) -> (keep, mode)``: ``keep`` is True (all cells),
  False (none: the row is dropped) or a list of per-cell booleans; ``mode``
  is a value mode of :mod:`storage.filters._values` for the kept cells (one
  int, or a list per cell).
* ``_eval_batch(batch) -> (mask, mode)``: the same over a
  :class:`~storage.filters._rows.RowBatch`, as NumPy arrays.

Both hooks may assume that ``filter_row_key`` is False for every row they
see; the public methods and FilterList make sure of it.  A row left without
cells is dropped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import copy as _copy
from itertools import compress
from typing import Any, Union

import numpy as np
import pyarrow as pa

from ..cells import CELL_SCHEMA, Cell
from ..errors import InvalidArgument
from . import _values
from ._rows import RowBatch, as_cell_table
from ..keys import KeyRange
from ..kernels.cell_columns import one_array

__all__ = [
    "Filter",
    "Keep",
    "Mode",
    "apply_row",
    "apply_batch",
    "eval_rows",
    "MAX_FILTER_DEPTH",
    "filter_depth",
    "check_depth",
    "scan_copy",
]

MAX_FILTER_DEPTH = 64
"""The deepest nesting of lists and wrappers a filter may have.

Evaluation, ``copy`` and ``repr`` walk a filter recursively, a few Python
frames per level; bounding the depth where filters are built and parsed keeps
them far from the interpreter's recursion limit (a RecursionError would
otherwise surface mid-scan, or as a filter the remote client cannot send)."""

Keep = Union[bool, list]
Mode = Union[int, list]


class Filter(ABC):
    """Base class of all filters (HBase's ``Filter``).

    Filters compare equal when they have the same type and settings (their
    per-scan state, such as PageFilter's count, is not compared).  ``repr``
    gives the filter-language form that :func:`parse_filter_string` reads.
    """

    #: True when evaluating rows changes the filter's state (PageFilter).
    stateful: bool = False

    # --- per-scan state -------------------------------------------------
    def reset(self) -> None:
        """Clear per-scan state; scanners call it when a scan starts."""

    def copy(self) -> "Filter":
        """An independent copy, state included (scanners filter with a copy)."""
        return _copy.deepcopy(self)

    def __deepcopy__(self, memo: dict) -> "Filter":
        # Settings never change after construction, so a filter is shared when it and
        # everything it wraps keep no per-scan state.  A child that does (an
        # InclusiveStopFilter's "done") is copied, and so is each wrapper above it: a
        # shared SkipFilter would hand one scan's finished state to the next.
        if not self.stateful and all(_copy.deepcopy(c, memo) is c for c in self._children()):
            return self
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__dict__.update(_copy.deepcopy(self.__dict__, memo))
        return clone

    def _children(self) -> tuple["Filter", ...]:
        """The filters this one combines or wraps (none for a leaf)."""
        return ()

    def oriented(self, reverse: bool) -> "Filter":
        """This filter as a scan running ``reverse`` (or forward) applies it.

        HBase's scans call ``Filter.setReversed``; a filter whose meaning
        depends on the direction (InclusiveStopFilter) returns a new object
        for the other direction, every other one returns itself.  It never
        changes ``self``: stateless filters are shared between scans.
        """
        return self

    # --- hints to the scanner ------------------------------------------
    def row_ranges(self) -> list[KeyRange] | None:
        """Sorted disjoint ``[start, stop)`` key ranges holding every row that
        can pass (stop None: unbounded), or None for no restriction."""
        return None

    def filter_all_remaining(self) -> bool:
        """True when no further row can pass, so the scan may stop."""
        return False

    def selected_timestamps(self) -> frozenset[int] | None:
        """The timestamps outside which the filter keeps no cell, or None.

        A read selects them before it counts versions, as it does its time
        range (HBase's ``TestMinVersions.testFilters``: a TimestampsFilter's
        cells count against ``min_versions`` and ``max_versions`` among
        themselves), so such a filter behaves as the timestamps it names."""
        return None

    def columns_needed(self) -> set[bytes] | None:
        """``b"family:qualifier"`` columns the filter must see even when the
        scan's column list leaves them out, or None."""
        return None

    def families_kept(self) -> set[bytes] | None:
        """Families outside of which the filter keeps no cell, whatever else a row
        holds, or None.  A scan may then skip the other families' stores: their
        cells could never come out and cannot change the answer."""
        return None

    # --- the cell-at-a-time path --------------------------------------
    def filter_row_key(self, row: bytes) -> bool:
        """True to skip ``row`` before its cells are read (see the module's notes on state)."""
        return False

    def filter_row_cells(self, cells: list[Cell]) -> list[Cell] | None:
        """Filter the visible cells of one row (cell order); None drops the row."""
        if not cells or self.filter_row_key(cells[0][0]):
            return None
        keep, mode = self._eval_row(cells)
        return apply_row(cells, keep, mode)

    # --- the batch path -------------------------------------------------
    def filter_batch(self, cells: pa.Table) -> pa.Table:
        """Filter a :data:`~storage.cells.CELL_SCHEMA` table of whole rows.

        Gives the same cells as :meth:`filter_row_cells` applied to each row
        in batch order, with the same effect on the filter's state.
        """
        table = as_cell_table(cells)
        if table.num_rows == 0:
            return table
        batch = RowBatch(table)
        skip = self._skip_rows(batch)
        mask, mode = eval_rows(self, batch, None if skip is None else ~skip)
        return apply_batch(batch, mask, mode)

    # --- internal hooks ---------------------------------------------------
    def _skip_rows(self, batch: RowBatch) -> np.ndarray | None:
        """Vectorized :meth:`filter_row_key`: per-row skip mask, or None for none."""
        return None

    @abstractmethod
    def _eval_row(self, cells: list[Cell]) -> tuple[Keep, Mode]:
        ...

    @abstractmethod
    def _eval_batch(self, batch: RowBatch) -> tuple[np.ndarray, Any]:
        ...

    # --- identity ---------------------------------------------------------
    def _settings(self) -> tuple:
        """The constructor settings that define equality."""
        return ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._settings() == self._settings()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._settings()))

    def __and__(self, other: "Filter") -> "Filter":
        """``a & b``: a MUST_PASS_ALL FilterList (flattening ``a & b & c``)."""
        return _JOIN[0]("AND", self, other)

    def __or__(self, other: "Filter") -> "Filter":
        """``a | b``: a MUST_PASS_ONE FilterList (flattening ``a | b | c``)."""
        return _JOIN[0]("OR", self, other)


# FilterList subclasses Filter, so this module cannot import it; filter_list
# registers FilterList.join here when it loads (the package imports it, so it
# is there before any filter exists).
_JOIN: list = []


def register_join(join) -> None:
    """Set what ``a & b`` and ``a | b`` build: ``join(operator, a, b)`` (FilterList.join)."""
    _JOIN[:] = [join]


def scan_copy(f: Filter, reverse: bool = False) -> Filter:
    """The filter one scan works on: a copy, reset, for the scan's direction."""
    g = f.copy()
    g.reset()
    return g.oriented(reverse)


def filter_depth(f: Filter) -> int:
    """Levels of ``f`` (1 for a leaf), counted without recursion."""
    deepest = 0
    stack = [(f, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > MAX_FILTER_DEPTH:
                break  # deep enough to refuse; a cycle must not loop forever
        stack.extend((child, depth + 1) for child in node._children())
    return deepest


def check_depth(f: Filter, extra: int = 0) -> None:
    """Raise InvalidArgument when ``f`` nested ``extra`` levels deeper passes MAX_FILTER_DEPTH."""
    depth = filter_depth(f) + extra
    if depth > MAX_FILTER_DEPTH:
        raise InvalidArgument(
            f"filter is nested more than {MAX_FILTER_DEPTH} levels deep (lists and SKIP/WHILE wrappers)"
        )


def eval_rows(f: Filter, batch: RowBatch, rows: np.ndarray | None) -> tuple[np.ndarray, Any]:
    """``f._eval_batch`` on the rows of ``batch`` where ``rows`` is set (None:
    all), with the answer laid out over all of ``batch``'s cells (cells of
    other rows not kept)."""
    if rows is None or rows.all():
        return f._eval_batch(batch)
    n = batch.num_cells
    if not rows.any():
        return np.zeros(n, dtype=bool), _values.KEEP
    positions = batch.cell_positions(rows)
    sub_mask, mode = f._eval_batch(batch.select_rows(rows))
    mask = np.zeros(n, dtype=bool)
    mask[positions] = sub_mask
    if isinstance(mode, np.ndarray):
        full = np.zeros(n, dtype=np.int8)
        full[positions] = mode
        mode = full
    return mask, mode


def apply_row(cells: list[Cell], keep: Keep, mode: Mode) -> list[Cell] | None:
    """The kept, rewritten cells of one row, or None when none is kept."""
    if keep is False:
        return None
    if isinstance(mode, list):  # one mode per cell: rewrite before selecting
        cells = [_values.rewrite_cell(c, m) if m else c for c, m in zip(cells, mode)]
        mode = _values.KEEP
    if keep is not True:
        cells = list(compress(cells, keep))
        if not cells:
            return None
    if mode:
        cells = [_values.rewrite_cell(c, mode) for c in cells]
    return cells


def apply_batch(batch: RowBatch, mask: np.ndarray, mode: Any) -> pa.Table:
    """The kept, rewritten cells of a batch."""
    table = batch.table
    everything = mask.all()
    if not everything:
        table = table.filter(pa.array(mask))
    if isinstance(mode, np.ndarray):
        if not mode.any():
            return table
        if not everything:
            mode = mode[mask]
    elif not mode:
        return table
    values = _values.rewrite_values(one_array(table.column("value")), mode)
    return table.set_column(5, CELL_SCHEMA.field(5), values)
