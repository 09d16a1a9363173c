"""Resolve versions, delete markers, TTL and time range over a merged table.

The batch counterpart of HBase's scan query matcher.  Groups are found from
adjacent inequality of the key columns: a *column* is one (row, family,
qualifier), a *family group* one (row, family).  Per group the newest
marker timestamp is reduced with ``np.maximum.reduceat`` and broadcast back
to the cells by group id; version ranks come from a cumulative count of
visible puts minus the count at the group's start.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from ..cells import LATEST_TIMESTAMP, CellType
from ..errors import InvalidArgument
from .cell_columns import CellColumns, as_cell_table, group_ids
from .rules import NO_MARKER, covered, time_mask, unseen_markers

__all__ = ["resolve", "raw_versions"]

_KNOWN_TYPE = np.zeros(256, dtype=bool)
_KNOWN_TYPE[[int(t) for t in CellType]] = True


def resolve(
    cells: pa.Table,
    *,
    max_versions: int = 1,
    min_timestamp: int = 0,
    max_timestamp: int = LATEST_TIMESTAMP,
    ttl_cutoff: int | None = None,
    keep_deletes: bool = False,
    timestamps: Sequence[int] | None = None,
    min_versions: int = 0,
    keep_deleted_cells: str = "FALSE",
    compaction: bool = False,
) -> pa.Table:
    """Return the cells a reader sees, in cell order.

    ``cells`` is merged (see :func:`merge_sources`) and in cell order.  With
    ``keep_deletes=False`` (scans, gets, major compaction):

    * a DeleteFamily marker hides the puts of its family in its row with a
      timestamp <= the marker's; a DeleteColumn marker the puts of its column
      with a timestamp <= the marker's; a Delete marker the put of its column
      with exactly its timestamp.  Markers act whatever the time range: a
      marker outside ``[min_timestamp, max_timestamp)`` still hides puts
      inside it, as in HBase.
    * puts with ``timestamp < ttl_cutoff`` are expired and dropped, except
      the newest ``min_versions`` of each column (HBase's MIN_VERSIONS: what
      TTL leaves of a column at the least);
    * only puts with ``min_timestamp <= timestamp < max_timestamp`` (HBase's
      TimeRange) and, when ``timestamps`` is given, a timestamp in it are kept;
    * of the puts left, the ``max_versions`` newest per column are kept;
    * the markers themselves are removed.

    Hidden, expired and out-of-range puts do not count as versions.  Major
    compaction calls this with the family's max versions and TTL cutoff.

    ``keep_deleted_cells`` is the family's HBase ``KEEP_DELETED_CELLS``
    (``"FALSE"``, ``"TRUE"`` or ``"TTL"``).  When the family keeps deleted
    cells a read does not apply the markers at or after ``max_timestamp``
    (:func:`storage.kernels.rules.unseen_markers`): a read of the past sees
    the puts deleted since.  ``compaction=True`` is a major compaction of such
    a family (:func:`_compact_keeping`); of a family that does not keep
    deleted cells it is the plain read above with the default bounds.

    ``keep_deletes=True`` is the raw mode (HBase's raw scan), in which
    nothing is resolved: markers neither hide puts nor are removed, and every
    version is kept (``max_versions`` is not applied: a raw scan with a
    version limit runs :func:`raw_versions` on the result).  Only the time range
    and ``timestamps`` apply, to markers and puts alike, and the TTL: expired
    puts go except the newest ``min_versions`` puts of their column, expired
    markers go unless the family has ``min_versions``.  With the default
    bounds the input comes back unchanged.  (A minor compaction, which must
    keep markers and versions because older files are not part of it, needs
    no resolve at all: :func:`merge_sources` alone.)

    When nothing is dropped the input table is returned as is, without
    copying; a table without markers whose columns hold one cell each skips
    the group work entirely.
    """
    table = as_cell_table(cells)
    if not isinstance(max_versions, (int, np.integer)) or max_versions < 1:
        raise InvalidArgument(f"max_versions must be an integer >= 1, got {max_versions!r}")
    if min_timestamp > max_timestamp:
        raise InvalidArgument(
            f"min_timestamp {min_timestamp} is greater than max_timestamp {max_timestamp}"
        )
    if keep_deleted_cells not in ("FALSE", "TRUE", "TTL"):
        raise InvalidArgument(f"keep_deleted_cells must be FALSE, TRUE or TTL, got {keep_deleted_cells!r}")
    n = table.num_rows
    if n == 0:
        return table

    columns = CellColumns(table)
    ts = columns.numpy("timestamp")
    types = columns.numpy("type")
    if keep_deletes and min_versions and ttl_cutoff is not None:
        return _select(table, _raw_keep(columns, ts, types, min_timestamp, max_timestamp, ttl_cutoff,
                                        timestamps, min_versions))
    if keep_deleted_cells != "FALSE" and not keep_deletes:
        if compaction:
            return _select(table, _compact_keeping(columns, ts, types, max_versions, ttl_cutoff, min_versions,
                                                   keep_deleted_cells))
        unseen = unseen_markers(ts, types != CellType.PUT, max_timestamp, keep_deleted_cells)
        if unseen is not None:  # a read of the past: the later markers are not there for it
            table = table.filter(pa.array(~unseen, type=pa.bool_()))
            n = table.num_rows
            if n == 0:
                return table
            columns = CellColumns(table)
            ts = columns.numpy("timestamp")
            types = columns.numpy("type")
    if keep_deletes or not min_versions:
        in_range = time_mask(ts, min_timestamp, max_timestamp, ttl_cutoff, timestamps)
        expired = None
    else:
        # the TTL drops a put only past the column's newest min_versions: by rank, below
        in_range = time_mask(ts, min_timestamp, max_timestamp, None, timestamps)
        expired = ts < ttl_cutoff if ttl_cutoff is not None and int(ts.min()) < ttl_cutoff else None
    has_markers = int(types.max()) != CellType.PUT or int(types.min()) != CellType.PUT
    if has_markers and not _KNOWN_TYPE[types].all():
        bad = np.unique(types[~_KNOWN_TYPE[types]]).tolist()
        raise InvalidArgument(f"cells: unknown cell type codes {bad}")

    if keep_deletes:
        return _select(table, in_range)

    if not has_markers:
        keep = in_range
        if max_versions < n or expired is not None:
            starts = columns.column_starts()
            if not starts.all() or expired is not None:
                visible = np.ones(n, dtype=bool) if keep is None else keep
                keep = _newest_versions(visible, starts, group_ids(starts), max_versions, expired, min_versions)
        return _select(table, keep)

    starts = columns.column_starts()
    column_ids = group_ids(starts)
    hidden = _hidden(columns, ts, types, starts, column_ids)
    visible = (types == CellType.PUT) & ~hidden
    if in_range is not None:
        visible &= in_range
    return _select(table, _newest_versions(visible, starts, column_ids, max_versions, expired, min_versions))


def raw_versions(cells: pa.Table, max_versions: int) -> pa.Table:
    """A raw scan's cells (``resolve(..., keep_deletes=True)``) cut to ``max_versions``
    puts per column, as HBase's raw scan with ``VERSIONS => n`` (its wildcard
    column tracker): delete markers do not count as versions, and a column's
    cells stop at its ``max_versions + 1``-th put, so a marker is kept when at
    most ``max_versions`` puts of its column come before it, a put when it is
    one of the first ``max_versions``.  A column is one (row, family,
    qualifier); a DeleteFamily marker (empty qualifier) sits in the family's
    empty-qualifier column, as in HBase.  One cumulative count over the whole
    table, no loop per cell; the table itself when nothing goes.
    """
    table = as_cell_table(cells)
    if not isinstance(max_versions, (int, np.integer)) or isinstance(max_versions, bool) or max_versions < 1:
        raise InvalidArgument(f"max_versions must be an integer >= 1, got {max_versions!r}")
    n = table.num_rows
    if n <= max_versions:
        return table
    columns = CellColumns(table)
    is_put = columns.numpy("type") == CellType.PUT
    starts = columns.column_starts()
    # puts of its column at or before each cell: a running count less the count before the column
    seen = np.cumsum(is_put, dtype=np.int64)
    first = np.flatnonzero(starts)
    before = seen[first] - is_put[first]
    return _select(table, (seen - before[group_ids(starts)]) <= max_versions)


def _hidden(columns: CellColumns, ts: np.ndarray, types: np.ndarray, starts: np.ndarray,
            column_ids: np.ndarray, acting: np.ndarray | None = None) -> np.ndarray:
    """Cells hidden by the markers (only those of ``acting``, when given)."""
    if acting is not None:
        types = np.where(acting, types, CellType.PUT)
    hidden = np.zeros(len(ts), dtype=bool)
    if (types == CellType.DELETE_FAMILY).any():
        family_starts = columns.family_starts()
        is_marker = types == CellType.DELETE_FAMILY
        hidden |= _covered(ts, is_marker, family_starts, group_ids(family_starts))
    if (types == CellType.DELETE_COLUMN).any():
        hidden |= _covered(ts, types == CellType.DELETE_COLUMN, starts, column_ids)
    point = types == CellType.DELETE
    if point.any():
        # A Delete marker sorts just before the put of the same column and
        # timestamp (type descending), so group by (column, timestamp).
        version_starts = starts | columns.adjacent_ne("timestamp")
        first = np.flatnonzero(version_starts)
        hidden |= np.logical_or.reduceat(point, first)[group_ids(version_starts)]
    return hidden


def _raw_keep(columns: CellColumns, ts: np.ndarray, types: np.ndarray, min_timestamp: int, max_timestamp: int,
              ttl_cutoff: int, timestamps, min_versions: int) -> np.ndarray:
    """A raw read of a family with a TTL and ``min_versions``: every cell inside
    the time range, less the expired puts past the newest ``min_versions``
    puts of their column (markers are kept, as HBase keeps them)."""
    n = len(ts)
    in_range = time_mask(ts, min_timestamp, max_timestamp, None, timestamps)
    inside = np.ones(n, dtype=bool) if in_range is None else in_range
    is_put = types == CellType.PUT
    starts = columns.column_starts()
    puts = _newest_versions(inside & is_put, starts, group_ids(starts), n + 1, ts < ttl_cutoff, min_versions)
    return puts | (inside & ~is_put)


def _compact_keeping(columns: CellColumns, ts: np.ndarray, types: np.ndarray, max_versions: int,
                     ttl_cutoff: int | None, min_versions: int, mode: str) -> np.ndarray:
    """What a major compaction of a family keeping deleted cells keeps (HBase's
    MajorCompactionScanQueryMatcher with KEEP_DELETED_CELLS TRUE or TTL).

    * Markers do not hide puts, except (``"TTL"``) the markers past the TTL,
      which hide what they cover and go.
    * Of each column's puts (deleted or not) the newest ``max_versions`` stay,
      the expired ones only among the newest ``min_versions``.
    * A marker goes when it is older than every put of its row and family
      (it hides nothing), when it names a column and is older than a put the
      compaction dropped from it (HBase's seek to the next column), or when
      it is past the TTL and the family has no ``min_versions``.
    """
    n = len(ts)
    is_marker = types != CellType.PUT
    expired = ts < ttl_cutoff if ttl_cutoff is not None else np.zeros(n, dtype=bool)
    starts = columns.column_starts()
    column_ids = group_ids(starts)
    acting = is_marker & expired if mode == "TTL" else None
    puts = ~is_marker
    if acting is not None and acting.any():
        puts &= ~_hidden(columns, ts, types, starts, column_ids, acting)
    kept_puts = _newest_versions(puts, starts, column_ids, max_versions,
                                 expired if ttl_cutoff is not None else None, min_versions)
    kept_markers = is_marker.copy()
    if mode == "TTL" or not min_versions:
        kept_markers &= ~expired
    dropped = puts & ~kept_puts
    if dropped.any():
        seen = np.cumsum(dropped)
        first = np.flatnonzero(starts)
        before = seen[first] - dropped[first]
        past_drop = (seen - before[column_ids]) > 0
        kept_markers &= ~(past_drop & (types != CellType.DELETE_FAMILY))
    family_starts = columns.family_starts()
    first_f = np.flatnonzero(family_starts)
    earliest = np.minimum.reduceat(np.where(is_marker, np.iinfo(np.int64).max, ts), first_f)
    kept_markers &= ts >= earliest[group_ids(family_starts)]
    return kept_puts | kept_markers


def _covered(
    ts: np.ndarray, is_marker: np.ndarray, starts: np.ndarray, ids: np.ndarray
) -> np.ndarray:
    """Cells whose timestamp is <= the newest marker of their group."""
    first = np.flatnonzero(starts)
    newest = np.maximum.reduceat(np.where(is_marker, ts, NO_MARKER), first)[ids]
    return covered(ts, newest)


def _newest_versions(
    visible: np.ndarray, starts: np.ndarray, ids: np.ndarray, max_versions: int,
    expired: np.ndarray | None = None, min_versions: int = 0,
) -> np.ndarray:
    """Keep the first ``max_versions`` visible cells of each group; of the
    ``expired`` ones only those among the first ``min_versions``."""
    # Rank of a visible cell in its group: visible cells up to and including
    # it, minus those before the group's first cell.
    seen = np.cumsum(visible, dtype=ids.dtype)
    first = np.flatnonzero(starts)
    before = seen[first] - visible[first]
    rank = seen - before[ids]
    keep = visible & (rank <= max_versions)
    if expired is not None:
        keep &= ~expired | (rank <= min_versions)
    return keep


def _select(table: pa.Table, keep: np.ndarray | None) -> pa.Table:
    """Filter ``table`` by ``keep``; the table itself when everything is kept."""
    if keep is None or keep.all():
        return table
    return table.filter(pa.array(keep, type=pa.bool_()))
