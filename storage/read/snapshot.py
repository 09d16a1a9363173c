"""Read snapshots: leased region views of one key range at one read point,
which several scans (a Spark job's partitions) can plan against."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from ..errors import StorageError
from ..keys import clip_bounds
from ..mvcc import Mvcc
from ..region.view import RegionView

__all__ = ["ReadSnapshot", "SnapshotTable", "release_views"]


class SnapshotTable(Protocol):
    """What a snapshot needs of its table: a :class:`storage.table.table.Table` (which
    makes snapshots, so this module names it through this protocol)."""

    name: str
    mvcc: Mvcc


class ReadSnapshot:
    """Leased region views of one key range at one read point (see :meth:`Table.snapshot`)."""

    def __init__(self, table: SnapshotTable, low: bytes, high: bytes | None, views: list[RegionView]):
        self.table = table
        self.low = low
        self.high = high
        self.views = views  # in key order
        self.read_point = views[0].read_point if views else table.mvcc.read_point

    def plan(self, spans: Sequence[tuple[bytes, bytes | None]]) -> list[tuple[RegionView, bytes, bytes | None]]:
        """The snapshot's views that each span covers, in key order (spans cut to the snapshot's range)."""
        if self.views is None:
            raise StorageError(f"snapshot of table {self.table.name} is closed")
        plan = []
        for lo, hi in spans:
            lo, hi = clip_bounds(lo, hi, self.low, self.high)
            if hi is not None and lo >= hi:
                continue
            for view in self.views:
                if hi is not None and view.start >= hi:
                    break
                if view.end is not None and view.end <= lo:
                    continue
                plan.append((view, lo, hi))
        return plan

    def close(self) -> None:
        """Release the views (scans still reading them must be done)."""
        views, self.views = self.views, None
        if views:
            release_views(views)

    def __enter__(self) -> "ReadSnapshot":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def release_views(views: list[RegionView]) -> None:
    """Release leased region views (a closed snapshot, a finished scan)."""
    for view in views:
        view.release()
