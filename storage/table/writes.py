"""A table's write side: mutations checked and turned into cells, routed to
the regions that hold their rows, and the region upkeep a write triggers."""

from __future__ import annotations

import bisect
from typing import Any, Iterable, Sequence

from ..cells import LATEST_TIMESTAMP, Cell, CellType, check_cell
from ..columns import parse_column
from ..errors import InvalidArgument, clip
from ..region.region import Region
from ..schema import no_such_family
from .arguments import _check_bytes, _check_row, _now_ms
from .mutation_batch import Batch

_PUT = int(CellType.PUT)

# writes wait for their region's flush past this many times the flush size
BLOCKING_MULTIPLIER = 4


class TableWrites:
    """Puts, deletes and mutation batches of a :class:`~storage.table.table.Table`."""

    def _put_cells(self, row: bytes, data: dict, timestamp: int | None) -> list[Cell]:
        if type(row) is not bytes or not row:
            row = _check_row(row)
        if not isinstance(data, dict):
            raise InvalidArgument(f"put data must be a dict of b'family:qualifier' -> bytes, got {type(data).__name__}")
        if not data:
            # HBase refuses an empty Put ("No columns to insert"); a silent no-op hides a bug
            raise InvalidArgument(f"put of row {clip(repr(row))} names no columns")
        ts = _now_ms() if timestamp is None else self._check_ts(timestamp)
        column = self._put_column
        cells = []
        for name, value in data.items():
            family, qualifier = column(name)
            if type(value) is not bytes:
                value = _check_bytes(value, f"value of {name!r}")
            cells.append((row, family, qualifier, ts, _PUT, value))
        return cells

    def _put_column(self, name: bytes) -> tuple[bytes, bytes]:
        """(family, qualifier) of a put's column, checked once per distinct name."""
        hit = self._columns.get(name)
        if hit is None:
            family, qualifier = parse_column(name)
            if qualifier is None:
                raise InvalidArgument(f"column {clip(repr(name))} needs a qualifier (b'family:qualifier')")
            self._check_family(family)
            hit = (family, qualifier)
            if isinstance(name, bytes) and len(self._columns) < 65536:
                self._columns[name] = hit
        return hit

    def _check_family(self, family: bytes) -> None:
        if family.decode("ascii", "replace") not in self.families_settings:
            raise no_such_family(self.name, family, self.families_settings)

    @staticmethod
    def _check_ts(timestamp: Any) -> int:
        if not isinstance(timestamp, int) or isinstance(timestamp, bool) or not 0 <= timestamp < LATEST_TIMESTAMP:
            raise InvalidArgument(f"timestamp must be an int in [0, 2**63-1), got {timestamp!r}")
        return timestamp

    def _delete_cells(self, row: bytes, columns: Iterable | None, timestamp: int | None) -> list[Cell]:
        row = _check_row(row)
        ts = _now_ms() if timestamp is None else self._check_ts(timestamp)
        cells = []
        if columns is None:
            for family in self.families_settings:
                cells.append(Cell(row, family.encode(), b"", ts, CellType.DELETE_FAMILY, b""))
            return cells
        for column in columns:
            family, qualifier = parse_column(column)
            self._check_family(family)
            if qualifier is None:
                cells.append(Cell(row, family, b"", ts, CellType.DELETE_FAMILY, b""))
            else:
                cells.append(Cell(row, family, qualifier, ts, CellType.DELETE_COLUMN, b""))
        return cells

    def _write(self, cells: Sequence[Cell]) -> None:
        self._check_open()
        if not cells:
            return
        tickets = []
        with self._mutex:
            if len(self._regions) == 1:
                by_region = {0: cells if isinstance(cells, list) else list(cells)}
            else:
                by_region: dict[int, list] = {}
                starts = self._starts
                for cell in cells:
                    i = bisect.bisect_right(starts, cell[0]) - 1
                    by_region.setdefault(i, []).append(cell)
            try:
                for i, group in by_region.items():
                    region = self._regions[i]
                    tickets.append((region, region.mutate_begin(group)))
            except BaseException:
                for region, ticket in tickets:
                    region.mutate_finish(ticket)
                raise
        # Outside the table's lock: one WAL sync serves every writer whose
        # records it covers (group commit); each group is visible once durable.
        error = None
        for region, ticket in tickets:
            try:
                region.mutate_finish(ticket)
            except BaseException as exc:  # every ticket must complete, or the read point stalls
                error = error or exc
        if error is not None:
            raise error
        for region, _ in tickets:
            self._maintain(region)

    def _maintain(self, region: Region) -> None:
        """Flush, compact and split a region past its thresholds (HBase's
        automatic policies), without holding up the table's other writers: a
        write waits for a flush only once the region's memstore holds
        ``BLOCKING_MULTIPLIER`` times the flush size (HBase's
        ``hbase.hregion.memstore.block.multiplier``)."""
        if region.closed or not region.needs_flush():
            return
        blocked = region.memstore_size + region.snapshot_size >= (
            BLOCKING_MULTIPLIER * self.settings.memstore_flush_size
        )
        if not region.flush_if_due(wait=blocked):
            return
        region.compact_if_due()
        if region.needs_split():
            with self._mutex:
                if not region.closed and region.needs_split():  # a split may have retired it meanwhile
                    key = region.midkey()
                    if key is not None:
                        self._split_region(region, key)

    def put(self, row: bytes, data: dict, timestamp: int | None = None, wal: bool = True) -> None:
        """Store ``data`` (``{b"cf:q": value}``) in ``row``, at ``timestamp`` (ms; now by default)."""
        self._write(self._put_cells(row, data, timestamp))

    def delete(self, row: bytes, columns: Iterable | None = None, timestamp: int | None = None, wal: bool = True) -> None:
        """Delete a whole row, or the given columns (``b"cf:q"``: all versions; ``b"cf"``: the family).

        With ``timestamp``, only versions at or before it are deleted.
        """
        self._write(self._delete_cells(row, columns, timestamp))

    def delete_version(self, row: bytes, column: bytes, timestamp: int) -> None:
        """Delete exactly one version of a column (HBase ``Delete.addColumn(f, q, ts)``)."""
        family, qualifier = parse_column(column)
        if qualifier is None:
            raise InvalidArgument(f"column {column!r} needs a qualifier")
        self._check_family(family)
        self._write([Cell(_check_row(row), family, qualifier, self._check_ts(timestamp), CellType.DELETE, b"")])

    def batch(self, timestamp: int | None = None, batch_size: int | None = None, transaction: bool = False, wal: bool = True) -> "Batch":
        """A happybase-style batch: mutations are sent together (one WAL record per region)."""
        return Batch(self, timestamp, batch_size, transaction)

    def put_cells(self, cells: Sequence[Cell]) -> None:
        """Write raw cells (puts and delete markers) as one group per region."""
        checked = [check_cell(c) for c in cells]
        for cell in checked:
            self._check_family(cell[1])
        self._write(checked)
