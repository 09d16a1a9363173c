"""The rules of resolution, stated once for the cell and the row kernels.

Both :func:`storage.kernels.resolve` (cells in cell order) and
:func:`storage.kernels.resolve_rows.resolve_rows` (rows of several sources
laid side by side) decide with these functions which puts a reader sees:

* :func:`time_mask`: a put is seen only inside the scan's time range
  ``[min, max)``, at or after the TTL cutoff and, with a timestamp list, at
  one of its timestamps;
* :func:`covered`: a DeleteFamily or DeleteColumn marker hides the puts of
  what it covers with a timestamp at or before its own (the newest marker of
  a group is what counts), whatever the scan's time range and whatever the
  order of writing;
* a Delete marker hides the put of its column with exactly its timestamp
  (both kernels match ``(column, timestamp)`` pairs);
* of two puts of one column and timestamp, the newer source's (the later
  write) wins;
* of the puts left, the newest ``max_versions`` per column are seen;
* :func:`unseen_markers`: in a family keeping deleted cells (HBase's
  ``KEEP_DELETED_CELLS`` TRUE or TTL) a read does not see the markers at or
  after the end of its time range, so a read of the past sees the puts
  deleted since (HBase: such a scan "sees past" the delete markers).

The kernels differ only in how they find a cell's group: neighbours in cell
order there, merged row keys here.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["NO_MARKER", "time_mask", "covered", "effective_low", "unseen_markers"]

_INT64 = np.iinfo(np.int64)

NO_MARKER = _INT64.min
"""The "no marker" value of a group's newest marker timestamp (below every timestamp)."""


def effective_low(min_timestamp: int, ttl_cutoff: int | None) -> int:
    """The lowest timestamp a reader sees: the time range's start or the TTL cutoff."""
    low = min_timestamp if ttl_cutoff is None else max(min_timestamp, ttl_cutoff)
    # bounds beyond int64 exclude nothing on that side
    return max(low, _INT64.min)


def time_mask(
    ts: np.ndarray,
    min_timestamp: int,
    max_timestamp: int,
    ttl_cutoff: int | None,
    timestamps: Sequence[int] | None,
) -> np.ndarray | None:
    """Mask of the timestamps inside the time range, TTL and timestamp list;
    None when every one of ``ts`` is (so callers skip the mask)."""
    if len(ts) == 0:
        return None
    low = effective_low(min_timestamp, ttl_cutoff)
    mask = None
    if max_timestamp <= _INT64.max and int(ts.max()) >= max_timestamp:
        mask = ts < max_timestamp
    if int(ts.min()) < low:
        at_least = ts >= low
        mask = at_least if mask is None else mask & at_least
    if timestamps is not None:
        wanted = np.fromiter((int(t) for t in timestamps), dtype=np.int64)
        listed = np.isin(ts, wanted)
        mask = listed if mask is None else mask & listed
    return mask


def covered(ts: np.ndarray, newest_marker: np.ndarray) -> np.ndarray:
    """Puts hidden by a DeleteFamily / DeleteColumn: a timestamp at or before
    the newest marker of the put's group (``NO_MARKER`` where there is none)."""
    return (ts <= newest_marker) & (newest_marker != NO_MARKER)


def unseen_markers(
    ts: np.ndarray, is_marker: np.ndarray, max_timestamp: int, keep_deleted_cells: str
) -> np.ndarray | None:
    """The markers a read ending at ``max_timestamp`` (exclusive) does not apply
    in a family with ``keep_deleted_cells`` (``"FALSE"``, ``"TRUE"`` or
    ``"TTL"``): those at or after ``max_timestamp`` when the family keeps
    deleted cells; None when there are none (every marker acts)."""
    if keep_deleted_cells == "FALSE" or len(ts) == 0 or max_timestamp > _INT64.max:
        return None
    if int(ts.max()) < max_timestamp:
        return None
    unseen = is_marker & (ts >= max_timestamp)
    return unseen if unseen.any() else None
