"""A table's write side: mutations checked and turned into cells, routed to
the regions that hold their rows, and the region upkeep a write triggers.

:class:`TableWriter` is the collaborator a :class:`~storage.table.table.Table`
holds for its puts, deletes and batches; the table hands it what it needs
(its name, families, settings, region map and lock, and the two table
operations a write may need: the open check and a region split)."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable, Sequence

from .. import clock
from ..cells import LATEST_TIMESTAMP, Cell, CellType
from ..columns import parse_column
from ..errors import InvalidArgument, StorageError, StorageIOError, check_bytes, clip
from ..region.region import Region
from ..schema import FamilySettings, TableSettings, no_such_family
from .arguments import MAX_ROW_KEY_LENGTH, check_row, row_too_long
from .descriptor import MAX_CELL_SIZE_KEY, cell_size_limit
from .region_map import RegionMap

__all__ = ["TableWriter", "BLOCKING_MULTIPLIER", "ADMIT_RETRY_SECONDS"]

_PUT = int(CellType.PUT)
_NO_LIMIT = 1 << 62

# writes wait for their region's flush past this many times the flush size
BLOCKING_MULTIPLIER = 4

# after a flush that a blocked write needed failed, the region's writes are refused this long before the next
# try; after a flush, compaction or split that a write triggered failed, writes trigger none for this long
ADMIT_RETRY_SECONDS = 0.25

log = logging.getLogger("storage.table")


class TableWriter:
    """Puts, deletes and mutation batches of one :class:`~storage.table.table.Table`."""

    def __init__(self, name: str, families: dict[str, FamilySettings], settings: TableSettings,
                 regions: RegionMap, mutex: threading.RLock, check_open: Callable[[], None],
                 split: Callable[[Region, bytes], None]):
        self.name = name
        self.families = families
        self.regions = regions
        self._mutex = mutex  # the table's: routing, splits and the counters below
        self._check_open = check_open
        self._split = split  # the table's split of a region at a key (under the mutex)
        self.known_columns: dict[bytes, tuple[bytes, bytes]] = {}
        """Column name -> (family, qualifier), filled by checked puts (a batch's fast path reads it)."""
        self._refused_until: dict = {}  # region id -> (until when, the error) after a blocked write's flush failed
        self._maintain_after: dict = {}  # region id -> when writes may trigger upkeep again after a failure
        self._blocked: set = set()  # regions past the blocking limit whose flush failed: writes flush them first
        self.maintenance_errors = 0
        """How many flushes, compactions or splits that writes triggered have failed
        (the writes themselves were acknowledged)."""
        self.last_maintenance_error: Exception | None = None
        """The latest of those failures (None if there was none)."""
        self.configure(settings)

    def configure(self, settings: TableSettings) -> None:
        """Take the table's settings (again, after its descriptor values changed)."""
        self.settings = settings
        self.max_cell_size = cell_size_limit(settings.extra)  # hbase.server.keyvalue.maxsize; None: no limit
        """The largest cell a write takes, in bytes (None: no limit)."""

    def put_cells(self, row: bytes, data: dict, timestamp: int | None) -> list[Cell]:
        """The checked cells of a put of ``data`` (``{b"cf:q": value}``) to ``row``."""
        if type(row) is not bytes or not row:
            row = check_row(row)
        if len(row) > MAX_ROW_KEY_LENGTH:
            raise row_too_long(row)
        if not isinstance(data, dict):
            raise InvalidArgument(f"put data must be a dict of b'family:qualifier' -> bytes, got {type(data).__name__}")
        if not data:
            # HBase refuses an empty Put ("No columns to insert"); a silent no-op hides a bug
            raise InvalidArgument(f"put of row {clip(repr(row))} names no columns")
        ts = clock.now_ms() if timestamp is None else self.check_timestamp(timestamp)
        column = self._put_column
        room = _NO_LIMIT if self.max_cell_size is None else self.max_cell_size - len(row)
        cells = []
        for name, value in data.items():
            family, qualifier = column(name)
            if type(value) is not bytes:
                value = check_bytes(value, f"value of {name!r}")
            if len(value) + len(name) > room:
                raise self._cell_too_big(row, name, len(value) + len(row) + len(name))
            cells.append((row, family, qualifier, ts, _PUT, value))
        return cells

    def _cell_too_big(self, row: bytes, column: bytes, size: int) -> InvalidArgument:
        return InvalidArgument(
            f"cell {clip(repr(column), 60)} of row {clip(repr(row), 60)} is {size} bytes, over table {self.name}'s"
            f" {MAX_CELL_SIZE_KEY} of {self.max_cell_size} bytes (raise it with set_table_values; 0 turns it off)"
        )

    def _put_column(self, name: bytes) -> tuple[bytes, bytes]:
        """(family, qualifier) of a put's column, checked once per distinct name."""
        hit = self.known_columns.get(name)
        if hit is None:
            family, qualifier = parse_column(name)
            if qualifier is None:
                raise InvalidArgument(f"column {clip(repr(name))} needs a qualifier (b'family:qualifier')")
            self.check_family(family)
            hit = (family, qualifier)
            if isinstance(name, bytes) and len(self.known_columns) < 65536:
                self.known_columns[name] = hit
        return hit

    def check_family(self, family: bytes) -> None:
        """Refuse a family the table does not have (naming the closest one)."""
        if family.decode("ascii", "replace") not in self.families:
            raise no_such_family(self.name, family, self.families)

    @staticmethod
    def check_timestamp(timestamp: Any) -> int:
        """A mutation's timestamp, checked (ms since the epoch, under HBase's LATEST_TIMESTAMP)."""
        if not isinstance(timestamp, int) or isinstance(timestamp, bool) or not 0 <= timestamp < LATEST_TIMESTAMP:
            raise InvalidArgument(f"timestamp must be an int in [0, 2**63-1), got {timestamp!r}")
        return timestamp

    def delete_cells(self, row: bytes, columns: Iterable | None, timestamp: int | None) -> list[Cell]:
        """The delete markers of a delete of ``row`` (whole, or ``columns``)."""
        row = check_row(row)
        if len(row) > MAX_ROW_KEY_LENGTH:
            raise row_too_long(row)
        ts = clock.now_ms() if timestamp is None else self.check_timestamp(timestamp)
        cells = []
        if columns is None:
            for family in self.families:
                cells.append(Cell(row, family.encode(), b"", ts, CellType.DELETE_FAMILY, b""))
            return cells
        for column in columns:
            family, qualifier = parse_column(column)
            self.check_family(family)
            if qualifier is None:
                cells.append(Cell(row, family, b"", ts, CellType.DELETE_FAMILY, b""))
            else:
                cells.append(Cell(row, family, qualifier, ts, CellType.DELETE_COLUMN, b""))
        return cells

    def write(self, cells: Sequence[Cell]) -> None:
        """Log and apply ``cells``, one group per region.

        Once every group is in its WAL and memstore the write is acknowledged:
        the flush, compaction or split it triggers afterwards never turns it
        into an error (a failure there is kept in :attr:`maintenance_errors`
        and logged).  A write that fails before then leaves nothing behind,
        and a region whose unflushed edits are past the blocking limit must
        flush before it takes more, so a disk that stays full refuses writes
        instead of filling the memory.
        """
        self._check_open()
        if not cells:
            return
        with self._mutex:
            by_region = self.regions.cells_by_region(cells)
            full = ()
            if self._blocked:  # regions whose flush failed past the blocking limit (none, mostly)
                full = [r for r in (self.regions.regions[i] for i in by_region) if r in self._blocked]
            tickets = None if full else self._begin(by_region)
        if tickets is None:
            for region in full:
                self._flush_to_admit(region)
            with self._mutex:  # routed again: a flush may have split a region meanwhile
                tickets = self._begin(self.regions.cells_by_region(cells))
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

    def _begin(self, by_region: dict[int, list]) -> list[tuple[Region, tuple]]:
        """Log and apply each region's group (under the table lock); the tickets to finish."""
        tickets = []
        try:
            for i, group in by_region.items():
                region = self.regions.regions[i]
                tickets.append((region, region.mutate_begin(group)))
        except BaseException:
            for region, ticket in tickets:
                region.mutate_finish(ticket)
            raise
        return tickets

    def _over_blocking_limit(self, region: Region) -> bool:
        return region.memstore_size + region.snapshot_size >= BLOCKING_MULTIPLIER * self.settings.memstore_flush_size

    def _flush_to_admit(self, region: Region) -> None:
        """Flush a region past the blocking limit before a write goes in (HBase
        blocks such writes, then refuses them with ``RegionTooBusyException``):
        if the flush fails, the write is refused in one line, not applied.

        After a failed flush the region's writes are refused at once for
        ``ADMIT_RETRY_SECONDS`` (each attempt rewrites the whole memstore; a
        full disk must not make every refused write cost a flush)."""
        with region.maintenance():
            if region.closed or not self._over_blocking_limit(region):
                self._blocked.discard(region)
                return
            failed = self._refused_until.get(region.info.region_id)
            if failed is not None and clock.monotonic() < failed[0]:
                refusal = failed[1]  # a new exception each time: re-raising one would grow its traceback
                if isinstance(refusal, StorageIOError):
                    raise StorageIOError(str(refusal), refusal.errno, refusal.filename)
                raise StorageError(str(refusal))
            try:
                region.flush()
            except Exception as exc:
                message = (
                    f"write to table {self.name} refused: region {region.info.region_id} holds"
                    f" {region.memstore_size + region.snapshot_size} bytes of unflushed edits (the limit is"
                    f" {BLOCKING_MULTIPLIER} x memstore_flush_size) and its flush failed: {exc}"
                )
                if isinstance(exc, OSError):
                    refusal = StorageIOError(message, exc.errno, exc.filename)
                else:
                    refusal = StorageError(message)
                self._refused_until[region.info.region_id] = (clock.monotonic() + ADMIT_RETRY_SECONDS, refusal)
                raise refusal from exc
            self._refused_until.pop(region.info.region_id, None)
            self._blocked.discard(region)

    def _maintain(self, region: Region) -> None:
        """The upkeep a write triggers, after the write is acknowledged: a
        failure is recorded (:attr:`maintenance_errors`, the log), never raised
        to the writer, whose edits are safe in the WAL and the memstore; the
        next flush, explicit or due, tries again."""
        retry_at = self._maintain_after.get(region.info.region_id)
        if retry_at is not None and clock.monotonic() < retry_at:
            # it failed a moment ago: each try rewrites the memstore, so not on every write
            if self._over_blocking_limit(region):
                self._blocked.add(region)  # the next write to it must flush first (_flush_to_admit)
            return
        try:
            self._maintain_region(region)
        except Exception as exc:
            self._maintain_after[region.info.region_id] = clock.monotonic() + ADMIT_RETRY_SECONDS
            if self._over_blocking_limit(region):
                self._blocked.add(region)
            self._maintenance_failed(region, exc)

    def _maintenance_failed(self, region: Region, exc: Exception) -> None:
        def kind(error: Exception | None) -> tuple:
            return type(error), getattr(error, "errno", None)

        with self._mutex:
            self.maintenance_errors += 1
            repeated = kind(exc) == kind(self.last_maintenance_error)
            self.last_maintenance_error = exc
        if not repeated:  # a disk that stays full fails every due flush (each a new file): say so once
            log.warning("table %s region %s: flush/compaction/split after a write failed: %s",
                        self.name, region.info.region_id, exc)

    def _maintain_region(self, region: Region) -> None:
        """Flush, compact and split a region past its thresholds (HBase's
        automatic policies), without holding up the table's other writers: a
        write waits for a flush only once the region's memstore holds
        ``BLOCKING_MULTIPLIER`` times the flush size (HBase's
        ``hbase.hregion.memstore.block.multiplier``)."""
        if region.closed or not region.needs_flush():
            return
        if not region.flush_if_due(wait=self._over_blocking_limit(region)):
            return
        region.compact_if_due()
        if region.needs_split():
            with self._mutex:
                if not region.closed and region.needs_split():  # a split may have retired it meanwhile
                    key = region.midkey()
                    if key is not None:
                        self._split(region, key)

    def put(self, row: bytes, data: dict, timestamp: int | None = None) -> None:
        """Store ``data`` (``{b"cf:q": value}``) in ``row``, at ``timestamp`` (ms; now by default)."""
        self.write(self.put_cells(row, data, timestamp))

    def delete(self, row: bytes, columns: Iterable | None = None, timestamp: int | None = None) -> None:
        """Delete a whole row, or the given columns (``b"cf:q"``: all versions; ``b"cf"``: the family)."""
        self.write(self.delete_cells(row, columns, timestamp))

    def delete_version(self, row: bytes, column: bytes, timestamp: int) -> None:
        """Delete exactly one version of a column (HBase ``Delete.addColumn(f, q, ts)``)."""
        family, qualifier = parse_column(column)
        if qualifier is None:
            raise InvalidArgument(f"column {column!r} needs a qualifier")
        self.check_family(family)
        row = check_row(row)
        if len(row) > MAX_ROW_KEY_LENGTH:
            raise row_too_long(row)
        self.write([Cell(row, family, qualifier, self.check_timestamp(timestamp), CellType.DELETE, b"")])
