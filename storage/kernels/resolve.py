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
from .rules import NO_MARKER, covered, time_mask

__all__ = ["resolve"]

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

    ``keep_deletes=True`` is the raw mode, in which nothing is resolved:
    markers neither hide puts nor are removed, and every version is kept
    (``max_versions`` is not applied).  Only the TTL, time range and
    ``timestamps`` filters apply, to markers and puts alike.  With the default
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
    hidden = np.zeros(n, dtype=bool)
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
    visible = (types == CellType.PUT) & ~hidden
    if in_range is not None:
        visible &= in_range
    return _select(table, _newest_versions(visible, starts, column_ids, max_versions, expired, min_versions))


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
