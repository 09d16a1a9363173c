"""Resolve ROWS of several sources: per row and column, the newest visible cell.

The row counterpart of :func:`storage.kernels.resolve` for a reader that
keeps one version per column (a rows scan, a major compaction to one
version).  Its input is what dense blocks hold: :class:`RowPiece` pieces,
each a run of distinct sorted row keys with, per column, a timestamp and a
value per row (absent where the row lacks the column), given newest source
first; plus the delete markers of every source (:class:`Markers`).  A source
holding several versions of a column gives one piece per version rank
(:mod:`storage.row_pieces` builds pieces from dense blocks and from cells).

How, over whole arrays:

* the pieces' keys are encoded in byte order
  (:func:`storage.kernels.row_merge.order_keys`) and one stable NumPy sort of
  them laid end to end (newest piece first) groups each row's entries, the
  newest source's first;
* markers are placed on the merged rows by ``searchsorted`` and reduced to
  the newest DeleteFamily per row and DeleteColumn per row and column
  (``np.maximum.at``); Delete markers are matched as (row, timestamp) pairs;
* per column the visible entries (present, inside the time range and TTL,
  not covered: :mod:`storage.kernels.rules`) compete: ``np.maximum.reduceat``
  gives each row's newest timestamp, and the first entry holding it (the
  newest source, on a tie) wins;
* rows left with no cell are dropped, and each column is gathered once.

Nothing loops over rows or cells in Python; the loops are over columns and
pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import LATEST_TIMESTAMP, CellType
from ..errors import InvalidArgument
from .row_merge import order_keys
from .rules import NO_MARKER, covered, time_mask

__all__ = ["ABSENT", "RowPiece", "Markers", "ResolvedRows", "resolve_rows"]

ABSENT = NO_MARKER
"""The timestamp of an absent entry of a :class:`RowPiece` column (below every real timestamp)."""

_DELETE = int(CellType.DELETE)
_DELETE_COLUMN = int(CellType.DELETE_COLUMN)
_DELETE_FAMILY = int(CellType.DELETE_FAMILY)


@dataclass
class RowPiece:
    """Rows of one source (or one version rank of one source).

    ``keys``: binary row keys, ascending, distinct.  ``ts[j]``: int64 per row
    for column ``j`` (:data:`ABSENT` where the row lacks it).  ``values[j]``:
    binary per row (anything where absent).
    """

    keys: pa.Array
    ts: list
    values: list

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class Markers:
    """Delete markers of one family (any order): row keys, qualifiers
    (binary), timestamps (int64) and type codes (uint8)."""

    rows: pa.Array
    qualifiers: pa.Array
    ts: np.ndarray
    types: np.ndarray

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class ResolvedRows:
    """The rows a reader sees, ascending: ``keys``, and per column ``ts[j]``
    (int64, :data:`ABSENT` where the row has no visible cell) and
    ``values[j]`` (binary, null there)."""

    keys: pa.Array
    ts: list
    values: list

    @property
    def num_rows(self) -> int:
        return len(self.keys)


def resolve_rows(
    pieces: Sequence[RowPiece],
    columns: int,
    markers: Markers | None = None,
    *,
    min_timestamp: int = 0,
    max_timestamp: int = LATEST_TIMESTAMP,
    ttl_cutoff: int | None = None,
    timestamps: Sequence[int] | None = None,
    qualifiers: Sequence[bytes] | None = None,
) -> ResolvedRows | None:
    """The newest visible cell of every row and column of ``pieces`` (newest
    source first, ``columns`` columns each), rows without any dropped; None
    when a key is too wide to encode (the caller then resolves cells).

    ``markers`` hide what they cover in every piece; ``qualifiers`` (the
    columns' qualifiers, in column order) says which column a DeleteColumn
    or Delete marker names (required with such markers).
    """
    pieces = [p for p in pieces if len(p)]
    for i, p in enumerate(pieces):
        if len(p.ts) != columns or len(p.values) != columns:
            raise InvalidArgument(f"pieces[{i}] has {len(p.ts)} timestamp and {len(p.values)} value columns, not {columns}")
    if not pieces:
        return ResolvedRows(pa.array([], pa.binary()), [np.zeros(0, np.int64)] * columns,
                            [pa.array([], pa.binary())] * columns)
    if markers is not None and not len(markers):
        markers = None
    key_arrays = [p.keys for p in pieces]
    encoded = order_keys(key_arrays + ([markers.rows] if markers is not None else []))
    if encoded is None:
        return None
    joined = encoded[0] if len(pieces) == 1 else np.concatenate(encoded[: len(pieces)])
    n = len(joined)
    order = np.argsort(joined, kind="stable")
    ordered = joined[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    shared = len(starts) != n  # some row is in two pieces

    family_newest = column_newest = point = None
    if markers is not None:
        family_newest, column_newest, point = _place_markers(
            ordered[starts], encoded[-1], markers, qualifiers, columns
        )
    ranged = (
        min_timestamp > 0 or max_timestamp != LATEST_TIMESTAMP or ttl_cutoff is not None or timestamps is not None
    )

    sources = []  # per column: index into the pieces laid end to end, -1 where no cell
    laid = []  # per column: the pieces' timestamps laid end to end
    for j in range(columns):
        ts_all = np.concatenate([p.ts[j] for p in pieces]) if len(pieces) > 1 else pieces[0].ts[j]
        laid.append(ts_all)
        ts = ts_all[order]
        visible = ts != ABSENT
        if ranged:
            inside = time_mask(ts, min_timestamp, max_timestamp, ttl_cutoff, timestamps)
            if inside is not None:
                visible &= inside
        if family_newest is not None:
            visible &= ~covered(ts, family_newest[group])
        if column_newest is not None and column_newest[j] is not None:
            visible &= ~covered(ts, column_newest[j][group])
        if point is not None and point[j] is not None:
            visible &= ~_point_deleted(group, ts, point[j])
        sources.append(_winners(ts, visible, order, starts, group, shared))
    keep = None
    if columns:
        any_cell = sources[0] >= 0
        for src in sources[1:]:
            any_cell |= src >= 0
        if not any_cell.all():
            keep = np.flatnonzero(any_cell)
    firsts = order[starts] if keep is None else order[starts[keep]]
    all_keys = pa.concat_arrays(key_arrays) if len(key_arrays) > 1 else key_arrays[0]
    keys = all_keys.take(pa.array(firsts))
    out_ts, out_values = [], []
    for j, src in enumerate(sources):
        if keep is not None:
            src = src[keep]
        missing = src < 0
        out_ts.append(np.where(missing, ABSENT, laid[j][np.where(missing, 0, src)]))
        chunks = pa.chunked_array([p.values[j] for p in pieces], pa.binary())
        index = pa.array(src, mask=missing) if missing.any() else pa.array(src)
        taken = chunks.take(index)
        out_values.append(taken.combine_chunks() if isinstance(taken, pa.ChunkedArray) else taken)
    return ResolvedRows(keys, out_ts, out_values)


def _winners(ts, visible, order, starts, group, shared) -> np.ndarray:
    """Per merged row, the entry (index into the pieces laid end to end) of
    its newest visible cell, the first such on a tie; -1 where none is visible."""
    if not shared:
        return np.where(visible, order, -1)
    best = np.maximum.reduceat(np.where(visible, ts, ABSENT), starts)
    win = visible & (ts == best[group])
    at = np.flatnonzero(win)
    # the first winner of each row: the newest source holding the newest timestamp
    if len(at):
        first = np.empty(len(at), dtype=bool)
        first[0] = True
        g = group[at]
        np.not_equal(g[1:], g[:-1], out=first[1:])
        at = at[first]
    src = np.full(len(starts), -1, dtype=np.int64)
    src[group[at]] = order[at]
    return src


def _place_markers(row_keys: np.ndarray, marker_keys: np.ndarray, markers: Markers, qualifiers, columns: int):
    """Markers on the merged rows: the newest DeleteFamily per row, the newest
    DeleteColumn per row of each column, the Delete (row, timestamp) pairs of
    each column; None for a kind (or a column) without markers."""
    pos = np.searchsorted(row_keys, marker_keys)
    inside = pos < len(row_keys)
    found = np.zeros(len(marker_keys), dtype=bool)
    found[inside] = row_keys[pos[inside]] == marker_keys[inside]
    types, ts = markers.types, markers.ts
    family_newest = None
    is_family = found & (types == _DELETE_FAMILY)
    if is_family.any():
        family_newest = np.full(len(row_keys), NO_MARKER, dtype=np.int64)
        np.maximum.at(family_newest, pos[is_family], ts[is_family])
    column_newest = point = None
    named = found & ((types == _DELETE_COLUMN) | (types == _DELETE))
    if named.any():
        if qualifiers is None or len(qualifiers) != columns:
            raise InvalidArgument("resolve_rows: column markers need the columns' qualifiers")
        column_newest, point = [None] * columns, [None] * columns
        for j, qualifier in enumerate(qualifiers):
            same = pc.equal(markers.qualifiers, pa.scalar(qualifier, pa.binary()))
            mine = named & same.to_numpy(zero_copy_only=False)
            if not mine.any():
                continue
            whole = mine & (types == _DELETE_COLUMN)
            if whole.any():
                newest = np.full(len(row_keys), NO_MARKER, dtype=np.int64)
                np.maximum.at(newest, pos[whole], ts[whole])
                column_newest[j] = newest
            one = mine & (types == _DELETE)
            if one.any():
                point[j] = (pos[one], ts[one])
    return family_newest, column_newest, point


def _point_deleted(group: np.ndarray, ts: np.ndarray, pairs) -> np.ndarray:
    """Entries whose (row, timestamp) is a Delete marker's."""
    rows, stamps = pairs
    known = np.unique(stamps)
    at = np.searchsorted(known, ts)
    at_ok = at < len(known)
    hit = np.zeros(len(ts), dtype=bool)
    hit[at_ok] = known[at[at_ok]] == ts[at_ok]
    if not hit.any():
        return hit
    width = np.int64(len(known))
    wanted = rows.astype(np.int64) * width + np.searchsorted(known, stamps)
    candidates = group[hit].astype(np.int64) * width + at[hit]
    hit[hit] = np.isin(candidates, wanted)
    return hit
